//! The loopback/client report as a [`Document`]: its context lines, its
//! table of distributions, its CSV rows and its `ibprobe.report/1` JSON
//! document (whose fields `report/README.md` lists).

use super::counters;
use super::model::{
    us, Align, Block, Column, Csv, Distribution, Document, JsonDoc, Quote, Report, RunCounters,
    Spacing, Table, Warning, SCHEMA,
};
use super::threshold::FailIf;
use crate::clock::ClockKind;
use serde::ser::SerializeMap;
use serde::{Serialize, Serializer};

/// The CSV header row (the counters' columns follow: [`csv_header`]).
pub const CSV_HEADER: &str = "transport,mode,bytes,distribution,count,min_ns,p50_ns,p90_ns,p99_ns,p999_ns,p9999_ns,max_ns,mean_ns,stdev_ns,over_10us_count,over_10us_fraction,sent,lost,missed_steps";

/// The whole CSV header row: [`CSV_HEADER`] and one column per counter
/// (`context_switches` ... `smis`, empty where not counted).
pub fn csv_header() -> String {
    format!("{CSV_HEADER},{}", counters::csv_header())
}

fn columns() -> Vec<Column> {
    let r = |t, w| Column::new(t, w, Align::RIGHT);
    let mut columns = vec![Column::new("latency [us]", 16, Align::LEFT)];
    columns.extend(["count", "min", "p50", "p90", "p99", "p99.9", "p99.99"].map(|t| r(t, 9)));
    columns.extend([
        r("max", 10),
        r("mean ± stdev", 17),
        // The text header has always stood one space right of its cells
        // (11 wide: it is wider than the column).
        Column::titled("  % > 10 us", "% > 10 us", 10, Align::RIGHT),
    ]);
    columns
}

fn row(d: &Distribution) -> Vec<String> {
    let s = &d.summary;
    let mut row = vec![d.kind.label().to_string(), s.count.to_string()];
    row.extend(
        [
            s.min_ns, s.p50_ns, s.p90_ns, s.p99_ns, s.p999_ns, s.p9999_ns, s.max_ns,
        ]
        .map(us),
    );
    row.extend([
        format!("{:.3} ± {:.3}", s.mean_ns / 1000.0, s.stdev_ns / 1000.0),
        format!("{:.4}%", s.over_10us * 100.0),
    ]);
    row
}

impl Document for Report {
    fn noun(&self) -> &'static str {
        "run report"
    }

    fn blocks(&self) -> Vec<Block> {
        let (c, run) = (&self.context, &self.run);
        let transport = if c.transport.detail.is_empty() {
            c.transport.name.clone()
        } else {
            format!("{} ({})", c.transport.name, c.transport.detail)
        };
        let mut run_line = format!(
            "run: {} sent, {} lost, {:.3} s, warm-up {} (max {} us)",
            run.sent,
            run.lost,
            run.elapsed_ns as f64 / 1e9,
            run.warmup_count,
            us(run.warmup_max_ns)
        );
        if run.steps > 0 {
            run_line += &format!(", {} of {} paced steps missed", run.missed_steps, run.steps);
        }
        let counter_lines: Vec<String> = self
            .counters
            .iter()
            .flat_map(counters::table_lines)
            .collect();
        let mut context = vec![
            format!(
                "ibprobe {}: {} over {transport}, {} B",
                c.tool_version,
                c.mode.name(),
                c.message_size
            ),
            format!("clock: {}", c.clock.describe()),
            run_line,
        ];
        context.extend(counter_lines.iter().cloned());
        context.extend(self.notes.iter().map(|n| format!("note: {n}")));
        context.push(String::new());
        vec![
            Block::Context(context),
            Block::Title {
                bold: format!("ibprobe {}", c.tool_version),
                rest: format!(
                    ": {} over `{}`, {} B, clock: {}",
                    c.mode.name(),
                    c.transport.name,
                    c.message_size,
                    c.clock.describe()
                ),
            },
            Table::block(columns(), " ", self.distributions.iter().map(row).collect()),
            Block::List(counter_lines, Spacing::Before),
            Block::Warnings {
                list: self.warnings.clone(),
                gap: true,
                style: Quote::Together,
            },
        ]
    }

    fn fail_if(&self) -> Option<&FailIf> {
        self.fail_if.as_ref()
    }

    fn csv(&self) -> Option<Csv> {
        let mut header = csv_header();
        if self.fail_if.is_some() {
            header.push_str(",fail_if_violated");
        }
        let (c, run) = (&self.context, &self.run);
        let rows = self
            .distributions
            .iter()
            .map(|d| {
                let s = &d.summary;
                let mut row = vec![
                    c.transport.name.clone(),
                    c.mode.name().to_string(),
                    c.message_size.to_string(),
                    d.kind.name().to_string(),
                ];
                row.extend(
                    [
                        s.count, s.min_ns, s.p50_ns, s.p90_ns, s.p99_ns, s.p999_ns, s.p9999_ns,
                        s.max_ns,
                    ]
                    .map(|v| v.to_string()),
                );
                row.extend([
                    format!("{:.1}", s.mean_ns),
                    format!("{:.1}", s.stdev_ns),
                    s.over_10us_count.to_string(),
                    format!("{:.6}", s.over_10us),
                ]);
                row.extend([run.sent, run.lost, run.missed_steps].map(|v| v.to_string()));
                row.extend(counters::csv_cells(self.counters.as_ref()));
                row.extend(self.fail_if.as_ref().map(FailIf::csv_cell));
                row
            })
            .collect();
        Some(Csv { header, rows })
    }

    fn json(&self) -> Option<Box<dyn JsonDoc + '_>> {
        Some(Box::new(jreport(self)))
    }

    fn perftest(&self) -> Option<(u64, Option<&Distribution>)> {
        Some((self.context.message_size, self.headline()))
    }
}

