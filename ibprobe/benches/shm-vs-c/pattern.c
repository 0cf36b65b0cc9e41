/*
 * The shm access patterns of `ibprobe loopback -t shm --round-trip` and of
 * `ibprobe stream -t shm --pipeline 1` (stop-and-wait), in C, with nothing
 * else in the loops: which cache lines each side touches per message, in
 * which order, and nothing more. Variants differ in one thing at a time,
 * so a difference in their rates is the memory pattern's, not the work's.
 *
 * Both models are a ping-pong over two rings of slots in one shared
 * anonymous mapping (MAP_SHARED, like ibprobe's), after one header line:
 * ring 0 carries A -> B (the data), ring 1 B -> A (the echo, the credit).
 * A slot's first word is its flag (0: empty). Per message:
 * - A (CPU_A) writes ring 0 slot i: with `check`, first loads the flag
 *   (the slot must be empty), then stores words 1.. (relaxed) and the flag
 *   (release); then spins on ring 1 slot i's flag (acquire), reads its
 *   words and, with `clear`, stores 0 into the flag (the slot is free);
 * - B (CPU_B) spins on ring 0 slot i's flag, reads its words (with `copy`
 *   into a local buffer), clears it, and writes ring 1 slot i the same way.
 * Without `clear` (`lap`) a slot's flag carries the message number + 1,
 *   so nobody stores into a slot it only reads.
 *
 * Built-in variants (-v NAME, repeatable; default: all):
 *   rt      the round trip's rings (ShmChannel): 8 slots of 64 B, 5 words
 *           (stamp + 32 B payload) each way
 *   stream  the stream's rings (ShmSlots): 8 slots of 128 B, a 64 B data
 *           slot (8 words) one way, a 24 B control slot (3 words) back,
 *           the receiver copying the data out
 *   pp      pingpong.c's one line each way
 *   ...     and the one-change-at-a-time variants between them, listed
 *           by -l, among them the spin's shape: what an empty poll does
 *           besides its load (nothing, a TSC read as the round trip's
 *           loops do for their timeout, or a `pause`); -s 0|1|2 gives
 *           every variant one of those on both sides.
 *
 * What it showed (ibprobe/docs/stream-design.md, "shm stop-and-wait
 * against the round trip"): the stream's rings and the round trip's run
 * at the same rate, and the spin's shape moves either by 30-40%.
 *
 * Each round runs every variant once for N messages, in an order that
 * alternates between rounds; prints per variant the best and the median
 * ns per message, their min..max, and the median of the per-round ratios
 * to the first variant. Run it under SCHED_FIFO (`chrt -f 10`) on a busy
 * machine: both threads spin, and a preempted one stalls its peer.
 *
 *   cc -O2 -pthread -o /tmp/pattern ibprobe/benches/shm-vs-c/pattern.c
 *   chrt -f 10 /tmp/pattern [-n MSGS] [-r ROUNDS] [-s SPIN] [-v NAME]... [CPU_A CPU_B]
 * Defaults: 200000 messages, 20 rounds, CPUs 0 and 1.
 *
 * A benchmark, not a test (x86_64 Linux: it reads the TSC).
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
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>
#include <x86intrin.h>

struct variant {
	const char *name;
	const char *what;
	int stride;   /* bytes per slot */
	int nslots;   /* slots per ring */
	int dwords;   /* words of a data message (flag included) */
	int cwords;   /* words of a return message (flag included) */
	int gap;      /* bytes between ring 0's end and ring 1's start */
	int check;    /* the producer loads the flag before writing */
	int clear;    /* the consumer stores 0 into the flag (else laps) */
	int copy;     /* the consumer copies the words into a local buffer */
	int pp;       /* one line per direction, no ring (pingpong.c) */
	int spin_a;   /* per empty poll of A: 0 nothing, 1 a TSC read, 2 a pause */
	int spin_b;   /* the same for B */
};

