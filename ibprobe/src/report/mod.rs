//! The report of a probe run and its formats.
//!
//! Why it exists: the runner fills a [`crate::probe::outcome::Outcome`]
//! (histograms and counters); this module turns it, plus the run's
//! context, into one [`Report`] that every output is printed from, so the
//! table, JSON, CSV, Markdown and perftest-style outputs can never
//! disagree. It also adds the warnings a reader needs (outliers, losses,
//! missed steps, clock fallback), writes HDR interval logs
//! ([`hdrlog::HdrLogWriter`]) and SVG plots ([`plot::write_svg`]).
//!
//! The JSON schema (`"schema": "ibprobe.report/1"`) and every field of
//! every format are documented in `report/README.md`, next to this file.
//!
//! Usage from the runner/CLI:
//!
//! ```no_run
//! # use ibprobe::{clock::Clock, probe::outcome::Outcome, transport::TransportInfo};
//! # use ibprobe::report::{Report, ReportContext, Mode, Format};
//! # let outcome = Outcome::default();
//! let ctx = ReportContext::new(Mode::Loopback, TransportInfo::default(), Clock::calibrate(), 32);
//! let report = Report::new(&outcome, ctx);
//! print!("{}", report.render(Format::Table));
//! ```

pub mod compare;
pub mod counters;
pub mod effects_plot;
pub mod format;
pub mod hdrlog;
pub mod heatmap;
pub mod host;
pub mod loggp;
pub mod plot;
pub mod progress;
pub mod stream;
pub mod stream_sweep;
pub mod sweep;
pub mod threshold;
pub mod timerlat;

use crate::clock::{Clock, ClockKind};
use crate::probe::outcome::Outcome;
use crate::stats::{LatencyHistogram, Summary};
use crate::transport::TransportInfo;
use serde::Serialize;

pub use format::Format;

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
    /// The whole histogram, [`hdrlog::encode`]d (`hdr` in the JSON).
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

impl threshold::Measured for Report {
    /// Latencies from the first distribution (one-way in loopback, the
    /// round trip with --round-trip and in client); `lost` from the run.
    fn value(&self, m: threshold::Metric) -> Option<f64> {
        match m {
            threshold::Metric::Lost => Some(self.run.lost as f64),
            _ => threshold::from_summary(&self.distributions.first()?.summary, m),
        }
    }
}

fn fraction(part: u64, whole: u64) -> f64 {
    if whole == 0 {
        0.0
    } else {
        part as f64 / whole as f64
    }
}

/// Microseconds with 3 decimals, the unit every human format uses.
pub fn us(ns: u64) -> String {
    format!("{:.3}", ns as f64 / 1000.0)
}

/// The messages the hardware-timestamp split left out, as context
/// warnings (each starts with "hw timestamps:"): one per reason.
fn hw_left_out(sp: &crate::probe::hwts::Split) -> Vec<String> {
    let mut w = Vec::new();
    if sp.missing_prober > 0 {
        w.push(format!("hw timestamps: {} answered messages had no send or receive completion timestamp on this end and are not in the split", sp.missing_prober));
    }
    if sp.missing_responder > 0 {
        w.push(format!("hw timestamps: the responder reported no timestamps for {} messages; they are not in the split", sp.missing_responder));
    }
    if sp.invalid > 0 {
        w.push(format!("hw timestamps: {} messages had a negative part (stamps out of order or a clock step) and are counted invalid, not split", sp.invalid));
    }
    w
}

impl Report {
    /// Builds the report of `outcome` (RTT/2 is derived from RTT here).
    pub fn new(outcome: &Outcome, context: ReportContext) -> Report {
        let mut distributions = Vec::new();
        let mut push = |kind, h: &LatencyHistogram| {
            distributions.push(Distribution {
                kind,
                summary: h.summary(),
                clamped: h.clamped(),
                hdr: hdrlog::encode(h),
            })
        };
        if let Some(h) = &outcome.one_way {
            push(DistKind::OneWay, h);
        }
        if let Some(h) = &outcome.send_done {
            push(DistKind::SendCompletion, h);
        }
        if let Some(h) = &outcome.rtt {
            push(DistKind::Rtt, h);
            push(DistKind::RttHalf, &h.halved());
        }
        if let Some((before, after)) = &outcome.t_send_split {
            push(DistKind::SendBeforeRead, before);
            push(DistKind::SendAfterRead, after);
        }
        if let Some(hw) = &outcome.hw_split {
            let sp = &hw.split;
            if hw.one_way {
                push(DistKind::HwOneWay, &sp.network_rtt);
                push(DistKind::HwProberDelay, &sp.prober_delay);
            } else {
                push(DistKind::HwNetworkRtt, &sp.network_rtt);
                push(DistKind::HwProberDelay, &sp.prober_delay);
                push(DistKind::HwResponderDelay, &sp.responder_delay);
            }
        }
        let run = RunCounters {
            sent: outcome.sent,
            lost: outcome.lost,
            lost_fraction: fraction(outcome.lost, outcome.sent),
            warmup_count: outcome.warmup_count,
            warmup_max_ns: outcome.warmup_max_ns,
            steps: outcome.steps,
            missed_steps: outcome.missed_steps,
            missed_fraction: fraction(outcome.missed_steps, outcome.steps),
            elapsed_ns: outcome.elapsed_ns,
            interrupted: outcome.interrupted,
        };
        let mut report = Report {
            context,
            run,
            distributions,
            warnings: Vec::new(),
            notes: outcome
                .notes
                .iter()
                .chain(outcome.hw_split.iter().flat_map(|h| &h.notes))
                .cloned()
                .collect(),
            fail_if: None,
            counters: outcome.counters.clone(),
        };
        if let Some(hw) = &outcome.hw_split {
            report.context.warnings.extend(hw_left_out(&hw.split));
        }
        report.warnings = report.compute_warnings();
        report
    }

