/*
 * The floor under `ibprobe loopback -t shm --round-trip`: a raw C
 * cache-line ping-pong between two pinned threads, with nothing else in
 * the loop (no ring, no sequence check, no histogram, no Rust).
 *
 * Why it exists: issue 12 asks that the shm round-trip p50 stay where it
 * is (130-150 ns on the 2-core dev VM) and names a raw C ping-pong as the
 * reference (about 130 ns). What a round trip costs on a given machine is
 * mostly two cache-line transfers between cores; this program measures
 * exactly that, so `benches/shm-vs-c/run` can put ibprobe's figure beside
 * it and report the ratio (ibprobe's own cost on top of the hardware).
 *
 * How: two 64-byte-aligned lines, one per direction. The main thread
 * (pinned to CPU_A) reads the clock, writes round number i into `ping`
 * (release), spins until `pong` holds i (acquire), reads the clock again
 * and keeps t1 - t0 as one sample. The responder (pinned to CPU_B) spins
 * until `ping` holds i and writes i into `pong`. The spins are plain loads
 * with no `pause`, like ibprobe's poll loop. Samples go into an array
 * allocated and touched before the first round trip (no allocation, no
 * syscall in the loop beyond the vDSO clock read); WARMUP round trips
 * come first and are not kept. The samples are sorted and p50/p99 are
 * nearest-rank percentiles.
 *
 * Clock: clock_gettime(CLOCK_MONOTONIC) by default (vDSO; on a tsc
 * clocksource it costs a few tens of ns, and one read lands inside every
 * sample). With -t it reads the TSC instead (rdtsc, not serialized, as
 * ibprobe's default clock does), converted to ns with a rate measured
 * against CLOCK_MONOTONIC over 200 ms before the run; -t needs an
 * invariant TSC (constant_tsc + nonstop_tsc in /proc/cpuinfo).
 *
 * Build and run (x86_64 Linux; a benchmark, not a test):
 *   cc -O2 -pthread -o /tmp/pingpong ibprobe/benches/shm-vs-c/pingpong.c
 *   /tmp/pingpong [-n ROUND_TRIPS] [-w WARMUP] [-t] [CPU_A CPU_B]
 * Defaults: 1000000 round trips after 10000 warm-up ones, CPUs 0 and 1.
 * It prints one line, e.g.
 *   pingpong: cpus 0,1 clock monotonic round_trips 1000000 p50_ns 130 p99_ns 190 min_ns 110 max_ns 41000
 * (benches/shm-vs-c/run reads p50_ns and p99_ns from it). Both CPUs must
 * be free of other spinning work, or the responder is descheduled and the
 * tail (and then the p50) moves.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#if defined(__x86_64__)
#include <x86intrin.h>
#endif

/* One direction of the ping-pong: alone on its cache line, so the two
 * directions never share (and false-share) a line. */
struct line {
	_Atomic uint64_t seq;
	char pad[64 - sizeof(uint64_t)];
} __attribute__((aligned(64)));

static struct line ping; /* main -> responder */
static struct line pong; /* responder -> main */

static uint64_t total; /* warm-up + measured round trips */
static int cpu_b = 1;

static void die(const char *what, int err)
{
	fprintf(stderr, "pingpong: %s: %s\n", what, strerror(err));
	exit(1);
}

/* Pins the calling thread to one CPU; a benchmark on an unpinned pair
 * measures the scheduler, so failure is fatal. */
static void pin(int cpu)
{
	cpu_set_t set;
	CPU_ZERO(&set);
	CPU_SET(cpu, &set);
	int err = pthread_setaffinity_np(pthread_self(), sizeof(set), &set);
	if (err) {
		char what[64];
		snprintf(what, sizeof(what), "cannot pin a thread to CPU %d", cpu);
		die(what, err);
	}
}

