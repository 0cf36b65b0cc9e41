//! `ibprobe host --trace` (the kernel's timerlat tracer) on Debian's two
//! kernels in the lab (tests/lab): the standard one has no timerlat tracer
//! and is refused with one line; the PREEMPT_RT one runs it, and the
//! result is checked for its own consistency, for leaving tracefs as it
//! found it, and against `rtla timerlat` (Debian's rtla package) on the
//! same guest. Runs with `--include-ignored` (scripts/test-all does).

use ibtools_tests::lab::harness::{self, Group};
use ibtools_tests::lab::{LabConfig, Node};
use std::process::ExitCode;
use std::time::Duration;

const IBPROBE: &str = env!("CARGO_BIN_EXE_ibprobe");
const MOUNT: &str =
    "mountpoint -q /sys/kernel/tracing || mount -t tracefs nodev /sys/kernel/tracing";

fn main() -> ExitCode {
    harness::run(vec![standard_kernel(), rt_kernel()])
}

fn standard_kernel() -> Group {
    Group::with_lab("timerlat_std", LabConfig::loopback())
        .test(
            "auto_clock_uses_the_tsc_where_clock_gettime_is_a_syscall",
            |lab| {
                // The guest's CPU flags hide constant_tsc and its clocksource
                // (hpet) has no vDSO read: `auto` must measure that and pick
                // the TSC, as perftest always does, and say why.
                let o = lab
                    .sh(&format!("{IBPROBE} loopback -t shm -n 200 --json"))
                    .success();
                let j: serde_json::Value = serde_json::from_str(&o.stdout).expect("JSON");
                let c = &j["clock"];
                eprintln!("guest clock: {}", c["description"]);
                assert_eq!(c["read_cost"]["monotonic_is_syscall"], true, "{c}");
                assert_eq!(c["kind"], "tsc", "{c}");
                assert!(
                    c["auto_reason"]
                        .as_str()
                        .is_some_and(|r| r.contains("system call")),
                    "{c}"
                );
                let (tsc, mono) = (
                    c["read_cost"]["tsc_ns"].as_f64().expect("tsc_ns"),
                    c["read_cost"]["monotonic_ns"]
                        .as_f64()
                        .expect("monotonic_ns"),
                );
                assert!(mono > tsc, "a system call cheaper than rdtsc? {c}");
            },
        )
        .test("trace_is_refused_without_the_tracer", |lab| {
            let o = lab.sh(&format!(
                "{MOUNT}; cat /sys/kernel/tracing/available_tracers; {IBPROBE} host --trace -n 10"
            ));
            let mut out = o.stdout.lines();
            let tracers = out.next().unwrap_or_default();
            // The fact the docs state: Debian's standard 6.1 kernel has no timerlat.
            assert!(!tracers.split_whitespace().any(|t| t == "timerlat"), "{o}");
            assert_eq!(o.status, 2, "{o}");
            assert_eq!(out.next(), None, "nothing on stdout: {o}");
            let err: Vec<&str> = o.stderr.lines().collect();
            assert_eq!(err.len(), 1, "one line: {o}");
            assert!(
                err[0].contains("has no timerlat tracer")
                    && err[0].contains("linux-image-rt-amd64")
                    && err[0].contains("without --trace"),
                "{o}"
            );
        })
}

/// `rtla timerlat top -q` lines: "  0 #2158 | cur min avg max | cur min avg max"
/// (us); the (IRQ avg, thread avg) of CPU `cpu`.
fn rtla_averages(out: &str, cpu: usize) -> Option<(f64, f64)> {
    out.lines().find_map(|l| {
        let l = strip_ansi(l).replace('|', " ");
        let w: Vec<&str> = l.split_whitespace().collect();
        (w.len() == 10 && w[0] == cpu.to_string() && w[1].starts_with('#'))
            .then(|| Some((w[4].parse().ok()?, w[8].parse().ok()?)))
            .flatten()
    })
}

/// The line without its terminal colour codes (`ESC [ ... m`).
fn strip_ansi(l: &str) -> String {
    let mut out = String::new();
    let mut it = l.chars();
    while let Some(c) = it.next() {
        if c == '\x1b' {
            for d in it.by_ref() {
                if d.is_ascii_alphabetic() {
                    break;
                }
            }
        } else {
            out.push(c);
        }
    }
    out
}