static const struct variant all[] = {
	{ "pp", "pingpong.c: one line each way, no ring", 64, 1, 1, 1, 0, 0, 0, 0, 1, 0, 0 },
	{ "rt", "round trip rings: 8 x 64 B, 5 words each way", 64, 8, 5, 5, 0, 1, 1, 0, 0, 0, 0 },
	{ "rt128", "rt with 128 B slots", 128, 8, 5, 5, 0, 1, 1, 0, 0, 0, 0 },
	{ "rt-d8", "rt with an 8-word (64 B) data message", 64, 8, 8, 5, 0, 1, 1, 0, 0, 0, 0 },
	{ "rt-c3", "rt with a 3-word (24 B) return message", 64, 8, 5, 3, 0, 1, 1, 0, 0, 0, 0 },
	{ "rt-copy", "rt, B copying the data out", 64, 8, 5, 5, 0, 1, 1, 1, 0, 0, 0 },
	{ "stream", "stream rings: 8 x 128 B, 8 words there, 3 back, B copies", 128, 8, 8, 3, 0, 1, 1, 1, 0, 0, 0 },
	{ "st-64", "stream with 64 B slots", 64, 8, 8, 3, 0, 1, 1, 1, 0, 0, 0 },
	{ "st-d5", "stream with a 5-word data message", 128, 8, 5, 3, 0, 1, 1, 1, 0, 0, 0 },
	{ "st-nocheck", "stream, producers not loading the flag first", 128, 8, 8, 3, 0, 0, 1, 1, 0, 0, 0 },
	{ "st-lap", "stream, laps instead of clears (nobody stores into a slot it reads)", 128, 8, 8, 3, 0, 0, 0, 1, 0, 0, 0 },
	{ "st-gap", "stream with 4 KiB between the rings", 128, 8, 8, 3, 4096, 1, 1, 1, 0, 0, 0 },
	{ "st-16", "stream with 16 slots", 128, 16, 8, 3, 0, 1, 1, 1, 0, 0, 0 },
	{ "st-2", "stream with 2 slots", 128, 2, 8, 3, 0, 1, 1, 1, 0, 0, 0 },
	{ "rt-lap", "rt, laps instead of clears", 64, 8, 5, 5, 0, 0, 0, 0, 0, 0, 0 },
	{ "rt-1", "rt with 1 slot (one line each way, clears)", 64, 1, 5, 5, 0, 1, 1, 0, 0, 0, 0 },
	{ "pp-tsc", "pp, a TSC read per empty poll", 64, 1, 1, 1, 0, 0, 0, 0, 1, 1, 1 },
	{ "pp-pause", "pp, a pause per empty poll", 64, 1, 1, 1, 0, 0, 0, 0, 1, 2, 2 },
	{ "pp-tsc-a", "pp, a TSC read per empty poll of A only", 64, 1, 1, 1, 0, 0, 0, 0, 1, 1, 0 },
	{ "pp-tsc-b", "pp, a TSC read per empty poll of B only", 64, 1, 1, 1, 0, 0, 0, 0, 1, 0, 1 },
	{ "rt-tsc", "rt, a TSC read per empty poll", 64, 8, 5, 5, 0, 1, 1, 0, 0, 1, 1 },
	{ "rt-pause", "rt, a pause per empty poll", 64, 8, 5, 5, 0, 1, 1, 0, 0, 2, 2 },
	{ "st-tsc", "stream, a TSC read per empty poll", 128, 8, 8, 3, 0, 1, 1, 1, 0, 1, 1 },
	{ "st-pause", "stream, a pause per empty poll", 128, 8, 8, 3, 0, 1, 1, 1, 0, 2, 2 },
};
#define NVARIANTS (sizeof(all) / sizeof(all[0]))

struct run {
	const struct variant *v;
	_Atomic uint64_t *ring0, *ring1;
	uint64_t n;
	_Atomic int go;
};

static void die(const char *what, int err)
{
	fprintf(stderr, "pattern: %s: %s\n", what, strerror(err));
	exit(1);
}

/* The set of one CPU (threads are placed before they spin: pinned runs
 * only, an unpinned pair measures the scheduler). */
static cpu_set_t one_cpu(int cpu)
{
	cpu_set_t set;
	CPU_ZERO(&set);
	CPU_SET(cpu, &set);
	return set;
}

#define LD(p) atomic_load_explicit((p), memory_order_relaxed)
#define LDA(p) atomic_load_explicit((p), memory_order_acquire)
#define ST(p, x) atomic_store_explicit((p), (x), memory_order_relaxed)
#define STR(p, x) atomic_store_explicit((p), (x), memory_order_release)

/* What an empty poll does besides its load. */
static inline void idle(int spin)
{
	if (spin == 1) {
		uint64_t t = __rdtsc();
		__asm__ volatile("" : : "r"(t));
	} else if (spin == 2) {
		_mm_pause();
	}
}

static inline _Atomic uint64_t *slot(_Atomic uint64_t *ring, const struct variant *v, uint64_t i)
{
	return ring + (i % (uint64_t)v->nslots) * (uint64_t)(v->stride / 8);
}

