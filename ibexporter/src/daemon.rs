//! The daemon: builds every collector, starts the probe engine, serves
//! HTTP until shutdown.
//!
//! Why it exists: `main` parses options; everything a running exporter is
//! made of is assembled here, so tests and `main` start the same thing.

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use anyhow::Context;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::info::Info;
use prometheus_client::registry::Registry;

use crate::collect;
use crate::collect::latency::LatencyStore;
use crate::collect::tuning::TuningConfig;
use crate::config::{
    CardinalityConfig, Config, CpuSelection, TargetsConfig, DEFAULT_RESPONDER_PORT,
};
use crate::engine::{
    discover_local, Engine, EngineConfig, EngineMetrics, Limits, LocalOptions, RemoteProbes,
    Responder, ResponderMetrics, TargetMetrics, TargetsThread,
};
use crate::http::{self, FamilySource, Metrics, WebConfig};
use ibprobe::probe::session::auth::Secret;
use ibprobe::probe::session::{MemoryCap, ResponderOptions, RESPONDER_MEMORY_KEY};
use std::net::SocketAddr;

/// Everything a running exporter needs to know.
#[derive(Clone, Debug)]
pub struct DaemonOptions {
    /// HTTP listen address.
    pub listen: String,
    /// exporter-toolkit style web config (TLS, basic auth).
    pub web_config: Option<PathBuf>,
    /// The mesh secret's key file (responder and remote probes).
    pub secret_file: Option<PathBuf>,
    /// Concurrent HTTP requests served; more get 503 (0: no limit).
    pub max_requests: usize,
    /// Host root for sysfs/procfs reads (`/`, or a snapshot in tests).
    pub root: PathBuf,
    /// ibtune profile to watch for drift.
    pub profile: Option<PathBuf>,
    /// ibtune's state directory (`None`: ibtune's default for `root`).
    pub state_dir: Option<PathBuf>,
    /// Minimum time between two tuning verifications.
    pub tuning_min_interval: Duration,
    /// The probe engine.
    pub engine: EngineConfig,
    /// The built-in local probes.
    pub local: LocalOptions,
    /// The sliding window of the percentile summary.
    pub window: Duration,
    /// Where the responder listens (`None`: it is off).
    pub responder: Option<SocketAddr>,
    /// The memory one responder session may take (bytes).
    pub responder_memory: u64,
    /// Remote targets and their sources.
    pub targets: TargetsConfig,
    /// Per-peer series limit and the label peers are grouped by above it.
    pub cardinality: CardinalityConfig,
}

impl Default for DaemonOptions {
    fn default() -> Self {
        DaemonOptions {
            listen: crate::DEFAULT_LISTEN.into(),
            web_config: None,
            secret_file: None,
            max_requests: http::DEFAULT_MAX_REQUESTS,
            root: PathBuf::from("/"),
            profile: None,
            state_dir: None,
            tuning_min_interval: crate::collect::tuning::DEFAULT_MIN_INTERVAL,
            engine: EngineConfig::default(),
            local: LocalOptions {
                source: hostname(),
                ..LocalOptions::default()
            },
            window: Duration::from_secs(300),
            responder: Some(SocketAddr::from(([0, 0, 0, 0], DEFAULT_RESPONDER_PORT))),
            responder_memory: ibprobe::spec::peer::DEFAULT_MAX_SESSION_MEMORY,
            targets: Config::default().targets,
            cardinality: Config::default().cardinality,
        }
    }
}

