//! Prints what one read of the counters costs on this machine, by part:
//! `meter_cost [READS] [CPU]` (defaults 2000, the CPU it runs on).
//!
//! Why it exists: the counters are read at every interval's end between
//! messages (`probe::workload::record`), so their cost is time the probe
//! is not probing; this says how much, per source (perf events, getrusage,
//! `/proc/thread-self/sched`, `/proc/interrupts`), what an interval's end reads by default
//! (`Meter::read_without_interrupts`), and the histogram merges an interval's end
//! does, in the lab guest or on a real host.

use std::time::Instant;

use ibnoise::counters::attribution::Attributor;
use ibnoise::counters::interrupts::InterruptTable;
use ibnoise::counters::perf::PerfSet;
use ibnoise::counters::sched::SchedFile;
use ibnoise::counters::{Counter, Counts, Meter};
use ibstats::latency::LatencyHistogram;

fn main() {
    let mut args = std::env::args().skip(1);
    let reads: usize = args
        .next()
        .map_or(2000, |s| s.parse().expect("READS: a count"));
    let cpus = match args.next() {
        Some(c) => vec![c.parse().expect("CPU: a number")],
        None => ibnoise::counters::measuring_cpus(None),
    };
    let mut missing = Vec::new();
    let mut perf = PerfSet::open(&mut missing);
    let mut irq = InterruptTable::open(&cpus).ok();
    let mut sched = SchedFile::open().ok();
    // The default meter (no perf event), as a run opens it.
    let mut meter = Meter::open(&cpus, false);
    println!(
        "{} perf events open; /proc/interrupts {}; CPUs {:?}",
        perf.len(),
        if irq.is_some() {
            "readable"
        } else {
            "not readable"
        },
        cpus
    );
    let time = |name: &str, f: &mut dyn FnMut()| {
        let mut ns: Vec<u64> = (0..reads)
            .map(|_| {
                let t = Instant::now();
                f();
                t.elapsed().as_nanos() as u64
            })
            .collect();
        ns.sort_unstable();
        println!(
            "{name:<22} p50 {:>8} ns  p99 {:>8} ns  max {:>8} ns",
            ns[ns.len() / 2],
            ns[ns.len() * 99 / 100],
            ns[ns.len() - 1]
        );
    };
    time("perf events (all)", &mut || {
        let mut c = Counts::default();
        perf.read(&mut c);
        std::hint::black_box(c);
    });
    time("getrusage", &mut || {
        std::hint::black_box(nix::sys::resource::getrusage(
            nix::sys::resource::UsageWho::RUSAGE_THREAD,
        ))
        .ok();
    });
    if let Some(f) = sched.as_mut() {
        time("/proc/thread-self/sched", &mut || {
            std::hint::black_box(f.migrations());
        });
    }
    if let Some(t) = irq.as_mut() {
        time("/proc/interrupts", &mut || {
            std::hint::black_box(t.total());
        });
    }
    time("Meter::read (all)", &mut || {
        std::hint::black_box(meter.read());
    });
    time("without interrupts", &mut || {
        std::hint::black_box(meter.read_without_interrupts());
    });
    // What an interval's end does besides reading: the interval's
    // histogram into the run's total and into the attribution, then reset.
    let mut attr = Attributor::new();
    let (mut cur, mut total) = (LatencyHistogram::new(), LatencyHistogram::new());
    let mut d = Counts::default();
    for &c in Counter::ALL {
        d.set(c, Some(1));
    }
    time("interval merges", &mut || {
        for i in 0..1000u64 {
            cur.record(20_000 + i * 37);
        }
        attr.interval(&d, &cur);
        total.merge(&cur);
        cur.reset();
    });
}
