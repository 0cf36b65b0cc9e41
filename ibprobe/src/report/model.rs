//! What a run's report is, as data: the [`Report`] every output format
//! prints, its parts, its schema name and [`ReportError`]. Its own file so
//! that the formats take it from here, not through `mod.rs`, which
//! computes a report and re-exports the formats' words.

use super::threshold;
use crate::clock::Clock;
use crate::transport::TransportInfo;
use ibstats::latency::Summary;
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
    #[error("cannot write {path}: {source} (check that the directory exists and is writable)")]
    Io {
        path: String,
        source: std::io::Error,
    },
    #[error("HDR log: {0}")]
    HdrLog(String),
    #[error("{0}")]
    Format(String),
    #[error("plot {path}: {message}")]
    Plot { path: String, message: String },
}

ibhost::vocabulary! {
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

ibhost::vocabulary! {
    no_from_str
    /// Which distribution a row is about: its machine name (JSON, CSV) and
    /// its label (table, Markdown); their definitions are in
    /// `report/README.md`.
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

#[derive(Clone, Debug)]
pub struct Distribution {
    pub kind: DistKind,
    /// Definitions in [`ibstats::latency`].
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
    /// Messages posted in the measured part, and those that never arrived.
    pub sent: u64,
    pub lost: u64,
    /// lost / sent (0 when nothing was sent).
    pub lost_fraction: f64,
    /// Warm-up messages (excluded from the distributions).
    pub warmup_count: u64,
    /// Largest warm-up latency, ns.
    pub warmup_max_ns: u64,
    /// Paced steps planned (`--rate`), 0 when unpaced, and missed.
    pub steps: u64,
    pub missed_steps: u64,
    /// missed_steps / steps (0 when unpaced).
    pub missed_fraction: f64,
    /// Wall time of the measured part, ns.
    pub elapsed_ns: u64,
    pub interrupted: bool,
}

/// Everything a run's outputs print, computed once.
#[derive(Clone, Debug)]
pub struct Report {
    pub context: ReportContext,
    pub run: RunCounters,
    /// Those the run measured, in [`DistKind`]'s order.
    pub distributions: Vec<Distribution>,
    /// Context warnings first, then those computed from the data.
    pub warnings: Vec<Warning>,
    /// The runner's placement facts (pinned CPU, mlockall), from
    /// `Outcome::notes`.
    pub notes: Vec<String>,
    /// `--fail-if`, checked (None: none given).
    pub fail_if: Option<threshold::FailIf>,
    /// The measuring thread's counters (None: `--no-counters`).
    pub counters: Option<ibnoise::counters::CounterReport>,
}

/// Microseconds with 3 decimals, the unit every human format uses.
pub fn us(ns: u64) -> String {
    format!("{:.3}", ns as f64 / 1000.0)
}

/// The `clock_resolution` warning of one distribution: `None` unless its
/// min or p50 is within [`crate::clock::RESOLUTION_TICKS`] steps of the
/// clock's resolution, where ratios of two values (`compare`) would
/// compare clock steps; the message names every quantile up to p99 that
/// is, the resolution, and what to do.
pub fn clock_resolution_warning(label: &str, s: &Summary, clock: &Clock) -> Option<String> {
    let near = |ns: u64| clock.near_resolution(ns as f64);
    if !near(s.min_ns) && !near(s.p50_ns) {
        return None;
    }
    let near: Vec<String> = [
        ("min", s.min_ns),
        ("p50", s.p50_ns),
        ("p90", s.p90_ns),
        ("p99", s.p99_ns),
    ]
    .into_iter()
    .filter(|&(_, ns)| near(ns))
    .map(|(q, ns)| format!("{q} {} us", us(ns)))
    .collect();
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

#[derive(Clone, Debug)]
pub struct Column {
    /// Its title in the text table, and in Markdown (the text table may
    /// say the unit once, after its header, instead).
    pub title: String,
    pub markdown: String,
    /// Width of the text table's cells (0: the column's longest cell or
    /// title).
    pub width: usize,
    pub align: Align,
}

impl Column {
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

impl Block {
    /// Warnings without codes (the reports whose JSON has plain ones).
    pub fn plain_warnings<S: Into<String>>(
        list: impl IntoIterator<Item = S>,
        gap: bool,
        style: Quote,
    ) -> Block {
        let list = list.into_iter().map(Into::into);
        let list = list.map(|message| Warning { code: "", message }).collect();
        Block::Warnings { list, gap, style }
    }
}

/// How a Markdown list is set apart from what precedes it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Spacing {
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
    doc.fail_if().map_or(String::new(), |f| {
        let lines = f
            .lines()
            .iter()
            .map(|l| format!("{prefix}{l}\n"))
            .collect::<String>();
        format!("\n{lines}")
    })
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
    /// The CSV and the JSON document (None: this report has none).
    fn csv(&self) -> Option<Csv> {
        None
    }
    fn json(&self) -> Option<Box<dyn JsonDoc + '_>> {
        None
    }
    /// perftest's result row: message size and the distribution shown
    /// (None: no perftest output).
    fn perftest(&self) -> Option<(u64, Option<&Distribution>)> {
        None
    }
}
