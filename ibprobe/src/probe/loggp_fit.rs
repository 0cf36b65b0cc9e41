//! From PRTT measurements (`workload/loggp.rs`) to LogGP parameters with
//! 95% confidence intervals. Pure computation.
//!
//! Per round and size (Netgauge's method, `ANCHORS.md`), b the bytes of
//! one message:
//! - gap(b) = (PRTT(n,0,b) - PRTT(1,0,b)) / (n-1), fitted as g + G*b in
//!   segments: where a line leaves a point more than [`SPLIT_RESIDUAL`]
//!   off, the sizes split where it fits best (a protocol change: inline
//!   threshold, MTU, eager/rendezvous); G is the last segment's slope, g
//!   the intercept of the first segment the network paces (where the CPU
//!   does, gap = max(o_s, o_r) > g + G*b, the gap says nothing of g);
//! - o_s(b): the send call's own time in PRTT(n,d,b)'s bursts (d longer
//!   than any gap). Netgauge's (PRTT(n,d,b) - PRTT(1,0,b)) / (n-1) - d
//!   adds the measuring loop's cost (about 70 ns on this project's VM):
//!   reported per size as `os_prtt_ns`;
//! - o_r(b) = the responder's time taking n-1 arrived messages / (n-1);
//! - L = PRTT(1,0,b)/2 - o_s(b) - o_r(b) - G*b at the smallest size, G
//!   the slope of the segment that gives g (Netgauge takes PRTT/2 whole).
//!
//! An estimate is the median over rounds, its 95% interval the order
//! statistics of a median (distribution-free). A parameter below zero is
//! clamped to 0 with a note; an interval wider than [`WIDE_CI`] warns.

/// One size in one round: medians of `reps` repetitions, ns: PRTT(1, 0,
/// s), PRTT(n, 0, s), the delay d of the o_s measurement, PRTT(n, d, s).
#[derive(Clone, Copy, Debug, Default, serde::Serialize)]
pub struct Point {
    /// Payload bytes.
    pub size: usize,
    /// Bytes per message (header and payload): what G counts.
    pub bytes: usize,
    pub p1: f64,
    pub pn: f64,
    pub d: f64,
    pub pd: f64,
    /// The send call's own time in the bursts of PRTT(n, d, s).
    pub send_call: f64,
    /// The responder's time per message taking arrived messages (o_r).
    pub orecv: f64,
    /// A receive call that found nothing (the client's, after an answer).
    pub empty_poll: f64,
}

/// Everything measured: `rounds[r][i]` is size i in round r.
#[derive(Clone, Debug, Default)]
pub struct Samples {
    /// Messages per burst.
    pub n: u16,
    pub rounds: Vec<Vec<Point>>,
    /// Repetitions whose answer never came (repeated).
    pub lost: u64,
}

/// A point more than this far off its line (relative) splits a segment.
pub const SPLIT_RESIDUAL: f64 = 0.10;

/// An interval wider than this share of its estimate gives a warning.
pub const WIDE_CI: f64 = 0.20;

/// The median over rounds and its 95% interval.
#[derive(Clone, Copy, Debug, Default, PartialEq, serde::Serialize)]
pub struct Estimate {
    pub value: f64,
    pub low: f64,
    pub high: f64,
}

/// A size range whose gap per message is one line g + G*b.
#[derive(Clone, Debug, Default, serde::Serialize)]
pub struct Segment {
    /// First and last payload size of the range.
    pub from_size: usize,
    pub to_size: usize,
    /// Intercept (ns) and slope (ns per byte).
    pub g_ns: Estimate,
    #[serde(rename = "G_ns_per_byte")]
    pub big_g: Estimate,
    /// The largest relative distance of a median point from the line.
    pub max_residual: f64,
}

/// The medians over rounds at one size, ns (`os_prtt_ns`: o_s as Netgauge
/// derives it).
#[derive(Clone, Debug, Default, serde::Serialize)]
pub struct SizePoint {
    pub size: usize,
    pub bytes: usize,
    pub prtt1_ns: f64,
    pub gap_ns: f64,
    pub os_ns: f64,
    pub os_prtt_ns: f64,
    pub or_ns: f64,
    pub empty_poll_ns: f64,
}

/// The LogGP parameters of one run: L, o_s, o_r, g (ns), G (ns per byte).
#[derive(Clone, Debug, Default)]
pub struct Fit {
    pub l: Estimate,
    pub os: Estimate,
    pub or: Estimate,
    pub g: Estimate,
    pub big_g: Estimate,
    pub segments: Vec<Segment>,
    pub points: Vec<SizePoint>,
    /// Facts about the fit (clamps, what cannot be told apart); warnings:
    /// the wide intervals.
    pub notes: Vec<String>,
    pub warnings: Vec<String>,
}

/// 0 when empty.
pub fn median(v: &[f64]) -> f64 {
    ibstats::median(v).unwrap_or(0.0)
}