/* Producer side of message i: the slot's words, then its flag. */
static inline void put(_Atomic uint64_t *s, const struct variant *v, int words, uint64_t i)
{
	if (v->check)
		while (LDA(&s[0]) != 0)
			;
	for (int k = 1; k < words; k++)
		ST(&s[k], i);
	STR(&s[0], v->clear ? (uint64_t)words : i + 1);
}

/* Consumer side of message i: spins on the flag, reads (or copies) the
 * words, frees the slot. Returns a checksum so nothing is optimized away. */
static inline uint64_t take(_Atomic uint64_t *s, const struct variant *v, int words, uint64_t i, uint64_t *local, int spin)
{
	uint64_t want = v->clear ? (uint64_t)words : i + 1, f;
	while ((f = LDA(&s[0])) != want)
		idle(spin);
	uint64_t acc = f;
	if (local) {
		for (int k = 1; k < words; k++)
			local[k] = LD(&s[k]);
		acc ^= local[words - 1];
	} else {
		for (int k = 1; k < words; k++)
			acc ^= LD(&s[k]);
	}
	if (v->clear)
		STR(&s[0], 0);
	return acc;
}

static uint64_t sink;

static void *responder(void *arg)
{
	struct run *r = arg;
	const struct variant *v = r->v;
	uint64_t local[64 * 8] __attribute__((aligned(64)));
	uint64_t acc = 0;
	atomic_store(&r->go, 1);
	for (uint64_t i = 0; i < r->n; i++) {
		if (v->pp) {
			while (LDA(&r->ring0[0]) != i + 1)
				idle(v->spin_b);
			STR(&r->ring1[0], i + 1);
			continue;
		}
		/* The stream's receiver copies into a queue of 64 slots. */
		uint64_t *l = v->copy ? &local[(i % 8) * 8 * (v->stride / 64)] : NULL;
		acc += take(slot(r->ring0, v, i), v, v->dwords, i, l, v->spin_b);
		put(slot(r->ring1, v, i), v, v->cwords, i);
	}
	sink += acc;
	return NULL;
}

/* One run of variant v: N messages after N / 10 warm-up ones; returns
 * TSC ticks per message. */
static double one_run(const struct variant *v, uint64_t n, int cpu_b)
{
	size_t ring = (size_t)v->nslots * (size_t)v->stride;
	size_t len = 64 + 2 * ring + (size_t)v->gap;
	len = (len + 4095) & ~(size_t)4095;
	void *m = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
	if (m == MAP_FAILED)
		die("mmap", errno);
	memset(m, 0, len);
	uint64_t warm = n / 10;
	struct run r = {
		.v = v,
		.ring0 = (_Atomic uint64_t *)((char *)m + 64),
		.ring1 = (_Atomic uint64_t *)((char *)m + 64 + ring + (size_t)v->gap),
		.n = warm + n,
	};
	/* Started on its CPU: under SCHED_FIFO a thread started on CPU_A
	 * would never run while this one spins there. */
	pthread_t t;
	pthread_attr_t at;
	cpu_set_t set = one_cpu(cpu_b);
	pthread_attr_init(&at);
	pthread_attr_setaffinity_np(&at, sizeof(set), &set);
	int err = pthread_create(&t, &at, responder, &r);
	pthread_attr_destroy(&at);
	if (err)
		die("pthread_create", err);
	while (!atomic_load(&r.go))
		;
	uint64_t acc = 0, t0 = 0;
	for (uint64_t i = 0; i < r.n; i++) {
		if (i == warm)
			t0 = __rdtsc();
		if (v->pp) {
			STR(&r.ring0[0], i + 1);
			while (LDA(&r.ring1[0]) != i + 1)
				idle(v->spin_a);
			continue;
		}
		put(slot(r.ring0, v, i), v, v->dwords, i);
		acc += take(slot(r.ring1, v, i), v, v->cwords, i, NULL, v->spin_a);
	}
	uint64_t t1 = __rdtsc();
	pthread_join(t, NULL);
	sink += acc;
	munmap(m, len);
	return (double)(t1 - t0) / (double)n;
}

static double ns_per_tick(void)
{
	struct timespec a, b, d = { 0, 100 * 1000 * 1000 };
	clock_gettime(CLOCK_MONOTONIC, &a);
	uint64_t c0 = __rdtsc();
	nanosleep(&d, NULL);
	clock_gettime(CLOCK_MONOTONIC, &b);
	uint64_t c1 = __rdtsc();
	double ns = (double)(b.tv_sec - a.tv_sec) * 1e9 + (double)(b.tv_nsec - a.tv_nsec);
	return ns / (double)(c1 - c0);
}

