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
mod spec;

pub use budget::Budget;
pub use local::{discover_local, LocalOptions};
pub use remote::{remote_specs, TargetMetrics, TargetsThread};
pub use responder::{Limits, Responder, ResponderMetrics};
pub use spec::{EngineConfig, NodePlan, ProbeKind, ProbeSpec, Remote, RemoteProbes};

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::registry::{Registry, Unit};

use crate::collect::hw_split::HwSplitMetrics;
use crate::collect::latency::{LatencyStore, SeriesKey};

/// Wall-clock time since the Unix epoch (the plan's epochs are wall-clock).
fn unix_now() -> Duration {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap_or_default()
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
