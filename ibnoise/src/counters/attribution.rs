//! Attribution: per interval, did a context switch (a page fault, a
//! migration, an interrupt, an SMI) happen, and what was the tail of the
//! intervals with one against those without? "p99.9 31 us" is a number;
//! "intervals with a context switch: p99.9 31 us; without: 2.1 us" is a
//! cause. Each interval's samples are merged into the "with" or the
//! "without" histogram of each cause (allocated before the run), so the
//! pooled percentiles are exact, not averages of per-interval ones.

use serde::Serialize;

use super::counts::{Counter, Counts};
use ibstats::latency::LatencyHistogram;

ibhost::vocabulary! {
    no_from_str
    /// A cause an interval may have (at least one of it in the interval):
    /// its name in JSON and its phrase for sentences (`help`), in the
    /// order a tie is broken.
    Cause {
        ContextSwitch = "context_switch", "a context switch";
        PageFault = "page_fault", "a page fault";
        Migration = "cpu_migration", "a CPU migration";
        Smi = "smi", "an SMI";
        Interrupt = "interrupt", "an interrupt";
    }
}

impl Cause {
    /// How many of this cause `d` counted; None when not counted.
    fn count(self, d: &Counts) -> Option<u64> {
        match self {
            Cause::ContextSwitch => d.get(Counter::ContextSwitches),
            Cause::PageFault => {
                let (a, b) = (
                    d.get(Counter::PageFaultsMinor),
                    d.get(Counter::PageFaultsMajor),
                );
                a.zip(b).map(|(a, b)| a + b).or(a).or(b)
            }
            Cause::Migration => d.get(Counter::CpuMigrations),
            Cause::Smi => d.get(Counter::Smis),
            Cause::Interrupt => d.get(Counter::Interrupts),
        }
    }
}

/// A cause's intervals without it (`sides[0]`) and with it (`sides[1]`):
/// their pooled samples and how many.
struct Group {
    cause: Cause,
    sides: [(LatencyHistogram, u64); 2],
}

/// Collects intervals; allocated before the run.
pub struct Attributor {
    groups: Vec<Group>,
    intervals: u64,
}

impl Default for Attributor {
    fn default() -> Self {
        Self::new()
    }
}

impl Attributor {
    /// Two histograms per cause (about 2 MiB in all).
    pub fn new() -> Attributor {
        Attributor {
            groups: Cause::ALL
                .iter()
                .map(|&cause| Group {
                    cause,
                    sides: [(LatencyHistogram::new(), 0), (LatencyHistogram::new(), 0)],
                })
                .collect(),
            intervals: 0,
        }
    }

    /// One interval ended with counters `d` and samples `h` (no allocation).
    pub fn interval(&mut self, d: &Counts, h: &LatencyHistogram) {
        if h.is_empty() {
            return;
        }
        self.intervals += 1;
        for g in &mut self.groups {
            if let Some(n) = g.cause.count(d) {
                let side = &mut g.sides[usize::from(n > 0)];
                side.0.merge(h);
                side.1 += 1;
            }
        }
    }

    /// The result; causes never counted are left out.
    pub fn finish(&self) -> Attribution {
        let side = |(h, n): &(LatencyHistogram, u64)| Side {
            intervals: *n,
            samples: h.len(),
            p999_ns: h.summary().p999_ns,
            max_ns: h.max_ns(),
        };
        Attribution {
            intervals: self.intervals,
            causes: self
                .groups
                .iter()
                .filter(|g| g.sides[0].1 + g.sides[1].1 > 0)
                .map(|g| CauseLine {
                    cause: g.cause.name(),
                    phrase: g.cause.help(),
                    with: side(&g.sides[1]),
                    without: side(&g.sides[0]),
                })
                .collect(),
        }
    }
}

/// The intervals on one side of a cause: their samples' pooled p99.9 (0
/// when none) and max.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
pub struct Side {
    pub intervals: u64,
    pub samples: u64,
    pub p999_ns: u64,
    pub max_ns: u64,
}

/// One cause: the intervals with it against those without.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct CauseLine {
    /// The [`Cause`]'s name and its phrase.
    pub cause: &'static str,
    #[serde(skip)]
    pub phrase: &'static str,
    pub with: Side,
    pub without: Side,
}

impl CauseLine {
    /// "intervals with a context switch (3 of 50): p99.9 31.000 us, max
    /// 184.000 us; without: p99.9 2.100 us, max 3.000 us".
    pub fn sentence(&self) -> String {
        let us = |ns: u64| format!("{:.3} us", ns as f64 / 1000.0);
        let side = |s: &Side| {
            if s.intervals == 0 {
                "none".to_string()
            } else {
                format!("p99.9 {}, max {}", us(s.p999_ns), us(s.max_ns))
            }
        };
        let n = self.with.intervals;
        let total = n + self.without.intervals;
        let (with, without, phrase) = (side(&self.with), side(&self.without), self.phrase);
        format!("intervals with {phrase} ({n} of {total}): {with}; without: {without}")
    }

    /// How much worse the tail is with the cause than without: the larger
    /// of the p99.9 ratio and the max ratio (0 when a side is empty).
    pub fn tail_ratio(&self) -> f64 {
        if self.with.intervals == 0 || self.without.intervals == 0 {
            return 0.0;
        }
        let r = |a: u64, b: u64| a as f64 / b.max(1) as f64;
        r(self.with.p999_ns, self.without.p999_ns).max(r(self.with.max_ns, self.without.max_ns))
    }
}

/// Per-interval attribution of a run: the intervals with samples, one
/// line per cause that was counted.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize)]
pub struct Attribution {
    pub intervals: u64,
    pub causes: Vec<CauseLine>,
}

/// A cause's tail must be this many times the tail without it to be named.
pub const NAMED_RATIO: f64 = 1.5;

impl Attribution {
    /// The cause whose intervals hold the tail. A candidate has intervals
    /// on both sides (at least 2, and 5% of all), a "with" max at least
    /// the "without" one, and a p99.9 or max [`NAMED_RATIO`] times the
    /// "without" one. Of those, the largest ratio; interrupts only when no
    /// other cause qualifies (the timer interrupts most intervals, so its
    /// "without" side is small and its ratio loud).
    pub fn likely(&self) -> Option<&CauseLine> {
        let min_side = (self.intervals / 20).max(2);
        let ok = |c: &&CauseLine| {
            c.with.intervals >= min_side
                && c.without.intervals >= min_side
                && c.with.max_ns >= c.without.max_ns
                && c.tail_ratio() >= NAMED_RATIO
        };
        let best = |interrupt: bool| {
            self.causes
                .iter()
                .filter(ok)
                .filter(|c| (c.cause == Cause::Interrupt.name()) == interrupt)
                .max_by(|a, b| a.tail_ratio().total_cmp(&b.tail_ratio()))
        };
        best(false).or_else(|| best(true))
    }
}