/// The 1-based rank k of the lower bound of a distribution-free 95%
/// interval of the median of `n` values ([x_(k), x_(n+1-k)]): the largest
/// k with P(Binomial(n, 1/2) < k) <= 2.5%; 1 when no k qualifies.
pub fn median_ci_rank(n: usize) -> usize {
    let mut k = 1;
    let mut cdf = 0.0; // P(X <= j - 1)
    let mut pmf = 0.5f64.powi(n as i32); // P(X = 0)
    for j in 1..=n / 2 {
        cdf += pmf; // now P(X <= j - 1) = P(X < j)
        if cdf > 0.025 {
            break;
        }
        k = j;
        pmf *= (n - (j - 1)) as f64 / j as f64;
    }
    k
}

pub fn estimate(v: &[f64]) -> Estimate {
    let mut s = v.to_vec();
    s.sort_by(|a, b| a.total_cmp(b));
    let n = s.len();
    if n == 0 {
        return Estimate::default();
    }
    let k = median_ci_rank(n);
    Estimate {
        value: median(&s),
        low: s[k - 1],
        high: s[n - k],
    }
}

/// Least squares y = a + b*x: (a, b).
fn line(xs: &[f64], ys: &[f64]) -> (f64, f64) {
    let n = xs.len() as f64;
    if xs.len() < 2 {
        return (ys.first().copied().unwrap_or(0.0), 0.0);
    }
    let (mx, my) = (xs.iter().sum::<f64>() / n, ys.iter().sum::<f64>() / n);
    let sxx: f64 = xs.iter().map(|x| (x - mx) * (x - mx)).sum();
    let sxy: f64 = xs.iter().zip(ys).map(|(x, y)| (x - mx) * (y - my)).sum();
    let b = if sxx > 0.0 { sxy / sxx } else { 0.0 };
    (my - b * mx, b)
}

fn max_residual(xs: &[f64], ys: &[f64]) -> f64 {
    let (a, b) = line(xs, ys);
    xs.iter()
        .zip(ys)
        .map(|(x, y)| (y - (a + b * x)).abs() / y.abs().max(1e-9))
        .fold(0.0, f64::max)
}

fn sse(xs: &[f64], ys: &[f64]) -> f64 {
    let (a, b) = line(xs, ys);
    xs.iter()
        .zip(ys)
        .map(|(x, y)| (y - (a + b * x)).powi(2))
        .sum()
}

/// Splits `lo..hi` (indexes of the sizes) into ranges of one line each.
fn segments(xs: &[f64], ys: &[f64], lo: usize, hi: usize, out: &mut Vec<(usize, usize)>) {
    let (x, y) = (&xs[lo..hi], &ys[lo..hi]);
    if hi - lo < 4 || max_residual(x, y) <= SPLIT_RESIDUAL {
        out.push((lo, hi));
        return;
    }
    let best = (lo + 2..=hi - 2)
        .map(|m| (m, sse(&xs[lo..m], &ys[lo..m]) + sse(&xs[m..hi], &ys[m..hi])))
        .min_by(|a, b| a.1.total_cmp(&b.1))
        .map(|(m, _)| m)
        .unwrap_or(hi);
    segments(xs, ys, lo, best, out);
    segments(xs, ys, best, hi, out);
}

/// Per round and size: (gap, o_s, o_r, Netgauge's o_s).
fn per_point(p: &Point, n: u16) -> (f64, f64, f64, f64) {
    let k = f64::from(n.max(2) - 1);
    (
        (p.pn - p.p1) / k,
        p.send_call,
        p.orecv,
        (p.pd - p.p1) / k - p.d,
    )
}