static inline uint64_t mono_ns(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

static inline uint64_t ticks(int tsc)
{
#if defined(__x86_64__)
	if (tsc)
		return __rdtsc();
#endif
	(void)tsc;
	return mono_ns();
}

/* Nanoseconds per TSC tick, measured against CLOCK_MONOTONIC over
 * about 200 ms (the same idea as ibprobe's Clock::calibrate). */
static double tsc_ns_per_tick(void)
{
#if defined(__x86_64__)
	uint64_t n0 = mono_ns(), c0 = __rdtsc();
	struct timespec d = { 0, 200 * 1000 * 1000 };
	while (nanosleep(&d, &d) == -1 && errno == EINTR)
		;
	uint64_t n1 = mono_ns(), c1 = __rdtsc();
	return (double)(n1 - n0) / (double)(c1 - c0);
#else
	return 1.0;
#endif
}

/* The echo side: waits for round i on `ping`, answers it on `pong`. */
static void *responder(void *arg)
{
	(void)arg;
	pin(cpu_b);
	for (uint64_t i = 1; i <= total; i++) {
		while (atomic_load_explicit(&ping.seq, memory_order_acquire) != i)
			;
		atomic_store_explicit(&pong.seq, i, memory_order_release);
	}
	return NULL;
}

static int cmp_u64(const void *a, const void *b)
{
	uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
	return (x > y) - (x < y);
}

/* Nearest-rank percentile of sorted samples: the smallest sample with at
 * least q of all samples at or below it. */
static uint64_t pct(const uint64_t *s, uint64_t n, double q)
{
	uint64_t rank = (uint64_t)(q * (double)n + 0.999999);
	if (rank < 1)
		rank = 1;
	if (rank > n)
		rank = n;
	return s[rank - 1];
}

static long parse(const char *s, const char *what)
{
	char *end;
	errno = 0;
	long v = strtol(s, &end, 10);
	if (errno || *end || v < 0) {
		fprintf(stderr, "pingpong: %s must be a non-negative integer, not '%s'\n", what, s);
		exit(2);
	}
	return v;
}

int main(int argc, char **argv)
{
	uint64_t n = 1000000, warmup = 10000;
	int cpu_a = 0, tsc = 0, opt;
	while ((opt = getopt(argc, argv, "n:w:th")) != -1) {
		switch (opt) {
		case 'n': n = (uint64_t)parse(optarg, "-n"); break;
		case 'w': warmup = (uint64_t)parse(optarg, "-w"); break;
		case 't': tsc = 1; break;
		default:
			fprintf(stderr, "usage: %s [-n ROUND_TRIPS] [-w WARMUP] [-t] [CPU_A CPU_B]\n", argv[0]);
			return opt == 'h' ? 0 : 2;
		}
	}
	if (argc - optind == 2) {
		cpu_a = (int)parse(argv[optind], "CPU_A");
		cpu_b = (int)parse(argv[optind + 1], "CPU_B");
	} else if (argc != optind) {
		fprintf(stderr, "pingpong: give both CPUs or neither\n");
		return 2;
	}
	if (n == 0) {
		fprintf(stderr, "pingpong: -n must be at least 1\n");
		return 2;
	}
#if !defined(__x86_64__)
	if (tsc) {
		fprintf(stderr, "pingpong: -t needs x86_64\n");
		return 2;
	}
#endif
	total = warmup + n;

	/* Samples allocated and faulted in before the loop. */
	uint64_t *s = malloc(n * sizeof(*s));
	if (!s)
		die("cannot allocate the samples", ENOMEM);
	memset(s, 0, n * sizeof(*s));

	pin(cpu_a);
	double ns_per_tick = tsc ? tsc_ns_per_tick() : 1.0;

	pthread_t t;
	int err = pthread_create(&t, NULL, responder, NULL);
	if (err)
		die("cannot start the responder", err);

	for (uint64_t i = 1; i <= total; i++) {
		uint64_t t0 = ticks(tsc);
		atomic_store_explicit(&ping.seq, i, memory_order_release);
		while (atomic_load_explicit(&pong.seq, memory_order_acquire) != i)
			;
		uint64_t t1 = ticks(tsc);
		if (i > warmup)
			s[i - warmup - 1] = t1 - t0;
	}
	pthread_join(t, NULL);

	qsort(s, n, sizeof(*s), cmp_u64);
#define NS(x) ((uint64_t)((double)(x) * ns_per_tick + 0.5))
	printf("pingpong: cpus %d,%d clock %s round_trips %llu p50_ns %llu p99_ns %llu min_ns %llu max_ns %llu\n",
	       cpu_a, cpu_b, tsc ? "tsc" : "monotonic", (unsigned long long)n,
	       (unsigned long long)NS(pct(s, n, 0.50)), (unsigned long long)NS(pct(s, n, 0.99)),
	       (unsigned long long)NS(s[0]), (unsigned long long)NS(s[n - 1]));
	free(s);
	return 0;
}
