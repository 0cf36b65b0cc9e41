//! `ibprobe compare`'s report: per variant the medians over rounds, and
//! per metric its effect against the baseline (ratio, 95% interval,
//! verdict), from [`ibstats`]; formats table, JSON (`ibprobe.compare/1`,
//! documented in `report/README.md`) and Markdown.

use ibstats::{Better, Effect};
use serde::Serialize;
use std::fmt::Write as _;

use super::model::{Align, Block, Column, Document, JsonDoc, Spacing, Table};

/// A metric compared, in report order: its name in JSON and tables, and
/// which way is better (a lower latency, a higher rate).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Metric {
    pub name: &'static str,
    pub better: Better,
}

const fn metric(name: &'static str, better: Better) -> Metric {
    Metric { name, better }
}

/// The latency metrics of every report, then the stream's rate.
pub const METRICS: [Metric; 5] = [
    metric("p50", Better::Lower),
    metric("p99", Better::Lower),
    metric("p999", Better::Lower),
    metric("max", Better::Lower),
    metric("msgs_per_sec", Better::Higher),
];

/// One round of one variant: a value per metric of [`METRICS`] (`None`:
/// the round failed, or the command's report has no such figure).
pub type RoundValues = [Option<f64>; METRICS.len()];

/// The report schemas whose figures a comparison reads, for messages.
pub const ROUND_SCHEMAS: &str = "ibprobe.report/1 or ibprobe.stream/1";

/// Reads the metrics of [`METRICS`] from an `ibprobe.report/1` or
/// `ibprobe.stream/1` document (what `ibprobe compare` and `ibtune
/// experiment` read from each round); `None` for any other document.
pub fn round_values(doc: &serde_json::Value) -> Option<RoundValues> {
    let (d, suffix, rate) = match doc.get("schema")?.as_str()? {
        "ibprobe.report/1" => (doc.get("distributions")?.get(0)?, "_ns", None),
        "ibprobe.stream/1" => (doc.get("latency")?, "", doc["msgs_per_sec"].as_f64()),
        _ => return None,
    };
    let q = |k: &str| d[format!("{k}{suffix}")].as_f64();
    Some([q("p50"), q("p99"), q("p999"), q("max"), rate])
}

/// The clock resolution (ns) an `ibprobe.report/1` (`clock.resolution_ns`)
/// or `ibprobe.stream/1` (`clock_resolution_ns`) document reports; `None`
/// for a document from before the field (its comparisons stay unmarked).
pub fn round_resolution(doc: &serde_json::Value) -> Option<f64> {
    match doc.get("schema")?.as_str()? {
        "ibprobe.report/1" => doc.get("clock")?.get("resolution_ns")?.as_f64(),
        "ibprobe.stream/1" => doc.get("clock_resolution_ns")?.as_f64(),
        _ => None,
    }
    .filter(|r| *r > 0.0)
}

pub fn coarser(a: Option<f64>, b: Option<f64>) -> Option<f64> {
    match (a, b) {
        (Some(x), Some(y)) => Some(x.max(y)),
        (x, y) => x.or(y),
    }
}

/// Per metric, a 95% interval inside one run (a saved report's sampling
/// noise), `None` where there is none.
pub type SamplingIntervals = [Option<(f64, f64)>; METRICS.len()];

/// What one variant measured, and its effect against the baseline.
#[derive(Clone, Debug, Serialize)]
pub struct VariantReport {
    pub value: String,
    /// The first value given: what the others are compared with.
    pub baseline: bool,
    pub rounds_ok: usize,
    /// Per metric, the median over rounds of each round's figure (ns;
    /// messages/s for `msgs_per_sec`, stream commands only).
    pub p50: Option<f64>,
    pub p99: Option<f64>,
    pub p999: Option<f64>,
    pub max: Option<f64>,
    pub msgs_per_sec: Option<f64>,
    /// Per metric, the effect against the baseline (none for the
    /// baseline, nor for a metric the command does not report); an object
    /// keyed by metric in the JSON, which scripts index.
    #[serde(serialize_with = "as_map")]
    pub effects: Vec<(String, EffectReport)>,
    /// Every round's values, in run order of this variant.
    pub per_round: Vec<RoundValues>,
    /// The clock resolution its rounds reported (the coarsest, ns).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub clock_resolution_ns: Option<f64>,
    /// Latency metrics whose median is within 10 steps of that resolution.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub at_clock_resolution: Vec<String>,
}