/// Fits the parameters of `s` (at least one round of at least two sizes).
pub fn fit(s: &Samples) -> Fit {
    let mut f = Fit::default();
    let Some(first) = s.rounds.first() else {
        return f;
    };
    let sizes = first.len();
    let xs: Vec<f64> = first.iter().map(|p| p.bytes as f64).collect();
    let col = |i: usize, which: usize| -> Vec<f64> {
        s.rounds
            .iter()
            .map(|r| {
                let (gap, os, or, os_prtt) = per_point(&r[i], s.n);
                [gap, os, or, r[i].p1, os_prtt, r[i].empty_poll][which]
            })
            .collect()
    };
    f.points = (0..sizes)
        .map(|i| SizePoint {
            size: first[i].size,
            bytes: first[i].bytes,
            gap_ns: median(&col(i, 0)),
            os_ns: median(&col(i, 1)),
            or_ns: median(&col(i, 2)),
            prtt1_ns: median(&col(i, 3)),
            os_prtt_ns: median(&col(i, 4)),
            empty_poll_ns: median(&col(i, 5)),
        })
        .collect();
    let gaps: Vec<f64> = f.points.iter().map(|p| p.gap_ns).collect();
    let mut ranges = Vec::new();
    segments(&xs, &gaps, 0, sizes, &mut ranges);
    // Per round: each segment's line, then the parameters.
    let mut per_seg: Vec<(Vec<f64>, Vec<f64>)> = vec![Default::default(); ranges.len()];
    let (mut ls, mut oss, mut ors) = (Vec::new(), Vec::new(), Vec::new());
    for r in &s.rounds {
        let g: Vec<f64> = r.iter().map(|p| per_point(p, s.n).0).collect();
        for (k, &(lo, hi)) in ranges.iter().enumerate() {
            let (a, b) = line(&xs[lo..hi], &g[lo..hi]);
            per_seg[k].0.push(a);
            per_seg[k].1.push(b);
        }
        let (_, os, or, _) = per_point(&r[0], s.n);
        // L's wire time G*b comes below, once it is known which segment
        // the network paces (its slope is the wire's).
        ls.push(r[0].p1 / 2.0 - os - or);
        oss.push(os);
        ors.push(or);
    }
    f.segments = ranges
        .iter()
        .zip(&per_seg)
        .map(|(&(lo, hi), (a, b))| Segment {
            from_size: first[lo].size,
            to_size: first[hi - 1].size,
            g_ns: estimate(a),
            big_g: estimate(b),
            max_residual: max_residual(&xs[lo..hi], &gaps[lo..hi]),
        })
        .collect();
    if sizes < 2 {
        f.notes.push(
            "one size only: G needs two or more (--sizes); G is reported as 0 and g is the gap at that size"
                .into(),
        );
    }
    if f.segments.len() > 1 {
        let cuts: Vec<String> = f
            .segments
            .iter()
            .map(|s| format!("{}..{} B", s.from_size, s.to_size))
            .collect();
        f.notes.push(format!(
            "the gap per message is not one line over all sizes: {} segments ({}); g is the intercept of the first the network paces, G the last's slope",
            f.segments.len(),
            cuts.join(", ")
        ));
    }
    f.os = estimate(&oss);
    f.or = estimate(&ors);
    // A segment the CPU paces: every gap within 5% of the larger overhead.
    let o = f.os.value.max(f.or.value);
    let cpu_paced = |g: &Segment| {
        f.points
            .iter()
            .filter(|p| (g.from_size..=g.to_size).contains(&p.size))
            .all(|p| p.gap_ns <= 1.05 * o)
    };
    let paced = f.segments.iter().position(|g| !cpu_paced(g));
    f.g = f
        .segments
        .get(paced.unwrap_or(0))
        .map(|s| s.g_ns)
        .unwrap_or_default();
    f.big_g = f.segments.last().map(|s| s.big_g).unwrap_or_default();
    let wire = &per_seg[paced.unwrap_or(0).min(per_seg.len().saturating_sub(1))].1;
    let b0 = first[0].bytes as f64;
    for (l, slope) in ls.iter_mut().zip(wire) {
        *l -= slope * b0;
    }
    f.l = estimate(&ls);
    if let (Some(i), Some(g)) = (paced.filter(|&i| i > 0), f.segments.first()) {
        f.notes.push(format!(
            "up to {} B the CPU sets the pace (gap = o = {:.1} ns > g + G*b): g is the intercept of the segment from {} B, where the network does",
            g.to_size, o, f.segments[i].from_size
        ));
    }
    if let (None, Some(p)) = (paced, f.points.first()) {
        f.notes.push(format!(
            "at {} B the gap per message ({:.1} ns) is no larger than the overhead o ({:.1} ns): the CPU, not the network, sets the pace, so g is at most what is reported",
            p.size, p.gap_ns, o
        ));
    }
    let mut params = [
        ("L", &mut f.l),
        ("o_s", &mut f.os),
        ("o_r", &mut f.or),
        ("g", &mut f.g),
        ("G", &mut f.big_g),
    ];
    for (name, e) in params.iter_mut() {
        if e.value < 0.0 {
            f.notes.push(format!(
                "{name} came out negative ({:.3}): clamped to 0; it is below what this run resolves",
                e.value
            ));
            e.value = 0.0;
        }
        e.low = e.low.max(0.0);
        e.high = e.high.max(0.0);
        let width = e.high - e.low;
        if width > WIDE_CI * e.value && width > 0.0 {
            f.warnings.push(format!(
                "{name}: the 95% interval [{:.4}, {:.4}] is wider than {:.0}% of the estimate {:.4}: run more --rounds, or on a quieter host (pinned, tuned)",
                e.low,
                e.high,
                WIDE_CI * 100.0,
                e.value
            ));
        }
    }
    f
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn segments_split_where_the_slope_changes() {
        let xs: Vec<f64> = [16.0, 64.0, 256.0, 1024.0, 4096.0, 16384.0].to_vec();
        // 100 + 0.1*b up to 1024, then 2000 + 0.5*b.
        let ys: Vec<f64> = xs
            .iter()
            .map(|&x| {
                if x <= 1024.0 {
                    100.0 + 0.1 * x
                } else {
                    2000.0 + 0.5 * x
                }
            })
            .collect();
        let mut out = Vec::new();
        segments(&xs, &ys, 0, xs.len(), &mut out);
        assert_eq!(out, [(0, 4), (4, 6)]);
        let mut one = Vec::new();
        let straight: Vec<f64> = xs.iter().map(|x| 50.0 + 0.2 * x).collect();
        segments(&xs, &straight, 0, xs.len(), &mut one);
        assert_eq!(one, [(0, 6)]);
    }
}
