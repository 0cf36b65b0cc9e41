//! Collectors: one file per source of metrics, as node_exporter does.
//!
//! Each collector reads its source when Prometheus scrapes (or, for the
//! probes, publishes what the probe loop measured) and encodes through
//! prometheus-client, so a source that fails loses only its own metrics.

pub mod hca;
pub mod latency;
pub mod tuning;
