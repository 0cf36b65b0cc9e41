//! Probe latency: what the probe loop measured, as Prometheus families.
//!
//! Why it exists: the probe thread (`crate::engine`) measures rounds with
//! the ibprobe library; this collector turns each round into the families
//! below, with bounded memory (one cumulative histogram and a window of a
//! few HDR histograms per series, never per-sample vectors).
//!
//! | family | type | labels | unit |
//! |---|---|---|---|
//! | `ibprobe_latency_seconds` | histogram: 29 classic buckets, log-linear 250 ns .. 10 ms (1, 1.5, 2, 3, 5, 7 per decade), and a native histogram (schema 3) in the protobuf format | source, target, transport, op, size_bytes | seconds |
//! | `ibprobe_latency_window_seconds` | summary over the sliding window: quantile 0.5, 0.9, 0.99, 0.999, `_sum`, `_count` (from HDR histograms, 1 ns resolution) | same | seconds |
//! | `ibprobe_latency_window_max_seconds` | gauge: the true max over the window | same | seconds |
//! | `ibprobe_probes_total` | counter | same + result = ok, timeout, error | probes |
//! | `ibprobe_probe_errors_total` | counter | source, target, transport, reason | rounds |
//! | `ibprobe_last_success_timestamp_seconds` | gauge: Unix time of the last round with an answer | same as the histogram | seconds |
//!
//! What a sample is: one-way latency (t_recv - t_subm) for a loopback
//! probe (HCA loopback, shm, udp), the round trip for a remote target, the
//! wake-up latency for a `host` probe.

use std::collections::{BTreeMap, VecDeque};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use hdrhistogram::Histogram as Hdr;
use prometheus_client::encoding::prometheus_protobuf::prometheus_data_model as pb;
use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::histogram::{Histogram, NativeHistogramConfig};
use prometheus_client::registry::{Registry, Unit};

/// The classic bucket bounds in seconds: 1, 1.5, 2, 3, 5, 7 per decade
/// from 250 ns to 10 ms, so a 1-3 us tail lands in its own buckets.
pub fn classic_buckets() -> Vec<f64> {
    // From whole nanoseconds, so each bound is the double nearest its
    // decimal value (5e-6, not 4.9999999999999996e-6).
    let mut ns: Vec<u64> = vec![250, 300, 500, 700];
    for decade in [1_000, 10_000, 100_000, 1_000_000] {
        for m10 in [10, 15, 20, 30, 50, 70] {
            ns.push(decade * m10 / 10);
        }
    }
    ns.push(10_000_000);
    ns.into_iter().map(|n| n as f64 / 1e9).collect()
}

/// Native histogram schema: 2^(2^-3) = 9% wide buckets.
pub const NATIVE_SCHEMA: i8 = 3;

/// The quantiles of the window summary.
pub const QUANTILES: [f64; 4] = [0.5, 0.9, 0.99, 0.999];

/// One latency series: the label set every family of this module shares.
#[derive(Clone, Debug, Hash, PartialEq, Eq, PartialOrd, Ord, EncodeLabelSet)]
pub struct SeriesKey {
    /// This exporter's name.
    pub source: String,
    /// The peer, `rxe0:1` for an HCA loopback, `loopback`, `cpu2`, or
    /// `group:<label>` when peers are aggregated.
    pub target: String,
    /// rc, uc, ud, udp, shm, host.
    pub transport: String,
    /// send, send-imm, write-imm, write, wakeup.
    pub op: String,
    /// Message size in bytes (0 for wake-ups).
    pub size_bytes: String,
}

impl SeriesKey {
    fn pairs(&self) -> [(&'static str, &str); 5] {
        [
            ("source", &self.source),
            ("target", &self.target),
            ("transport", &self.transport),
            ("op", &self.op),
            ("size_bytes", &self.size_bytes),
        ]
    }
}

/// `ibprobe_probes_total` labels.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct ResultKey {
    source: String,
    target: String,
    transport: String,
    op: String,
    size_bytes: String,
    result: &'static str,
}

