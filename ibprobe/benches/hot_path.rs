//! Cost of the probe's per-message measurement: one `clock.now()` (the
//! stamp) plus the record of `t1 - t0` as the stream receiver makes it
//! (held in ticks by `record::Pending`, converted and put into the
//! histogram together every `PENDING` samples): what the hot loop adds to
//! every message on top of the transport, against the floor: a loop that
//! only reads the same clock. Beside them, the record made at once
//! (`hist.record(clock.ticks_to_ns(t1 - t0))` right behind the read, as
//! the other loops record) and the record alone.
//!
//! Why it exists: the target is stamp + record <= 12 ns per message on
//! the development machine; this bench measures it (release build, no
//! harness):
//!
//! ```text
//! cargo bench -p ibprobe --bench hot_path
//! ```
//!
//! Each round runs the floor and the measured loop once, in alternating
//! order (so a slow spell of the machine does not always fall on the same
//! one). It prints each round, the medians with their min..max across
//! rounds, the ratio measured / floor, what the record adds above the
//! floor, and the verdict against the 12 ns target, for the calibrated
//! clock and for CLOCK_MONOTONIC_RAW.

use ibprobe::clock::Clock;
use ibprobe::probe::workload::record::Pending;
use ibstats::latency::LatencyHistogram;
use std::hint::black_box;
use std::time::Instant;

const ITERATIONS: u64 = 10_000_000;
const ROUNDS: usize = 9;
const TARGET_NS: f64 = 12.0;

/// The floor: ITERATIONS clock reads and nothing else; ns per read.
fn floor(clock: &Clock) -> f64 {
    let start = Instant::now();
    let mut acc = 0u64;
    for _ in 0..ITERATIONS {
        acc = acc.wrapping_add(black_box(clock).now());
    }
    black_box(acc);
    start.elapsed().as_nanos() as f64 / ITERATIONS as f64
}

/// The stream receiver's measurement: stamp, hold the ticks, fold them
/// into the histogram when `PENDING` are held; ns per message.
fn measured(clock: &Clock, hist: &mut LatencyHistogram) -> f64 {
    hist.reset();
    let mut pending = Pending::default();
    let start = Instant::now();
    let mut t0 = clock.now();
    for _ in 0..ITERATIONS {
        let t1 = black_box(clock).now();
        if pending.push(t1.wrapping_sub(t0)) {
            pending.fold(hist, clock);
        }
        t0 = t1;
    }
    pending.fold(hist, clock);
    black_box(&hist);
    start.elapsed().as_nanos() as f64 / ITERATIONS as f64
}

/// Stamp, convert and record at once, right behind the clock read; ns per
/// message.
fn immediate(clock: &Clock, hist: &mut LatencyHistogram) -> f64 {
    hist.reset();
    let start = Instant::now();
    let mut t0 = clock.now();
    for _ in 0..ITERATIONS {
        let t1 = black_box(clock).now();
        hist.record(clock.ticks_to_ns(t1.wrapping_sub(t0)));
        t0 = t1;
    }
    black_box(&hist);
    start.elapsed().as_nanos() as f64 / ITERATIONS as f64
}

/// The record alone (conversion + record of precomputed tick gaps of
/// about 1-2 us with some spread, like real samples); ns per record.
fn record_only(clock: &Clock, hist: &mut LatencyHistogram) -> f64 {
    hist.reset();
    let start = Instant::now();
    let mut t = 1_500u64;
    for i in 0..ITERATIONS {
        t = t.wrapping_add(i & 0x3ff);
        hist.record(clock.ticks_to_ns(black_box(1_500 + (t & 0x7ff))));
    }
    black_box(&hist);
    start.elapsed().as_nanos() as f64 / ITERATIONS as f64
}

/// Median and min..max of one contender's per-round figures.
fn spread(mut v: Vec<f64>) -> (f64, f64, f64) {
    v.sort_by(|a, b| a.total_cmp(b));
    (v[v.len() / 2], v[0], v[v.len() - 1])
}

fn bench(name: &str, clock: Clock) {
    println!("{name}: {}", clock.describe());
    let mut hist = LatencyHistogram::new();
    // Warm-up: fault in the histogram's counts and train the predictors.
    measured(&clock, &mut hist);
    let (mut fl, mut me, mut re, mut ratio) = (vec![], vec![], vec![], vec![]);
    let mut im = vec![];
    for round in 0..ROUNDS {
        // Alternate the order: floor first in even rounds, last in odd ones.
        let (f, m, i, r) = if round % 2 == 0 {
            let f = floor(&clock);
            let m = measured(&clock, &mut hist);
            let i = immediate(&clock, &mut hist);
            (f, m, i, record_only(&clock, &mut hist))
        } else {
            let r = record_only(&clock, &mut hist);
            let i = immediate(&clock, &mut hist);
            let m = measured(&clock, &mut hist);
            (floor(&clock), m, i, r)
        };
        println!("  round {round}: floor {f:.2} ns/read, stamp + record {m:.2} ns/message, recorded at once {i:.2}, record alone {r:.2} ns");
        fl.push(f);
        me.push(m);
        im.push(i);
        re.push(r);
        ratio.push(m / f);
    }
    let (i, i_lo, i_hi) = spread(im);
    let (f, f_lo, f_hi) = spread(fl);
    let (m, m_lo, m_hi) = spread(me);
    let (r, r_lo, r_hi) = spread(re);
    let (q, q_lo, q_hi) = spread(ratio);
    println!("  floor (clock read only): median {f:.2} ns ({f_lo:.2}..{f_hi:.2}) over {ROUNDS} rounds of {ITERATIONS}");
    println!("  stamp + record:          median {m:.2} ns ({m_lo:.2}..{m_hi:.2})");
    println!("  recorded at once:        median {i:.2} ns ({i_lo:.2}..{i_hi:.2})");
    println!("  record alone:            median {r:.2} ns ({r_lo:.2}..{r_hi:.2})");
    println!(
        "  ratio stamp + record / floor: median {q:.2} ({q_lo:.2}..{q_hi:.2}); {:.2} ns above the floor",
        m - f
    );
    println!(
        "  target stamp + record <= {TARGET_NS:.0} ns: {:.2} x the target ({})",
        m / TARGET_NS,
        if m_hi <= TARGET_NS {
            "within, in every round"
        } else if m <= TARGET_NS {
            "within at the median, not in every round"
        } else {
            "OVER"
        }
    );
    let s = hist.summary();
    println!(
        "  (last round's record-alone histogram: p50 {} ns, p99 {} ns, max {} ns)",
        s.p50_ns, s.p99_ns, s.max_ns
    );
}

fn main() {
    bench("calibrated clock", Clock::calibrate());
    bench("CLOCK_MONOTONIC_RAW", Clock::monotonic());
}