/// An effect as printed: [`Effect`] with its verdict as a word.
#[derive(Clone, Debug, Serialize)]
pub struct EffectReport {
    pub ratio: f64,
    /// 95% interval of the ratio `[low, high]`.
    pub ci: [f64; 2],
    /// `faster`, `slower`, `no_significant_difference` (or `one_run_each`).
    pub verdict: &'static str,
    /// Achieved confidence of `ci`.
    pub confidence: f64,
    /// Exact signed-rank p, and after Holm over the variants.
    pub p: f64,
    pub p_adjusted: f64,
    /// Smallest effect this run could tell from noise (ratio above 1).
    pub detectable: f64,
    /// Blocks with a value on both sides.
    pub pairs: usize,
    /// This value or the baseline's is at the clock's resolution: the
    /// ratio compares clock steps, not the path (the table prints no ratio).
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub at_clock_resolution: bool,
}

impl VariantReport {
    /// Variant `v` (0: the baseline) named `value`, with its medians
    /// (`x`, in [`METRICS`]' order) and its rounds; no effect yet.
    fn new(
        v: usize,
        value: &str,
        rounds_ok: usize,
        x: RoundValues,
        per_round: &[RoundValues],
    ) -> Self {
        let [p50, p99, p999, max, msgs_per_sec] = x;
        VariantReport {
            value: value.to_string(),
            baseline: v == 0,
            rounds_ok,
            p50,
            p99,
            p999,
            max,
            msgs_per_sec,
            effects: Vec::new(),
            per_round: per_round.to_vec(),
            clock_resolution_ns: None,
            at_clock_resolution: Vec::new(),
        }
    }
}

impl From<Effect> for EffectReport {
    fn from(e: Effect) -> Self {
        EffectReport {
            ratio: e.ratio,
            ci: e.ci,
            verdict: e.verdict.word(),
            confidence: e.confidence,
            p: e.p,
            p_adjusted: e.p_adjusted,
            detectable: e.detectable,
            pairs: e.pairs,
            at_clock_resolution: false,
        }
    }
}

#[derive(Clone, Debug, Serialize)]
pub struct CompareReport {
    pub schema: &'static str,
    /// The ibprobe command compared, as given after `--`.
    pub command: Vec<String>,
    /// The option varied (its long name).
    pub option: String,
    pub rounds: usize,
    /// Seed of the run order (give it back with --seed to repeat it).
    pub seed: u64,
    /// The run order: per block, the variant indexes in the order run.
    pub order: Vec<Vec<usize>>,
    pub variants: Vec<VariantReport>,
    /// Lines a reader must see (too few rounds, failed rounds).
    pub warnings: Vec<String>,
    /// How the effects were computed, in one line.
    pub method: &'static str,
    /// The table's title, when a caller other than `ibprobe compare`
    /// (e.g. `ibtune experiment`) names what was compared.
    #[serde(skip)]
    pub title: Option<String>,
    /// The first column's heading for such a caller (default: `--OPTION`).
    #[serde(skip)]
    pub column: Option<String>,
}

/// The one-line method statement every format carries.
pub const METHOD: &str = "rounds paired by block (order randomised, mirrored in pairs); ratio = Hodges-Lehmann estimate of the paired log ratios; 95% interval and test: exact Wilcoxon signed-rank; verdicts at 5% after Holm over the variants";

/// What a comparison of two saved reports always says, and its method.
pub const SAVED_WARNING: &str = "one run each cannot separate an effect from run-to-run noise (10-25% between runs on a shared host): the intervals cover only the sampling noise inside each run; for a verdict run `ibprobe compare --rounds 10 --vary OPTION=A,B -- COMMAND`";

pub const SAVED_METHOD: &str = "two saved reports, one run each: quantiles from the histograms they carry; ratio = B / A; interval = the ratio's range over each quantile's 95% order-statistic interval inside its run (sampling noise only); no verdict";

