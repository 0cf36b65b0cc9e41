//! The Wilcoxon signed-rank test and the Hodges-Lehmann estimate with its
//! interval, for paired differences (see the crate's Methods).

/// The exact null distribution of the signed-rank statistic for `n`
/// untied, nonzero differences: `p[w]` = P(W+ = w), w in 0..=n(n+1)/2.
/// Exact in f64 up to n of a few hundred (each step halves).
pub fn null_distribution(n: usize) -> Vec<f64> {
    let scores: Vec<usize> = (1..=n).collect();
    sign_flip_distribution(&scores)
}

/// P(sum of a random subset of `scores` = s) for every s, each score in
/// or out with probability 1/2: the signed-rank null for these ranks.
fn sign_flip_distribution(scores: &[usize]) -> Vec<f64> {
    let total: usize = scores.iter().sum();
    let mut p = vec![0.0; total + 1];
    p[0] = 1.0;
    let mut reach = 0;
    for &a in scores {
        reach += a;
        for w in (0..=reach).rev() {
            let with = if w >= a { p[w - a] } else { 0.0 };
            p[w] = 0.5 * (p[w] + with);
        }
    }
    p
}

/// Two-sided p-value of the exact signed-rank test that the differences
/// `d` are centred on 0. Zeros are dropped (Wilcoxon's rule); tied
/// magnitudes get mid-ranks and the null is enumerated over those ranks,
/// so the test stays exact with ties. 1.0 when nothing is left.
pub fn signed_rank_p(d: &[f64]) -> f64 {
    let mut nz: Vec<f64> = d.iter().copied().filter(|x| *x != 0.0).collect();
    if nz.is_empty() {
        return 1.0;
    }
    nz.sort_by(|a, b| a.abs().total_cmp(&b.abs()));
    // Doubled mid-ranks: integers, so the null can be enumerated.
    let n = nz.len();
    let mut scores = vec![0usize; n];
    let mut i = 0;
    while i < n {
        let mut j = i;
        while j + 1 < n && nz[j + 1].abs() == nz[i].abs() {
            j += 1;
        }
        // Ranks i+1..=j+1, mean (i+j+2)/2, doubled: i+j+2.
        for s in &mut scores[i..=j] {
            *s = i + j + 2;
        }
        i = j + 1;
    }
    let w: usize = nz
        .iter()
        .zip(&scores)
        .filter(|(x, _)| **x > 0.0)
        .map(|(_, s)| *s)
        .sum();
    let p = sign_flip_distribution(&scores);
    let lower: f64 = p[..=w].iter().sum();
    let upper: f64 = p[w..].iter().sum();
    (2.0 * lower.min(upper)).min(1.0)
}

/// The Hodges-Lehmann estimate of the centre of `d` and its signed-rank
/// interval at confidence at least `level` (e.g. 0.95): `(estimate, low,
/// high, achieved level)`. With too few values for `level` (fewer than 6
/// at 0.95) the interval is the whole range of pairwise means and the
/// achieved level says how much less it is. `d` must not be empty.
pub fn hodges_lehmann(d: &[f64], level: f64) -> (f64, f64, f64, f64) {
    let n = d.len();
    assert!(n > 0, "hodges_lehmann of nothing");
    let mut walsh = Vec::with_capacity(n * (n + 1) / 2);
    for i in 0..n {
        for j in i..n {
            walsh.push((d[i] + d[j]) / 2.0);
        }
    }
    walsh.sort_by(|a, b| a.total_cmp(b));
    let m = walsh.len();
    let est = if m % 2 == 1 {
        walsh[m / 2]
    } else {
        (walsh[m / 2 - 1] + walsh[m / 2]) / 2.0
    };
    // The largest c >= 1 with P(W+ <= c - 1) <= (1 - level) / 2: then
    // [walsh(c), walsh(m + 1 - c)] (1-based) covers with probability
    // 1 - 2 P(W+ <= c - 1).
    let p = null_distribution(n);
    let tail = (1.0 - level) / 2.0;
    let mut cum = 0.0;
    let mut c = 0;
    for (w, pw) in p.iter().enumerate() {
        if cum + pw > tail + 1e-12 {
            break;
        }
        cum += pw;
        c = w + 1;
    }
    if c == 0 {
        // Not even the widest interval reaches `level`.
        let achieved = 1.0 - 2.0 * p[0];
        return (est, walsh[0], walsh[m - 1], achieved.max(0.0));
    }
    let c = c.min(m.div_ceil(2));
    (est, walsh[c - 1], walsh[m - c], 1.0 - 2.0 * cum)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn null_distribution_matches_the_tables() {
        // n = 3: sums 0..6 of subsets of {1,2,3}: 1,1,1,2,1,1,1 of 8.
        let p = null_distribution(3);
        let counts: Vec<f64> = p.iter().map(|x| x * 8.0).collect();
        assert_eq!(counts, [1.0, 1.0, 1.0, 2.0, 1.0, 1.0, 1.0]);
        // n = 10: P(W+ <= 8) = 0.0244 (tables: the 5% two-sided critical value is 8).
        let p = null_distribution(10);
        let le8: f64 = p[..=8].iter().sum();
        assert!((le8 - 0.02441).abs() < 1e-4, "{le8}");
        let le9: f64 = p[..=9].iter().sum();
        assert!(le9 > 0.025, "{le9}");
        assert!((p.iter().sum::<f64>() - 1.0).abs() < 1e-12);
    }

    #[test]
    fn p_values_of_clear_and_null_cases() {
        // All 10 positive: p = 2 / 1024.
        let d: Vec<f64> = (1..=10).map(f64::from).collect();
        assert!((signed_rank_p(&d) - 2.0 / 1024.0).abs() < 1e-12);
        // Symmetric around zero: p = 1.
        assert_eq!(signed_rank_p(&[-1.0, 1.0, -2.0, 2.0]), 1.0);
        assert_eq!(signed_rank_p(&[0.0, 0.0]), 1.0);
        // Ties: all equal and positive, 8 of them: still 2 / 256.
        assert!((signed_rank_p(&[0.1; 8]) - 2.0 / 256.0).abs() < 1e-12);
    }

    #[test]
    fn interval_of_ten_uses_the_ninth_walsh_average() {
        // n = 10, 95%: c = 9 (P(W+ <= 8) = 0.0244), achieved 95.1%.
        let d: Vec<f64> = (0..10).map(|i| f64::from(i) - 4.5).collect();
        let (est, lo, hi, lvl) = hodges_lehmann(&d, 0.95);
        assert!(est.abs() < 1e-12);
        assert!(lo < 0.0 && hi > 0.0);
        assert!((lvl - (1.0 - 2.0 * 0.024414)).abs() < 1e-4, "{lvl}");
        // Shifting the data shifts estimate and interval alike.
        let s: Vec<f64> = d.iter().map(|x| x + 3.0).collect();
        let (e2, l2, h2, _) = hodges_lehmann(&s, 0.95);
        assert!(
            (e2 - 3.0).abs() < 1e-12
                && (l2 - lo - 3.0).abs() < 1e-12
                && (h2 - hi - 3.0).abs() < 1e-12
        );
    }

    #[test]
    fn too_few_pairs_say_so() {
        let (_, lo, hi, lvl) = hodges_lehmann(&[1.0, 2.0, 3.0, 4.0, 5.0], 0.95);
        assert_eq!((lo, hi), (1.0, 5.0));
        assert!(lvl < 0.95, "{lvl}");
    }
}