/// `ibprobe_probe_errors_total` labels.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct ErrorKey {
    source: String,
    target: String,
    transport: String,
    reason: String,
}

/// What one probe round gave, as the engine hands it over.
#[derive(Debug, Default)]
pub struct Round {
    /// Latencies of the answered probes, ns (the ibprobe HDR histogram).
    pub samples: Option<ibprobe::stats::LatencyHistogram>,
    /// Probes with no answer within the timeout.
    pub timeouts: u64,
    /// Set when the round failed (peer lost, device gone): a short reason
    /// such as `peer_lost`, `refused`, `transport`.
    pub error: Option<String>,
}

/// A window entry: when a round ended and what it measured.
type Slice = (Instant, Hdr<u64>);

#[derive(Default)]
struct Windows {
    by_series: BTreeMap<SeriesKey, VecDeque<Slice>>,
}

/// The store the engine writes rounds into and the registry reads.
///
/// Why it exists: one owner for every latency family, so a round updates
/// them together and the window is trimmed in one place.
#[derive(Clone)]
pub struct LatencyStore {
    window: Duration,
    histo: Family<SeriesKey, Histogram, fn() -> Histogram>,
    probes: Family<ResultKey, Counter>,
    errors: Family<ErrorKey, Counter>,
    last_ok: Family<SeriesKey, Gauge<f64, std::sync::atomic::AtomicU64>>,
    windows: Arc<Mutex<Windows>>,
}

impl std::fmt::Debug for LatencyStore {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("LatencyStore")
            .field("window", &self.window)
            .finish_non_exhaustive()
    }
}

fn new_histogram() -> Histogram {
    Histogram::new_classic_and_native(
        classic_buckets(),
        NativeHistogramConfig::with_schema(NATIVE_SCHEMA),
    )
}

impl LatencyStore {
    /// A store whose summary covers the last `window`.
    pub fn new(window: Duration) -> LatencyStore {
        LatencyStore {
            window,
            histo: Family::new_with_constructor(new_histogram as fn() -> Histogram),
            probes: Family::default(),
            errors: Family::default(),
            last_ok: Family::default(),
            windows: Arc::default(),
        }
    }

    /// Registers the histogram, counter and gauge families (the summary
    /// and the window max come from [`LatencyStore::window_families`]).
    pub fn register(&self, reg: &mut Registry) {
        reg.register_with_unit(
            "ibprobe_latency",
            "Probe latency: one-way for loopback probes, round trip for remote targets, wake-up for host probes",
            Unit::Seconds,
            self.histo.clone(),
        );
        reg.register(
            "ibprobe_probes",
            "Probe messages by result: ok (answered), timeout (no answer within the timeout), error (the round failed)",
            self.probes.clone(),
        );
        reg.register(
            "ibprobe_probe_errors",
            "Probe rounds that failed, by reason (peer_lost, refused, transport, setup)",
            self.errors.clone(),
        );
        reg.register_with_unit(
            "ibprobe_last_success_timestamp",
            "Unix time of the last probe round that got at least one answer",
            Unit::Seconds,
            self.last_ok.clone(),
        );
    }

    /// Makes a series visible before its first round (zeros, so rate()
    /// has a start and a dead target shows up as such).
    pub fn declare(&self, key: &SeriesKey) {
        let _ = self.histo.get_or_create(key);
        for result in ["ok", "timeout", "error"] {
            let _ = self.probes.get_or_create(&result_key(key, result));
        }
    }