static int cmp_d(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;
	return (x > y) - (x < y);
}

static double median(double *x, int n)
{
	double *c = malloc(sizeof(double) * (size_t)n);
	memcpy(c, x, sizeof(double) * (size_t)n);
	qsort(c, (size_t)n, sizeof(double), cmp_d);
	double m = n % 2 ? c[n / 2] : (c[n / 2 - 1] + c[n / 2]) / 2;
	free(c);
	return m;
}

int main(int argc, char **argv)
{
	uint64_t n = 200000;
	int rounds = 20, opt, nv = 0, cpu_a = 0, cpu_b = 1;
	const struct variant *vs[NVARIANTS];
	int spin = -1;
	while ((opt = getopt(argc, argv, "n:r:v:s:lh")) != -1) {
		switch (opt) {
		case 'n': n = strtoull(optarg, NULL, 10); break;
		case 'r': rounds = atoi(optarg); break;
		case 's': spin = atoi(optarg); break;
		case 'v': {
			size_t k;
			for (k = 0; k < NVARIANTS && strcmp(all[k].name, optarg); k++)
				;
			if (k == NVARIANTS || nv == (int)NVARIANTS) {
				fprintf(stderr, "pattern: no variant '%s' (-l lists them)\n", optarg);
				return 2;
			}
			vs[nv++] = &all[k];
			break;
		}
		case 'l':
			for (size_t k = 0; k < NVARIANTS; k++)
				printf("%-11s %s\n", all[k].name, all[k].what);
			return 0;
		default:
			fprintf(stderr, "usage: %s [-n MSGS] [-r ROUNDS] [-s SPIN] [-v NAME]... [-l] [CPU_A CPU_B]\n", argv[0]);
			return opt == 'h' ? 0 : 2;
		}
	}
	if (argc - optind == 2) {
		cpu_a = atoi(argv[optind]);
		cpu_b = atoi(argv[optind + 1]);
	}
	if (n < 10 || rounds < 1) {
		fprintf(stderr, "pattern: -n must be >= 10 and -r >= 1\n");
		return 2;
	}
	if (nv == 0)
		for (size_t k = 0; k < NVARIANTS; k++)
			vs[nv++] = &all[k];
	/* -s: every variant's polls spin this way (0 tight, 1 TSC, 2 pause). */
	static struct variant over[NVARIANTS];
	if (spin >= 0) {
		if (spin > 2) {
			fprintf(stderr, "pattern: -s must be 0 (tight), 1 (a TSC read) or 2 (a pause)\n");
			return 2;
		}
		for (int k = 0; k < nv; k++) {
			over[k] = *vs[k];
			over[k].spin_a = over[k].spin_b = spin;
			vs[k] = &over[k];
		}
	}
	cpu_set_t a = one_cpu(cpu_a);
	if (sched_setaffinity(0, sizeof(a), &a))
		die("cannot pin to CPU_A", errno);
	double npt = ns_per_tick();
	double *ns = calloc((size_t)(nv * rounds), sizeof(double));
	for (int r = 0; r < rounds; r++)
		for (int j = 0; j < nv; j++) {
			int k = r % 2 ? nv - 1 - j : j;
			ns[k * rounds + r] = one_run(vs[k], n, cpu_b) * npt;
		}
	printf("pattern: cpus %d,%d, %d rounds of %llu messages per variant (ns per message; ratio: median of per-round ratios to %s)\n",
	       cpu_a, cpu_b, rounds, (unsigned long long)n, vs[0]->name);
	printf("%-11s %7s %7s %16s %7s  %s\n", "variant", "best", "median", "min..max", "ratio", "what");
	for (int k = 0; k < nv; k++) {
		double *x = &ns[k * rounds], lo = x[0], hi = x[0];
		double ratio[rounds];
		for (int r = 0; r < rounds; r++) {
			lo = x[r] < lo ? x[r] : lo;
			hi = x[r] > hi ? x[r] : hi;
			ratio[r] = x[r] / ns[r];
		}
		char span[40];
		snprintf(span, sizeof(span), "%.1f..%.1f", lo, hi);
		printf("%-11s %7.1f %7.1f %16s %7.3f  %s\n", vs[k]->name, lo, median(x, rounds), span,
		       median(ratio, rounds), vs[k]->what);
	}
	return sink == 42 ? 1 : 0;
}