    /// The distribution a one-line (perftest) output shows: RTT/2 in client
    /// mode (perftest's own number), else one-way, else send-completion.
    pub fn headline(&self) -> Option<&Distribution> {
        [
            DistKind::RttHalf,
            DistKind::OneWay,
            DistKind::SendCompletion,
        ]
        .iter()
        .find_map(|k| self.distributions.iter().find(|d| d.kind == *k))
    }

    /// Renders one output format (every format ends with a newline).
    pub fn render(&self, format: Format) -> String {
        format::render(self, format)
    }

    fn compute_warnings(&self) -> Vec<Warning> {
        let mut w: Vec<Warning> = self
            .context
            .warnings
            .iter()
            .map(|m| Warning {
                code: "context",
                message: m.clone(),
            })
            .collect();
        if let Some(f) = self.context.clock.fallback() {
            w.push(Warning {
                code: "clock_fallback",
                message: f.explain().to_string(),
            });
        }
        if self.run.interrupted {
            w.push(Warning {
                code: "interrupted",
                message: format!(
                    "interrupted (Ctrl-C) after {} s: the statistics cover the {} messages sent so far",
                    format_args!("{:.3}", self.run.elapsed_ns as f64 / 1e9),
                    self.run.sent
                ),
            });
        }
        if self.run.lost > 0 {
            w.push(Warning {
                code: "lost",
                message: format!(
                    "{} of {} messages lost ({:.3}%): they are not in the distributions; on UC/UD/UDP check receive-queue depth and drops (`ethtool -S`, port counters)",
                    self.run.lost,
                    self.run.sent,
                    self.run.lost_fraction * 100.0
                ),
            });
        }
        if self.run.missed_steps > 0 {
            w.push(Warning {
                code: "missed_steps",
                message: format!(
                    "{} of {} paced steps missed ({:.3}%): the previous message was still in flight; lower --rate or look at the tail",
                    self.run.missed_steps,
                    self.run.steps,
                    self.run.missed_fraction * 100.0
                ),
            });
        }
        let measured_max = self
            .distributions
            .iter()
            .filter(|d| d.kind != DistKind::RttHalf && d.summary.count > 0)
            .map(|d| d.summary.max_ns)
            .max();
        if let Some(max) = measured_max {
            if self.run.warmup_max_ns > max {
                w.push(Warning {
                    code: "warmup_max",
                    message: format!(
                        "warm-up max {} us exceeds the measured max {} us: first-touch effects (page faults, cold caches, connection setup) were real and the warm-up kept them out of the statistics; keep --warmup at least this long",
                        us(self.run.warmup_max_ns),
                        us(max)
                    ),
                });
            }
        }
        for d in &self.distributions {
            let s = &d.summary;
            if d.kind == DistKind::RttHalf {
                continue; // RTT already warned.
            }
            if s.count == 0 {
                w.push(Warning {
                    code: "no_samples",
                    message: format!("{}: no samples", d.kind.label()),
                });
                continue;
            }
            if s.p50_ns > 0 && s.max_ns > s.p50_ns.saturating_mul(OUTLIER_FACTOR) {
                w.push(Warning {
                    code: "max_outlier",
                    message: format!(
                        "{}: max {} us is {:.0}x the median {} us: a statistical outlier ({}); pin the loop to an isolated core and pre-fault memory, and read p99.9/p99.99 for the typical tail",
                        d.kind.label(),
                        us(s.max_ns),
                        s.max_ns as f64 / s.p50_ns as f64,
                        us(s.p50_ns),
                        self.counters.as_ref().map_or_else(
                            || "interrupt, preemption, page fault, SMI? counters were off".to_string(),
                            counters::likely_cause
                        )
                    ),
                });
            }
            if s.count < FEW_SAMPLES {
                w.push(Warning {
                    code: "few_samples",
                    message: format!(
                        "{}: only {} samples, so p99.99 is the max (and p99.9 too below 1000): run longer (-n or -D) for a tail",
                        d.kind.label(),
                        s.count
                    ),
                });
            }
            if d.clamped > 0 {
                w.push(Warning {
                    code: "clamped",
                    message: format!(
                        "{}: {} samples above 100 s were recorded as 100 s (max is still exact)",
                        d.kind.label(),
                        d.clamped
                    ),
                });
            }
        }
        w
    }

    /// The clock's kind as the JSON `clock.kind` string.
    pub fn clock_kind_name(&self) -> &'static str {
        match self.context.clock.kind() {
            ClockKind::Tsc { .. } => "tsc",
            ClockKind::MonotonicRaw => "monotonic_raw",
        }
    }
}