    /// Records one round of `key`, sent `sent` messages.
    pub fn record(&self, key: &SeriesKey, sent: u64, round: &Round) {
        let ok = round.samples.as_ref().map_or(0, |h| h.len());
        self.probes.get_or_create(&result_key(key, "ok")).inc_by(ok);
        self.probes
            .get_or_create(&result_key(key, "timeout"))
            .inc_by(round.timeouts);
        let errored = sent.saturating_sub(ok + round.timeouts);
        if round.error.is_some() || errored > 0 {
            self.probes
                .get_or_create(&result_key(key, "error"))
                .inc_by(errored.max(1));
        }
        if let Some(reason) = &round.error {
            self.errors
                .get_or_create(&ErrorKey {
                    source: key.source.clone(),
                    target: key.target.clone(),
                    transport: key.transport.clone(),
                    reason: reason.clone(),
                })
                .inc();
        }
        let Some(samples) = round.samples.as_ref().filter(|h| !h.is_empty()) else {
            return;
        };
        let hdr = samples.to_hdr();
        {
            let h = self.histo.get_or_create(key);
            for v in hdr.iter_recorded() {
                let secs = v.value_iterated_to() as f64 * 1e-9;
                for _ in 0..v.count_at_value() {
                    h.observe(secs);
                }
            }
        }
        let now = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map_or(0.0, |d| d.as_secs_f64());
        self.last_ok.get_or_create(key).set(now);
        let mut w = self.windows.lock().unwrap_or_else(|p| p.into_inner());
        let q = w.by_series.entry(key.clone()).or_default();
        q.push_back((Instant::now(), hdr));
        let horizon = Instant::now().checked_sub(self.window);
        while let (Some(h), Some((t, _))) = (horizon, q.front()) {
            if *t < h {
                q.pop_front();
            } else {
                break;
            }
        }
    }

    /// Forgets a series that is no longer probed (a target left the
    /// pinglist), so its series stop being exported.
    pub fn forget(&self, key: &SeriesKey) {
        self.histo.remove(key);
        self.last_ok.remove(key);
        for result in ["ok", "timeout", "error"] {
            self.probes.remove(&result_key(key, result));
        }
        let mut w = self.windows.lock().unwrap_or_else(|p| p.into_inner());
        w.by_series.remove(key);
    }

    /// The window summary and max as protobuf-model families (the HTTP
    /// layer renders them in every format).
    pub fn window_families(&self) -> Vec<pb::MetricFamily> {
        let mut w = self.windows.lock().unwrap_or_else(|p| p.into_inner());
        let horizon = Instant::now().checked_sub(self.window);
        let mut summary = Vec::new();
        let mut max = Vec::new();
        for (key, q) in w.by_series.iter_mut() {
            if let Some(h) = horizon {
                while q.front().is_some_and(|(t, _)| *t < h) {
                    q.pop_front();
                }
            }
            let Some((_, first)) = q.front() else {
                continue;
            };
            let mut merged = first.clone();
            for (_, h) in q.iter().skip(1) {
                // Same bounds and precision everywhere: cannot fail.
                let _ = merged.add(h);
            }
            let label: Vec<pb::LabelPair> = key
                .pairs()
                .iter()
                .map(|(k, v)| pb::LabelPair {
                    name: (*k).into(),
                    value: (*v).into(),
                })
                .collect();
            let sum_ns: f64 = merged
                .iter_recorded()
                .map(|v| v.value_iterated_to() as f64 * v.count_at_value() as f64)
                .sum();
            summary.push(pb::Metric {
                label: label.clone(),
                summary: Some(pb::Summary {
                    sample_count: merged.len(),
                    sample_sum: sum_ns * 1e-9,
                    quantile: QUANTILES
                        .iter()
                        .map(|&q| pb::Quantile {
                            quantile: q,
                            value: merged.value_at_quantile(q) as f64 * 1e-9,
                        })
                        .collect(),
                    ..Default::default()
                }),
                ..Default::default()
            });
            max.push(pb::Metric {
                label,
                gauge: Some(pb::Gauge {
                    value: merged.max() as f64 * 1e-9,
                }),
                ..Default::default()
            });
        }
        let secs = self.window.as_secs();
        vec![
            pb::MetricFamily {
                name: "ibprobe_latency_window_seconds".into(),
                help: format!("Probe latency percentiles over the last {secs} s, from HDR histograms (1 ns resolution)"),
                r#type: pb::MetricType::Summary as i32,
                metric: summary,
                ..Default::default()
            },
            pb::MetricFamily {
                name: "ibprobe_latency_window_max_seconds".into(),
                help: format!("The largest probe latency over the last {secs} s (the true max, not a bucket bound)"),
                r#type: pb::MetricType::Gauge as i32,
                metric: max,
                ..Default::default()
            },
        ]
    }
}