impl DaemonOptions {
    /// The options a validated config file asks for.
    pub fn from_config(c: &Config) -> DaemonOptions {
        let mut o = DaemonOptions {
            listen: c.listen.to_string(),
            web_config: c.web_config.clone(),
            secret_file: c.secret_file.clone(),
            root: c.tuning.root.clone(),
            profile: c.tuning.profile.clone(),
            state_dir: c.tuning.state_dir.clone(),
            tuning_min_interval: c.tuning.min_interval,
            window: c.probe.window,
            responder: c.responder.enabled.then_some(c.responder.bind),
            responder_memory: c.responder.max_session_memory,
            targets: c.targets.clone(),
            cardinality: c.cardinality.clone(),
            ..DaemonOptions::default()
        };
        o.engine = EngineConfig {
            interval: c.probe.interval,
            probes_per_round: u64::from(c.probe.probes_per_interval),
            rate_hz: c.probe.rate_hz,
            timeout: c.probe.timeout,
            event_poll: c.probe.poll == crate::config::Poll::Event,
            max_core_fraction: c.budget.max_core_fraction,
            max_interval: c.budget.max_interval,
            secret: None,
            hw_timestamps: c.probe.hw_timestamps,
            perf_counters: c.probe.perf_counters,
        };
        o.local = LocalOptions {
            source: c.source.clone(),
            hca_loopback: c.local.hca_loopback,
            qp: match c.probe.transport {
                t if t.is_verbs() => t,
                _ => crate::config::Transport::Rc,
            },
            op: c.probe.op,
            reference: c.local.reference.clone(),
            host_wakeup: c.local.host_wakeup,
            wakeup_cpus: match &c.local.wakeup_cpus {
                CpuSelection::All => None,
                CpuSelection::List(l) => Some(l.clone()),
            },
            sizes: c.probe.sizes.clone(),
        };
        o
    }
}

/// This host's name, for the `source` label.
pub fn hostname() -> String {
    ibhost::file::read_pseudo("/proc/sys/kernel/hostname", 4096)
        .map(|s| s.trim().to_string())
        .ok()
        .filter(|s| !s.is_empty())
        .unwrap_or_else(|| "localhost".into())
}

/// Reads every file the options name as a run would (the web config with
/// its TLS files, the mesh secret), each a regular file of at most 1 MiB;
/// the one-line error names the file and never quotes what it holds.
///
/// Why it exists: `--check-config` must refuse what a run would refuse,
/// and a run must refuse it before it starts anything (exit 2).
pub fn check_files(o: &DaemonOptions) -> Result<(Option<WebConfig>, Option<Secret>), String> {
    let web = match &o.web_config {
        Some(p) => Some(WebConfig::load(p).map_err(|e| e.to_string())?),
        None => None,
    };
    let secret = match &o.secret_file {
        Some(p) => Some(Secret::load(p)?),
        None => None,
    };
    Ok((web, secret))
}

/// A started exporter: the metrics handle and the probe engine.
pub struct Daemon {
    /// What `/metrics` serves.
    pub metrics: Metrics,
    /// The probe thread (stops on drop).
    pub engine: Engine,
    /// The responder (stops on drop).
    pub responder: Option<Responder>,
    /// The targets thread (stops on drop).
    pub targets: Option<TargetsThread>,
    /// Lines to log once at start (what was skipped and why).
    pub notes: Vec<String>,
}

/// Builds the collectors and starts probing (no HTTP yet).
pub fn start(o: &DaemonOptions) -> anyhow::Result<Daemon> {
    let mut reg = Registry::default();
    reg.register(
        "ibexporter_build",
        "ibexporter build information",
        Info::new(vec![("version".to_string(), crate::VERSION.to_string())]),
    );
    let tuning = o.profile.as_ref().map(|p| {
        let mut tc = TuningConfig::new(p);
        tc.root = o.root.clone();
        tc.state_dir = o.state_dir.clone();
        tc.min_interval = o.tuning_min_interval;
        tc
    });
    collect::register(&mut reg, &o.root, tuning)
        .with_context(|| format!("host root {}", o.root.display()))?;
    let store = LatencyStore::new(o.window);
    reg.register_collector(Box::new(store.counter_collector()));
    let em = EngineMetrics::default();
    em.register(&mut reg);
    let (probes, notes) = discover_local(&o.local);
    let local: Gauge = Gauge::default();
    local.set(probes.len() as i64);
    reg.register(
        "ibexporter_local_probes",
        "Local probes running (HCA loopback ports x sizes, references, wake-up CPUs)",
        local,
    );
    let secret = match &o.secret_file {
        Some(p) => Some(Secret::load(p).map_err(anyhow::Error::msg)?),
        None => None,
    };
    let responder = match o.responder {
        Some(bind) => {
            let rm = ResponderMetrics::default();
            rm.register(&mut reg);
            let opts = ResponderOptions {
                dev: None,
                handshake_timeout: Duration::from_secs(5),
                secret: secret.clone(),
                max_busy: 1,
                busy: Arc::default(),
                memory: MemoryCap {
                    bytes: o.responder_memory,
                    raise: RESPONDER_MEMORY_KEY,
                },
            };
            let listener = std::net::TcpListener::bind(bind).with_context(|| {
                format!("responder: cannot listen on {bind}; free the port or set [responder] bind (enabled = false turns it off)")
            })?;
            // A flood of connections must not fill the kernel's queue
            // (peers' connects would wait for SYN retransmissions).
            if let Err(e) = crate::sys::set_listen_backlog(&listener, 4096) {
                tracing::warn!("responder: listen backlog stays at 128: {e}");
            }
            Some(
                Responder::serve(listener, opts, rm, Limits::default())
                    .context("responder: starting its thread")?,
            )
        }
        None => None,
    };
    let remote: RemoteProbes = Arc::default();
    let tm = TargetMetrics::default();
    tm.register(&mut reg);
    let targets = if o.targets.static_targets.is_empty()
        && o.targets.file_sd.is_empty()
        && o.targets.dns.is_empty()
    {
        None
    } else {
        Some(TargetsThread::start(
            &o.targets,
            o.responder.map(|a| a.port()),
            &o.local.source,
            &o.cardinality,
            crate::targets::plan::Timing {
                interval: o.engine.interval.as_secs_f64(),
                probes: o.engine.probes_per_round as f64,
                rate_hz: o.engine.rate_hz,
                timeout: o.engine.timeout.as_secs_f64(),
            },
            remote.clone(),
            tm,
        )?)
    };
    let engine_config = EngineConfig {
        secret,
        ..o.engine.clone()
    };
    let engine = Engine::spawn(engine_config, probes, remote, store.clone(), em);
    let source: FamilySource = Arc::new(store.clone());
    let metrics = Metrics::with_registries_and_sources([Arc::new(reg)], vec![source]);
    Ok(Daemon {
        metrics,
        engine,
        responder,
        targets,
        notes,
    })
}

