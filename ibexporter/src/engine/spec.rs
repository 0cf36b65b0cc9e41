//! What the probe thread is told: the kinds of probe ([`ProbeKind`]), a
//! probe with its series ([`ProbeSpec`]), the remote probes and the
//! cluster plan of this node ([`Remote`], [`NodePlan`]) and the engine's
//! settings ([`EngineConfig`]). Its own file so that `local.rs`,
//! `remote.rs` and `round.rs` take these from here, not through `mod.rs`,
//! which runs them.

use std::sync::Arc;
use std::time::Duration;

use ibprobe::spec::ChannelSpec;

use crate::collect::latency::SeriesKey;

/// What one probe measures.
#[derive(Clone, Debug, PartialEq)]
pub enum ProbeKind {
    /// One process owns both ends: verbs loopback on one port of a local
    /// HCA (two QPs, one clock), or the shm / udp reference. The spec's
    /// polling is set per round from [`EngineConfig::event_poll`].
    Loopback(ChannelSpec),
    /// SCHED_FIFO wake-up latency of one CPU.
    Wakeup {
        /// The CPU.
        cpu: usize,
    },
    /// Round trip to a peer's responder (another ibexporter, or
    /// `ibprobe server`) over the channel `spec` describes.
    Remote {
        /// The responder's address.
        addr: std::net::SocketAddr,
        /// Transport, size and op asked of the responder.
        spec: ChannelSpec,
    },
}

/// The remote probes, replaced as targets come and go (the targets thread
/// writes, the engine reads a copy at the start of every round set).
pub type RemoteProbes = Arc<std::sync::Mutex<Remote>>;

/// Every remote probe (each declares its series) and the plan that picks
/// which of them run in each round.
#[derive(Clone, Debug, Default)]
pub struct Remote {
    /// One per target and size.
    pub probes: Vec<ProbeSpec>,
    /// This exporter's share of the cluster plan; `None`: every probe, every round.
    pub plan: Option<Arc<NodePlan>>,
}

/// This exporter's row of a cluster plan.
#[derive(Clone, Debug)]
pub struct NodePlan {
    /// The whole plan (every member computes the same).
    pub cluster: crate::targets::plan::ClusterPlan,
    /// This exporter's member.
    pub me: crate::targets::plan::MemberId,
    /// Per member, its probes' indices in [`Remote::probes`].
    pub rows: Vec<Vec<usize>>,
    /// One epoch of the plan (the configured probe interval).
    pub epoch: Duration,
}

impl NodePlan {
    /// The indices of the probes to run in `epoch`, in round order.
    pub fn select(&self, epoch: u64) -> Vec<usize> {
        let mut members = Vec::new();
        self.cluster.targets_of(self.me, epoch, &mut members);
        members
            .iter()
            .flat_map(|&m| self.rows[m as usize].iter().copied())
            .collect()
    }
}

/// One probe and the series it feeds.
#[derive(Clone, Debug)]
pub struct ProbeSpec {
    /// The labels of its series.
    pub key: SeriesKey,
    /// What it runs.
    pub kind: ProbeKind,
}

/// How the engine probes.
#[derive(Clone, Debug)]
pub struct EngineConfig {
    /// One round of every probe per interval (before throttling).
    pub interval: Duration,
    /// Messages per round.
    pub probes_per_round: u64,
    /// Pacing inside a round, messages per second.
    pub rate_hz: f64,
    /// A message with no answer after this long is a timeout.
    pub timeout: Duration,
    /// Sleep for completions (event) instead of spinning (busy).
    pub event_poll: bool,
    /// The overhead budget: probing CPU as a share of one core.
    pub max_core_fraction: f64,
    /// The longest interval the throttle may stretch to.
    pub max_interval: Duration,
    /// The mesh secret remote peers are probed with (None: none).
    pub secret: Option<ibprobe::probe::session::auth::Secret>,
    /// Remote verbs probes ask both HCAs for completion timestamps and
    /// count the R-Pingmesh split (`[probe] hw_timestamps`).
    pub hw_timestamps: bool,
    /// Rounds count with perf events even without a PMU (`[probe]
    /// perf_counters`).
    pub perf_counters: bool,
}

impl Default for EngineConfig {
    fn default() -> Self {
        EngineConfig {
            interval: Duration::from_secs(10),
            probes_per_round: 100,
            rate_hz: 1000.0,
            timeout: Duration::from_secs(1),
            event_poll: true,
            max_core_fraction: 0.01,
            max_interval: Duration::from_secs(300),
            secret: None,
            hw_timestamps: false,
            perf_counters: false,
        }
    }
}
