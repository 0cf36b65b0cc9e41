//! ibstats: the toolkit's statistics, defined once. [`latency`] is how one
//! run's latencies are kept and summarised (a streaming HDR histogram,
//! true percentiles), used by all three tools; the rest answers "did a
//! change help, and with what confidence?": the one place where the
//! toolkit turns repeated measurements into a verdict, used by `ibprobe
//! compare` and `ibtune experiment`.
//!
//! # Methods
//!
//! **Design.** Each variant (the baseline first) is run once per *block*;
//! a run of R rounds is R blocks. The order inside a block is random, and
//! every second block runs the previous block's order backwards
//! ([`schedule`]): with two variants that is A B B A, so a linear drift of
//! the host over a pair of blocks adds the same amount to both and
//! cancels. One round of a variant yields one number per metric (its
//! p50, p99, p99.9, max, or messages/s), taken from that round's own
//! histogram.
//!
//! **Effect.** Rounds are paired by block. For variant B against the
//! baseline A, block r gives the log ratio `d_r = ln(B_r / A_r)`: a ratio
//! because latency effects are multiplicative (a knob that removes a
//! context switch scales the tail), a log so that 0.5x and 2x are equally
//! far from 1. The effect is `exp(HL)`, where HL is the Hodges-Lehmann
//! estimate of the centre of the `d_r` (the median of all pairwise means
//! `(d_i + d_j) / 2`, i <= j).
//!
//! **Confidence interval and test.** The 95% interval is the Wilcoxon
//! signed-rank interval for that centre (Hollander & Wolfe, ch. 3): the
//! `C`-th smallest and largest pairwise means, with `C` from the exact
//! null distribution of the signed-rank statistic for the number of pairs.
//! The test of "no effect" is the exact signed-rank test, computed on the
//! actual ranks (ties get mid-ranks, zero differences are dropped), so it
//! stays exact when histogram buckets make two rounds report the same
//! quantile. Why rank-based rather than a bootstrap: with the 6 to 20
//! rounds a user will wait for, a percentile bootstrap of a median is
//! coarse and undercovers (it can only return values that occurred, and
//! its coverage at n = 10 is below nominal), while the signed-rank
//! interval has guaranteed coverage for any continuous, symmetric
//! distribution of the paired log ratios, needs no normality (per-round
//! tails are not normal), and a single wild round moves it by one rank,
//! not by its size. The price: with fewer than 6 pairs no 95% interval
//! exists (2^-5 x 2 > 0.05), and the tool says so instead of guessing.
//!
//! **Verdict.** `faster` or `slower` when the test rejects "no effect" at
//! 5% after Holm's correction over the variants (or knobs) compared on
//! that metric, else `no_significant_difference`. Holm controls the
//! chance of any false verdict across the family at 5%, uniformly more
//! powerful than Bonferroni. The interval is reported at 95% per
//! comparison; with one variant the two agree exactly. The signed-rank
//! statistic is discrete, so the test's exact level is at most 5% and
//! usually below it: with one variant, n untied pairs and no effect, a
//! verdict comes with probability 50/1024 = 4.88% at n = 10 (the
//! largest level under 5% the exact null distribution offers), and the
//! interval's achieved confidence is 95.1% there (`Effect::confidence`).
//!
//! **Smallest detectable effect.** Half the width of the interval, as a
//! ratio (e.g. 1.07: effects within +-7% could not be told from noise in
//! this run). More rounds or a quieter host narrow it.
//!
//! Validated by simulation in `tests/simulation.rs` (false verdicts
//! under the null, coverage, power), with figures in the project's notes.

pub mod effect;
pub mod holm;
pub mod latency;
pub mod schedule;
pub mod wilcoxon;

pub use effect::{compare, compare_family, compare_pairs, Better, Effect, Pair, Verdict};
pub use schedule::schedule;

/// The median of `v` (the mean of the middle two for an even count);
/// `None` when empty. NaNs sort last.
pub fn median(v: &[f64]) -> Option<f64> {
    if v.is_empty() {
        return None;
    }
    let mut s = v.to_vec();
    s.sort_by(|a, b| a.total_cmp(b));
    let n = s.len();
    Some(if n % 2 == 1 {
        s[n / 2]
    } else {
        (s[n / 2 - 1] + s[n / 2]) / 2.0
    })
}

#[cfg(test)]
mod tests {
    #[test]
    fn median_of_odd_and_even() {
        assert_eq!(super::median(&[3.0, 1.0, 2.0]), Some(2.0));
        assert_eq!(super::median(&[4.0, 1.0, 2.0, 3.0]), Some(2.5));
        assert_eq!(super::median(&[]), None);
    }
}