/// Open files kept for everything but HTTP connections: the responder's
/// sessions (a TCP and a UDP socket each, 64 of them plus closing ones),
/// sysfs reads, probes, the listeners.
const FILES_NOT_FOR_HTTP: u64 = 512;

/// The HTTP connection cap under an open-files limit of `files`: the
/// default (4,096) when the limit allows it, else what is left after
/// [`FILES_NOT_FOR_HTTP`] (at least 64), so accepting never fails for
/// want of a descriptor and the oldest idle connection can make room.
fn connection_cap(files: Option<u64>) -> usize {
    let default = http::ServeOptions::default().max_connections;
    match files {
        None => default,
        Some(n) => {
            let left = n.saturating_sub(FILES_NOT_FOR_HTTP).max(64);
            default.min(usize::try_from(left).unwrap_or(usize::MAX))
        }
    }
}

/// Starts the exporter and serves it on `o.listen` until `shutdown`.
pub async fn run(
    o: DaemonOptions,
    shutdown: impl std::future::Future<Output = ()> + Send + 'static,
) -> anyhow::Result<()> {
    let (web, _) = check_files(&o).map_err(anyhow::Error::msg)?;
    let listener = http::listen(&o.listen).await.with_context(|| {
        format!(
            "cannot listen on {}; pick a free address with --listen HOST:PORT",
            o.listen
        )
    })?;
    let addr = listener
        .local_addr()
        .context("reading the listen address")?;
    let opts = o.clone();
    let daemon = tokio::task::spawn_blocking(move || start(&opts))
        .await
        .context("starting the collectors")??;
    for n in &daemon.notes {
        tracing::warn!("{n}");
    }
    let scheme = if web.as_ref().is_some_and(|w| w.tls_enabled()) {
        "https"
    } else {
        "http"
    };
    tracing::info!(
        "ibexporter {} serving {scheme}://{addr}/metrics",
        crate::VERSION
    );
    let router = http::router(daemon.metrics.clone());
    let serve_opts = http::ServeOptions {
        max_requests: o.max_requests,
        max_connections: connection_cap(crate::sys::raise_open_files_limit()),
        ..http::ServeOptions::default()
    };
    http::serve_with(listener, web, router, shutdown, serve_opts)
        .await
        .context("serving HTTP")?;
    let engine = daemon.engine;
    tokio::task::spawn_blocking(move || engine.stop())
        .await
        .context("stopping the probe thread")?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_connection_cap_fits_the_open_files_limit() {
        assert_eq!(connection_cap(Some(20_000)), 4096);
        assert_eq!(connection_cap(None), 4096);
        assert_eq!(connection_cap(Some(1024)), 512);
        assert_eq!(connection_cap(Some(100)), 64);
    }
}
