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
//! Memory and cost: the window is kept as [`WINDOW_SLICES`] slices per
//! series, each an auto-sized HDR histogram with 2 significant digits
//! (values within 1%) and 32-bit counts, a few KiB each; a round is
//! merged into the current slice. The families are encoded once per
//! change (a round ended, a slice expired) and per format, and served
//! from that cache: a scrape of 400 series costs a copy, not an encode.
//!
//! What a sample is: one-way latency (t_recv - t_subm) for a loopback
//! probe (HCA loopback, shm, udp), the round trip for a remote target, the
//! wake-up latency for a `host` probe.

use std::collections::{BTreeMap, VecDeque};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use hdrhistogram::Histogram as Hdr;
use prometheus_client::encoding::prometheus_protobuf::{self, prometheus_data_model as pb};
use prost::Message;

use crate::http::{encode_text_004, EncodeError, Encoded, Format};
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

/// Slices per window: the summary covers between (1 - 1/SLICES) and 1
/// window of rounds.
pub const WINDOW_SLICES: u32 = 5;

/// Significant digits of the window histograms (values within 1%).
pub const WINDOW_SIGFIG: u8 = 2;

/// A window slice: when it began and what its rounds measured.
type Slice = (Instant, Hdr<u32>);

#[derive(Default)]
struct Windows {
    by_series: BTreeMap<SeriesKey, VecDeque<Slice>>,
}

/// One format's encoding: the generation and time it was made at.
type CacheEntry = (u64, Instant, Arc<Vec<u8>>);

/// Encoded bytes per format (text, OpenMetrics, protobuf).
#[derive(Default)]
struct Cache {
    entries: [Option<CacheEntry>; 3],
}

/// A cached encoding older than this is redone even without a new round
/// (slices expire with time).
const CACHE_MAX_AGE: Duration = Duration::from_secs(5);

