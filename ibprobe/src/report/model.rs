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
        /// The file.
        path: String,
        /// The error.
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
    Plot {
        /// The SVG file.
        path: String,
        /// What plotters said.
        message: String,
    },
}

/// How the probe ran: the one-process loopback (one-way latency) or the
/// client of a ping-pong (round trip).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Mode {
    /// One process, both ends, one clock: one-way latency.
    Loopback,
    /// Client of a server that echoes: round-trip time.
    Client,
}

impl Mode {
    /// "loopback" / "client".
    pub fn as_str(&self) -> &'static str {
        match self {
            Mode::Loopback => "loopback",
            Mode::Client => "client",
        }
    }
}

/// What the report says about the run besides the measurements: filled by
/// the runner/CLI.
#[derive(Clone, Debug)]
pub struct ReportContext {
    /// The tool's version (defaults to this crate's).
    pub tool_version: String,
    /// Loopback or client.
    pub mode: Mode,
    /// The transport's facts.
    pub transport: TransportInfo,
    /// The clock every timestamp came from.
    pub clock: Clock,
    /// Payload size, bytes.
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

/// Which distribution a row is about.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum DistKind {
    /// t_recv - t_subm (loopback).
    OneWay,
    /// t_comp - t_subm, signaled sends.
    SendCompletion,
    /// Round trip (client).
    Rtt,
    /// Round trip / 2, perftest's number.
    RttHalf,
    /// `--stamp-thread`: post to the HCA's read of the send buffer.
    SendBeforeRead,
    /// `--stamp-thread`: the HCA's read of the send buffer to the arrival.
    SendAfterRead,
    /// `--hw-timestamps`, round trip: (T5 - T2) - (T4 - T3), the time on
    /// the wire and in both HCAs (R-Pingmesh's network RTT).
    HwNetworkRtt,
    /// `--hw-timestamps`, one-way loopback: the send completion to the
    /// receive completion on the one HCA.
    HwOneWay,
    /// `--hw-timestamps`: the prober host's part, (T6 - T1) - (T5 - T2)
    /// (one-way: the one-way latency less the HCA's part).
    HwProberDelay,
    /// `--hw-timestamps`, round trip: the responder's T4 - T3.
    HwResponderDelay,
}

impl DistKind {
    /// Machine name: one_way, send_completion, rtt, rtt_half,
    /// before_hca_read, after_hca_read, network_rtt, hca_one_way,
    /// prober_delay, responder_delay (JSON, CSV).
    pub fn name(&self) -> &'static str {
        match self {
            DistKind::OneWay => "one_way",
            DistKind::SendCompletion => "send_completion",
            DistKind::Rtt => "rtt",
            DistKind::RttHalf => "rtt_half",
            DistKind::SendBeforeRead => "before_hca_read",
            DistKind::SendAfterRead => "after_hca_read",
            DistKind::HwNetworkRtt => "network_rtt",
            DistKind::HwOneWay => "hca_one_way",
            DistKind::HwProberDelay => "prober_delay",
            DistKind::HwResponderDelay => "responder_delay",
        }
    }

    /// Human label: one-way, send-completion, RTT, RTT/2 (table, Markdown).
    pub fn label(&self) -> &'static str {
        match self {
            DistKind::OneWay => "one-way",
            DistKind::SendCompletion => "send-completion",
            DistKind::Rtt => "RTT",
            DistKind::RttHalf => "RTT/2",
            DistKind::SendBeforeRead => "before HCA read",
            DistKind::SendAfterRead => "after HCA read",
            DistKind::HwNetworkRtt => "network RTT (hw)",
            DistKind::HwOneWay => "HCA one-way (hw)",
            DistKind::HwProberDelay => "prober delay (hw)",
            DistKind::HwResponderDelay => "responder delay (hw)",
        }
    }
}

/// One distribution of the report.
#[derive(Clone, Debug)]
pub struct Distribution {
    /// Which one.
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
    /// interrupted, few_samples, clamped, no_samples, context.
    pub code: &'static str,
    /// What happened and what to do about it.
    pub message: String,
}

/// Counters of the run.
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
    /// Paced steps missed.
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
    /// Context given by the runner.
    pub context: ReportContext,
    /// Counters of the run.
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
