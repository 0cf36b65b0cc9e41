//! The statistics validated by simulation (issue 16): on synthetic
//! latency distributions with run-to-run noise, how often the method
//! calls a difference where there is none, how often its interval covers
//! the true ratio, and how often it sees a 10% shift of p99 with 10
//! rounds. The rates are printed (`cargo test -p ibstats --test
//! simulation -- --nocapture`) and asserted against what the statistics
//! promise, with seeded runs and binomial bounds: false verdicts under
//! the null at the exact signed-rank test's level (50/1024 at 10 pairs,
//! within the promised 5%), the interval's coverage at its achieved
//! confidence.
//!
//! The model of one round of one variant: `SAMPLES` latencies, each
//! lognormal (median 20 us, sigma 0.25) with a heavy tail (0.2% of them
//! multiplied by a Pareto factor, alpha 1.5), all scaled by the block's
//! drift and by the round's own jitter, then by the variant's true effect.
//! The drift is what the Soft-RoCE lab shows between minutes: +-20%
//! (lognormal, sigma 0.20) and, in 30% of blocks, the slow mode (x2.2,
//! rxe's 22 vs 48 us); it is shared by the variants of one block because
//! they run back to back. The jitter (lognormal, sigma 0.05) is each
//! round's own. The metric is the round's p99. What the method cannot
//! survive is noise of the slow mode's size that is NOT shared within a
//! block: then no 10-round run can see 10% (say so to users: quieten the
//! host or add rounds; the report's `detectable` shows it).

use ibstats::effect::{ALPHA, LEVEL};
use ibstats::{compare, Better, Verdict};

const SAMPLES: usize = 2000;
const ROUNDS: usize = 10;

struct Gen(fastrand::Rng);

impl Gen {
    fn normal(&mut self) -> f64 {
        // Box-Muller.
        let u1 = 1.0 - self.0.f64();
        let u2 = self.0.f64();
        (-2.0 * u1.ln()).sqrt() * (std::f64::consts::TAU * u2).cos()
    }

    fn lognormal(&mut self, sigma: f64) -> f64 {
        (sigma * self.normal()).exp()
    }

    /// One round's p99 (ns) under `scale` (drift x jitter x effect).
    fn round_p99(&mut self, scale: f64, buf: &mut Vec<f64>) -> f64 {
        buf.clear();
        for _ in 0..SAMPLES {
            let mut x = 20_000.0 * self.lognormal(0.25);
            if self.0.f64() < 0.002 {
                x *= (1.0 - self.0.f64()).powf(-1.0 / 1.5);
            }
            buf.push(x * scale);
        }
        let k = SAMPLES * 99 / 100;
        *buf.select_nth_unstable_by(k, |a, b| a.total_cmp(b)).1
    }

    /// One experiment: `ROUNDS` blocks of baseline and variant (true
    /// effect `effect`), p99 per round.
    fn experiment(
        &mut self,
        effect: f64,
        buf: &mut Vec<f64>,
    ) -> (Vec<Option<f64>>, Vec<Option<f64>>) {
        let (mut a, mut b) = (Vec::new(), Vec::new());
        for _ in 0..ROUNDS {
            let mode = if self.0.f64() < 0.3 { 2.2 } else { 1.0 };
            let drift = mode * self.lognormal(0.20);
            let ja = self.lognormal(0.05);
            let jb = self.lognormal(0.05);
            a.push(Some(self.round_p99(drift * ja, buf)));
            b.push(Some(self.round_p99(drift * jb * effect, buf)));
        }
        (a, b)
    }
}

/// What `rates` counts over its experiments.
struct Rates {
    experiments: usize,
    /// Experiments with a verdict (faster or slower).
    called: usize,
    /// Experiments whose interval covers the true effect.
    covered: usize,
    /// Experiments called slower.
    slower: usize,
    /// The intervals' achieved confidence (the same for every experiment:
    /// it depends on the number of pairs only).
    confidence: f64,
}