/// The store the engine writes rounds into and the registry reads.
///
/// Why it exists: one owner for every latency family, so a round updates
/// them together and the window is trimmed in one place.
#[derive(Clone)]
pub struct LatencyStore {
    window: Duration,
    registry: Arc<Registry>,
    generation: Arc<std::sync::atomic::AtomicU64>,
    cache: Arc<Mutex<Cache>>,
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
        let histo: Family<SeriesKey, Histogram, fn() -> Histogram> =
            Family::new_with_constructor(new_histogram as fn() -> Histogram);
        let probes = Family::<ResultKey, Counter>::default();
        let errors = Family::<ErrorKey, Counter>::default();
        let last_ok = Family::<SeriesKey, Gauge<f64, std::sync::atomic::AtomicU64>>::default();
        let mut reg = Registry::default();
        reg.register_with_unit(
            "ibprobe_latency",
            "Probe latency: one-way for loopback probes, round trip for remote targets, wake-up for host probes",
            Unit::Seconds,
            histo.clone(),
        );
        reg.register(
            "ibprobe_probes",
            "Probe messages by result: ok (answered), timeout (no answer within the timeout), error (the round failed)",
            probes.clone(),
        );
        reg.register(
            "ibprobe_probe_errors",
            "Probe rounds that failed, by reason (connect, refused, setup, protocol, peer_lost, completion, transport, config)",
            errors.clone(),
        );
        reg.register_with_unit(
            "ibprobe_last_success_timestamp",
            "Unix time of the last probe round that got at least one answer",
            Unit::Seconds,
            last_ok.clone(),
        );
        LatencyStore {
            window,
            registry: Arc::new(reg),
            generation: Arc::default(),
            cache: Arc::default(),
            histo,
            probes,
            errors,
            last_ok,
            windows: Arc::default(),
        }
    }

    fn changed(&self) {
        self.generation
            .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    }

    /// Makes a series visible before its first round (zeros, so rate()
    /// has a start and a dead target shows up as such).
    pub fn declare(&self, key: &SeriesKey) {
        self.changed();
        let _ = self.histo.get_or_create(key);
        for result in ["ok", "timeout", "error"] {
            let _ = self.probes.get_or_create(&result_key(key, result));
        }
    }

    /// Records one round of `key`, sent `sent` messages.
    pub fn record(&self, key: &SeriesKey, sent: u64, round: &Round) {
        self.changed();
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
        let h = self.histo.get_or_create(key);
        let mut slice = Hdr::<u32>::new(WINDOW_SIGFIG).expect("2 significant digits are valid");
        for v in samples.to_hdr().iter_recorded() {
            let ns = v.value_iterated_to();
            let n = v.count_at_value();
            for _ in 0..n {
                h.observe(ns as f64 * 1e-9);
            }
            // Auto-sized: cannot be out of range; a count beyond u32 saturates.
            let _ = slice.record_n(ns, u32::try_from(n).unwrap_or(u32::MAX));
        }
        drop(h);
        let now_unix = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map_or(0.0, |d| d.as_secs_f64());
        self.last_ok.get_or_create(key).set(now_unix);
        let now = Instant::now();
        let slice_len = self.window / WINDOW_SLICES;
        let mut w = self.windows.lock().unwrap_or_else(|p| p.into_inner());
        let q = w.by_series.entry(key.clone()).or_default();
        match q.back_mut() {
            Some((start, h)) if now.duration_since(*start) < slice_len => {
                let _ = h.add(&slice);
            }
            _ => q.push_back((now, slice)),
        }
        trim(q, now, self.window);
    }

    /// Forgets a series that is no longer probed (a target left the
    /// pinglist), so its series stop being exported.
    pub fn forget(&self, key: &SeriesKey) {
        self.changed();
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
        let now = Instant::now();
        let mut summary = Vec::new();
        let mut max = Vec::new();
        for (key, q) in w.by_series.iter_mut() {
            trim(q, now, self.window);
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

/// Drops the slices that began a whole window ago or more.
fn trim(q: &mut VecDeque<Slice>, now: Instant, window: Duration) {
    while q
        .front()
        .is_some_and(|(start, _)| now.duration_since(*start) >= window)
    {
        q.pop_front();
    }
}

impl LatencyStore {
    fn render(&self, format: Format) -> Result<Vec<u8>, EncodeError> {
        let fmt_err = |source| EncodeError::Fmt { format, source };
        let window = self.window_families();
        match format {
            Format::Protobuf => {
                let mut out = Vec::with_capacity(64 * 1024);
                for fam in prometheus_protobuf::encode(&self.registry).map_err(fmt_err)? {
                    fam.encode_length_delimited(&mut out)?;
                }
                for fam in window {
                    fam.encode_length_delimited(&mut out)?;
                }
                Ok(out)
            }
            Format::Text => {
                let mut s = String::with_capacity(256 * 1024);
                let fams = prometheus_protobuf::encode(&self.registry).map_err(fmt_err)?;
                encode_text_004(&mut s, &fams).map_err(fmt_err)?;
                encode_text_004(&mut s, &window).map_err(fmt_err)?;
                Ok(s.into_bytes())
            }
            Format::OpenMetrics => {
                let mut s = String::with_capacity(256 * 1024);
                prometheus_client::encoding::text::encode_registry(&mut s, &self.registry)
                    .map_err(fmt_err)?;
                // Gauges and summaries read the same in OpenMetrics and 0.0.4.
                encode_text_004(&mut s, &window).map_err(fmt_err)?;
                Ok(s.into_bytes())
            }
        }
    }
}

impl Encoded for LatencyStore {
    /// Served from the cache while no round ended and it is younger than
    /// [`CACHE_MAX_AGE`]; else encoded once and cached.
    fn encoded(&self, format: Format) -> Result<Arc<Vec<u8>>, EncodeError> {
        let slot = match format {
            Format::Text => 0,
            Format::OpenMetrics => 1,
            Format::Protobuf => 2,
        };
        let generation = self.generation.load(std::sync::atomic::Ordering::Relaxed);
        // One encoder at a time: concurrent scrapes wait for and share it.
        let mut c = self.cache.lock().unwrap_or_else(|p| p.into_inner());
        if let Some((g, at, bytes)) = &c.entries[slot] {
            if *g == generation && at.elapsed() < CACHE_MAX_AGE {
                return Ok(Arc::clone(bytes));
            }
        }
        let bytes = Arc::new(self.render(format)?);
        c.entries[slot] = Some((generation, Instant::now(), Arc::clone(&bytes)));
        Ok(bytes)
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
        // The window keeps 2 significant digits: within 1%.
        assert!((p50 - 5000e-9).abs() <= 50e-9, "p50 {p50}");
        let max = fams[1].metric[0].gauge.as_ref().unwrap().value;
        assert!((max - 10_000e-9).abs() <= 100e-9, "max {max}");
    }

    #[test]
    fn scrapes_between_rounds_share_one_encoding() {
        let s = LatencyStore::new(Duration::from_secs(60));
        s.declare(&key());
        let a = s.encoded(Format::Text).unwrap();
        let b = s.encoded(Format::Text).unwrap();
        assert!(Arc::ptr_eq(&a, &b), "no round in between: the same bytes");
        let mut h = ibprobe::stats::LatencyHistogram::new();
        h.record(1000);
        s.record(
            &key(),
            1,
            &Round {
                samples: Some(h),
                ..Round::default()
            },
        );
        let c = s.encoded(Format::Text).unwrap();
        assert!(!Arc::ptr_eq(&a, &c), "a round ended: encoded again");
        let text = String::from_utf8(c.to_vec()).unwrap();
        assert!(
            text.contains("ibprobe_latency_window_seconds_count{"),
            "{text}"
        );
    }

    #[test]
    fn the_window_keeps_a_few_small_slices() {
        let s = LatencyStore::new(Duration::from_millis(500));
        for _ in 0..20 {
            let mut h = ibprobe::stats::LatencyHistogram::new();
            for ns in 1..=100u64 {
                h.record(ns * 1000);
            }
            s.record(
                &key(),
                100,
                &Round {
                    samples: Some(h),
                    ..Round::default()
                },
            );
            std::thread::sleep(Duration::from_millis(30));
        }
        let w = s.windows.lock().unwrap();
        let q = &w.by_series[&key()];
        assert!(q.len() <= WINDOW_SLICES as usize + 1, "{} slices", q.len());
        // 2 significant digits up to 100 us: a few KiB, not the 224 KiB of
        // a full-range 3-digit histogram.
        for (_, h) in q {
            assert!(
                h.distinct_values() * 4 < 16 * 1024,
                "{} counts",
                h.distinct_values()
            );
        }
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
