//! Latency statistics: a streaming HDR histogram at 1 ns resolution and the
//! summary a report prints. Unlike perftest's per-sample array (memory
//! grows with the run, the top two samples dropped, stdev in integer
//! microseconds), it keeps memory constant, the true max, and mean and
//! stdev in floating point.
//!
//! # Definitions (what the numbers in a report mean)
//!
//! - **Percentile p** (nearest rank): the value of the sample of rank
//!   `r = max(1, ceil(p * n))` (1-based) in the sorted samples, as the
//!   histogram holds it: the highest value of that sample's bucket, so it
//!   is at or above the exact value by at most 1/1024 of it (3 significant
//!   digits, relative error <= 0.1%), then clamped into `[min, max]`.
//!   Below 2048 ns buckets are 1 ns wide: percentiles are exact there.
//! - **min / max**: exact (tracked beside the histogram, never bucketed,
//!   never dropped).
//! - **mean / stdev**: exact, from running integer sums of the samples and
//!   of their squares; stdev is the *population* standard deviation
//!   (divide by n, like perftest), since a run's samples are the
//!   population the report describes. Samples above [`MAX_NS`] enter the
//!   sums as [`MAX_NS`].
//! - **over 10 us**: exact count of samples strictly above 10 000 ns.

use hdrhistogram::Histogram;
use serde::Serialize;

/// Highest latency the histogram holds: 100 s. Larger samples are clamped
/// to it (and still counted), so recording never fails or allocates.
pub const MAX_NS: u64 = 100_000_000_000;

/// The threshold of [`Summary::over_10us`], ns (the thesis's tail metric).
pub const TAIL_NS: u64 = 10_000;

/// Counts per bucket, in HdrHistogram's layout for 1 ns .. [`MAX_NS`] at 3
/// significant digits: 2048 sub-buckets, the first bucket 1 ns wide and
/// each next one twice as wide. Index math is HdrHistogram's
/// (`counts_index`), so [`LatencyHistogram::to_hdr`] is an exact copy.
const SUB_BUCKET_HALF_MAGNITUDE: u32 = 10;
const SUB_BUCKET_HALF: usize = 1 << SUB_BUCKET_HALF_MAGNITUDE;
const SUB_BUCKET_MASK: u64 = (2 << SUB_BUCKET_HALF_MAGNITUDE) - 1;
const LEADING_ZERO_BASE: u32 = 64 - (SUB_BUCKET_HALF_MAGNITUDE + 1);

/// Buckets HdrHistogram needs for a `max` of at least 2048 (its
/// `buckets_to_cover` in closed form: doublings of 2048 until above `max`).
const fn buckets_to_cover(max: u64) -> usize {
    (max.ilog2() + 1 - SUB_BUCKET_HALF_MAGNITUDE) as usize
}

/// Length of the counts array (28,672: 224 KiB of counts).
pub const COUNTS_LEN: usize = (buckets_to_cover(MAX_NS) + 1) << SUB_BUCKET_HALF_MAGNITUDE;

/// Bucket index of a value in 1..=MAX_NS (HdrHistogram's `index_for`).
#[inline(always)]
fn index_for(v: u64) -> usize {
    let bucket = LEADING_ZERO_BASE - (v | SUB_BUCKET_MASK).leading_zeros();
    let sub = (v >> bucket) as usize;
    ((bucket as usize + 1) << SUB_BUCKET_HALF_MAGNITUDE) + sub - SUB_BUCKET_HALF
}

/// Lowest value of a bucket index (HdrHistogram's `value_for`).
fn value_for(i: usize) -> u64 {
    match i >> SUB_BUCKET_HALF_MAGNITUDE {
        0 => i as u64,
        bucket => (((i & (SUB_BUCKET_HALF - 1)) + SUB_BUCKET_HALF) as u64) << (bucket - 1),
    }
}

/// A latency distribution in nanoseconds. Recording is a handful of
/// instructions; the bucket counts, in HdrHistogram's layout, are walked
/// directly for percentiles and the RTT/2 halving, and turned into an
/// `hdrhistogram::Histogram` only for its encoding (logs, JSON, plots).
#[derive(Clone)]
pub struct LatencyHistogram {
    counts: Box<[u64]>,
    total: u64,
    true_max: u64,
    true_min: u64,
    over_10us: u64,
    over_20us: u64,
    clamped: u64,
    sum: u128,
    sum_sq: u128,
    /// The bucket indexes `record_bucketed` filled (`lo..hi`; empty when
    /// `lo >= hi`): a derived distribution's buckets need not sit at its
    /// exact min and max.
    bucketed: (usize, usize),
}

