//! What a run's report is, as data: the [`Report`] every output format
//! prints, its parts, its schema name and [`ReportError`]. Its own file so
//! that the formats take it from here, not through `mod.rs`, which
//! computes a report and re-exports the formats' words.

use super::threshold;
use crate::clock::Clock;
use crate::stats::Summary;
use crate::transport::TransportInfo;
use serde::Serialize;

/// The JSON schema identifier; bumped when a field changes meaning or goes
/// away (adding fields keeps it).
pub const SCHEMA: &str = "ibprobe.report/1";

/// Warn when the max exceeds the median by this factor.
pub const OUTLIER_FACTOR: u64 = 100;

/// Below this many samples p99.99 is the max (nearest rank), so say so.
pub const FEW_SAMPLES: u64 = 10_000;

/// Why a report output could not be written.
#[derive(Debug, thiserror::Error)]
pub enum ReportError {
    /// A file could not be created or written.
    #[error("cannot write {path}: {source} (check that the directory exists and is writable)")]
    Io {
        path: String,
        source: std::io::Error,
    },
    /// The HDR interval log rejected a histogram or a tag.
    #[error("HDR log: {0}")]
    HdrLog(String),
    /// The output format cannot show this result.
    #[error("{0}")]
    Format(String),
    /// The plot could not be drawn.
    #[error("plot {path}: {message}")]
    Plot { path: String, message: String },
}

crate::words::vocabulary! {
    no_from_str
    /// How the probe ran: the one-process loopback (one-way latency) or the
    /// client of a ping-pong (round trip); `name` is its word in every format.
    Mode {
        Loopback = "loopback", "One process, both ends, one clock: one-way latency.";
        Client = "client", "Client of a server that echoes: round-trip time.";
    }
}

/// What the report says about the run besides the measurements: filled by
/// the runner/CLI.
#[derive(Clone, Debug)]
pub struct ReportContext {
    /// The tool's version (defaults to this crate's).
    pub tool_version: String,
    pub mode: Mode,
    pub transport: TransportInfo,
    /// The clock every timestamp came from.
    pub clock: Clock,
    pub message_size: u64,
    /// The effective configuration, echoed as key/values (in this order).
    pub config: Vec<(String, String)>,
    /// Warnings the runner already knows (e.g. "not pinned to a CPU").
    pub warnings: Vec<String>,
}

impl ReportContext {
    /// A context with this crate's version, no config echo and no warnings.
    pub fn new(mode: Mode, transport: TransportInfo, clock: Clock, message_size: u64) -> Self {
        ReportContext {
            tool_version: env!("CARGO_PKG_VERSION").to_string(),
            mode,
            transport,
            clock,
            message_size,
            config: Vec::new(),
            warnings: Vec::new(),
        }
    }
}

crate::words::vocabulary! {
    no_from_str
    /// Which distribution a row is about: its machine name (JSON, CSV) and
    /// its label (table, Markdown). One-way is t_recv - t_subm (loopback);
    /// send-completion t_comp - t_subm of signaled sends; RTT/2 perftest's
    /// number. `--stamp-thread` splits the one-way at the HCA's read of the
    /// send buffer. `--hw-timestamps`: the network RTT is (T5 - T2) - (T4 -
    /// T3), the time on the wire and in both HCAs (R-Pingmesh's); one-way,
    /// the send completion to the receive completion on the one HCA; the
    /// prober's part is (T6 - T1) - (T5 - T2) (one-way: the one-way latency
    /// less the HCA's part); the responder's is its T4 - T3.
    DistKind {
        OneWay = "one_way", "one-way";
        SendCompletion = "send_completion", "send-completion";
        Rtt = "rtt", "RTT";
        RttHalf = "rtt_half", "RTT/2";
        SendBeforeRead = "before_hca_read", "before HCA read";
        SendAfterRead = "after_hca_read", "after HCA read";
        HwNetworkRtt = "network_rtt", "network RTT (hw)";
        HwOneWay = "hca_one_way", "HCA one-way (hw)";
        HwProberDelay = "prober_delay", "prober delay (hw)";
        HwResponderDelay = "responder_delay", "responder delay (hw)";
    }
}

impl DistKind {
    /// Human label: one-way, send-completion, RTT, RTT/2 (table, Markdown).
    pub fn label(self) -> &'static str {
        self.help()
    }
}

/// One distribution of the report.
#[derive(Clone, Debug)]
pub struct Distribution {
    pub kind: DistKind,
    /// Its statistics (definitions in [`crate::stats`]).
    pub summary: Summary,
    /// Samples above the histogram's range (clamped to 100 s).
    pub clamped: u64,
    /// The whole histogram, [`hdrlog::encode`](super::hdrlog::encode)d (`hdr` in the JSON).
    pub hdr: String,
}

