//! `ibprobe host --trace` (the kernel's timerlat tracer) on Debian's two
//! kernels in the lab (tests/lab): the standard one has no timerlat tracer
//! and is refused with one line; the PREEMPT_RT one runs it, and the
//! result is checked for its own consistency, for leaving tracefs as it
//! found it, and for being refused while `rtla timerlat` (Debian's rtla
//! package) holds the tracer. The comparison of its figures with rtla's is
//! a benchmark, `ibprobe/benches/vs-rtla` (an emulated CPU's means swing
//! several-fold between runs, and the guest has stopped answering under
//! rtla in CI). Runs with `--include-ignored` (scripts/test-all does).
//! The standard kernel's half (no tracer: refused; the auto clock) runs in
//! the `rxe_loopback` guest of `tests/lab.rs`, which boots that kernel
//! anyway: a boot less.

use ibtools_tests::lab::harness::{self, Group};
use ibtools_tests::lab::{LabConfig, Node};
use std::process::ExitCode;

const IBPROBE: &str = env!("CARGO_BIN_EXE_ibprobe");
const MOUNT: &str =
    "mountpoint -q /sys/kernel/tracing || mount -t tracefs nodev /sys/kernel/tracing";

fn main() -> ExitCode {
    harness::run(vec![rt_kernel()])
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
                 taskset -c 0 {IBPROBE} host --trace --cpus 1 --period 500us -n 1000 --json > /run/lab/results/t.json; echo rc=$?; \
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
            // Nanoseconds, as the schema says: an emulated CPU's median timer
            // latency is tens of microseconds to a few milliseconds (a unit
            // mix-up, us or ms read as ns, lands 1000x outside).
            for ctx in ["irq", "thread"] {
                let p50 = n(ctx, "p50_ns");
                assert!((1_000..=20_000_000).contains(&p50), "{ctx} p50 {p50} ns: {c}");
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
        // Another user of the tracer, as `rtla timerlat` leaves tracefs
        // while it runs: an instance of its own with timerlat as its
        // tracer (rtla's is "timerlat_top"), here on CPU 1 at a 10 ms
        // period. rtla itself is not run in CI: in two CI runs the guest
        // stopped answering while it ran (at 1 ms and 2 ms; never under
        // ibprobe; not reproduced here). Until 2026-11-27 this test ran
        // rtla itself, and passed whenever the guest stayed up;
        // benches/vs-rtla runs rtla now.
        .test("trace_is_refused_while_another_instance_runs_timerlat", |lab| {
            let o = lab.sh(&format!(
                "{MOUNT}; cd /sys/kernel/tracing; echo 1 > osnoise/cpus; echo 10000 > osnoise/timerlat_period_us; \
                 mkdir instances/other && echo timerlat > instances/other/current_tracer; \
                 {IBPROBE} host --trace --cpus 0 -n 10; echo rc=$?; \
                 echo nop > instances/other/current_tracer; rmdir instances/other; \
                 echo 0-1 > osnoise/cpus; echo 1000 > osnoise/timerlat_period_us; ls instances | wc -l"
            ));
            assert!(o.stdout.contains("rc=2"), "{o}");
            assert!(o.stderr.contains("already runs the timerlat tracer"), "{o}");
            assert_eq!(o.stdout.lines().last(), Some("0"), "the instance was not removed: {o}");
        })
}