/// Compact: the summary, not the 28 672 bucket counts.
impl std::fmt::Debug for LatencyHistogram {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("LatencyHistogram")
            .field("count", &self.total)
            .field("min_ns", &if self.total == 0 { 0 } else { self.true_min })
            .field("max_ns", &self.true_max)
            .field("mean_ns", &self.mean())
            .field("over_10us", &self.over_10us)
            .finish_non_exhaustive()
    }
}

impl Default for LatencyHistogram {
    fn default() -> Self {
        Self::new()
    }
}

impl LatencyHistogram {
    /// 1 ns to 100 s, 3 significant digits; allocated once, here (224 KiB).
    pub fn new() -> Self {
        Self::with_counts(vec![0u64; COUNTS_LEN].into_boxed_slice())
    }

    /// An empty histogram over `counts` (all zero).
    fn with_counts(counts: Box<[u64]>) -> Self {
        LatencyHistogram {
            counts,
            total: 0,
            true_max: 0,
            true_min: u64::MAX,
            over_10us: 0,
            over_20us: 0,
            clamped: 0,
            sum: 0,
            sum_sq: 0,
            bucketed: (COUNTS_LEN, 0),
        }
    }

    /// Records one sample. Never allocates (the hot path calls it).
    #[inline]
    pub fn record(&mut self, ns: u64) {
        self.true_max = self.true_max.max(ns);
        self.true_min = self.true_min.min(ns);
        // Tail counters behind one rarely-taken branch (the hot path is
        // mostly below 10 us).
        if ns > TAIL_NS {
            self.count_tail(ns);
        }
        let s = ns.min(MAX_NS);
        self.sum += s as u128;
        self.sum_sq += s as u128 * s as u128;
        self.total += 1;
        // In range: s.max(1) is within 1..=MAX_NS, whose indexes all fit.
        if let Some(c) = self.counts.get_mut(index_for(s.max(1))) {
            *c += 1;
        }
    }

    /// Records `n` samples of 0 ns: the same distribution as `n` calls of
    /// `record(0)`, in one step (off a hot path that only counts them).
    pub fn record_zeros(&mut self, n: u64) {
        if n == 0 {
            return;
        }
        self.true_min = 0;
        self.total += n;
        self.counts[index_for(1)] += n;
    }

    #[cold]
    #[inline(never)]
    fn count_tail(&mut self, ns: u64) {
        self.over_10us += 1;
        self.over_20us += (ns > 2 * TAIL_NS) as u64;
        self.clamped += (ns > MAX_NS) as u64;
    }

    /// Adds `count` samples of (bucketed) value `v` to the buckets and
    /// sums only (for derived distributions).
    fn record_bucketed(&mut self, v: u64, count: u64) {
        let i = index_for(v.clamp(1, MAX_NS));
        if let Some(c) = self.counts.get_mut(i) {
            *c += count;
            self.bucketed = (self.bucketed.0.min(i), self.bucketed.1.max(i + 1));
        }
        self.total += count;
    }

    pub fn len(&self) -> u64 {
        self.total
    }

    pub fn is_empty(&self) -> bool {
        self.total == 0
    }

    /// Samples above [`MAX_NS`] (recorded as [`MAX_NS`] in the buckets).
    pub fn clamped(&self) -> u64 {
        self.clamped
    }

    /// The buckets as an `hdrhistogram::Histogram`, for HDR logs and plots.
    /// Allocates (about 224 KiB): call it off the hot path.
    pub fn to_hdr(&self) -> Histogram<u64> {
        let mut h = Histogram::new_with_bounds(1, MAX_NS, 3).expect("static bounds are valid");
        for (i, c) in self.filled() {
            // Cannot fail: value_for(i) of an index we filled is in bounds.
            let _ = h.record_n(value_for(i), c);
        }
        h
    }

