//! ibexporter: continuous RDMA latency probing, HCA port counters and
//! tuning drift, for Prometheus.
//!
//! Why it exists: production clusters need to see RDMA tail latency all
//! the time, not only when someone runs perftest; it embeds the ibprobe
//! library and serves what it measures with true percentiles.
//!
//! Map of the crate (one folder per concern):
//! - [`daemon`]: assembles everything and serves it (what `main` runs);
//! - [`engine`]: the probe thread, its local probes and the overhead budget;
//! - [`collect`]: one collector per source of metrics (latency, HCA
//!   counters, tuning drift);
//! - [`config`]: the TOML configuration and its validation;
//! - [`expo`]: the Prometheus text writer (escaping, line shapes, numbers)
//!   that `http` and the latency collector both write through;
//! - [`targets`]: where remote targets come from (static, file_sd, DNS);
//! - [`http`]: `/metrics` (text, OpenMetrics, protobuf with native
//!   histograms), `/healthz`, the landing page, TLS and basic auth;
//! - [`planner`]: `ibexporter mesh` (a cluster's probe plan, figures and
//!   failure simulation; the plan itself is [`targets::plan`]);
//! - [`localize`]: from mesh probes to ranked suspects (host, NIC, link,
//!   dead host, rack pair, path) with evidence, and its fault simulation;
//! - [`sys`]: the one module with `unsafe` (allocator settings).

pub mod collect;
pub mod config;
pub mod daemon;
pub mod engine;
pub mod expo;
pub mod http;
pub mod limits;
pub mod localize;
pub mod planner;
pub mod sys;
pub mod targets;

/// The default listen address; 9427 is unassigned on the Prometheus
/// exporter port list.
pub const DEFAULT_LISTEN: &str = "0.0.0.0:9427";

/// This crate's version, as reported in `ibexporter_build_info`.
pub const VERSION: &str = env!("CARGO_PKG_VERSION");

/// Completes on Ctrl-C (SIGINT) or SIGTERM, listening from the moment it
/// is called (inside a Tokio runtime).
///
/// Why it exists: systemd stops services with SIGTERM, terminals with
/// Ctrl-C; both must shut the server down cleanly. Why it listens at the
/// call: an `async fn` registers nothing until it is first polled, and the
/// server first polls it once it serves, after it has said so; a SIGTERM in
/// between (a unit stopped right after it started) killed the process by
/// the signal's default action instead of stopping it with exit 0.
pub fn shutdown_signal() -> impl std::future::Future<Output = ()> {
    use tokio::signal::unix::{signal, Signal, SignalKind};
    // If a handler cannot be installed, only the other signal stops us.
    let interrupt = signal(SignalKind::interrupt()).ok();
    let terminate = signal(SignalKind::terminate()).ok();
    async fn received(s: Option<Signal>) {
        match s {
            Some(mut s) => {
                s.recv().await;
            }
            None => std::future::pending::<()>().await,
        }
    }
    async move {
        tokio::select! {
            _ = received(interrupt) => {},
            _ = received(terminate) => {},
        }
    }
}
