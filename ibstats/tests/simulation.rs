//! The statistics validated by simulation (issue 16): on synthetic
//! latency distributions with run-to-run noise, how often the method
//! calls a difference where there is none, how often its interval covers
//! the true ratio, and how often it sees a 10% shift of p99 with 10
//! rounds. The rates are printed (`cargo test -p ibstats --test
//! simulation -- --nocapture`) and asserted.
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

use ibstats::{compare, Better, Verdict};

const SAMPLES: usize = 2000;
const EXPERIMENTS: usize = 1000;
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

/// (share with a verdict, share whose interval covers `effect`, share
/// called slower) over `EXPERIMENTS` experiments.
fn rates(effect: f64, seed: u64) -> (f64, f64, f64) {
    let mut g = Gen(fastrand::Rng::with_seed(seed));
    let mut buf = Vec::with_capacity(SAMPLES);
    let (mut called, mut covered, mut slower) = (0, 0, 0);
    for _ in 0..EXPERIMENTS {
        let (a, b) = g.experiment(effect, &mut buf);
        let e = compare(&a, &b, Better::Lower).unwrap();
        if e.verdict != Verdict::NoSignificantDifference {
            called += 1;
        }
        if e.verdict == Verdict::Slower {
            slower += 1;
        }
        if e.ci[0] <= effect && effect <= e.ci[1] {
            covered += 1;
        }
    }
    let n = EXPERIMENTS as f64;
    (called as f64 / n, covered as f64 / n, slower as f64 / n)
}

#[test]
fn the_null_is_rarely_called_and_the_interval_covers() {
    let (called, covered, _) = rates(1.0, 1);
    eprintln!(
        "A = A, {EXPERIMENTS} experiments of {ROUNDS} rounds: a verdict in {:.1}%, the 95% interval covers 1.0 in {:.1}%",
        called * 100.0,
        covered * 100.0
    );
    // 5% nominal (4.9% achieved at 10 pairs); three binomial standard
    // errors (0.7% each at n = 1000) of slack.
    assert!(called <= 0.05 + 3.0 * 0.0069, "false verdicts {called}");
    assert!(covered >= 0.93, "coverage {covered}");
}

#[test]
fn a_ten_percent_shift_of_p99_is_seen_with_ten_rounds() {
    let (called, covered, slower) = rates(1.10, 2);
    eprintln!(
        "p99 x 1.10, {EXPERIMENTS} experiments of {ROUNDS} rounds: called slower in {:.1}% (any verdict {:.1}%), the interval covers 1.10 in {:.1}%",
        slower * 100.0,
        called * 100.0,
        covered * 100.0
    );
    assert!(slower >= 0.80, "power {slower}");
    assert!(covered >= 0.93, "coverage {covered}");
}
