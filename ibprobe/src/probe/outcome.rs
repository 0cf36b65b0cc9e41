//! What a probe run measured, before any formatting.
//!
//! Why it exists: the runner (probe/) and the report (report/) meet here,
//! and ibexporter consumes the same data without going through text.

use crate::clock::hwts::{HwSplit, ProberLog};
use crate::counters::CounterReport;
use crate::stats::LatencyHistogram;

/// The raw result of one probe run.
#[derive(Clone, Debug, Default)]
pub struct Outcome {
    /// One-way latency t_recv - t_subm (loopback mode), ns.
    pub one_way: Option<LatencyHistogram>,
    /// Send-completion latency t_comp - t_subm (signaled sends only), ns.
    pub send_done: Option<LatencyHistogram>,
    /// Round trip time (client mode), ns. RTT/2 is derived by the report.
    pub rtt: Option<LatencyHistogram>,
    /// `--stamp-thread`: one-way latency split at the HCA's read of the
    /// send buffer: (post to read, read to arrival), ns.
    pub t_send_split: Option<(LatencyHistogram, LatencyHistogram)>,
    /// `--hw-timestamps`: the prober's HCA stamps of the measured part.
    pub hw: Option<ProberLog>,
    /// `--hw-timestamps`: the R-Pingmesh split, once computed (loopback:
    /// by the runner; client: after the responder's report).
    pub hw_split: Option<HwSplit>,
    /// Warm-up messages sent (excluded from the distributions).
    pub warmup_count: u64,
    /// Largest latency seen during warm-up, ns (the thesis's maxima were warm-up).
    pub warmup_max_ns: u64,
    /// Messages posted in the measured part.
    pub sent: u64,
    /// Messages that never arrived (UC/UD/UDP), counted at the end of the run.
    pub lost: u64,
    /// Paced steps (`--rate`) planned in the measured part.
    pub steps: u64,
    /// Paced steps missed because the previous message was still in flight.
    pub missed_steps: u64,
    /// Wall time of the measured part, ns.
    pub elapsed_ns: u64,
    /// True when Ctrl-C ended the run early (the statistics cover what ran).
    pub interrupted: bool,
    /// Placement facts and warnings (pinned CPU, mlockall), for the report.
    pub notes: Vec<String>,
    /// The measuring thread's counters over the measured part (None:
    /// counters off, `--no-counters`).
    pub counters: Option<CounterReport>,
}