impl CompareReport {
    /// Builds the report from every round's values: `values[v][r]` is
    /// variant `v`'s round in block `r`.
    pub fn new(
        command: Vec<String>,
        option: String,
        seed: u64,
        order: Vec<Vec<usize>>,
        labels: &[String],
        values: &[Vec<RoundValues>],
    ) -> CompareReport {
        let rounds = order.len();
        let column =
            |v: usize, m: usize| -> Vec<Option<f64>> { values[v].iter().map(|r| r[m]).collect() };
        let med = |v: usize, m: usize| -> Option<f64> {
            let xs: Vec<f64> = column(v, m).into_iter().flatten().collect();
            ibstats::median(&xs)
        };
        let mut variants: Vec<VariantReport> = labels
            .iter()
            .enumerate()
            .map(|(v, value)| {
                let ok = values[v].iter().filter(|r| r.iter().any(Option::is_some));
                VariantReport::new(
                    v,
                    value,
                    ok.count(),
                    std::array::from_fn(|m| med(v, m)),
                    &values[v],
                )
            })
            .collect();
        for (m, metric) in METRICS.iter().enumerate() {
            let others: Vec<Vec<Option<f64>>> = (1..labels.len()).map(|v| column(v, m)).collect();
            let effects = ibstats::compare_family(&column(0, m), &others, metric.better);
            for (v, e) in variants.iter_mut().skip(1).zip(effects) {
                v.effects
                    .extend(e.map(|e| (metric.name.to_string(), e.into())));
            }
        }
        let mut warnings = Vec::new();
        // The smallest p of R pairs is 2 / 2^R, times the family's size
        // after Holm: below that many rounds no verdict is possible.
        let family = labels.len().saturating_sub(1).max(1) as f64;
        let min_p = |r: usize| family * 2f64.powi(1 - r as i32);
        if rounds < 6 {
            warnings.push(format!(
                "{rounds} rounds: fewer than 6 pairs cannot give a 95% interval, so no verdict can be other than no_significant_difference; use --rounds 10 or more"
            ));
        } else if min_p(rounds) >= ibstats::effect::ALPHA {
            let need = (rounds..64)
                .find(|&r| min_p(r) < ibstats::effect::ALPHA)
                .unwrap_or(64);
            warnings.push(format!(
                "{rounds} rounds for {} values: after Holm's correction no verdict can reach 5%; use --rounds {need} or more",
                labels.len() - 1
            ));
        }
        for v in variants.iter().filter(|v| v.rounds_ok < rounds) {
            warnings.push(format!(
                "--{option}={}: {} of {rounds} rounds failed and were left out",
                v.value,
                rounds - v.rounds_ok
            ));
        }
        CompareReport::with(command, option, seed, order, variants, warnings, METHOD)
    }

    /// The report of these parts; `rounds` is the blocks of `order`.
    fn with(
        command: Vec<String>,
        option: String,
        seed: u64,
        order: Vec<Vec<usize>>,
        variants: Vec<VariantReport>,
        warnings: Vec<String>,
        method: &'static str,
    ) -> CompareReport {
        CompareReport {
            schema: "ibprobe.compare/1",
            command,
            option,
            rounds: order.len(),
            seed,
            order,
            variants,
            warnings,
            method,
            title: None,
            column: None,
        }
    }

