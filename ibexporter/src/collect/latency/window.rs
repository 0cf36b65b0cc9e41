//! The sliding window behind `ibprobe_latency_window_seconds`: a few
//! time slices per series, each a sparse log-linear histogram, and the
//! summary (quantiles, count, sum, max) computed from them.
//!
//! Why it exists: the window must answer "p99.9 over the last 5 minutes"
//! for hundreds of series in bounded memory. A slice keeps only its
//! non-empty buckets (a round of 100 probes fills at most 100), so a
//! series costs a few KiB however long the window, and the summary is
//! computed once per change (when a round is recorded or a slice
//! expires), never per scrape.
//!
//! Buckets: values below 256 ns are exact; above, 128 buckets per
//! power of two, so a bucket is at most 1/128 (0.78%) of its lower
//! bound wide. A quantile reports the highest value of its bucket, capped
//! at the true max: at or above the exact nearest-rank value by less
//! than 0.8%.

use std::collections::VecDeque;
use std::time::{Duration, Instant};

/// Mantissa bits of a bucket index: 2^8 exact values, then 2^7 buckets
/// per power of two.
const MANTISSA_BITS: u32 = 8;
const EXACT: u64 = 1 << MANTISSA_BITS;
const HALF: u64 = EXACT / 2;

/// The bucket a value in ns falls in.
fn index(v: u64) -> u32 {
    if v < EXACT {
        return v as u32;
    }
    let shift = 63 - v.leading_zeros() - (MANTISSA_BITS - 1);
    (u64::from(shift) * HALF + (v >> shift)) as u32
}

/// The highest value in ns bucket `i` holds.
fn highest(i: u32) -> u64 {
    let i = u64::from(i);
    if i < EXACT {
        return i;
    }
    let shift = i / HALF - 1;
    let mantissa = i - shift * HALF;
    (mantissa << shift) + ((1u64 << shift) - 1)
}

/// What the window says of one series.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub(super) struct Summary {
    /// Samples in the window.
    pub count: u64,
    /// Their exact sum, ns.
    pub sum_ns: u128,
    /// [`super::QUANTILES`], ns.
    pub quantiles: [u64; 4],
    /// The largest sample, exact, ns.
    pub max_ns: u64,
}

/// One slice of the window: when it began and what its rounds measured.
#[derive(Debug)]
struct Slice {
    start: Instant,
    /// (bucket index, count), ascending by index.
    buckets: Vec<(u32, u32)>,
    count: u64,
    sum_ns: u128,
    max_ns: u64,
}

/// A series' window: at most `slices` (+1 while one expires) slices.
#[derive(Debug)]
pub(super) struct Window {
    slices: VecDeque<Slice>,
    slice_len: Duration,
    length: Duration,
}

impl Window {
    /// A window of `length`, kept as `slices` slices.
    pub fn new(length: Duration, slices: u32) -> Window {
        Window {
            slices: VecDeque::new(),
            slice_len: length / slices.max(1),
            length,
        }
    }

    /// Adds a round: `buckets` are (value in ns, count) in ascending value
    /// order, `sum_ns` and `max_ns` exact.
    pub fn add(
        &mut self,
        now: Instant,
        buckets: impl Iterator<Item = (u64, u64)>,
        sum_ns: u128,
        max_ns: u64,
    ) {
        let fresh = self
            .slices
            .back()
            .is_none_or(|s| now.duration_since(s.start) >= self.slice_len);
        if fresh {
            self.slices.push_back(Slice {
                start: now,
                buckets: Vec::new(),
                count: 0,
                sum_ns: 0,
                max_ns: 0,
            });
        }
        let slice = self.slices.back_mut().expect("pushed above");
        let mut round: Vec<(u32, u32)> = Vec::new();
        for (v, n) in buckets {
            let i = index(v);
            let n = u32::try_from(n).unwrap_or(u32::MAX);
            match round.last_mut() {
                Some((last, c)) if *last == i => *c = c.saturating_add(n),
                _ => round.push((i, n)),
            }
            slice.count += u64::from(n);
        }
        slice.buckets = merge(&slice.buckets, &round);
        slice.sum_ns += sum_ns;
        slice.max_ns = slice.max_ns.max(max_ns);
        self.expire(now);
    }

    /// Drops the slices that began a whole window ago or more; true when
    /// one was dropped (the summary changed).
    pub fn expire(&mut self, now: Instant) -> bool {
        let before = self.slices.len();
        while self
            .slices
            .front()
            .is_some_and(|s| now.duration_since(s.start) >= self.length)
        {
            self.slices.pop_front();
        }
        self.slices.len() != before
    }

    /// Slices held now.
    #[cfg(test)]
    pub fn slices(&self) -> usize {
        self.slices.len()
    }

    /// Bytes of bucket storage held (for the memory tests).
    #[cfg(test)]
    pub fn bucket_bytes(&self) -> usize {
        self.slices
            .iter()
            .map(|s| s.buckets.capacity() * std::mem::size_of::<(u32, u32)>())
            .sum()
    }

