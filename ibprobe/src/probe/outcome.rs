//! What a probe run measured, before any formatting: [`Outcome`] (a
//! one-message run) and [`StreamOutcome`] (a stream), where the executor,
//! the report and ibexporter meet.

use crate::clock::hwts::{HwSplit, ProberLog};
use crate::clock::Clock;
use crate::probe::workload::stream::{RecvTally, SendHistos, SendTally, StampSplit};
use crate::transport::TransportError;
use ibnoise::counters::CounterReport;
use ibstats::latency::LatencyHistogram;

/// The raw result of one probe run; latencies in ns.
#[derive(Clone, Debug, Default)]
pub struct Outcome {
    /// t_recv - t_subm (loopback).
    pub one_way: Option<LatencyHistogram>,
    /// t_comp - t_subm (signaled sends only).
    pub send_done: Option<LatencyHistogram>,
    /// Round trip (client).
    pub rtt: Option<LatencyHistogram>,
    /// `--stamp-thread`: one-way latency split at the HCA's read of the
    /// send buffer: (post to read, read to arrival).
    pub t_send_split: Option<(LatencyHistogram, LatencyHistogram)>,
    /// `--hw-timestamps`: the prober's HCA stamps of the measured part,
    /// and the R-Pingmesh split once computed.
    pub hw: Option<ProberLog>,
    pub hw_split: Option<HwSplit>,
    pub warmup_count: u64,
    /// Largest latency during warm-up (the thesis's maxima were warm-up).
    pub warmup_max_ns: u64,
    /// Messages posted in the measured part.
    pub sent: u64,
    pub lost: u64,
    /// Paced steps (`--rate`) planned in the measured part, and missed
    /// (the previous message still in flight).
    pub steps: u64,
    pub missed_steps: u64,
    /// Wall time of the measured part.
    pub elapsed_ns: u64,
    /// Ctrl-C ended the run early (the statistics cover what ran).
    pub interrupted: bool,
    /// Placement facts and warnings, for the report.
    pub notes: Vec<String>,
    /// The measuring thread's counters over the measured part.
    pub counters: Option<CounterReport>,
}

/// What a stream run measured, before any formatting; times in ns.
#[derive(Clone, Debug, Default)]
pub struct StreamOutcome {
    /// Per message: delivery at the receiver minus hand-over at the sender.
    pub latency: LatencyHistogram,
    pub send_histos: SendHistos,
    pub send: SendTally,
    /// The receiver's counters (across hosts: what the server reported).
    pub recv: RecvTally,
    /// First measured hand-over to last measured delivery, and the
    /// sender's credit stalls and ack waits.
    pub elapsed_ns: u64,
    pub credit_stall_ns: u64,
    pub ack_wait_ns: u64,
    pub notes: Vec<String>,
    pub rx_cpu: Option<usize>,
    /// The sending thread's counters over its run (warm-up included).
    pub counters: Option<CounterReport>,
    pub stamp: Option<StampRun>,
}

/// A stream's `--stamp-thread`: what the receiver split, and the stamping
/// thread's pace (a stamp is at most one pass older than the HCA's read).
#[derive(Clone, Debug, Default)]
pub struct StampRun {
    pub split: StampSplit,
    /// Mean time of one pass, ns.
    pub pass_ns: f64,
    /// Stamp words per pass (the send buffers).
    pub words: usize,
    /// None: unpinned, no CPU was free.
    pub cpu: Option<usize>,
}

impl StreamOutcome {
    /// The times of a finished run, from the first measured hand-over to
    /// `last` (a delivery, or the sender's end).
    pub fn finish(&mut self, clock: &Clock, last: u64) {
        self.elapsed_ns = clock.ticks_to_ns(last.wrapping_sub(self.send.first_handover));
        self.credit_stall_ns = clock.ticks_to_ns(self.send.credit_stall_ticks);
        self.ack_wait_ns = clock.ticks_to_ns(self.send.ack_wait_ticks);
    }

    pub fn lost(&self) -> u64 {
        self.send.msgs.saturating_sub(self.recv.msgs)
    }

    /// Delivered.
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

    /// Every operation per message (data, credits, acks, counter writes).
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

/// A stream run that failed, with what was measured before it.
#[derive(Debug, thiserror::Error)]
#[error("{error}")]
pub struct StreamError {
    pub error: TransportError,
    pub outcome: Box<StreamOutcome>,
}