fn result_key(k: &SeriesKey, result: &'static str) -> ResultKey {
    ResultKey {
        source: k.source.clone(),
        target: k.target.clone(),
        transport: k.transport.clone(),
        op: k.op.clone(),
        size_bytes: k.size_bytes.clone(),
        result,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn key() -> SeriesKey {
        SeriesKey {
            source: "a".into(),
            target: "loopback".into(),
            transport: "shm".into(),
            op: "send".into(),
            size_bytes: "32".into(),
        }
    }

    #[test]
    fn buckets_are_sorted_and_span_250ns_to_10ms() {
        let b = classic_buckets();
        assert_eq!(b.len(), 29);
        assert_eq!(b[0], 250e-9);
        assert_eq!(*b.last().unwrap(), 10e-3);
        assert!(b.windows(2).all(|w| w[0] < w[1]), "{b:?}");
    }

    #[test]
    fn a_round_fills_histogram_counters_and_window() {
        let s = LatencyStore::new(Duration::from_secs(60));
        let mut h = ibprobe::stats::LatencyHistogram::new();
        for ns in 1..=1000u64 {
            h.record(ns * 10);
        }
        let round = Round {
            samples: Some(h),
            timeouts: 2,
            error: None,
        };
        s.record(&key(), 1002, &round);
        assert_eq!(s.histo.get_or_create(&key()).count(), 1000);
        assert_eq!(
            s.probes.get_or_create(&result_key(&key(), "ok")).get(),
            1000
        );
        assert_eq!(
            s.probes.get_or_create(&result_key(&key(), "timeout")).get(),
            2
        );
        assert_eq!(
            s.probes.get_or_create(&result_key(&key(), "error")).get(),
            0
        );
        let fams = s.window_families();
        let sum = fams[0].metric[0].summary.as_ref().unwrap();
        assert_eq!(sum.sample_count, 1000);
        let p50 = sum.quantile[0].value;
        assert!((p50 - 5000e-9).abs() < 10e-9, "p50 {p50}");
        let max = fams[1].metric[0].gauge.as_ref().unwrap().value;
        assert!((max - 10_000e-9).abs() < 10e-9, "max {max}");
    }

    #[test]
    fn a_failed_round_counts_an_error_and_its_reason() {
        let s = LatencyStore::new(Duration::from_secs(60));
        let round = Round {
            samples: None,
            timeouts: 0,
            error: Some("peer_lost".into()),
        };
        s.record(&key(), 0, &round);
        assert_eq!(
            s.probes.get_or_create(&result_key(&key(), "error")).get(),
            1
        );
        assert!(s.window_families()[0].metric.is_empty());
    }

    #[test]
    fn the_window_forgets_old_rounds() {
        let s = LatencyStore::new(Duration::from_millis(50));
        let mut h = ibprobe::stats::LatencyHistogram::new();
        h.record(1000);
        let round = Round {
            samples: Some(h),
            ..Round::default()
        };
        s.record(&key(), 1, &round);
        assert_eq!(s.window_families()[0].metric.len(), 1);
        std::thread::sleep(Duration::from_millis(80));
        assert!(s.window_families()[0].metric.is_empty());
        // The cumulative histogram keeps it.
        assert_eq!(s.histo.get_or_create(&key()).count(), 1);
    }
}