    /// Two saved reports, one run each: `labels` name them, `values[v]`
    /// their metrics, `sampling[v][m]` each metric's 95% sampling interval
    /// inside its run (`None`: none, e.g. the max). An effect's interval is
    /// the ratio's range over the two; its verdict `one_run_each` (without
    /// run-to-run noise it cannot be one).
    pub fn saved(
        labels: &[String],
        values: &[RoundValues],
        sampling: &[SamplingIntervals],
    ) -> CompareReport {
        let mut variants: Vec<VariantReport> = labels
            .iter()
            .zip(values)
            .enumerate()
            .map(|(v, (label, x))| VariantReport::new(v, label, 1, *x, std::slice::from_ref(x)))
            .collect();
        for v in 1..variants.len() {
            for (m, metric) in METRICS.iter().enumerate() {
                let (Some(a), Some(b)) = (values[0][m], values[v][m]) else {
                    continue;
                };
                if a <= 0.0 {
                    continue;
                }
                let ci = match (sampling[0][m], sampling[v][m]) {
                    (Some((alo, ahi)), Some((blo, bhi))) if alo > 0.0 => [blo / ahi, bhi / alo],
                    _ => [f64::NAN, f64::NAN],
                };
                variants[v].effects.push((
                    metric.name.to_string(),
                    EffectReport {
                        ratio: b / a,
                        ci,
                        verdict: "one_run_each",
                        confidence: f64::NAN,
                        p: f64::NAN,
                        p_adjusted: f64::NAN,
                        detectable: f64::NAN,
                        pairs: 1,
                        at_clock_resolution: false,
                    },
                ));
            }
        }
        let order = vec![(0..labels.len()).collect()];
        let warnings = vec![SAVED_WARNING.to_string()];
        CompareReport::with(
            Vec::new(),
            "report".into(),
            0,
            order,
            variants,
            warnings,
            SAVED_METHOD,
        )
    }

    /// Marks what was measured at the clock's resolution: `resolution[v]`
    /// is the (coarsest) resolution variant `v`'s reports gave (`None`:
    /// nothing changes). A latency median within 10 steps of it is listed
    /// in the variant's `at_clock_resolution` and one warning says so;
    /// every effect on that metric against or of it is marked, which the
    /// table and the detectable-effect line print no ratio of.
    pub fn mark_clock_resolution(&mut self, resolution: &[Option<f64>]) {
        for (v, r) in self.variants.iter_mut().zip(resolution) {
            v.clock_resolution_ns = *r;
            let Some(r) = *r else { continue };
            let near: Vec<(usize, f64)> = (0..METRICS.len())
                .filter(|&m| METRICS[m].better == Better::Lower)
                .filter_map(|m| Some((m, value_of(v, m)?)))
                .filter(|&(_, x)| crate::clock::near_resolution(x, r))
                .collect();
            if near.is_empty() {
                continue;
            }
            v.at_clock_resolution = near.iter().map(|&(m, _)| METRICS[m].name.into()).collect();
            let figures: Vec<String> = near
                .iter()
                .map(|&(m, x)| format!("{} {}", METRICS[m].name, fmt_value(m, x)))
                .collect();
            self.warnings.push(format!(
                "{}: {} within {} steps of the clock's {:.3} us resolution: a ratio against it compares clock steps, not the path, and is not printed (\"at clock resolution\"); compare the tail (p99 and up) or measure a longer path (a larger --size, --round-trip)",
                v.value,
                figures.join(", "),
                crate::clock::RESOLUTION_TICKS,
                r / 1000.0
            ));
        }
        let base = self.variants.first().map(|b| b.at_clock_resolution.clone());
        for v in &mut self.variants {
            for (k, e) in &mut v.effects {
                e.at_clock_resolution =
                    base.iter().flatten().any(|b| b == k) || v.at_clock_resolution.contains(k);
            }
        }
    }

    /// The JSON document as a value, for callers that add their own
    /// fields (`ibtune experiment`).
    pub fn to_value(&self) -> serde_json::Value {
        serde_json::to_value(self).unwrap_or_default()
    }

