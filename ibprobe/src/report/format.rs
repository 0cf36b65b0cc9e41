//! The text formats of a [`Report`]: table, JSON, CSV, Markdown, perftest.
//!
//! Why it exists: each consumer reads a different shape (people: the
//! table; scripts: JSON/CSV; wikis and issues: Markdown; existing
//! perftest parsers: perftest's exact line), all from one [`Report`].
//! Field meanings are in `report/README.md`.

use super::model::{us, Distribution, Report, RunCounters, Warning, SCHEMA};
use crate::clock::ClockKind;
use serde::ser::SerializeMap;
use serde::{Serialize, Serializer};

crate::words::vocabulary! {
    no_from_str
    /// An output format (`--format`).
    Format {
        Table = "table", "Human-readable table (hyperfine-like), with warnings.";
        Json = "json", "The `ibprobe.report/1` JSON document.";
        Csv = "csv", "One header row and one row per distribution.";
        Markdown = "markdown", "A Markdown table, for issues and wikis.";
        Perftest = "perftest", "perftest's (ib_send_lat) header and result line, for its parsers.";
    }
}

impl std::str::FromStr for Format {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        match s.to_ascii_lowercase().as_str() {
            "table" => Ok(Format::Table),
            "json" => Ok(Format::Json),
            "csv" => Ok(Format::Csv),
            "markdown" | "md" => Ok(Format::Markdown),
            "perftest" => Ok(Format::Perftest),
            _ => Err(format!(
                "unknown format {s:?}: use one of table, json, csv, markdown, perftest"
            )),
        }
    }
}

/// Renders `report` as `format`.
pub fn render(report: &Report, format: Format) -> String {
    match format {
        Format::Table => table(report),
        Format::Json => json(report),
        Format::Csv => csv(report),
        Format::Markdown => markdown(report),
        Format::Perftest => perftest(report),
    }
}

// ---------------------------------------------------------------- table

/// Column header of the table format (after the context lines).
pub const TABLE_HEADER: &str = "latency [us]         count       min       p50       p90       p99     p99.9    p99.99        max      mean ± stdev     > 10 us";

fn table(r: &Report) -> String {
    let c = &r.context;
    let mut out = String::new();
    out.push_str(&format!(
        "ibprobe {}: {} over {}, {} B\n",
        c.tool_version,
        c.mode.as_str(),
        if c.transport.detail.is_empty() {
            c.transport.name.clone()
        } else {
            format!("{} ({})", c.transport.name, c.transport.detail)
        },
        c.message_size
    ));
    out.push_str(&format!("clock: {}\n", c.clock.describe()));
    let mut run = format!(
        "run: {} sent, {} lost, {:.3} s, warm-up {} (max {} us)",
        r.run.sent,
        r.run.lost,
        r.run.elapsed_ns as f64 / 1e9,
        r.run.warmup_count,
        us(r.run.warmup_max_ns)
    );
    if r.run.steps > 0 {
        run.push_str(&format!(
            ", {} of {} paced steps missed",
            r.run.missed_steps, r.run.steps
        ));
    }
    out.push_str(&run);
    out.push('\n');
    for l in r.counters.iter().flat_map(super::counters::table_lines) {
        out.push_str(&l);
        out.push('\n');
    }
    for n in &r.notes {
        out.push_str(&format!("note: {n}\n"));
    }
    out.push('\n');
    out.push_str(TABLE_HEADER);
    out.push('\n');
    for d in &r.distributions {
        let c = row_cells(d);
        out.push_str(&format!(
            "{:<16} {:>9} {:>9} {:>9} {:>9} {:>9} {:>9} {:>9} {:>10} {:>17} {:>10}\n",
            c[0], c[1], c[2], c[3], c[4], c[5], c[6], c[7], c[8], c[9], c[10],
        ));
    }
    if !r.warnings.is_empty() {
        out.push('\n');
        for w in &r.warnings {
            out.push_str(&format!("warning: {}\n", w.message));
        }
    }
    fail_if_lines(r, &mut out, "");
    out
}

/// The `--fail-if` lines of the human formats, each after `prefix`.
fn fail_if_lines(r: &Report, out: &mut String, prefix: &str) {
    if let Some(f) = &r.fail_if {
        out.push('\n');
        for l in f.lines() {
            out.push_str(&format!("{prefix}{l}\n"));
        }
    }
}

