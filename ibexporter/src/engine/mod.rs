//! The probe engine: one thread that runs a round of every probe each
//! interval, hands the results to the latency store, and keeps its own
//! cost under the overhead budget.
//!
//! Why it exists: continuous probing must never disturb what it measures
//! (Pingmesh capped its own CPU and network use) and must never stall:
//! a dead peer costs one timeout per message, counted, and the next probe
//! runs. Scrapes never wait for the engine: they read the store.
//!
//! Map:
//! - [`ProbeSpec`]: one thing to probe (an HCA port in loopback, the shm
//!   or udp reference, host wake-up, a remote responder) and its series;
//! - `local.rs`: discovery of the built-in local probes;
//! - `round.rs`: one round of one probe through the ibprobe library;
//! - [`Budget`]: the throttle.

mod budget;
mod local;
mod remote;
mod responder;
mod round;

pub use budget::Budget;
pub use local::{discover_local, LocalOptions};
pub use remote::{remote_specs, TargetMetrics, TargetsThread};
pub use responder::{Limits, Responder, ResponderMetrics};

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use ibprobe::spec::ChannelSpec;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::registry::{Registry, Unit};

use crate::collect::hw_split::HwSplitMetrics;
use crate::collect::latency::{LatencyStore, SeriesKey};

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