    /// Rows of the table: value, then per metric "median (ratio [ci] verdict)".
    fn rows(&self) -> (Vec<&'static str>, Vec<Vec<String>>) {
        let shown: Vec<usize> = (0..METRICS.len())
            .filter(|&m| self.variants.iter().any(|v| value_of(v, m).is_some()))
            .collect();
        let header: Vec<&'static str> = shown.iter().map(|&m| METRICS[m].name).collect();
        let cell = |v: &VariantReport, m: usize| {
            let Some(x) = value_of(v, m) else {
                return "-".to_string();
            };
            let (mut c, name) = (fmt_value(m, x), METRICS[m].name);
            // This value's own median at the resolution, or only the
            // baseline's: say which.
            let own = v.at_clock_resolution.iter().any(|k| k == name);
            match v.effects.iter().find(|(k, _)| k == name) {
                Some((_, e)) if e.at_clock_resolution && !own => {
                    c.push_str(" (baseline at clock resolution)")
                }
                Some((_, e)) if !e.at_clock_resolution => {
                    let _ = write!(c, " x{:.2}", e.ratio);
                    if e.ci.iter().all(|x| x.is_finite()) {
                        let _ = write!(c, " [{:.2}, {:.2}]", e.ci[0], e.ci[1]);
                    }
                    let _ = write!(c, " {}", short_verdict(e.verdict));
                }
                _ if own => c.push_str(" at clock resolution"),
                _ => {}
            }
            c
        };
        let rows = self.variants.iter().map(|v| {
            let value = format!("{}{}", v.value, if v.baseline { " (baseline)" } else { "" });
            std::iter::once(value)
                .chain(shown.iter().map(|&m| cell(v, m)))
                .collect()
        });
        (header, rows.collect())
    }

    fn first_column(&self) -> String {
        match &self.column {
            Some(c) => c.clone(),
            None if self.command.is_empty() => "report".into(),
            None => format!("--{}", self.option),
        }
    }

    fn title(&self) -> String {
        match &self.title {
            Some(t) => t.clone(),
            None if self.command.is_empty() => "two saved reports, one run each; effect = ratio to the first [sampling-only 95% interval]".into(),
            None => format!(
                "ibprobe {}: {} rounds per value, medians over rounds; effect = ratio to the baseline [95% CI] verdict",
                self.command.join(" "),
                self.rounds
            ),
        }
    }

    /// What the table's reader needs under it: the method, the
    /// warnings, the smallest effect the run could tell.
    fn footer(&self) -> Vec<String> {
        let mut out = vec![format!("method: {}", self.method)];
        out.extend(self.warnings.iter().map(|w| format!("warning: {w}")));
        let smallest = self
            .variants
            .iter()
            .flat_map(|v| v.effects.iter())
            .filter(|(k, e)| k == "p99" && !e.at_clock_resolution)
            .map(|(_, e)| e.detectable)
            .fold(f64::NAN, f64::min);
        if smallest.is_finite() {
            out.push(format!(
                "this run could tell p99 effects beyond about +-{:.0}% from noise",
                (smallest - 1.0) * 100.0
            ));
        }
        out
    }
}

/// The table of medians and effects per value, with the method and
/// warnings under it; JSON `ibprobe.compare/1`.
impl Document for CompareReport {
    fn noun(&self) -> &'static str {
        "comparison"
    }

    fn blocks(&self) -> Vec<Block> {
        let (header, rows) = self.rows();
        let mut columns = vec![Column::new(&self.first_column(), 0, Align::LEFT)];
        columns.extend(header.iter().map(|h| Column::new(h, 0, Align::LEFT)));
        let title = self.title();
        let footer = self.footer();
        vec![
            Block::Context(vec![title.clone()]),
            Block::Title {
                bold: title,
                rest: String::new(),
            },
            Table::block(columns, "  ", rows),
            Block::Context(footer.clone()),
            Block::List(footer, Spacing::Before),
        ]
    }

    fn json(&self) -> Option<Box<dyn JsonDoc + '_>> {
        Some(Box::new(self.to_value()))
    }
}

fn as_map<S: serde::Serializer>(e: &[(String, EffectReport)], s: S) -> Result<S::Ok, S::Error> {
    s.collect_map(e.iter().map(|(k, e)| (k, e)))
}

fn value_of(v: &VariantReport, m: usize) -> Option<f64> {
    [v.p50, v.p99, v.p999, v.max, v.msgs_per_sec][m]
}

fn fmt_value(m: usize, x: f64) -> String {
    if METRICS[m].better == Better::Higher {
        format!("{:.0}/s", x)
    } else {
        format!("{:.2} us", x / 1000.0)
    }
}

fn short_verdict(v: &str) -> &'static str {
    match v {
        "faster" => "faster",
        "slower" => "slower",
        "one_run_each" => "(one run each)",
        _ => "n.s.",
    }
}