// ----------------------------------------------------------------- json

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
/// The cells of one distribution's row, shared by the table and Markdown:
/// label, count, min, p50, p90, p99, p99.9, p99.99, max (us), mean ± stdev
/// (us), share over 10 us.
fn row_cells(d: &Distribution) -> [String; 11] {
    let s = &d.summary;
    [
        d.kind.label().to_string(),
        s.count.to_string(),
        us(s.min_ns).to_string(),
        us(s.p50_ns).to_string(),
        us(s.p90_ns).to_string(),
        us(s.p99_ns).to_string(),
        us(s.p999_ns).to_string(),
        us(s.p9999_ns).to_string(),
        us(s.max_ns).to_string(),
        format!("{:.3} ± {:.3}", s.mean_ns / 1000.0, s.stdev_ns / 1000.0),
        format!("{:.4}%", s.over_10us * 100.0),
    ]
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
    JReport {
        schema: SCHEMA,
        tool: JTool {
            name: "ibprobe",
            version: &c.tool_version,
        },
        mode: c.mode.as_str(),
        transport: JTransport {
            name: &c.transport.name,
            detail: &c.transport.detail,
            facts: Pairs(&c.transport.facts),
        },
        clock: JClock {
            kind: r.clock_kind_name(),
            hz: match c.clock.kind() {
                ClockKind::Tsc { hz } => Some(hz),
                ClockKind::MonotonicRaw => None,
            },
            description: c.clock.describe(),
            calibration_error_ppm: c.clock.calibration_error_ppm(),
            fallback: c.clock.fallback().map(|f| f.explain()),
            auto_reason: c.clock.auto_reason().map(|r| r.explain()),
            read_cost: c.clock.read_costs(),
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

fn json(r: &Report) -> String {
    let mut s = serde_json::to_string_pretty(&jreport(r))
        .expect("the report serializes: all keys are strings");
    s.push('\n');
    s
}

// ------------------------------------------------------------------ csv

/// The CSV header row (the counters' columns follow: [`csv_header`]).
pub const CSV_HEADER: &str = "transport,mode,bytes,distribution,count,min_ns,p50_ns,p90_ns,p99_ns,p999_ns,p9999_ns,max_ns,mean_ns,stdev_ns,over_10us_count,over_10us_fraction,sent,lost,missed_steps";

/// The whole CSV header row: [`CSV_HEADER`] and one column per counter
/// (`context_switches` ... `smis`, empty where not counted).
pub fn csv_header() -> String {
    format!("{CSV_HEADER},{}", super::counters::csv_header())
}

/// Quotes a CSV field when it needs it (RFC 4180).
fn csv_field(s: &str) -> String {
    if s.contains([',', '"', '\n', '\r']) {
        format!("\"{}\"", s.replace('"', "\"\""))
    } else {
        s.to_string()
    }
}

fn csv(r: &Report) -> String {
    let mut out = csv_header();
    let counter_cells = super::counters::csv_cells(r.counters.as_ref());
    // With --fail-if, one more column: the violated expressions (`;`).
    let extra = r
        .fail_if
        .as_ref()
        .map(|f| format!(",{}", csv_field(&f.csv_cell())));
    if extra.is_some() {
        out.push_str(",fail_if_violated");
    }
    out.push('\n');
    for d in &r.distributions {
        let s = &d.summary;
        out.push_str(&format!(
            "{},{},{},{},{},{},{},{},{},{},{},{},{:.1},{:.1},{},{:.6},{},{},{},{}\n",
            csv_field(&r.context.transport.name),
            r.context.mode.as_str(),
            r.context.message_size,
            d.kind.name(),
            s.count,
            s.min_ns,
            s.p50_ns,
            s.p90_ns,
            s.p99_ns,
            s.p999_ns,
            s.p9999_ns,
            s.max_ns,
            s.mean_ns,
            s.stdev_ns,
            s.over_10us_count,
            s.over_10us,
            r.run.sent,
            r.run.lost,
            r.run.missed_steps,
            counter_cells,
        ));
        if let Some(e) = &extra {
            out.insert_str(out.len() - 1, e);
        }
    }
    out
}

// ------------------------------------------------------------- markdown

/// The Markdown table's header row.
pub const MARKDOWN_HEADER: &str = "| latency [us] | count | min | p50 | p90 | p99 | p99.9 | p99.99 | max | mean ± stdev | > 10 us |";
/// The Markdown table's alignment row.
pub const MARKDOWN_ALIGN: &str = "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|";

fn markdown(r: &Report) -> String {
    let c = &r.context;
    let mut out = format!(
        "**ibprobe {}**: {} over `{}`, {} B, clock: {}\n\n",
        c.tool_version,
        c.mode.as_str(),
        c.transport.name,
        c.message_size,
        c.clock.describe()
    );
    out.push_str(MARKDOWN_HEADER);
    out.push('\n');
    out.push_str(MARKDOWN_ALIGN);
    out.push('\n');
    for d in &r.distributions {
        out.push_str(&format!("| {} |\n", row_cells(d).join(" | ")));
    }
    if let Some(c) = &r.counters {
        out.push('\n');
        for l in super::counters::table_lines(c) {
            out.push_str(&format!("- {l}\n"));
        }
    }
    if !r.warnings.is_empty() {
        out.push('\n');
        for w in &r.warnings {
            out.push_str(&format!("> **warning** ({}): {}\n", w.code, w.message));
        }
    }
    fail_if_lines(r, &mut out, "- ");
    out
}

// ------------------------------------------------------------- perftest

/// perftest's separator line (`RESULT_LINE` in perftest_parameters.h).
pub const PERFTEST_LINE: &str =
    "---------------------------------------------------------------------------------------";

/// perftest's latency header, byte for byte (`RESULT_FMT_LAT`, with its
/// leading and trailing space).
pub const PERFTEST_HEADER: &str = " #bytes #iterations    t_min[usec]    t_max[usec]  t_typical[usec]    t_avg[usec]    t_stdev[usec]   99% percentile[usec]   99.9% percentile[usec] ";

/// One result line in perftest's `REPORT_FMT_LAT` layout
/// (`" %-7lu %" PRIu64 "          %-7.2f        %-7.2f      %-7.2f  \t       %-7.2f     \t%-7.2f\t\t%-7.2f \t\t%-7.2f"`),
/// with our values: t_max is the TRUE max, t_typical the median.
pub fn perftest_row(bytes: u64, d: &Distribution) -> String {
    let s = &d.summary;
    let u = |ns: u64| ns as f64 / 1000.0;
    format!(
        " {:<7} {}          {:<7.2}        {:<7.2}      {:<7.2}  \t       {:<7.2}     \t{:<7.2}\t\t{:<7.2} \t\t{:<7.2}",
        bytes,
        s.count,
        u(s.min_ns),
        u(s.max_ns),
        u(s.p50_ns),
        s.mean_ns / 1000.0,
        s.stdev_ns / 1000.0,
        u(s.p99_ns),
        u(s.p999_ns),
    )
}

fn perftest(r: &Report) -> String {
    let mut out = format!("{PERFTEST_LINE}\n{PERFTEST_HEADER}\n");
    if let Some(d) = r.headline() {
        out.push_str(&perftest_row(r.context.message_size, d));
        out.push('\n');
    }
    out.push_str(PERFTEST_LINE);
    out.push('\n');
    fail_if_lines(r, &mut out, "");
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::report::DistKind;

    #[test]
    fn format_names_parse_and_unknown_names_say_what_is_accepted() {
        assert_eq!("JSON".parse::<Format>(), Ok(Format::Json));
        assert_eq!("md".parse::<Format>(), Ok(Format::Markdown));
        let e = "xml".parse::<Format>().unwrap_err();
        assert!(e.contains("xml") && e.contains("perftest"), "{e}");
    }

    #[test]
    fn csv_fields_are_quoted_when_needed() {
        assert_eq!(csv_field("shm"), "shm");
        assert_eq!(csv_field("a,b"), "\"a,b\"");
        assert_eq!(csv_field("say \"hi\""), "\"say \"\"hi\"\"\"");
    }

    #[test]
    fn perftest_row_matches_printf_layout() {
        // What perftest's printf gives for these numbers (%-7.2f pads to 7).
        let d = Distribution {
            kind: DistKind::RttHalf,
            summary: crate::stats::Summary {
                count: 1000,
                min_ns: 1050,
                p50_ns: 1090,
                p90_ns: 1100,
                p99_ns: 1240,
                p999_ns: 3270,
                p9999_ns: 3270,
                max_ns: 3270,
                mean_ns: 1100.0,
                stdev_ns: 40.0,
                over_10us: 0.0,
                over_10us_count: 0,
            },
            clamped: 0,
            hdr: String::new(),
        };
        assert_eq!(
            perftest_row(2, &d),
            " 2       1000          1.05           3.27         1.09     \t       1.10        \t0.04   \t\t1.24    \t\t3.27   "
        );
    }
}
