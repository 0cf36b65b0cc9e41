//! Latency statistics: a streaming HDR histogram at 1 ns resolution and the
//! summary a report prints.
//!
//! Why it exists: perftest sorts a per-sample array (memory grows with the
//! run), drops the top two samples and computes stdev in integer
//! microseconds. A histogram keeps memory constant for a run of any length,
//! keeps the true max, and gives mean and stdev in floating point.

use hdrhistogram::Histogram;
use serde::Serialize;

/// Highest latency the histogram holds: 100 s. Larger samples are clamped
/// to it (and still counted), so recording never fails or allocates.
pub const MAX_NS: u64 = 100_000_000_000;

/// A latency distribution in nanoseconds.
#[derive(Clone, Debug)]
pub struct LatencyHistogram {
    h: Histogram<u64>,
    true_max: u64,
}

impl Default for LatencyHistogram {
    fn default() -> Self {
        Self::new()
    }
}

impl LatencyHistogram {
    /// 1 ns to 100 s, 3 significant digits; allocated once, here.
    pub fn new() -> Self {
        LatencyHistogram {
            h: Histogram::new_with_bounds(1, MAX_NS, 3).expect("static bounds are valid"),
            true_max: 0,
        }
    }

    /// Records one sample. Never allocates (the hot path calls it).
    #[inline]
    pub fn record(&mut self, ns: u64) {
        self.true_max = self.true_max.max(ns);
        let v = ns.clamp(1, MAX_NS);
        // Cannot fail: v is within the bounds given to new().
        let _ = self.h.record(v);
    }

    /// Number of samples.
    pub fn len(&self) -> u64 {
        self.h.len()
    }

    /// True when nothing was recorded.
    pub fn is_empty(&self) -> bool {
        self.h.is_empty()
    }

    /// The underlying histogram (for HDR logs and plots).
    pub fn histogram(&self) -> &Histogram<u64> {
        &self.h
    }

    /// Adds another distribution into this one.
    pub fn merge(&mut self, other: &LatencyHistogram) {
        self.true_max = self.true_max.max(other.true_max);
        let _ = self.h.add(&other.h);
    }

    /// Empties it, keeping its memory.
    pub fn reset(&mut self) {
        self.h.reset();
        self.true_max = 0;
    }

    /// The summary of what was recorded.
    pub fn summary(&self) -> Summary {
        let q = |p: f64| if self.h.is_empty() { 0 } else { self.h.value_at_quantile(p) };
        let over = if self.h.is_empty() {
            0.0
        } else {
            self.h.count_between(10_001, MAX_NS) as f64 / self.h.len() as f64
        };
        Summary {
            count: self.h.len(),
            min_ns: if self.h.is_empty() { 0 } else { self.h.min() },
            p50_ns: q(0.50),
            p90_ns: q(0.90),
            p99_ns: q(0.99),
            p999_ns: q(0.999),
            p9999_ns: q(0.9999),
            max_ns: self.true_max,
            mean_ns: self.h.mean(),
            stdev_ns: self.h.stdev(),
            over_10us: over,
        }
    }
}

/// What a report prints about one distribution. Percentiles are the
/// histogram's (within 0.1%); `max_ns` is the exact largest sample.
#[derive(Clone, Copy, Debug, PartialEq, Serialize)]
pub struct Summary {
    /// Samples recorded.
    pub count: u64,
    /// Smallest sample.
    pub min_ns: u64,
    /// Median.
    pub p50_ns: u64,
    /// 90th percentile.
    pub p90_ns: u64,
    /// 99th percentile.
    pub p99_ns: u64,
    /// 99.9th percentile.
    pub p999_ns: u64,
    /// 99.99th percentile.
    pub p9999_ns: u64,
    /// The true maximum (not dropped, not bucketed).
    pub max_ns: u64,
    /// Mean, floating point.
    pub mean_ns: f64,
    /// Standard deviation, floating point.
    pub stdev_ns: f64,
    /// Fraction of samples above 10 us (0..1).
    pub over_10us: f64,
}