/// Wall-clock time since the Unix epoch (the plan's epochs are wall-clock).
fn unix_now() -> Duration {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap_or_default()
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
    pub secret: Option<ibprobe::probe::auth::Secret>,
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

/// The engine's own metrics.
#[derive(Clone, Debug, Default)]
pub struct EngineMetrics {
    /// `ibexporter_throttle_level`.
    pub throttle: Gauge,
    /// `ibexporter_probe_interval_seconds`.
    pub interval: Gauge<f64, std::sync::atomic::AtomicU64>,
    /// `ibexporter_probe_cpu_seconds_total`.
    pub cpu: Counter<f64, std::sync::atomic::AtomicU64>,
    /// `ibexporter_probe_rounds_total`.
    pub rounds: Counter,
    /// `ibexporter_plan_round_targets`.
    pub plan_targets: Gauge,
    /// The hardware-timestamp split of remote probes.
    pub hw: HwSplitMetrics,
}

impl EngineMetrics {
    /// Registers the engine's self metrics.
    pub fn register(&self, reg: &mut Registry) {
        reg.register(
            "ibexporter_throttle_level",
            "Overhead throttle: 0 = full rate; each step doubles the probe interval (up to the configured maximum) because probing used more CPU than the budget",
            self.throttle.clone(),
        );
        reg.register_with_unit(
            "ibexporter_probe_interval",
            "The probe interval in force (the configured one, stretched by the throttle)",
            Unit::Seconds,
            self.interval.clone(),
        );
        reg.register_with_unit(
            "ibexporter_probe_cpu",
            "CPU time the probe thread used (wake-up probe threads not included)",
            Unit::Seconds,
            self.cpu.clone(),
        );
        reg.register(
            "ibexporter_probe_rounds",
            "Probe rounds run (one round = one probe's messages of one interval)",
            self.rounds.clone(),
        );
        reg.register(
            "ibexporter_plan_round_targets",
            "Remote probes (targets x sizes) the probe plan runs in the current round",
            self.plan_targets.clone(),
        );
        self.hw.register(reg);
    }
}

/// The running engine; stops (and joins) on drop.
pub struct Engine {
    stop: Arc<AtomicBool>,
    handle: Option<JoinHandle<()>>,
}

impl Engine {
    /// Starts the probe thread over the `local` probes and whatever
    /// `remote` holds at each round set.
    pub fn spawn(
        cfg: EngineConfig,
        local: Vec<ProbeSpec>,
        remote: RemoteProbes,
        store: LatencyStore,
        metrics: EngineMetrics,
    ) -> Engine {
        let stop = Arc::new(AtomicBool::new(false));
        let s = stop.clone();
        for p in &local {
            store.declare(&p.key);
        }
        let handle = std::thread::Builder::new()
            .name("ibexporter-probe".into())
            .spawn(move || run(cfg, local, remote, store, metrics, &s))
            .expect("spawning the probe thread");
        Engine {
            stop,
            handle: Some(handle),
        }
    }

    /// Stops the probe thread after its current message.
    pub fn stop(mut self) {
        self.halt();
    }

    fn halt(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        if let Some(h) = self.handle.take() {
            let _ = h.join();
        }
    }
}

impl Drop for Engine {
    fn drop(&mut self) {
        self.halt();
    }
}

fn run(
    cfg: EngineConfig,
    local: Vec<ProbeSpec>,
    remote: RemoteProbes,
    store: LatencyStore,
    m: EngineMetrics,
    stop: &AtomicBool,
) {
    let mut remote_keys = std::collections::BTreeSet::new();
    let mut budget = Budget::new(cfg.interval, cfg.max_interval, cfg.max_core_fraction);
    // Calibrated once: a TSC calibration takes ~100 ms.
    let clock = ibprobe::clock::Clock::choose(ibprobe::clock::ClockChoice::Auto);
    while !stop.load(Ordering::Relaxed) {
        let t0 = Instant::now();
        let wall0 = unix_now();
        let cpu0 = ibprobe::sys::rt::thread_cpu_ns();
        let now_remote = remote.lock().unwrap_or_else(|p| p.into_inner()).clone();
        let keys: std::collections::BTreeSet<SeriesKey> =
            now_remote.probes.iter().map(|p| p.key.clone()).collect();
        for gone in remote_keys.difference(&keys) {
            store.forget(gone);
        }
        for new in keys.difference(&remote_keys) {
            store.declare(new);
        }
        remote_keys = keys;
        // The plan picks this round's remote probes; its epochs are
        // wall-clock, so every member is in the same one.
        let chosen: Vec<&ProbeSpec> = match &now_remote.plan {
            Some(plan) => {
                let epoch = crate::targets::plan::epoch_at(unix_now(), plan.epoch);
                plan.select(epoch)
                    .into_iter()
                    .map(|i| &now_remote.probes[i])
                    .collect()
            }
            None => now_remote.probes.iter().collect(),
        };
        m.plan_targets.set(chosen.len() as i64);
        for p in local.iter().chain(chosen) {
            if stop.load(Ordering::Relaxed) {
                return;
            }
            let (sent, r) = round::run(p, &cfg, &clock, stop);
            store.record(&p.key, sent, &r);
            match &r.hw {
                Some(Ok(split)) => m.hw.record(&p.key, split),
                Some(Err(answered)) => m.hw.no_report(&p.key, *answered),
                None => {}
            }
            m.rounds.inc();
        }
        let cpu = ibprobe::sys::rt::thread_cpu_ns().saturating_sub(cpu0);
        m.cpu.inc_by(cpu as f64 * 1e-9);
        let interval = budget.after_round(Duration::from_nanos(cpu));
        m.throttle.set(budget.level() as i64);
        m.interval.set(interval.as_secs_f64());
        let next = match &now_remote.plan {
            // Under a plan, rounds start on epoch boundaries: the epoch
            // after this round's (or, throttled, `interval / epoch` later).
            Some(plan) => {
                let e = plan.epoch.as_nanos().max(1);
                let step = (interval.as_nanos() / e).max(1);
                let boundary = (wall0.as_nanos() / e + step) * e;
                let wait = boundary.saturating_sub(unix_now().as_nanos());
                Instant::now() + Duration::from_nanos(wait as u64)
            }
            None => t0 + interval,
        };
        while !stop.load(Ordering::Relaxed) {
            let now = Instant::now();
            if now >= next {
                break;
            }
            std::thread::sleep((next - now).min(Duration::from_millis(100)));
        }
    }
}