/// Serializes key/value pairs as a JSON object, keeping their order.
struct Pairs<'a>(&'a [(String, String)]);

impl Serialize for Pairs<'_> {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let mut m = s.serialize_map(Some(self.0.len()))?;
        for (k, v) in self.0 {
            m.serialize_entry(k, v)?;
        }
        m.end()
    }
}

#[derive(Serialize)]
struct JTool<'a> {
    name: &'static str,
    version: &'a str,
}

#[derive(Serialize)]
struct JTransport<'a> {
    name: &'a str,
    detail: &'a str,
    facts: Pairs<'a>,
}

#[derive(Serialize)]
struct JClock {
    kind: &'static str,
    hz: Option<f64>,
    description: String,
    calibration_error_ppm: f64,
    fallback: Option<&'static str>,
    /// Why auto chose the TSC against the CPU flags.
    auto_reason: Option<String>,
    /// What one read of each clock costs here (auto only).
    read_cost: Option<crate::clock::ReadCosts>,
    /// The smallest non-zero step between two reads, ns.
    resolution_ns: f64,
}

#[derive(Serialize)]
struct JMicros {
    min: f64,
    p50: f64,
    p90: f64,
    p99: f64,
    p999: f64,
    p9999: f64,
    max: f64,
    mean: f64,
    stdev: f64,
}

#[derive(Serialize)]
struct JDist {
    name: &'static str,
    label: &'static str,
    count: u64,
    min_ns: u64,
    p50_ns: u64,
    p90_ns: u64,
    p99_ns: u64,
    p999_ns: u64,
    p9999_ns: u64,
    max_ns: u64,
    mean_ns: u64,
    stdev_ns: u64,
    over_10us_count: u64,
    over_10us_fraction: f64,
    clamped: u64,
    us: JMicros,
    hdr: String,
}

#[derive(Serialize)]
struct JReport<'a> {
    schema: &'static str,
    tool: JTool<'a>,
    mode: &'static str,
    transport: JTransport<'a>,
    clock: JClock,
    message_size: u64,
    config: Pairs<'a>,
    run: &'a RunCounters,
    distributions: Vec<JDist>,
    warnings: &'a [Warning],
    notes: &'a [String],
    #[serde(skip_serializing_if = "Option::is_none")]
    fail_if: Option<serde_json::Value>,
    /// null with `--no-counters`.
    counters: Option<serde_json::Value>,
}
fn jdist(d: &Distribution) -> JDist {
    let s = &d.summary;
    let u = |ns: u64| ns as f64 / 1000.0;
    JDist {
        name: d.kind.name(),
        label: d.kind.label(),
        count: s.count,
        min_ns: s.min_ns,
        p50_ns: s.p50_ns,
        p90_ns: s.p90_ns,
        p99_ns: s.p99_ns,
        p999_ns: s.p999_ns,
        p9999_ns: s.p9999_ns,
        max_ns: s.max_ns,
        mean_ns: s.mean_ns.round() as u64,
        stdev_ns: s.stdev_ns.round() as u64,
        over_10us_count: s.over_10us_count,
        over_10us_fraction: s.over_10us,
        clamped: d.clamped,
        us: JMicros {
            min: u(s.min_ns),
            p50: u(s.p50_ns),
            p90: u(s.p90_ns),
            p99: u(s.p99_ns),
            p999: u(s.p999_ns),
            p9999: u(s.p9999_ns),
            max: u(s.max_ns),
            mean: s.mean_ns / 1000.0,
            stdev: s.stdev_ns / 1000.0,
        },
        hdr: d.hdr.clone(),
    }
}

/// The report as a `serde_json::Value` (ibexporter and tests use it).
pub fn json_value(r: &Report) -> serde_json::Value {
    serde_json::to_value(jreport(r)).expect("the report serializes: all keys are strings")
}

fn jreport(r: &Report) -> JReport<'_> {
    let c = &r.context;
    let hz = match c.clock.kind() {
        ClockKind::Tsc { hz } => Some(hz),
        ClockKind::MonotonicRaw => None,
    };
    JReport {
        schema: SCHEMA,
        tool: JTool {
            name: "ibprobe",
            version: &c.tool_version,
        },
        mode: c.mode.name(),
        transport: JTransport {
            name: &c.transport.name,
            detail: &c.transport.detail,
            facts: Pairs(&c.transport.facts),
        },
        clock: JClock {
            kind: hz.map_or("monotonic_raw", |_| "tsc"),
            hz,
            description: c.clock.describe(),
            calibration_error_ppm: c.clock.calibration_error_ppm(),
            fallback: c.clock.fallback().map(|f| f.help()),
            auto_reason: c.clock.auto_reason().map(|r| r.explain()),
            read_cost: c.clock.read_costs(),
            resolution_ns: c.clock.resolution_ns(),
        },
        message_size: c.message_size,
        config: Pairs(&c.config),
        run: &r.run,
        distributions: r.distributions.iter().map(jdist).collect(),
        warnings: &r.warnings,
        notes: &r.notes,
        fail_if: r.fail_if.as_ref().map(|f| f.json()),
        counters: r.counters.as_ref().map(super::counters::json),
    }
}
