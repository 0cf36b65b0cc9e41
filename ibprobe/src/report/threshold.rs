//! `--fail-if`: pass/fail thresholds on a run's results, for acceptance
//! tests and a cluster's CI: `p99>20us` parsed once into a [`Threshold`]
//! (grammar in `ibprobe/README.md`), checked against any report that
//! answers [`Measured::value`], and listed in every format ([`FailIf`]).
//! A threshold *holds* when its comparison is true of the measured value;
//! a run with any threshold holding exits 1.

use serde_json::{json, Value};

ibhost::vocabulary! {
    no_from_str
    /// What a threshold reads from a run.
    Metric {
        P50 = "p50", "Median latency.";
        P90 = "p90", "90th percentile latency.";
        P99 = "p99", "99th percentile latency.";
        P999 = "p999", "99.9th percentile latency (also p99.9).";
        P9999 = "p9999", "99.99th percentile latency (also p99.99).";
        Max = "max", "The largest latency (the true maximum).";
        Min = "min", "The smallest latency.";
        Mean = "mean", "Mean latency.";
        Lost = "lost", "Messages lost (never answered or never delivered).";
        MsgsPerSec = "msgs_per_sec", "Messages per second (stream only).";
        BytesPerSec = "bytes_per_sec", "Payload bytes per second (stream only).";
        CreditStalls = "credit_stalls", "Times the sender waited for a credit (stream only).";
    }
}

/// Which results a command reports: a latency run (`loopback`, `client`)
/// or a stream (`stream`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum RunKind {
    Latency,
    Stream,
}

impl Metric {
    /// A latency, in ns (its value is written with a duration unit).
    pub fn is_latency(self) -> bool {
        !matches!(
            self,
            Metric::Lost | Metric::MsgsPerSec | Metric::BytesPerSec | Metric::CreditStalls
        )
    }

    pub fn reported_by(self, kind: RunKind) -> bool {
        kind == RunKind::Stream
            || !matches!(
                self,
                Metric::MsgsPerSec | Metric::BytesPerSec | Metric::CreditStalls
            )
    }

    fn parse(s: &str) -> Option<Metric> {
        let s = s.to_ascii_lowercase();
        let alias = match s.as_str() {
            "p99.9" => "p999",
            "p99.99" => "p9999",
            "median" => "p50",
            "msgs/s" | "msg_per_sec" => "msgs_per_sec",
            other => other,
        };
        Metric::ALL.iter().copied().find(|m| m.name() == alias)
    }
}

ibhost::vocabulary! {
    no_from_str
    /// A comparison, by its symbol; the two-character ones first (for
    /// parsing).
    Cmp {
        Ge = ">=", "At least.";
        Le = "<=", "At most.";
        Gt = ">", "More than.";
        Lt = "<", "Less than.";
    }
}

impl Cmp {
    fn holds(self, measured: f64, limit: f64) -> bool {
        match self {
            Cmp::Gt => measured > limit,
            Cmp::Ge => measured >= limit,
            Cmp::Lt => measured < limit,
            Cmp::Le => measured <= limit,
        }
    }
}

/// One `--fail-if` expression, parsed.
#[derive(Clone, Debug, PartialEq)]
pub struct Threshold {
    pub metric: Metric,
    pub cmp: Cmp,
    /// The limit: ns for latencies, else the count or rate.
    pub value: f64,
    /// The expression as written (trimmed), for reports.
    pub text: String,
}

const SYNTAX: &str = "write METRIC OP VALUE, e.g. p99>20us, p999>100us, lost>0, msgs_per_sec<1M";

impl std::str::FromStr for Threshold {
    type Err = String;

    fn from_str(s: &str) -> Result<Threshold, String> {
        let text = s.trim();
        let at = text
            .find(['>', '<'])
            .ok_or_else(|| format!("{text:?} has no comparison (>, >=, <, <=); {SYNTAX}"))?;
        let (name, rest) = text.split_at(at);
        let (value, cmp) = Cmp::ALL
            .iter()
            .find_map(|&c| Some((rest.strip_prefix(c.name())?, c)))
            .unwrap_or((&rest[1..], Cmp::Lt));
        let metric = Metric::parse(name.trim()).ok_or_else(|| {
            format!(
                "unknown metric {:?} in {text:?}; use one of {} (p99.9 and p99.99 also work)",
                name.trim(),
                Metric::choices()
            )
        })?;
        let value = value.trim();
        let parsed = if metric.is_latency() {
            latency_ns(value).map_err(|why| format!("{text:?}: {why}"))?
        } else {
            count(value).map_err(|why| format!("{text:?}: {why}"))?
        };
        Ok(Threshold {
            metric,
            cmp,
            value: parsed,
            text: text.to_string(),
        })
    }
}

/// A latency limit in ns: a duration with its unit (a bare number would be
/// read as seconds by the duration syntax, which is never what `p99>20`
/// means, so it is refused).
fn latency_ns(v: &str) -> Result<f64, String> {
    if v.is_empty() {
        return Err(format!("no value after the comparison; {SYNTAX}"));
    }
    if v.ends_with(|c: char| c.is_ascii_digit() || c == '.') {
        return Err(format!(
            "{v} has no unit; a latency needs one of ns, us, ms, s (e.g. {v}us)"
        ));
    }
    ibhost::duration::parse(v)
        .map(|d| d.as_nanos() as f64)
        .map_err(|e| format!("{v:?}: {e}"))
}