/// A warning in the report: a stable code for scripts, a sentence for
/// people.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct Warning {
    /// max_outlier, warmup_max, lost, missed_steps, clock_fallback,
    /// clock_resolution, interrupted, few_samples, clamped, no_samples, context; empty in
    /// the reports whose JSON has plain warnings (host, timerlat).
    pub code: &'static str,
    /// What happened and what to do about it.
    pub message: String,
}

#[derive(Clone, Copy, Debug, PartialEq, Serialize)]
pub struct RunCounters {
    /// Messages posted in the measured part.
    pub sent: u64,
    /// Messages that never arrived.
    pub lost: u64,
    /// lost / sent (0 when nothing was sent).
    pub lost_fraction: f64,
    /// Warm-up messages (excluded from the distributions).
    pub warmup_count: u64,
    /// Largest warm-up latency, ns.
    pub warmup_max_ns: u64,
    /// Paced steps planned (`--rate`), 0 when unpaced.
    pub steps: u64,
    pub missed_steps: u64,
    /// missed_steps / steps (0 when unpaced).
    pub missed_fraction: f64,
    /// Wall time of the measured part, ns.
    pub elapsed_ns: u64,
    /// Ctrl-C ended the run early.
    pub interrupted: bool,
}

/// Everything a run's outputs print, computed once.
#[derive(Clone, Debug)]
pub struct Report {
    pub context: ReportContext,
    pub run: RunCounters,
    /// One-way, send-completion, RTT, RTT/2: those the run measured, in
    /// this order.
    pub distributions: Vec<Distribution>,
    /// Context warnings first, then those computed from the data.
    pub warnings: Vec<Warning>,
    /// The runner's placement facts (pinned CPU, mlockall), from
    /// `Outcome::notes`.
    pub notes: Vec<String>,
    /// `--fail-if`, checked (None: none given).
    pub fail_if: Option<threshold::FailIf>,
    /// The measuring thread's counters (None: `--no-counters`).
    pub counters: Option<crate::counters::CounterReport>,
}

/// Microseconds with 3 decimals, the unit every human format uses.
pub fn us(ns: u64) -> String {
    format!("{:.3}", ns as f64 / 1000.0)
}

/// The `clock_resolution` warning of one distribution: `None` unless its
/// min or p50 is within [`crate::clock::RESOLUTION_TICKS`] steps of the
/// clock's resolution; the message names every quantile up to p99 that
/// is, the resolution, and what to do. Without it `compare` printed
/// ratios such as x298 between two values of one or two clock steps.
pub fn clock_resolution_warning(label: &str, s: &Summary, clock: &Clock) -> Option<String> {
    let quantiles = [
        ("min", s.min_ns),
        ("p50", s.p50_ns),
        ("p90", s.p90_ns),
        ("p99", s.p99_ns),
    ];
    let near: Vec<String> = quantiles
        .iter()
        .filter(|(_, ns)| clock.near_resolution(*ns as f64))
        .map(|(q, ns)| format!("{q} {} us", us(*ns)))
        .collect();
    if !quantiles[..2]
        .iter()
        .any(|(_, ns)| clock.near_resolution(*ns as f64))
    {
        return None;
    }
    let res = clock.resolution_ns();
    let what = match clock.kind() {
        crate::clock::ClockKind::Tsc { .. } => "",
        crate::clock::ClockKind::MonotonicRaw => "use --clock tsc where the TSC calibrates, ",
    };
    Some(format!(
        "{label}: {} within {} steps of the clock's {:.3} us resolution (the smallest step between two reads): differences below about {:.3} us are not measured, so ratios of these figures say little; {what}compare the tail (p99 and up) or measure a longer path (a larger --size, --round-trip)",
        near.join(", "),
        crate::clock::RESOLUTION_TICKS,
        res / 1000.0,
        crate::clock::RESOLUTION_TICKS * res / 1000.0
    ))
}

/// How a column lines up: in the text table (left or right, padded to
/// its width) and in Markdown (the alignment row's cell, e.g. `---:`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Align {
    /// Left-aligned in the text table (else right).
    pub left: bool,
    /// Its cell of Markdown's alignment row: `---`, `---:`, `:---`, `:---:`.
    pub markdown: &'static str,
}

impl Align {
    const fn new(left: bool, markdown: &'static str) -> Align {
        Align { left, markdown }
    }
    /// Left in both (Markdown's default `---`).
    pub const LEFT: Align = Align::new(true, "---");
    pub const RIGHT: Align = Align::new(false, "---:");
    /// Left in the text table, marked left (`:---`) in Markdown.
    pub const LEFT_MARKED: Align = Align::new(true, ":---");
    /// Left in the text table, right in Markdown (a number column whose
    /// text cells start at the margin).
    pub const LEFT_RIGHT: Align = Align::new(true, "---:");
    /// Right in the text table, centred in Markdown (yes/no).
    pub const CENTRED: Align = Align::new(false, ":---:");
}