    /// The non-empty buckets in ascending order, as (index, count).
    fn filled(&self) -> impl Iterator<Item = (usize, u64)> + '_ {
        let r = self.occupied();
        self.counts[r.clone()]
            .iter()
            .enumerate()
            .filter(|(_, &c)| c > 0)
            .map(move |(j, &c)| (r.start + j, c))
    }

    /// The non-empty buckets in ascending order, as (the highest value the
    /// bucket holds, its count), with no allocation (ibexporter's buckets).
    pub fn buckets(&self) -> impl Iterator<Item = (u64, u64)> + '_ {
        self.filled().map(|(i, c)| (value_for(i + 1) - 1, c))
    }

    /// The exact sum of the samples, ns (each clamped to [`MAX_NS`]).
    pub fn sum_ns(&self) -> u128 {
        self.sum
    }

    /// The largest sample (0 when empty), exact.
    pub fn max_ns(&self) -> u64 {
        self.true_max
    }

    /// Adds another distribution into this one (no allocation).
    pub fn merge(&mut self, other: &LatencyHistogram) {
        self.true_max = self.true_max.max(other.true_max);
        self.true_min = self.true_min.min(other.true_min);
        self.over_10us += other.over_10us;
        self.over_20us += other.over_20us;
        self.clamped += other.clamped;
        self.sum += other.sum;
        self.sum_sq += other.sum_sq;
        self.total += other.total;
        self.bucketed.0 = self.bucketed.0.min(other.bucketed.0);
        self.bucketed.1 = self.bucketed.1.max(other.bucketed.1);
        let r = other.occupied();
        for (a, b) in self.counts[r.clone()].iter_mut().zip(&other.counts[r]) {
            *a += *b;
        }
    }

    /// The bucket indexes that can be non-empty: from the smallest
    /// sample's to the largest's (a round of 1-50 us spans 6 000 of the
    /// 28 672), and those a derived distribution filled. Merging and
    /// resetting only this range keeps an interval's end cheap.
    fn occupied(&self) -> std::ops::Range<usize> {
        let (mut lo, mut hi) = self.bucketed;
        if self.true_min <= self.true_max {
            let at = |v: u64| index_for(v.clamp(1, MAX_NS));
            lo = lo.min(at(self.true_min));
            hi = hi.max(at(self.true_max) + 1);
        }
        if lo >= hi {
            return 0..0;
        }
        lo..hi.min(self.counts.len())
    }

    /// Empties it, keeping its memory.
    pub fn reset(&mut self) {
        let r = self.occupied();
        self.counts[r].fill(0);
        *self = Self::with_counts(std::mem::take(&mut self.counts));
    }

    /// A percentile by the module's definition (0 when empty); `q` in
    /// 0..=1. No allocation.
    pub fn quantile(&self, q: f64) -> u64 {
        self.quantiles([q])[0]
    }

    /// Percentiles by the module's definition for ascending `qs`, in one
    /// walk over the occupied buckets (no allocation; 0 when empty): the
    /// values of HdrHistogram's `value_at_quantile` on [`Self::to_hdr`]
    /// (for q = 0 the bucket's lowest value), clamped into `[min, max]`.
    pub fn quantiles<const N: usize>(&self, qs: [f64; N]) -> [u64; N] {
        let mut out = [0u64; N];
        if self.total == 0 {
            return out;
        }
        let r = self.occupied();
        let counts = &self.counts[r.clone()];
        let (mut seen, mut next) = (0u64, 0usize);
        for (o, q) in out.iter_mut().zip(qs) {
            let rank = ((q.min(1.0) * self.total as f64).ceil() as u64).max(1);
            while seen < rank && next < counts.len() {
                seen += counts[next];
                next += 1;
            }
            // The first bucket whose cumulative count reaches the rank.
            let i = r.start + next.saturating_sub(1);
            let v = if q == 0.0 {
                value_for(i)
            } else {
                value_for(i + 1) - 1
            };
            *o = v.clamp(self.true_min.min(self.true_max), self.true_max);
        }
        out
    }

    /// Exact mean, ns (0 when empty).
    pub fn mean(&self) -> f64 {
        self.sum as f64 / self.total.max(1) as f64
    }

    /// Exact population standard deviation, ns (0 when empty).
    pub fn stdev(&self) -> f64 {
        let n = self.total as u128;
        if n == 0 {
            return 0.0;
        }
        // n^2 var = n * sum_sq - sum^2, exact in integers while it fits.
        let exact = n
            .checked_mul(self.sum_sq)
            .and_then(|a| self.sum.checked_mul(self.sum).map(|b| a.saturating_sub(b)));
        match exact {
            Some(n2var) => (n2var as f64).sqrt() / n as f64,
            None => {
                let mean = self.sum as f64 / n as f64;
                (self.sum_sq as f64 / n as f64 - mean * mean)
                    .max(0.0)
                    .sqrt()
            }
        }
    }

    pub fn summary(&self) -> Summary {
        let n = self.total;
        let [p50_ns, p90_ns, p99_ns, p999_ns, p9999_ns] =
            self.quantiles([0.50, 0.90, 0.99, 0.999, 0.9999]);
        Summary {
            count: n,
            min_ns: if n == 0 { 0 } else { self.true_min },
            p50_ns,
            p90_ns,
            p99_ns,
            p999_ns,
            p9999_ns,
            max_ns: self.true_max,
            mean_ns: self.mean(),
            stdev_ns: self.stdev(),
            over_10us: self.over_10us as f64 / n.max(1) as f64,
            over_10us_count: self.over_10us,
        }
    }

    /// The same distribution with every sample halved (RTT -> RTT/2, values
    /// floored to whole ns): bucket values halved, exact min/max/sums
    /// halved, so percentiles are those of RTT/2 within the histogram's
    /// precision, mean/stdev/max/min and the > 10 us count exact. (Its own
    /// > 20 us count is bucketed: do not halve twice.)
    pub fn halved(&self) -> LatencyHistogram {
        let mut out = LatencyHistogram::new();
        for (i, c) in self.filled() {
            // The bucket's middle (HdrHistogram's median_equivalent), halved.
            let lo = value_for(i);
            let mid = lo + ((value_for(i + 1) - lo) >> 1);
            out.record_bucketed(mid / 2, c);
        }
        out.true_max = self.true_max / 2;
        if !self.is_empty() {
            out.true_min = self.true_min / 2;
        }
        out.sum = self.sum / 2;
        out.sum_sq = self.sum_sq / 4;
        out.clamped = self.clamped;
        // RTT/2 > 10 us exactly when RTT > 20 us (on the real half, not
        // the floored one): the exact count kept by record().
        out.over_10us = self.over_20us;
        // HdrHistogram's count_between(40 001 ns, max): whole buckets from
        // the one holding 40 001 ns up.
        let from = index_for(4 * TAIL_NS + 1);
        out.over_20us = self
            .filled()
            .filter(|&(i, _)| i >= from)
            .map(|(_, c)| c)
            .sum();
        out
    }
}

