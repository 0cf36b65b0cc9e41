//! The effect of a variant against the baseline on one metric: ratio,
//! interval, test, verdict (see the crate's Methods).

use crate::{holm, wilcoxon};
use serde::Serialize;

/// The test level: a verdict other than "no significant difference" is
/// wrong at most this often (per family, after Holm).
pub const ALPHA: f64 = 0.05;
/// The confidence of the reported intervals.
pub const LEVEL: f64 = 0.95;

/// Which way a metric improves.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Better {
    /// Latencies: lower is better.
    Lower,
    /// Rates (messages/s): higher is better.
    Higher,
}

/// What the run says about a variant on one metric.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Verdict {
    /// Better than the baseline (lower latency, or a higher rate).
    Faster,
    /// Worse than the baseline.
    Slower,
    /// The run cannot tell it from the baseline.
    NoSignificantDifference,
}

impl Verdict {
    /// The word used in tables and JSON.
    pub fn word(self) -> &'static str {
        match self {
            Verdict::Faster => "faster",
            Verdict::Slower => "slower",
            Verdict::NoSignificantDifference => "no_significant_difference",
        }
    }
}

/// A variant's effect on one metric, against the baseline.
#[derive(Clone, Copy, Debug, PartialEq, Serialize)]
pub struct Effect {
    /// Variant / baseline: exp of the Hodges-Lehmann estimate of the
    /// paired log ratios.
    pub ratio: f64,
    /// Interval of the ratio at confidence `confidence`.
    pub ci: [f64; 2],
    /// The interval's achieved confidence (>= 0.95, or less when there
    /// are fewer than 6 pairs: then no 95% interval exists).
    pub confidence: f64,
    /// Two-sided p of the exact signed-rank test of "no effect".
    pub p: f64,
    /// `p` after Holm's correction over the family compared.
    pub p_adjusted: f64,
    /// Faster, slower, or no significant difference (at 5%, adjusted).
    pub verdict: Verdict,
    /// The smallest effect this run could have told from noise, as a
    /// ratio above 1 (1.07: +-7%): half the interval's width.
    pub detectable: f64,
    /// Blocks where both the variant and the baseline gave a value.
    pub pairs: usize,
}

/// The paired log ratios of the blocks where both gave a usable (finite,
/// positive) value.
fn log_ratios(baseline: &[Option<f64>], variant: &[Option<f64>]) -> Vec<f64> {
    let ok = |x: &Option<f64>| x.filter(|v| v.is_finite() && *v > 0.0);
    baseline
        .iter()
        .zip(variant)
        .filter_map(|(a, b)| Some((ok(b)? / ok(a)?).ln()))
        .collect()
}

fn effect_of(d: &[f64], (p, p_adjusted): (f64, f64), better: Better) -> Effect {
    let (est, lo, hi, confidence) = wilcoxon::hodges_lehmann(d, LEVEL);
    let verdict = if p_adjusted < ALPHA && est != 0.0 {
        match (est < 0.0, better) {
            (true, Better::Lower) | (false, Better::Higher) => Verdict::Faster,
            _ => Verdict::Slower,
        }
    } else {
        Verdict::NoSignificantDifference
    };
    Effect {
        ratio: est.exp(),
        ci: [lo.exp(), hi.exp()],
        confidence,
        p,
        p_adjusted,
        verdict,
        detectable: ((hi - lo) / 2.0).exp(),
        pairs: d.len(),
    }
}

/// One variant against the baseline on one metric, blocks paired by
/// index (`None`: that round gave no value). `None` when no block has
/// both.
pub fn compare(
    baseline: &[Option<f64>],
    variant: &[Option<f64>],
    better: Better,
) -> Option<Effect> {
    compare_family(baseline, &[variant.to_vec()], better)
        .pop()
        .flatten()
}

/// One comparison of [`compare_pairs`]: the reference's rounds and the
/// variant's, paired by block (`None`: that round gave no value).
pub type Pair<'a> = (&'a [Option<f64>], &'a [Option<f64>]);

/// Every variant against the baseline on one metric, with Holm's
/// correction over the variants that have pairs.
pub fn compare_family(
    baseline: &[Option<f64>],
    variants: &[Vec<Option<f64>>],
    better: Better,
) -> Vec<Option<Effect>> {
    let pairs: Vec<Pair> = variants.iter().map(|v| (baseline, v.as_slice())).collect();
    compare_pairs(&pairs, better)
}

