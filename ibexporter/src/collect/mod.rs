//! Collectors: one file per source of metrics, as node_exporter does.
//!
//! Each collector reads its source when Prometheus scrapes (or, for the
//! probes, publishes what the probe loop measured) and encodes through
//! prometheus-client (`encode.rs`), so a source that fails loses only its
//! own metrics. A new collector of the host is its file, its `mod` line
//! and its line in [`register`].

use std::path::Path;

use prometheus_client::registry::Registry;

pub mod encode;
pub mod hca;
pub mod hw_split;
pub mod latency;
pub mod open_files;
pub mod tuning;

/// Registers the collectors that read the host at scrape time: the HCAs
/// under `root`, and the tuning state when a profile is watched. The one
/// place such a collector is registered (the probes' store is registered
/// with the probe loop that fills it, in `daemon.rs`).
pub fn register(
    reg: &mut Registry,
    root: &Path,
    tuning: Option<tuning::TuningConfig>,
) -> std::io::Result<()> {
    reg.register_collector(Box::new(hca::HcaCollector::new(root)?));
    if let Some(tc) = tuning {
        reg.register_collector(Box::new(tuning::TuningCollector::new(tc)));
    }
    Ok(())
}
