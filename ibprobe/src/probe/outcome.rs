//! What a probe run measured, before any formatting: [`Outcome`] (a
//! one-message run) and [`StreamOutcome`] (a stream).
//!
//! Why it exists: the executor (`probe/executor/`) and the report
//! (report/) meet here, and ibexporter consumes the same data without
//! going through text.

use crate::clock::hwts::{HwSplit, ProberLog};
use crate::clock::Clock;
use crate::counters::CounterReport;
use crate::probe::workload::stream::{RecvTally, SendHistos, SendTally, StampSplit};
use crate::stats::LatencyHistogram;
use crate::transport::TransportError;

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
    /// The measuring thread's counters over the measured part (None: off).
    pub counters: Option<CounterReport>,
}

/// What a stream run measured, before any formatting.
#[derive(Clone, Debug, Default)]
pub struct StreamOutcome {
    /// Per message: delivery at the receiver minus hand-over at the sender, ns.
    pub latency: LatencyHistogram,
    pub send_histos: SendHistos,
    pub send: SendTally,
    /// The receiver's counters (in client/server: what the server reported).
    pub recv: RecvTally,
    /// First measured hand-over to last measured delivery, and the time
    /// the sender spent in credit stalls and waiting for acks, ns.
    pub elapsed_ns: u64,
    pub credit_stall_ns: u64,
    pub ack_wait_ns: u64,
    pub notes: Vec<String>,
    /// CPU of the receiving loop, when pinned.
    pub rx_cpu: Option<usize>,
    /// The sending thread's counters over its run (warm-up included: the
    /// sender's loop runs both), None with `--no-counters`.
    pub counters: Option<CounterReport>,
    /// `--stamp-thread`: the latency split at the HCA's read, and how the
    /// stamping thread ran.
    pub stamp: Option<StampRun>,
}

/// A stream's `--stamp-thread`: what the receiver split, and the stamping
/// thread's pace (a stamp is at most one pass older than the HCA's read).
#[derive(Clone, Debug, Default)]
pub struct StampRun {
    pub split: StampSplit,
    /// Mean time of one pass (a clock read and a store into every send
    /// buffer's stamp word), ns.
    pub pass_ns: f64,
    /// Stamp words per pass (the send buffers).
    pub words: usize,
    /// The stamping thread's CPU (None: unpinned, no CPU was free).
    pub cpu: Option<usize>,
}

impl StreamOutcome {
    /// The times of a finished run: elapsed from the first measured
    /// hand-over to `last` (a delivery, or the sender's end), and the
    /// sender's stalls, in ns.
    pub fn finish(&mut self, clock: &Clock, last: u64) {
        self.elapsed_ns = clock.ticks_to_ns(last.wrapping_sub(self.send.first_handover));
        self.credit_stall_ns = clock.ticks_to_ns(self.send.credit_stall_ticks);
        self.ack_wait_ns = clock.ticks_to_ns(self.send.ack_wait_ticks);
    }

    pub fn lost(&self) -> u64 {
        self.send.msgs.saturating_sub(self.recv.msgs)
    }

    /// Delivered messages per second.
    pub fn msgs_per_sec(&self) -> f64 {
        if self.elapsed_ns == 0 {
            return 0.0;
        }
        self.recv.msgs as f64 * 1e9 / self.elapsed_ns as f64
    }

    /// Data posts per message (1/K with batches of K).
    pub fn ops_per_msg(&self) -> f64 {
        ratio(self.send.data_posts, self.send.msgs)
    }

    /// Every operation per message: data posts, credit and ack messages,
    /// credit counter writes.
    pub fn ops_per_msg_total(&self) -> f64 {
        ratio(
            self.send.data_posts
                + self.recv.credit_msgs
                + self.recv.ack_msgs
                + self.recv.counter_writes,
            self.send.msgs,
        )
    }
}

fn ratio(a: u64, b: u64) -> f64 {
    if b == 0 {
        0.0
    } else {
        a as f64 / b as f64
    }
}

/// A stream run that failed: the error and what was measured before it.
#[derive(Debug, thiserror::Error)]
#[error("{error}")]
pub struct StreamError {
    pub error: TransportError,
    /// The statistics up to the failure.
    pub outcome: Box<StreamOutcome>,
}