/// A family of comparisons on one metric, each `(reference, variant)`
/// with its own reference (e.g. "the profile" against "the profile
/// without knob k", for every k), with Holm's correction over the
/// comparisons that have pairs. [`compare_family`] is the case where
/// every reference is the baseline.
pub fn compare_pairs(pairs: &[Pair], better: Better) -> Vec<Option<Effect>> {
    let ds: Vec<Vec<f64>> = pairs.iter().map(|(a, b)| log_ratios(a, b)).collect();
    let present: Vec<usize> = (0..ds.len()).filter(|&i| !ds[i].is_empty()).collect();
    let ps: Vec<f64> = present
        .iter()
        .map(|&i| wilcoxon::signed_rank_p(&ds[i]))
        .collect();
    let adjusted = holm::adjust(&ps);
    let mut out = vec![None; ds.len()];
    for (k, &i) in present.iter().enumerate() {
        out[i] = Some(effect_of(&ds[i], (ps[k], adjusted[k]), better));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn some(v: &[f64]) -> Vec<Option<f64>> {
        v.iter().map(|x| Some(*x)).collect()
    }

    #[test]
    fn a_clear_improvement_is_faster_with_its_ratio() {
        let a = some(&[
            100.0, 102.0, 98.0, 101.0, 99.0, 100.0, 103.0, 97.0, 100.0, 101.0,
        ]);
        let b: Vec<Option<f64>> = a.iter().map(|x| x.map(|v| v * 0.8)).collect();
        let e = compare(&a, &b, Better::Lower).unwrap();
        assert_eq!(e.verdict, Verdict::Faster);
        assert!((e.ratio - 0.8).abs() < 1e-9, "{e:?}");
        assert!(e.ci[0] <= 0.8 + 1e-9 && e.ci[1] >= 0.8 - 1e-9);
        // The same numbers as a rate: lower is worse.
        assert_eq!(
            compare(&a, &b, Better::Higher).unwrap().verdict,
            Verdict::Slower
        );
    }

    #[test]
    fn identical_runs_are_no_difference_and_missing_rounds_are_skipped() {
        let a = some(&[5.0, 6.0, 5.5, 6.5, 5.2, 5.9]);
        let e = compare(&a, &a, Better::Lower).unwrap();
        assert_eq!(e.verdict, Verdict::NoSignificantDifference);
        assert_eq!(e.ratio, 1.0);
        let mut b = a.clone();
        b[2] = None;
        b[3] = Some(0.0);
        assert_eq!(compare(&a, &b, Better::Lower).unwrap().pairs, 4);
        assert!(compare(&a, &[None; 6], Better::Lower).is_none());
    }

    #[test]
    fn too_few_rounds_never_give_a_verdict() {
        let a = some(&[1.0, 1.0, 1.0, 1.0, 1.0]);
        let b = some(&[2.0, 2.0, 2.0, 2.0, 2.0]);
        let e = compare(&a, &b, Better::Lower).unwrap();
        assert_eq!(e.verdict, Verdict::NoSignificantDifference);
        assert!(e.confidence < 0.95);
    }

    #[test]
    fn pairs_with_their_own_references_share_one_holm_family() {
        // Two comparisons, each against its own reference: as a family of
        // two, six same-signed pairs are no longer significant.
        let a = some(&[10.0; 6]);
        let b = some(&[9.0, 8.9, 8.8, 8.7, 8.6, 8.5]);
        let c = some(&[20.0; 6]);
        let d = some(&[18.0, 17.8, 17.6, 17.4, 17.2, 17.0]);
        let fam = compare_pairs(&[(&a, &b), (&c, &d)], Better::Lower);
        for e in &fam {
            let e = e.unwrap();
            assert!((e.ratio - 0.87).abs() < 0.02, "{e:?}");
            assert!((e.p_adjusted - 0.0625).abs() < 1e-12);
        }
        let alone = compare_pairs(&[(&c, &d)], Better::Lower);
        assert_eq!(alone[0].unwrap().verdict, Verdict::Faster);
    }

    #[test]
    fn holm_makes_a_family_stricter() {
        // Six pairs all one way: p = 2/64 = 0.031 alone (significant), but
        // 0.0625 after Holm over two variants.
        let a = some(&[10.0; 6]);
        let b = some(&[9.0, 8.9, 8.8, 8.7, 8.6, 8.5]);
        assert_eq!(
            compare(&a, &b, Better::Lower).unwrap().verdict,
            Verdict::Faster
        );
        let fam = compare_family(&a, &[b.clone(), b], Better::Lower);
        for e in fam {
            let e = e.unwrap();
            assert_eq!(e.verdict, Verdict::NoSignificantDifference, "{e:?}");
            assert!((e.p_adjusted - 0.0625).abs() < 1e-12);
        }
    }
}

#[cfg(test)]
mod props {
    use super::*;
    use proptest::prelude::*;

    proptest! {
        /// The ratio lies in its interval; p values are probabilities; a
        /// common scale of both sides changes nothing (only ratios count).
        #[test]
        fn ratio_in_interval_and_scale_free(
            a in proptest::collection::vec(1.0f64..1e6, 2..30),
            f in proptest::collection::vec(0.5f64..2.0, 30),
            k in 0.001f64..1000.0,
        ) {
            let base: Vec<Option<f64>> = a.iter().map(|x| Some(*x)).collect();
            let var: Vec<Option<f64>> = a.iter().zip(&f).map(|(x, g)| Some(x * g)).collect();
            let e = compare(&base, &var, Better::Lower).unwrap();
            prop_assert!(e.ci[0] <= e.ratio * (1.0 + 1e-9) && e.ratio <= e.ci[1] * (1.0 + 1e-9));
            prop_assert!((0.0..=1.0).contains(&e.p) && e.p <= e.p_adjusted + 1e-15);
            prop_assert!(e.detectable >= 1.0);
            let sb: Vec<Option<f64>> = base.iter().map(|x| x.map(|v| v * k)).collect();
            let sv: Vec<Option<f64>> = var.iter().map(|x| x.map(|v| v * k)).collect();
            let e2 = compare(&sb, &sv, Better::Lower).unwrap();
            prop_assert!((e2.ratio / e.ratio - 1.0).abs() < 1e-9);
            prop_assert_eq!(e2.verdict, e.verdict);
        }
    }
}