/// A count or rate: a number, optionally with k, M or G (1e3, 1e6, 1e9).
fn count(v: &str) -> Result<f64, String> {
    let (num, scale) = match v.chars().last() {
        Some('k' | 'K') => (&v[..v.len() - 1], 1e3),
        Some('M') => (&v[..v.len() - 1], 1e6),
        Some('G') => (&v[..v.len() - 1], 1e9),
        _ => (v, 1.0),
    };
    match num.parse::<f64>() {
        Ok(n) if n.is_finite() && n >= 0.0 => Ok(n * scale),
        _ => Err(format!(
            "{v:?} is not a count or rate; write a number >= 0 with an optional k, M or G (e.g. 0, 1M)"
        )),
    }
}

/// Refuses thresholds on metrics runs of `kind` do not report (one line
/// for exit 2, before anything runs).
pub fn check_applicable(thresholds: &[Threshold], kind: RunKind) -> Result<(), String> {
    let Some(t) = thresholds.iter().find(|t| !t.metric.reported_by(kind)) else {
        return Ok(());
    };
    Err(format!(
        "--fail-if {:?}: {} is reported by `ibprobe stream` only; here use a latency metric or lost",
        t.text, t.metric
    ))
}

/// A report that can answer a threshold.
pub trait Measured {
    /// The run's value of `m` (ns for latencies); None when it has none
    /// (e.g. no message was measured).
    fn value(&self, m: Metric) -> Option<f64>;
}

/// A latency metric's value in a histogram summary (None: no sample, or
/// not a latency).
pub fn from_summary(s: &ibstats::latency::Summary, m: Metric) -> Option<f64> {
    let ns = match m {
        Metric::P50 => s.p50_ns,
        Metric::P90 => s.p90_ns,
        Metric::P99 => s.p99_ns,
        Metric::P999 => s.p999_ns,
        Metric::P9999 => s.p9999_ns,
        Metric::Max => s.max_ns,
        Metric::Min => s.min_ns,
        Metric::Mean => return (s.count > 0).then_some(s.mean_ns),
        Metric::Lost | Metric::MsgsPerSec | Metric::BytesPerSec | Metric::CreditStalls => {
            return None
        }
    };
    (s.count > 0).then_some(ns as f64)
}

#[derive(Clone, Debug, PartialEq)]
pub struct Checked {
    pub threshold: Threshold,
    /// The run's value (ns for latencies); None: not measured.
    pub measured: Option<f64>,
    /// The comparison is true (or nothing was measured): the run fails.
    pub holds: bool,
}

/// Every `--fail-if` of a run, checked.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct FailIf {
    pub checked: Vec<Checked>,
}

impl FailIf {
    /// Checks `thresholds` against `run`. A metric the run could not
    /// measure (no message arrived) counts as holding: a run that measured
    /// nothing is not a pass.
    pub fn check(thresholds: &[Threshold], run: &dyn Measured) -> FailIf {
        FailIf {
            checked: thresholds
                .iter()
                .map(|t| {
                    let measured = run.value(t.metric);
                    Checked {
                        threshold: t.clone(),
                        measured,
                        holds: measured.is_none_or(|v| t.cmp.holds(v, t.value)),
                    }
                })
                .collect(),
        }
    }

    /// Any threshold holds: the run fails (exit 1).
    pub fn failed(&self) -> bool {
        self.checked.iter().any(|c| c.holds)
    }

    /// The expressions that hold, as written.
    pub fn violated(&self) -> Vec<&str> {
        self.checked
            .iter()
            .filter(|c| c.holds)
            .map(|c| c.threshold.text.as_str())
            .collect()
    }

    /// Human lines (table, Markdown): one per threshold, then a verdict.
    pub fn lines(&self) -> Vec<String> {
        let mut out: Vec<String> = self
            .checked
            .iter()
            .map(|c| {
                let t = &c.threshold;
                let shown = c
                    .measured
                    .map_or("not measured".into(), |v| show(t.metric, v));
                format!(
                    "fail-if {}: {} = {} ({} {} {}): {}",
                    t.text,
                    t.metric,
                    shown,
                    if c.holds { "is" } else { "is not" },
                    t.cmp.name(),
                    show(t.metric, t.value),
                    if c.holds { "FAILED" } else { "ok" }
                )
            })
            .collect();
        out.push(if self.failed() {
            format!(
                "fail-if: FAILED ({} of {} thresholds hold: {}), exit 1",
                self.violated().len(),
                self.checked.len(),
                self.violated().join(", ")
            )
        } else {
            format!(
                "fail-if: passed ({} thresholds, none holds)",
                self.checked.len()
            )
        });
        out
    }

    /// The `fail_if` object of the JSON reports.
    pub fn json(&self) -> Value {
        json!({
            "failed": self.failed(),
            "violated": self.violated(),
            "thresholds": self.checked.iter().map(|c| json!({
                "expr": c.threshold.text,
                "metric": c.threshold.metric.name(),
                "op": c.threshold.cmp.name(),
                "limit": c.threshold.value,
                "measured": c.measured,
                "unit": if c.threshold.metric.is_latency() { "ns" } else { "" },
                "holds": c.holds,
            })).collect::<Vec<_>>(),
        })
    }

    /// The CSV cell: the violated expressions joined by `;` (empty: passed).
    pub fn csv_cell(&self) -> String {
        self.violated().join(";")
    }
}

/// A value for people: latencies in us, counts as numbers.
fn show(m: Metric, v: f64) -> String {
    if m.is_latency() {
        format!("{:.3} us", v / 1000.0)
    } else if v >= 1e6 {
        format!("{:.3}M", v / 1e6)
    } else {
        format!("{v}")
    }
}