/// What a report prints about one distribution (definitions in the module
/// docs: percentiles within 0.1%, the rest exact).
#[derive(Clone, Copy, Debug, PartialEq, Serialize)]
pub struct Summary {
    pub count: u64,
    pub min_ns: u64,
    pub p50_ns: u64,
    pub p90_ns: u64,
    pub p99_ns: u64,
    pub p999_ns: u64,
    pub p9999_ns: u64,
    pub max_ns: u64,
    pub mean_ns: f64,
    pub stdev_ns: f64,
    /// Fraction of samples above 10 us (0..1), and their number.
    pub over_10us: f64,
    pub over_10us_count: u64,
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn of(samples: &[u64]) -> LatencyHistogram {
        let mut h = LatencyHistogram::new();
        samples.iter().for_each(|&s| h.record(s));
        h
    }

    /// The halving as it was built on HdrHistogram (the reference).
    fn halved_via_hdr(h: &LatencyHistogram) -> (Vec<(u64, u64)>, u64) {
        let hdr = h.to_hdr();
        let mut out = LatencyHistogram::new();
        for it in hdr.iter_recorded() {
            let v = hdr.median_equivalent(it.value_iterated_to()) / 2;
            out.record_bucketed(v, it.count_at_value());
        }
        (
            out.buckets().collect(),
            hdr.count_between(4 * TAIL_NS + 1, u64::MAX),
        )
    }

    proptest! {
        /// Percentiles and the halving walk our own buckets; they give
        /// exactly what HdrHistogram gives on `to_hdr()` (clamped into
        /// [min, max]), for any samples, huge and zero ones included.
        #[test]
        fn quantiles_and_halving_are_hdrhistograms(
            samples in prop::collection::vec(prop_oneof![0u64..5000, 0u64..200_000, 0u64..2 * MAX_NS], 1..400),
            qs in prop::collection::vec(0.0f64..=1.0, 1..6),
        ) {
            let h = of(&samples);
            let hdr = h.to_hdr();
            let reference = |q: f64| hdr.value_at_quantile(q).clamp(h.true_min, h.true_max);
            for &q in qs.iter().chain(&[0.0, 0.5, 0.99, 1.0]) {
                prop_assert_eq!(h.quantile(q), reference(q), "q {}", q);
            }
            let s = h.summary();
            prop_assert_eq!(
                [s.p50_ns, s.p90_ns, s.p99_ns, s.p999_ns, s.p9999_ns],
                [reference(0.5), reference(0.9), reference(0.99), reference(0.999), reference(0.9999)]
            );
            let half = h.halved();
            let (buckets, over_20us) = halved_via_hdr(&h);
            prop_assert_eq!(half.buckets().collect::<Vec<_>>(), buckets);
            prop_assert_eq!(half.over_20us, over_20us);
            let hh = half.to_hdr();
            for q in [0.0, 0.5, 0.99, 1.0] {
                prop_assert_eq!(
                    half.quantile(q),
                    hh.value_at_quantile(q).clamp(half.true_min, half.true_max),
                    "halved q {}", q
                );
            }
        }
    }