/// One column of a [`Table`].
#[derive(Clone, Debug)]
pub struct Column {
    /// Its title in the text table.
    pub title: String,
    /// Its title in Markdown (the text table may say the unit once, after
    /// its header, instead).
    pub markdown: String,
    /// Width of the text table's cells (0: the column's longest cell or
    /// title).
    pub width: usize,
    pub align: Align,
}

impl Column {
    /// A column titled `title` in the text table, `markdown` in Markdown.
    pub fn titled(title: &str, markdown: &str, width: usize, align: Align) -> Column {
        Column {
            title: title.into(),
            markdown: markdown.into(),
            width,
            align,
        }
    }

    /// A column titled the same in both formats.
    pub fn new(title: &str, width: usize, align: Align) -> Column {
        Column::titled(title, title, width, align)
    }
}

/// A table of a report: the text table pads its cells to the columns'
/// widths, Markdown writes a pipe table.
#[derive(Clone, Debug, Default)]
pub struct Table {
    pub columns: Vec<Column>,
    /// What the text table's header says after the last title (its unit).
    pub unit: &'static str,
    /// What stands between two cells in the text table.
    pub sep: &'static str,
    pub rows: Vec<Vec<String>>,
}

impl Table {
    /// A table without a unit, its cells `sep` apart in the text table.
    pub fn block(columns: Vec<Column>, sep: &'static str, rows: Vec<Vec<String>>) -> Block {
        Block::Table(Table {
            columns,
            unit: "",
            sep,
            rows,
        })
    }
}

/// How a Markdown list is set apart from what precedes it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Spacing {
    /// Right after.
    None,
    /// One blank line before the list.
    Before,
    /// A blank line before every item.
    Each,
}

/// How Markdown sets a report's warnings.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Quote {
    /// One blank line, then a `> **warning** (code): ...` line each.
    Together,
    /// Each a quote of its own (`> warning: ...`).
    Apart,
    /// Each a paragraph of its own (`**Warning:** ...`).
    Paragraphs,
}

/// One part of a report as the text table and Markdown print it, in
/// order. What only one of them shows says so.
#[derive(Clone, Debug)]
pub enum Block {
    /// Lines the text table prints as they are (context, counters,
    /// notes; "" is a blank line); Markdown says its context in the
    /// [`Block::Title`] instead.
    Context(Vec<String>),
    /// Markdown's title paragraph: `bold` in bold, then `rest`.
    Title {
        bold: String,
        rest: String,
    },
    Table(Table),
    /// A Markdown list (the text table has these lines in its context).
    List(Vec<String>, Spacing),
    /// Markdown's title as a heading (`###`).
    Heading(String),
    Warnings {
        /// The warnings (with their codes where the report has them).
        list: Vec<Warning>,
        /// After a blank line in the text table.
        gap: bool,
        style: Quote,
    },
    /// Notes, in both: `note:` lines in the text table, paragraphs in
    /// Markdown.
    Notes(Vec<String>),
    OnlyText(Box<Block>),
    OnlyMarkdown(Box<Block>),
}

/// A report's CSV: one header line and rows of cells (quoted by the
/// renderer where RFC 4180 needs it).
#[derive(Clone, Debug, Default)]
pub struct Csv {
    pub header: String,
    pub rows: Vec<Vec<String>>,
}

/// A command's JSON document: its own serde type, so that its schema
/// (`ibprobe.report/1`, `ibprobe.host/1`, ...) is written down once, as
/// the type, and serialized in its field order.
pub trait JsonDoc {
    fn pretty(&self) -> String;
}

impl<T: Serialize> JsonDoc for T {
    fn pretty(&self) -> String {
        serde_json::to_string_pretty(self).expect("a report serializes: its keys are strings")
    }
}

/// The `--fail-if` lines of the human formats after a blank line, each
/// after `prefix` (nothing without `--fail-if`).
pub fn fail_if_text(doc: &dyn Document, prefix: &str) -> String {
    let Some(f) = doc.fail_if() else {
        return String::new();
    };
    let mut out = String::from("\n");
    for l in f.lines() {
        out.push_str(prefix);
        out.push_str(&l);
        out.push('\n');
    }
    out
}

/// What a command's report gives the renderers (`report/format/`): the
/// human formats' blocks, its CSV, its JSON document, its perftest row.
/// A format the report has no data for is refused by name.
pub trait Document {
    /// What a refused format has no room for ("stream row").
    fn noun(&self) -> &'static str;
    /// The blocks of the text table and Markdown.
    fn blocks(&self) -> Vec<Block>;
    /// `--fail-if`, checked: every human format ends with its lines.
    fn fail_if(&self) -> Option<&threshold::FailIf> {
        None
    }
    /// The CSV (None: no CSV).
    fn csv(&self) -> Option<Csv> {
        None
    }
    /// The JSON document (None: no JSON).
    fn json(&self) -> Option<Box<dyn JsonDoc + '_>> {
        None
    }
    /// perftest's result row: message size and the distribution shown
    /// (None: no perftest output).
    fn perftest(&self) -> Option<(u64, Option<&Distribution>)> {
        None
    }
}
