//! Bounding the number of series: per-peer `target` values, or groups.
//!
//! Why it exists: the series count grows with the mesh. Up to
//! `cardinality.max_peer_series` peers each peer has its own `target`
//! label value (its name); above, every peer is mapped to
//! `group:<value of cardinality.group_label>` (or `group:other` when the
//! target lacks that label), so series grow with the number of groups
//! (racks), not of peers.
//!
//! # How many series
//!
//! With N peers, G groups, S sizes per peer and, per (target value, size):
//!
//! - a classic histogram of B bucket series (`le`, including `+Inf`) plus
//!   `_sum` and `_count`: B + 2,
//! - a summary of Q quantiles plus `_sum` and `_count`: Q + 2,
//! - C probe-result counters (one per `result` value),
//! - 2 gauges (the window max and the last success time),
//!
//! the latency series are
//!
//! - per-peer mode: `N × S × (B + Q + C + 6)`,
//! - aggregated mode: `G × S × (B + Q + C + 6)`,
//!
//! times the number of transport/op combinations a peer is probed with
//! (the native histogram is one series per (value, size) in the protobuf
//! format, where it replaces nothing: Prometheus keeps what it is told).
//! With ibexporter's B = 30 (29 bounds and `+Inf`), Q = 4, C = 3 that is
//! 43 series per (value, size): 200 peers × 1 size = 8 600 series at the
//! default limit; 2 000 peers in 50 racks, aggregated, 4 sizes = 8 600.
//! See [`estimate_series`].
//!
//! Aggregating merges histograms (bucket counts add up); quantiles of a
//! group must be computed from the merged observations, never by
//! averaging per-peer quantiles.

use super::source::{Target, TargetKey};
use std::collections::BTreeSet;

/// The `target` label value of every target, sorted by key: the peer's name
/// while there are at most `max_peer_series` distinct peers (names), else
/// `group:<label value>` / `group:other`.
///
/// Why it exists: the scheduler labels each target's series with this; the
/// result depends only on the targets, so it is stable across refreshes.
pub fn series_labels(
    targets: &[Target],
    max_peer_series: usize,
    group_label: &str,
) -> Vec<(TargetKey, String)> {
    let peers: BTreeSet<&str> = targets.iter().map(|t| t.name.as_str()).collect();
    let per_peer = peers.len() <= max_peer_series;
    let mut out: Vec<(TargetKey, String)> = targets
        .iter()
        .map(|t| {
            let value = if per_peer {
                t.name.clone()
            } else {
                format!(
                    "group:{}",
                    t.labels
                        .get(group_label)
                        .map(String::as_str)
                        .unwrap_or("other")
                )
            };
            (t.key(), value)
        })
        .collect();
    out.sort();
    out.dedup_by(|a, b| a.0 == b.0);
    out
}

/// Latency series for `values` target values (peers or groups) × `sizes`,
/// with `buckets` bucket series (incl. `+Inf`), `quantiles` summary
/// quantiles and `counters` result counters: `values × sizes × (buckets +
/// quantiles + counters + 4)`.
///
/// Why it exists: the formula above as code, for docs, tests and a
/// start-up log line.
pub fn estimate_series(
    values: usize,
    sizes: usize,
    buckets: usize,
    quantiles: usize,
    counters: usize,
) -> usize {
    values * sizes * (buckets + quantiles + counters + 6)
}

/// Series one exporter serves per remote (target value, size) with the
/// default probe settings, as a running exporter renders them: the 43 of
/// [`estimate_series`] (B = 30, Q = 4, C = 3) and one per counter of the
/// probe thread (context switches, involuntary ones, migrations, minor and
/// major page faults, interrupts; more with a CPU PMU). Counted from a
/// real exporter's `/metrics` by `ibexporter/tests/remote_write.rs`.
pub const SERIES_PER_VALUE_SIZE: usize = 49;

/// Series per target value beside its latency series: the
/// `ibexporter_plan_peer_rack` gauge that joins a value to its rack.
pub const SERIES_PER_VALUE: usize = 1;

/// The remote-probe series of a whole fleet, every member an exporter of
/// the plan.
///
/// Why it exists: `ibexporter mesh` answers "how many series does the
/// mesh send to Prometheus" before it is deployed (docs/probe-plans.md,
/// "Sizing").
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct FleetSeries {
    /// `target` label values of one exporter: its peers up to
    /// `max_peer_series`, else its groups (one per rack when the group
    /// label is the rack label, as by default).
    pub target_values_per_exporter: usize,
    /// Message sizes per target.
    pub sizes: usize,
    /// Remote-probe series of one exporter (its local probes and host
    /// collectors, a few hundred, not included).
    pub per_exporter: usize,
    /// Of every exporter together.
    pub total: u64,
}

impl FleetSeries {
    /// The series of `plan`'s members, each probing `sizes` sizes, with
    /// peers grouped by rack above `max_peer_series`. Over the rack-pair
    /// coverage time every member probes every rack (the prober of a rack
    /// pair rotates), so a grouped exporter carries every rack's value.
    pub fn of(plan: &super::plan::ClusterPlan, max_peer_series: usize, sizes: usize) -> Self {
        let peers = plan.len().saturating_sub(1);
        let values = if peers <= max_peer_series {
            peers
        } else {
            plan.racks()
        };
        let per_exporter = values * (sizes * SERIES_PER_VALUE_SIZE + SERIES_PER_VALUE);
        FleetSeries {
            target_values_per_exporter: values,
            sizes,
            per_exporter,
            total: per_exporter as u64 * plan.len() as u64,
        }
    }
}