impl Rates {
    fn share(&self, k: usize) -> f64 {
        k as f64 / self.experiments as f64
    }
}

/// `experiments` experiments of true effect `effect`, from `seed`.
fn rates(effect: f64, seed: u64, experiments: usize) -> Rates {
    let mut g = Gen(fastrand::Rng::with_seed(seed));
    let mut buf = Vec::with_capacity(SAMPLES);
    let mut r = Rates {
        experiments,
        called: 0,
        covered: 0,
        slower: 0,
        confidence: 1.0,
    };
    for _ in 0..experiments {
        let (a, b) = g.experiment(effect, &mut buf);
        let e = compare(&a, &b, Better::Lower).unwrap();
        r.called += usize::from(e.verdict != Verdict::NoSignificantDifference);
        r.slower += usize::from(e.verdict == Verdict::Slower);
        r.covered += usize::from(e.ci[0] <= effect && effect <= e.ci[1]);
        r.confidence = r.confidence.min(e.confidence);
    }
    r
}

/// P(X <= k) for X ~ Binomial(n, p), summed from the log pmf.
fn binomial_cdf(n: usize, p: f64, k: usize) -> f64 {
    let (lp, lq) = (p.ln(), (1.0 - p).ln());
    let mut log_choose = 0.0; // ln C(n, 0)
    let mut sum = 0.0;
    for i in 0..=k.min(n) {
        if i > 0 {
            log_choose += ((n - i + 1) as f64).ln() - (i as f64).ln();
        }
        sum += (log_choose + i as f64 * lp + (n - i) as f64 * lq).exp();
    }
    sum.min(1.0)
}

/// The largest count of `n` trials at probability `p` that a one-sided
/// binomial test at `tail` does not call too high: the smallest c with
/// P(X > c) <= tail.
fn upper_bound(n: usize, p: f64, tail: f64) -> usize {
    (0..=n)
        .find(|&c| 1.0 - binomial_cdf(n, p, c) <= tail)
        .unwrap()
}

/// The smallest count of `n` trials at probability `p` that a one-sided
/// binomial test at `tail` does not call too low: the largest c with
/// P(X < c) <= tail.
fn lower_bound(n: usize, p: f64, tail: f64) -> usize {
    (0..=n)
        .rev()
        .find(|&c| c == 0 || binomial_cdf(n, p, c - 1) <= tail)
        .unwrap()
}

/// The exact level of the signed-rank test at `n` untied pairs: the
/// null probability of the statistics whose two-sided p-value is below
/// ALPHA (what a verdict needs with one variant, where Holm changes
/// nothing).
fn exact_level(n: usize) -> f64 {
    let null = ibstats::wilcoxon::null_distribution(n);
    let mut level = 0.0;
    for w in 0..null.len() {
        let lower: f64 = null[..=w].iter().sum();
        let upper: f64 = null[w..].iter().sum();
        if 2.0 * lower.min(upper) < ALPHA {
            level += null[w];
        }
    }
    level
}

/// Experiments under the null: 4000, so that the one-sided 95% binomial
/// bound on the count of false verdicts at the promised 5% is 5.6%, not
/// 7% as 1000 would allow (about 2.5 s on two cores in the test profile).
const NULL_EXPERIMENTS: usize = 4000;

