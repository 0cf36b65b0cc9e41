//! Cost of the probe's per-sample bookkeeping: one `clock.now()` plus
//! `hist.record(clock.ticks_to_ns(t1 - t0))`, the work the hot loop adds
//! to every message on top of the transport.
//!
//! Why it exists: the probe claims its own overhead stays under 30 ns per
//! sample; this bench measures it (release build, no harness):
//!
//! ```text
//! cargo bench -p ibprobe --bench hot_path
//! ```
//!
//! It prints each run's ns/sample, the median of the runs and its ratio to
//! the 30 ns target, for the calibrated clock and for CLOCK_MONOTONIC_RAW.

use ibprobe::clock::Clock;
use ibprobe::stats::LatencyHistogram;
use std::hint::black_box;

const ITERATIONS: u64 = 10_000_000;
const RUNS: usize = 7;
const TARGET_NS: f64 = 30.0;

/// One run: ITERATIONS samples; returns ns per sample (by the
/// CLOCK_MONOTONIC_RAW-equivalent wall clock of `std::time::Instant`).
fn run(clock: &Clock, hist: &mut LatencyHistogram) -> f64 {
    let start = std::time::Instant::now();
    let mut t0 = clock.now();
    for _ in 0..ITERATIONS {
        let t1 = black_box(clock).now();
        hist.record(clock.ticks_to_ns(t1.wrapping_sub(t0)));
        t0 = t1;
    }
    let elapsed = start.elapsed();
    black_box(&hist);
    elapsed.as_nanos() as f64 / ITERATIONS as f64
}

fn bench(name: &str, clock: Clock) {
    let mut hist = LatencyHistogram::new();
    // Warm-up: fault in the histogram's counts and train the predictors.
    run(&clock, &mut hist);
    let mut per_run: Vec<f64> = (0..RUNS)
        .map(|_| {
            hist.reset();
            run(&clock, &mut hist)
        })
        .collect();
    let runs: Vec<String> = per_run.iter().map(|v| format!("{v:.2}")).collect();
    per_run.sort_by(|a, b| a.total_cmp(b));
    let median = per_run[per_run.len() / 2];
    println!("{name}: {}", clock.describe());
    println!(
        "  runs (ns/sample, {ITERATIONS} samples each): {}",
        runs.join(" ")
    );
    println!(
        "  median {median:.2} ns/sample = {:.2} x the {TARGET_NS:.0} ns target ({})",
        median / TARGET_NS,
        if median <= TARGET_NS {
            "within"
        } else {
            "OVER"
        }
    );
    let s = hist.summary();
    println!(
        "  (last run's gaps between reads: p50 {} ns, p99 {} ns, max {} ns)",
        s.p50_ns, s.p99_ns, s.max_ns
    );
}

/// The two halves alone, to see where the time goes: the clock read, and
/// the conversion + record of precomputed tick differences.
fn breakdown(clock: Clock) {
    let mut read = Vec::with_capacity(RUNS);
    let mut rec = Vec::with_capacity(RUNS);
    let mut hist = LatencyHistogram::new();
    for _ in 0..RUNS {
        let start = std::time::Instant::now();
        let mut acc = 0u64;
        for _ in 0..ITERATIONS {
            acc = acc.wrapping_add(black_box(&clock).now());
        }
        black_box(acc);
        read.push(start.elapsed().as_nanos() as f64 / ITERATIONS as f64);

        hist.reset();
        let start = std::time::Instant::now();
        let mut t = 1_500u64;
        for i in 0..ITERATIONS {
            // Tick gaps of about 1-2 us with some spread, like real samples.
            t = t.wrapping_add(i & 0x3ff);
            hist.record(clock.ticks_to_ns(black_box(1_500 + (t & 0x7ff))));
        }
        black_box(&hist);
        rec.push(start.elapsed().as_nanos() as f64 / ITERATIONS as f64);
    }
    read.sort_by(|a, b| a.total_cmp(b));
    rec.sort_by(|a, b| a.total_cmp(b));
    println!(
        "  breakdown (median): clock.now() {:.2} ns, ticks_to_ns + record {:.2} ns",
        read[RUNS / 2],
        rec[RUNS / 2]
    );
}

fn main() {
    let tsc = Clock::calibrate();
    bench("calibrated clock", tsc);
    breakdown(tsc);
    bench("CLOCK_MONOTONIC_RAW", Clock::monotonic());
    breakdown(Clock::monotonic());
}
