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
pub mod localize;
pub mod planner;
pub mod sys;
pub mod targets;

/// The default listen address; 9427 is unassigned on the Prometheus
/// exporter port list.
pub const DEFAULT_LISTEN: &str = "0.0.0.0:9427";

/// This crate's version, as reported in `ibexporter_build_info`.
pub const VERSION: &str = env!("CARGO_PKG_VERSION");

/// Completes on Ctrl-C (SIGINT) or SIGTERM.
///
/// Why it exists: systemd stops services with SIGTERM, terminals with
/// Ctrl-C; both must shut the server down cleanly.
pub async fn shutdown_signal() {
    let ctrl_c = async {
        // If the handler cannot be installed, only SIGTERM stops us.
        if tokio::signal::ctrl_c().await.is_err() {
            std::future::pending::<()>().await;
        }
    };
    let term = async {
        match tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()) {
            Ok(mut s) => {
                s.recv().await;
            }
            Err(_) => std::future::pending::<()>().await,
        }
    };
    tokio::select! {
        _ = ctrl_c => {},
        _ = term => {},
    }
}