/// The promise under the null, as the Methods state it: with one variant
/// the chance of a false verdict is the exact signed-rank test's level,
/// at most 5%; at 10 untied pairs (the model's log ratios are continuous
/// and symmetric about 0 under the null, so no ties) it is exactly
/// 50/1024 = 4.88%, the interval's coverage exactly its achieved
/// confidence (95.1%). The seeded run must be consistent with each at the
/// 95% level (one-sided binomial bounds), and the false verdicts also
/// within the two-sided 99% bounds of the exact level: the test is the
/// exact one the Methods describe, neither looser nor needlessly strict.
#[test]
fn the_null_is_called_at_the_tests_exact_level_and_the_interval_covers() {
    let level = exact_level(ROUNDS);
    assert!(
        (level - 50.0 / 1024.0).abs() < 1e-12,
        "level {level} at {ROUNDS} pairs"
    );
    assert!(level <= ALPHA);
    let n = NULL_EXPERIMENTS;
    // Two halves side by side, each from its own seed (CI has 2 cores).
    let (h1, h2) = std::thread::scope(|s| {
        let h1 = s.spawn(|| rates(1.0, 1, n / 2));
        let h2 = rates(1.0, 3, n - n / 2);
        (h1.join().unwrap(), h2)
    });
    let r = Rates {
        experiments: n,
        called: h1.called + h2.called,
        covered: h1.covered + h2.covered,
        slower: h1.slower + h2.slower,
        confidence: h1.confidence.min(h2.confidence),
    };
    let promised = upper_bound(n, ALPHA, 0.05);
    let (lo, hi) = (lower_bound(n, level, 0.005), upper_bound(n, level, 0.005));
    let covered = lower_bound(n, r.confidence, 0.05);
    eprintln!(
        "A = A, {n} experiments of {ROUNDS} rounds: a verdict in {} ({:.2}%; the exact level {:.2}% gives {lo}..={hi} at 99%, the promised 5% at most {promised} at 95%), the interval (confidence {:.2}%) covers 1.0 in {} ({:.2}%; at least {covered} at 95%)",
        r.called,
        r.share(r.called) * 100.0,
        level * 100.0,
        r.confidence * 100.0,
        r.covered,
        r.share(r.covered) * 100.0,
    );
    assert!(r.confidence >= LEVEL, "confidence {}", r.confidence);
    assert!(
        r.called <= promised,
        "false verdicts {} > {promised}",
        r.called
    );
    assert!(
        (lo..=hi).contains(&r.called),
        "false verdicts {} outside {lo}..={hi}",
        r.called
    );
    assert!(r.covered >= covered, "coverage {} < {covered}", r.covered);
}

#[test]
fn a_ten_percent_shift_of_p99_is_seen_with_ten_rounds() {
    let n = 1000;
    let r = rates(1.10, 2, n);
    let covered = lower_bound(n, r.confidence, 0.05);
    eprintln!(
        "p99 x 1.10, {n} experiments of {ROUNDS} rounds: called slower in {:.1}% (any verdict {:.1}%), the interval covers 1.10 in {} ({:.1}%; at least {covered} at 95%)",
        r.share(r.slower) * 100.0,
        r.share(r.called) * 100.0,
        r.covered,
        r.share(r.covered) * 100.0
    );
    // Power depends on the noise model, not a promise of the method: this
    // model's 10 rounds must see a 10% shift of p99 at least 80% of the time.
    assert!(r.share(r.slower) >= 0.80, "power {}", r.share(r.slower));
    // The interval's coverage is a promise: its achieved confidence,
    // whatever the effect (the log ratios are symmetric about ln 1.10).
    assert!(r.covered >= covered, "coverage {} < {covered}", r.covered);
}

#[test]
fn the_binomial_bounds_are_the_textbook_ones() {
    // Binomial(10, 0.5): P(X <= 1) = 11/1024; P(X <= 8) = 1013/1024.
    assert!((binomial_cdf(10, 0.5, 1) - 11.0 / 1024.0).abs() < 1e-12);
    assert!((binomial_cdf(10, 0.5, 10) - 1.0).abs() < 1e-12);
    // At 5% one-sided: 1 - P(X <= 7) = 56/1024 > 0.05, 1 - P(X <= 8) =
    // 11/1024 <= 0.05; P(X < 2) = 11/1024 <= 0.05, P(X < 3) = 56/1024 > 0.05.
    assert_eq!(upper_bound(10, 0.5, 0.05), 8);
    assert_eq!(lower_bound(10, 0.5, 0.05), 2);
}
