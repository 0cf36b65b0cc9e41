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