fn rt_kernel() -> Group {
    Group::with_lab("timerlat_rt", LabConfig::loopback().rt())
        .test("trace_splits_irq_and_thread_and_restores_tracefs", |lab| {
            // Settings of our own choosing before the run, to see them restored.
            // The measured CPU is 1 and ibprobe runs on 0: under emulation
            // the timerlat thread (SCHED_FIFO 95, 1 ms period) can take most
            // of its CPU, and the guest's shell must not wait behind it.
            let o = lab.sh(&format!(
                "{MOUNT}; cd /sys/kernel/tracing; echo 0 > osnoise/cpus; echo 1500 > osnoise/timerlat_period_us; \
                 taskset -c 0 {IBPROBE} host --trace --cpus 1 --interval 500us -n 1000 --json > /run/lab/results/t.json; echo rc=$?; \
                 cat osnoise/cpus osnoise/timerlat_period_us; ls instances | wc -l; cat instances/*/current_tracer 2>/dev/null; \
                 echo 0-1 > osnoise/cpus; echo 1000 > osnoise/timerlat_period_us"
            ));
            let lines: Vec<&str> = o.stdout.lines().collect();
            assert_eq!(lines, ["rc=0", "0", "1500", "0"], "{o}");
            let json = std::fs::read_to_string(lab.results(Node::A).join("t.json"))
                .expect("t.json");
            let j: serde_json::Value = serde_json::from_str(&json).expect("JSON");
            assert_eq!(j["schema"], "ibprobe.timerlat/1");
            assert_eq!(j["period_ns"], 500_000);
            let cpus = j["cpus"].as_array().expect("cpus");
            assert_eq!(cpus.len(), 1, "{j}");
            let c = &cpus[0];
            let n = |ctx: &str, k: &str| c[ctx][k].as_u64().unwrap_or_else(|| panic!("{ctx}.{k} in {c}"));
            assert_eq!(n("thread", "count"), 1000, "{c}");
            assert!(n("irq", "count") >= 1000, "{c}");
            // The thread wakes after its timer's IRQ, so its distribution
            // lies above the IRQ's at every quantile (1% for the buckets).
            for k in ["min_ns", "p50_ns", "p99_ns", "max_ns"] {
                assert!(
                    n("thread", k) as f64 >= n("irq", k) as f64 * 0.99,
                    "thread {k} below irq {k}: {c}"
                );
            }
            let w = &c["worst"];
            assert_eq!(w["thread_ns"], c["thread"]["max_ns"], "{c}");
            // Under an emulated CPU the timer interrupt itself always shows.
            let sources = c["top_sources"].as_array().expect("top_sources");
            assert!(
                sources.iter().any(|s| s["kind"] == "irq"),
                "no irq among the interference: {c}"
            );
            eprintln!(
                "timerlat cpu 1 (ibprobe, 1000 x 500us): irq p50 {} p99 {} max {} ns, thread p50 {} p99 {} max {} ns; top: {}",
                n("irq", "p50_ns"),
                n("irq", "p99_ns"),
                n("irq", "max_ns"),
                n("thread", "p50_ns"),
                n("thread", "p99_ns"),
                n("thread", "max_ns"),
                sources.first().map(|s| s.to_string()).unwrap_or_default()
            );
        })
        .test("trace_agrees_with_rtla_timerlat", |lab| {
            // The same CPU and period, one after the other (never at once:
            // there is one timerlat), three times each, alternated. rtla's
            // `top` traces no interference: compare with --no-interference
            // (with it, each traced interrupt costs an event, which under
            // emulation raised the means 2-3x). A 2 ms period and rtla
            // under `timeout -s INT` (it prints its summary on SIGINT) with
            // 300 s for the guest, to lighten the load on a slow host: the
            // guest that stopped answering during rtla in one CI run
            // (2026-11-26) was, as found later that day, the emulated guest
            // soft-locking under any command on this VM (`ibv_devices`
            // too), not rtla's doing; the harness reruns such a test in a
            // new guest (`harness`'s docs).
            let mut ours = Vec::new();
            let mut theirs = Vec::new();
            for _ in 0..3 {
                let o = lab
                    .sh(&format!(
                        "{MOUNT}; taskset -c 0 {IBPROBE} host --trace --no-interference --cpus 1 --interval 2ms --duration 3s --json"
                    ))
                    .success();
                let j: serde_json::Value = serde_json::from_str(&o.stdout).expect("JSON");
                let mean = |ctx: &str| j["cpus"][0][ctx]["mean_ns"].as_f64().expect("mean") / 1000.0;
                ours.push((mean("irq"), mean("thread")));
                let r = lab
                    .exec(
                        Node::A,
                        "timeout -s INT 60 taskset -c 0 rtla timerlat top -c 1 -p 2000 -d 3s -q",
                        Duration::from_secs(300),
                    )
                    .unwrap_or_else(|e| std::panic::panic_any(e))
                    .success();
                theirs.push(rtla_averages(&r.stdout, 1).unwrap_or_else(|| panic!("no cpu 1 line: {r}")));
            }
            eprintln!("timerlat averages (irq us, thread us) on cpu 1: ibprobe {ours:?}, rtla {theirs:?}");
            let median = |v: &mut Vec<f64>| {
                v.sort_by(|a, b| a.total_cmp(b));
                v[v.len() / 2]
            };
            for (i, what) in [(0, "irq"), (1, "thread")] {
                let pick = |v: &[(f64, f64)]| v.iter().map(|p| if i == 0 { p.0 } else { p.1 }).collect::<Vec<_>>();
                let (a, b) = (median(&mut pick(&ours)), median(&mut pick(&theirs)));
                // Same tracer, same settings; an emulated CPU's mean timer
                // latency swings 5x between runs (a few 20-40 ms stalls).
                assert!(
                    (1.0 / 3.0..=3.0).contains(&(a / b)),
                    "{what}: ibprobe median average {a:.1} us vs rtla {b:.1} us"
                );
            }
        })
        // rtla only has to hold the tracer while ibprobe asks for it: a
        // 10 ms period (not its 1 ms default) and 20 s at most keep the
        // emulated guest's load low (on 2026-11-26 guests soft-locked on
        // this VM under load, see the test above).
        .test("trace_is_refused_while_rtla_runs", |lab| {
            let o = lab.sh(&format!(
                "{MOUNT}; timeout 25 rtla timerlat top -c 1 -p 10000 -d 20s -q > /dev/null 2>&1 & \
                 for i in $(seq 150); do cat /sys/kernel/tracing/current_tracer /sys/kernel/tracing/instances/*/current_tracer 2>/dev/null | grep -q timerlat && break; sleep 0.2; done; \
                 {IBPROBE} host --trace --cpus 0 -n 10; echo rc=$?; kill %1; wait"
            ));
            assert!(o.stdout.contains("rc=2"), "{o}");
            assert!(o.stderr.contains("already runs the timerlat tracer"), "{o}");
        })
}