    /// The summary over every slice (`None`: no sample in the window).
    pub fn summary(&self) -> Option<Summary> {
        let count: u64 = self.slices.iter().map(|s| s.count).sum();
        if count == 0 {
            return None;
        }
        let max_ns = self.slices.iter().map(|s| s.max_ns).max().unwrap_or(0);
        let sum_ns = self.slices.iter().map(|s| s.sum_ns).sum();
        let mut all: Vec<(u32, u32)> = self
            .slices
            .iter()
            .flat_map(|s| s.buckets.iter().copied())
            .collect();
        all.sort_unstable_by_key(|&(i, _)| i);
        // Nearest rank: the smallest bucket whose cumulative count
        // reaches ceil(q * count).
        let ranks =
            super::families::QUANTILES.map(|q| ((q * count as f64).ceil() as u64).clamp(1, count));
        let mut quantiles = [max_ns; 4];
        let mut next = 0;
        let mut seen = 0u64;
        for (i, c) in all {
            seen += u64::from(c);
            while next < ranks.len() && seen >= ranks[next] {
                quantiles[next] = highest(i).min(max_ns);
                next += 1;
            }
            if next == ranks.len() {
                break;
            }
        }
        Some(Summary {
            count,
            sum_ns,
            quantiles,
            max_ns,
        })
    }
}

/// Two ascending sparse bucket lists as one.
fn merge(a: &[(u32, u32)], b: &[(u32, u32)]) -> Vec<(u32, u32)> {
    let mut out = Vec::with_capacity(a.len() + b.len());
    let (mut x, mut y) = (a.iter().peekable(), b.iter().peekable());
    loop {
        match (x.peek(), y.peek()) {
            (Some(&&(i, c)), Some(&&(j, d))) if i == j => {
                out.push((i, c.saturating_add(d)));
                x.next();
                y.next();
            }
            (Some(&&(i, c)), Some(&&(j, _))) if i < j => {
                out.push((i, c));
                x.next();
            }
            (_, Some(&&e)) => {
                out.push(e);
                y.next();
            }
            (Some(&&e), None) => {
                out.push(e);
                x.next();
            }
            (None, None) => break,
        }
    }
    out.shrink_to_fit();
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn indexes_are_contiguous_and_bounded() {
        let mut prev = index(0);
        assert_eq!(prev, 0);
        for v in 1..200_000u64 {
            let i = index(v);
            assert!(i == prev || i == prev + 1, "{v}: {prev} -> {i}");
            assert!(
                highest(i) >= v,
                "{v} above its bucket's highest {}",
                highest(i)
            );
            if i != prev {
                assert_eq!(highest(prev), v - 1, "bucket {prev} ends before {v}");
            }
            prev = i;
        }
        assert!(index(u64::MAX) < u32::MAX);
        assert_eq!(highest(index(u64::MAX)), u64::MAX);
    }

    fn exact(sorted: &[u64], q: f64) -> u64 {
        let rank = ((q * sorted.len() as f64).ceil() as usize).clamp(1, sorted.len());
        sorted[rank - 1]
    }

    proptest! {
        /// Over any rounds, the summary's quantiles are at or above the
        /// exact nearest-rank values by less than 0.8%, never above the
        /// max; count, sum and max are exact.
        #[test]
        fn quantiles_within_precision(rounds in prop::collection::vec(
            prop::collection::vec(1u64..100_000_000, 1..200), 1..8)) {
            let mut w = Window::new(Duration::from_secs(60), 5);
            let now = Instant::now();
            let mut all = Vec::new();
            for (k, r) in rounds.iter().enumerate() {
                let mut sorted = r.clone();
                sorted.sort_unstable();
                let mut b: Vec<(u64, u64)> = Vec::new();
                for &v in &sorted {
                    match b.last_mut() {
                        Some((last, c)) if *last == v => *c += 1,
                        _ => b.push((v, 1)),
                    }
                }
                let at = now + Duration::from_secs(k as u64 * 5);
                w.add(at, b.into_iter(), r.iter().map(|&v| v as u128).sum(), *r.iter().max().unwrap());
                all.extend_from_slice(r);
            }
            all.sort_unstable();
            let s = w.summary().unwrap();
            prop_assert_eq!(s.count, all.len() as u64);
            prop_assert_eq!(s.sum_ns, all.iter().map(|&v| v as u128).sum::<u128>());
            prop_assert_eq!(s.max_ns, *all.last().unwrap());
            for (k, q) in super::super::QUANTILES.iter().enumerate() {
                let e = exact(&all, *q);
                let got = s.quantiles[k];
                prop_assert!(got >= e && (got - e) as f64 <= e as f64 / 128.0, "q{} exact {} got {}", q, e, got);
                prop_assert!(got <= s.max_ns);
            }
        }
    }

    #[test]
    fn slices_expire_with_the_window() {
        let mut w = Window::new(Duration::from_secs(50), 5);
        let t0 = Instant::now();
        for k in 0..20u64 {
            w.add(
                t0 + Duration::from_secs(k * 5),
                [(1000 + k, 1)].into_iter(),
                1000,
                1000 + k,
            );
        }
        // Slices of 10 s: t=95 keeps those begun at 50..90 (5 slices).
        assert_eq!(w.slices(), 5);
        assert_eq!(w.summary().unwrap().count, 10);
        assert!(w.expire(t0 + Duration::from_secs(135)));
        assert_eq!(w.slices(), 1);
        assert!(w.expire(t0 + Duration::from_secs(200)));
        assert_eq!(w.summary(), None);
    }
}