    proptest! {
        /// min, max, mean, stdev and the tail count are exact, whichever
        /// sample comes (zero, steady, new extreme, tail, clamped).
        #[test]
        fn exact_figures_whatever_the_sample(
            samples in prop::collection::vec(prop_oneof![0u64..3000, 9_000u64..11_000, 0u64..2 * MAX_NS], 1..300),
        ) {
            let h = of(&samples);
            let c: Vec<u128> = samples.iter().map(|&x| u128::from(x.min(MAX_NS))).collect();
            let (sum, sq): (u128, u128) = (c.iter().sum(), c.iter().map(|x| x * x).sum());
            prop_assert_eq!((h.sum, h.sum_sq), (sum, sq));
            prop_assert_eq!(h.len(), samples.len() as u64);
            prop_assert_eq!(h.max_ns(), *samples.iter().max().unwrap());
            prop_assert_eq!(h.summary().min_ns, *samples.iter().min().unwrap());
            prop_assert_eq!(h.summary().over_10us_count, samples.iter().filter(|&&x| x > TAIL_NS).count() as u64);
        }
    }

    /// `record_zeros(n)` leaves exactly what `n` times `record(0)` does,
    /// before and after other samples.
    #[test]
    fn zeros_at_once_are_zeros_one_by_one() {
        for (n, others) in [(0u64, vec![5u64]), (3, vec![]), (7, vec![1, 900, 50_000])] {
            let (mut a, mut b) = (of(&others), of(&others));
            for _ in 0..n {
                a.record(0);
            }
            b.record_zeros(n);
            assert_eq!(a.summary(), b.summary(), "{n} zeros, then {others:?}");
            assert_eq!(a.counts.to_vec(), b.counts.to_vec());
            assert_eq!(a.stdev(), b.stdev());
        }
    }

    #[test]
    fn layout_covers_the_range() {
        assert_eq!(
            COUNTS_LEN, 28_672,
            "HdrHistogram's length for 1 ns .. 100 s, 3 digits"
        );
        assert!(index_for(MAX_NS) < COUNTS_LEN);
        assert_eq!(index_for(1), 1);
        assert_eq!(value_for(index_for(2047)), 2047);
        assert_eq!(value_for(index_for(2049)), 2048);
        for v in [1u64, 2047, 2048, 4095, 1 << 20, MAX_NS] {
            let lo = value_for(index_for(v));
            assert!(lo <= v && v - lo <= v / 1024, "{v} -> bucket at {lo}");
        }
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(256))]

        /// Merge and reset touch only the occupied buckets (`occupied`):
        /// a histogram reset and reused between intervals, merged into a
        /// total, holds exactly what recording everything into one does,
        /// also with the derived (halved) distribution, whose buckets sit
        /// beside its min and max.
        #[test]
        fn reset_and_merge_per_interval_lose_nothing(
            intervals in prop::collection::vec(prop::collection::vec(prop_oneof![1u64..5_000, 1u64..3 * MAX_NS], 0..200), 1..6),
        ) {
            let (mut cur, mut total, mut all) = (LatencyHistogram::new(), LatencyHistogram::new(), LatencyHistogram::new());
            let mut halves = LatencyHistogram::new();
            for iv in &intervals {
                for &x in iv { cur.record(x); all.record(x); }
                halves.merge(&cur.halved());
                total.merge(&cur);
                cur.reset();
                prop_assert!(cur.counts.iter().all(|&c| c == 0));
            }
            prop_assert_eq!(total.summary(), all.summary());
            prop_assert_eq!(total.counts.to_vec(), all.counts.to_vec());
            prop_assert_eq!(halves.counts.iter().sum::<u64>(), all.len());
            prop_assert_eq!(halves.summary().p50_ns, all.halved().summary().p50_ns);
        }
    }
}
