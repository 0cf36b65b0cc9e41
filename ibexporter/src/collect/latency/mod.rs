//! Probe latency: what the probe loop measured, as Prometheus families.
//!
//! Why it exists: the probe thread (`crate::engine`) measures rounds with
//! the ibprobe library; this collector turns each round into the families
//! below, with bounded memory (per series: 30 classic bucket counts, the
//! native buckets in use, and a window of a few sparse slices; never
//! per-sample vectors).
//!
//! | family | type | labels | unit |
//! |---|---|---|---|
//! | `ibprobe_latency_seconds` | histogram: 29 classic buckets, log-linear 250 ns .. 10 ms (1, 1.5, 2, 3, 5, 7 per decade), and a native histogram (schema 3) in the protobuf format | source, target, transport, op, size_bytes | seconds |
//! | `ibprobe_latency_window_seconds` | summary over the sliding window: quantile 0.5, 0.9, 0.99, 0.999, `_sum`, `_count` (log-linear buckets, within 0.8%) | same | seconds |
//! | `ibprobe_latency_window_max_seconds` | gauge: the true max over the window | same | seconds |
//! | `ibprobe_probes_total` | counter | same + result = ok, timeout, error | probes |
//! | `ibprobe_probe_errors_total` | counter | source, target, transport, reason | rounds |
//! | `ibprobe_last_success_timestamp_seconds` | gauge: Unix time of the last round with an answer | same as the histogram | seconds |
//!
//! # How a scrape stays cheap
//!
//! - A round updates its series' counts and recomputes that series'
//!   window summary, on the probe thread (`series.rs`, `window.rs`).
//! - The families are written straight from those counts by `text.rs`
//!   (text 0.0.4, OpenMetrics) and `protobuf.rs`, with each series'
//!   labels escaped and encoded once, when it is declared. prometheus-client
//!   is not used for these families: its data model costs several times
//!   the direct writers per encode of 400 series (`benches/README.md`).
//!   The tests below check the output against prometheus-client's own
//!   encoding of the same observations, sample by sample.
//! - The encoding is cached per format until a round ends, a series
//!   comes or goes, or [`CACHE_MAX_AGE`] passes (window slices expire
//!   with time), but is never redone within [`MIN_ENCODE_INTERVAL`], and
//!   it is served as shared [`Bytes`]: concurrent scrapes share one
//!   buffer.
//!
//! What a sample is: one-way latency (t_recv - t_subm) for a loopback
//! probe (HCA loopback, shm, udp), the round trip for a remote target, the
//! wake-up latency for a `host` probe.

pub mod counters;
mod families;
mod native;
mod protobuf;
mod series;
mod state;
mod text;
mod window;
mod wire;

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, Instant};

use bytes::Bytes;

use crate::expo::{EncodeError, Encoded, Format};
use families::{Fam, CLASSIC_NS, FAMILIES};
pub use families::{Round, SeriesKey, QUANTILES, WINDOW_SLICES};
use series::{Labels, Series};
use state::{ErrorCount, ErrorKey, State};

/// The classic bucket bounds in seconds (without `+Inf`).
///
/// Why it exists: tests and the README's series count need the bounds
/// the exporter uses.
pub fn classic_buckets() -> Vec<f64> {
    // From whole nanoseconds, so each bound is the double nearest its
    // decimal value (5e-6, not 4.9999999999999996e-6).
    CLASSIC_NS.iter().map(|&n| n as f64 / 1e9).collect()
}

/// Native histogram schema: 2^(2^-3) = 9% wide buckets.
pub const NATIVE_SCHEMA: i8 = native::SCHEMA;

/// One format's encoding: the generation and time it was made at.
type CacheEntry = (u64, Instant, Bytes);

/// Encoded bytes per format (text, OpenMetrics, protobuf).
#[derive(Default)]
struct Cache {
    entries: [Option<CacheEntry>; 3],
}

/// A cached encoding older than this is redone even without a new round
/// (slices expire with time).
pub const CACHE_MAX_AGE: Duration = Duration::from_secs(5);

/// A cached encoding younger than this is served even when rounds ended
/// since: a scrape sees the rounds that ended up to this long before it.
///
/// Why: with 400 series a round ends every ~100 ms; encoding at each
/// would make concurrent scrapes hold many 2.4 MB generations at once
/// (51 MB RSS under 200 clients). Prometheus scrapes every few seconds
/// at most, so 1 s of lag costs nothing.
pub const MIN_ENCODE_INTERVAL: Duration = Duration::from_secs(1);

/// The store the engine writes rounds into and `/metrics` reads.
///
/// Why it exists: one owner for every latency family, so a round updates
/// them together, the window is trimmed in one place, and an encoding is
/// made once per change and shared by every scrape until the next.
#[derive(Clone)]
pub struct LatencyStore {
    min_encode_interval: Duration,
    counters: counters::CounterStore,
    state: Arc<Mutex<State>>,
    generation: Arc<AtomicU64>,
    cache: Arc<Mutex<Cache>>,
}

impl std::fmt::Debug for LatencyStore {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("LatencyStore")
            .field("window", &self.lock().window)
            .finish_non_exhaustive()
    }
}

impl LatencyStore {
    /// A store whose summary covers the last `window`.
    pub fn new(window: Duration) -> LatencyStore {
        let secs = window.as_secs();
        let helps = FAMILIES.map(|f| match f {
            Fam::Latency => "Probe latency: one-way for loopback probes, round trip for remote targets, wake-up for host probes.".to_string(),
            Fam::Probes => "Probe messages by result: ok (answered), timeout (no answer within the timeout), error (the round failed).".to_string(),
            Fam::Errors => "Probe rounds that failed, by reason (connect, refused, setup, protocol, peer_lost, completion, transport, config).".to_string(),
            Fam::LastSuccess => "Unix time of the last probe round that got at least one answer.".to_string(),
            Fam::Window => format!("Probe latency percentiles over the last {secs} s (log-linear buckets, values within 0.8%)."),
            Fam::WindowMax => format!("The largest probe latency over the last {secs} s (the true max, not a bucket bound)."),
        });
        let mut le_values = classic_buckets();
        le_values.push(f64::INFINITY);
        let le_labels = le_values
            .iter()
            .map(|&v| {
                let mut b = Vec::new();
                crate::expo::text::float(&mut b, v);
                String::from_utf8(b).expect("dtoa writes ASCII")
            })
            .collect();
        LatencyStore {
            min_encode_interval: MIN_ENCODE_INTERVAL,
            counters: counters::CounterStore::default(),
            state: Arc::new(Mutex::new(State {
                series: BTreeMap::new(),
                errors: BTreeMap::new(),
                helps,
                le_labels,
                le_values,
                window,
            })),
            generation: Arc::default(),
            cache: Arc::default(),
        }
    }

    /// The same store, re-encoding for scrapes at most every `d` instead
    /// of [`MIN_ENCODE_INTERVAL`] (tests and benchmarks use zero).
    pub fn with_min_encode_interval(mut self, d: Duration) -> LatencyStore {
        self.min_encode_interval = d;
        self
    }

    fn lock(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }

    fn changed(&self) {
        self.generation.fetch_add(1, Ordering::Relaxed);
    }

    /// Makes a series visible before its first round (zeros, so rate()
    /// has a start and a dead target shows up as such).
    pub fn declare(&self, key: &SeriesKey) {
        let mut st = self.lock();
        let window = st.window;
        st.series
            .entry(key.clone())
            .or_insert_with(|| Series::new(key, window));
        drop(st);
        self.changed();
    }

    /// The per-probe counters' collector (register it once).
    pub fn counter_collector(&self) -> counters::CounterStore {
        self.counters.clone()
    }

    /// Records one round of `key`, sent `sent` messages.
    pub fn record(&self, key: &SeriesKey, sent: u64, round: &Round) {
        if let Some(c) = &round.counters {
            self.counters.record(key, c);
        }
        let now = Instant::now();
        let mut st = self.lock();
        let window = st.window;
        st.series
            .entry(key.clone())
            .or_insert_with(|| Series::new(key, window))
            .record(sent, round, now);
        if let Some(reason) = &round.error {
            let ek = ErrorKey {
                source: key.source.clone(),
                target: key.target.clone(),
                transport: key.transport.clone(),
                reason: reason.clone(),
            };
            st.errors
                .entry(ek)
                .or_insert_with(|| ErrorCount {
                    labels: Labels::new(&[
                        ("source", &key.source),
                        ("target", &key.target),
                        ("transport", &key.transport),
                        ("reason", reason),
                    ]),
                    count: 0,
                })
                .count += 1;
        }
        drop(st);
        self.changed();
    }

    /// Forgets a series that is no longer probed (a target left the
    /// pinglist), so its series stop being exported.
    pub fn forget(&self, key: &SeriesKey) {
        self.counters.forget(key);
        self.lock().series.remove(key);
        self.changed();
    }

    /// Series held now.
    pub fn len(&self) -> usize {
        self.lock().series.len()
    }

    /// True when no series is declared.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Encodes every family in `format` now, bypassing the cache (the
    /// render benchmark times this).
    pub fn render(&self, format: Format) -> Vec<u8> {
        let now = Instant::now();
        let mut st = self.lock();
        let mut expired = false;
        for s in st.series.values_mut() {
            expired |= s.expire(now);
        }
        let mut out = Vec::with_capacity(64 * 1024);
        match format {
            Format::Text => text::write(&mut out, &st, false),
            Format::OpenMetrics => text::write(&mut out, &st, true),
            Format::Protobuf => protobuf::write(&mut out, &st),
        }
        drop(st);
        if expired {
            self.changed();
        }
        out
    }
}

impl Encoded for LatencyStore {
    /// Served from the cache while it is younger than
    /// [`MIN_ENCODE_INTERVAL`], or no round ended and it is younger than
    /// [`CACHE_MAX_AGE`]; else encoded once and cached.
    fn encoded(&self, format: Format) -> Result<Bytes, EncodeError> {
        let slot = match format {
            Format::Text => 0,
            Format::OpenMetrics => 1,
            Format::Protobuf => 2,
        };
        let generation = self.generation.load(Ordering::Relaxed);
        // One encoder at a time: concurrent scrapes wait for and share it.
        let mut c = self.cache.lock().unwrap_or_else(|p| p.into_inner());
        if let Some((g, at, bytes)) = &c.entries[slot] {
            let age = at.elapsed();
            if age < self.min_encode_interval || (*g == generation && age < CACHE_MAX_AGE) {
                return Ok(bytes.clone());
            }
        }
        let bytes = Bytes::from(self.render(format));
        // Tagged with the generation read before encoding: a round that
        // ended meanwhile makes the next scrape encode again.
        c.entries[slot] = Some((generation, Instant::now(), bytes.clone()));
        Ok(bytes)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use prometheus_client::encoding::prometheus_protobuf::{self, prometheus_data_model as pb};
    use prometheus_client::encoding::EncodeLabelSet;
    use prometheus_client::metrics::counter::Counter;
    use prometheus_client::metrics::family::Family;
    use prometheus_client::metrics::histogram::{Histogram, NativeHistogramConfig};
    use prometheus_client::registry::{Registry, Unit};
    use proptest::prelude::*;
    use prost::Message;

    fn key(target: &str, size: u32) -> SeriesKey {
        SeriesKey {
            source: "a".into(),
            target: target.into(),
            transport: "udp".into(),
            op: "send".into(),
            size_bytes: size.to_string(),
        }
    }

    fn round(samples: &[u64], timeouts: u64, error: Option<&str>) -> Round {
        let h = (!samples.is_empty()).then(|| {
            let mut h = ibstats::latency::LatencyHistogram::new();
            for &s in samples {
                h.record(s);
            }
            h
        });
        Round {
            samples: h,
            timeouts,
            error: error.map(String::from),
            hw: None,
            counters: None,
        }
    }

    #[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
    struct ResultKey {
        source: String,
        target: String,
        transport: String,
        op: String,
        size_bytes: String,
        result: &'static str,
    }

    #[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
    struct ErrKey {
        source: String,
        target: String,
        transport: String,
        reason: String,
    }

    /// The same rounds through prometheus-client's own types (what this
    /// module used before it wrote the families itself): the reference
    /// the direct encoders are checked against.
    struct Reference {
        reg: Registry,
        histo: Family<SeriesKey, Histogram, fn() -> Histogram>,
        probes: Family<ResultKey, Counter>,
        errors: Family<ErrKey, Counter>,
    }

    fn native_histogram() -> Histogram {
        Histogram::new_classic_and_native(
            classic_buckets(),
            NativeHistogramConfig::with_schema(NATIVE_SCHEMA),
        )
    }

    impl Reference {
        fn new() -> Reference {
            let histo: Family<SeriesKey, Histogram, fn() -> Histogram> =
                Family::new_with_constructor(native_histogram as fn() -> Histogram);
            let probes = Family::<ResultKey, Counter>::default();
            let errors = Family::<ErrKey, Counter>::default();
            let mut reg = Registry::default();
            let store = LatencyStore::new(Duration::from_secs(60));
            let st = store.lock();
            let help = |f| st.help(f).trim_end_matches('.').to_string();
            reg.register_with_unit(
                "ibprobe_latency",
                help(Fam::Latency),
                Unit::Seconds,
                histo.clone(),
            );
            reg.register("ibprobe_probes", help(Fam::Probes), probes.clone());
            reg.register("ibprobe_probe_errors", help(Fam::Errors), errors.clone());
            drop(st);
            Reference {
                reg,
                histo,
                probes,
                errors,
            }
        }

        fn declare(&self, k: &SeriesKey) {
            let _ = self.histo.get_or_create(k);
            for r in ["ok", "timeout", "error"] {
                let _ = self.probes.get_or_create(&self.rk(k, r));
            }
        }

        fn rk(&self, k: &SeriesKey, result: &'static str) -> ResultKey {
            ResultKey {
                source: k.source.clone(),
                target: k.target.clone(),
                transport: k.transport.clone(),
                op: k.op.clone(),
                size_bytes: k.size_bytes.clone(),
                result,
            }
        }

        fn record(&self, k: &SeriesKey, sent: u64, r: &Round) {
            let ok = r.samples.as_ref().map_or(0, |h| h.len());
            self.probes.get_or_create(&self.rk(k, "ok")).inc_by(ok);
            self.probes
                .get_or_create(&self.rk(k, "timeout"))
                .inc_by(r.timeouts);
            let errored = sent.saturating_sub(ok + r.timeouts);
            if r.error.is_some() || errored > 0 {
                self.probes
                    .get_or_create(&self.rk(k, "error"))
                    .inc_by(errored.max(1));
            }
            if let Some(reason) = &r.error {
                self.errors
                    .get_or_create(&ErrKey {
                        source: k.source.clone(),
                        target: k.target.clone(),
                        transport: k.transport.clone(),
                        reason: reason.clone(),
                    })
                    .inc();
            }
            if let Some(h) = &r.samples {
                let hist = self.histo.get_or_create(k);
                for (v, n) in h.buckets() {
                    for _ in 0..n {
                        hist.observe(v as f64 / 1e9);
                    }
                }
            }
        }
    }

    /// Decodes a length-delimited protobuf exposition.
    fn decode(mut b: &[u8]) -> Vec<pb::MetricFamily> {
        let mut out = Vec::new();
        while !b.is_empty() {
            out.push(pb::MetricFamily::decode_length_delimited(&mut b).expect("valid protobuf"));
        }
        out
    }

    fn labels_of(m: &pb::Metric) -> Vec<(String, String)> {
        m.label
            .iter()
            .map(|l| (l.name.clone(), l.value.clone()))
            .collect()
    }

    /// Sums differ by design (the store sums exact samples, the reference
    /// the bucket values it was fed): equal within 0.1%, then zeroed.
    fn take_sum(m: &mut pb::Metric) -> f64 {
        m.histogram
            .as_mut()
            .map_or(0.0, |h| std::mem::take(&mut h.sample_sum))
    }

    fn close(a: f64, b: f64) -> bool {
        (a - b).abs() <= 1e-3 * a.abs().max(b.abs()) + 1e-12
    }

    /// One text exposition as (family header lines, sample -> value).
    /// A sample: its name and sorted label pairs.
    type SampleId = (String, Vec<(String, String)>);

    fn parse_text(t: &str) -> (Vec<String>, BTreeMap<SampleId, f64>) {
        let mut headers = Vec::new();
        let mut samples = BTreeMap::new();
        for line in t.lines() {
            if line.starts_with('#') {
                headers.push(line.to_string());
                continue;
            }
            let (series, value) = line.rsplit_once(' ').expect("name and value");
            let (name, labels) = match series.split_once('{') {
                Some((n, rest)) => (n, rest.strip_suffix('}').expect("closing brace")),
                None => (series, ""),
            };
            let mut pairs = Vec::new();
            let mut rest = labels;
            while !rest.is_empty() {
                let (k, after) = rest.split_once("=\"").expect("label name");
                let mut v = String::new();
                let mut chars = after.char_indices();
                let mut end = after.len();
                while let Some((i, c)) = chars.next() {
                    match c {
                        '\\' => {
                            let (_, e) = chars.next().expect("escaped char");
                            v.push(if e == 'n' { '\n' } else { e });
                        }
                        '"' => {
                            end = i + 1;
                            break;
                        }
                        c => v.push(c),
                    }
                }
                // Bounds are numbers: "2.5e-7" and "0.00000025" are one le.
                if k == "le" || k == "quantile" {
                    v = match v.as_str() {
                        "+Inf" => "+Inf".into(),
                        n => format!("{:e}", n.parse::<f64>().expect("a numeric bound")),
                    };
                }
                pairs.push((k.to_string(), v));
                rest = after[end..].strip_prefix(',').unwrap_or(&after[end..]);
            }
            pairs.sort();
            let v: f64 = match value {
                "+Inf" => f64::INFINITY,
                v => v.parse().expect("a number"),
            };
            samples.insert((name.to_string(), pairs), v);
        }
        (headers, samples)
    }

    /// Everything in `ours` that the reference also writes must be there
    /// with the same value (sums within 0.1%), and nothing the reference
    /// writes may be missing.
    fn same_samples(ours: &str, reference: &str) {
        let (oh, os) = parse_text(ours);
        let (rh, rs) = parse_text(reference);
        for h in &rh {
            assert!(oh.contains(h), "header {h:?} missing in\n{ours}");
        }
        assert!(!rs.is_empty());
        for ((name, labels), v) in &rs {
            let got = os
                .get(&(name.clone(), labels.clone()))
                .unwrap_or_else(|| panic!("{name}{labels:?} missing in\n{ours}"));
            if name.ends_with("_sum") {
                assert!(close(*got, *v), "{name}{labels:?}: {got} vs {v}");
            } else {
                assert_eq!(got, v, "{name}{labels:?}");
            }
        }
    }

    fn check_against_reference(rounds: &[(usize, Vec<u64>, u64, Option<&str>)], targets: &[&str]) {
        let store = LatencyStore::new(Duration::from_secs(60));
        let reference = Reference::new();
        let keys: Vec<SeriesKey> = targets
            .iter()
            .enumerate()
            .map(|(i, t)| key(t, 32 << i))
            .collect();
        for k in &keys {
            store.declare(k);
            reference.declare(k);
        }
        for (which, samples, timeouts, error) in rounds {
            let k = &keys[which % keys.len()];
            let r = round(samples, *timeouts, *error);
            let sent = samples.len() as u64 + timeouts + u64::from(error.is_some());
            store.record(k, sent, &r);
            reference.record(k, sent, &r);
        }

        // Protobuf: decoded, family by family, metrics in label order.
        let ours = decode(&store.render(Format::Protobuf));
        let theirs = prometheus_protobuf::encode(&reference.reg).expect("reference encodes");
        for mut want in theirs {
            let mut got = ours
                .iter()
                .find(|f| f.name == want.name)
                .unwrap_or_else(|| panic!("family {} missing", want.name))
                .clone();
            want.metric.sort_by_key(labels_of);
            got.metric.sort_by_key(labels_of);
            assert_eq!(got.metric.len(), want.metric.len(), "{}", want.name);
            for (g, w) in got.metric.iter_mut().zip(want.metric.iter_mut()) {
                let (gs, ws) = (take_sum(g), take_sum(w));
                assert!(close(gs, ws), "{}: sum {gs} vs {ws}", want.name);
                if let Some(h) = w.histogram.as_mut() {
                    h.start_timestamp = None;
                }
            }
            assert_eq!(got, want, "family {}", want.name);
        }

        // Text 0.0.4: the reference is prometheus-client's data model
        // through this crate's 0.0.4 writer, as served before.
        let ours = String::from_utf8(store.render(Format::Text)).unwrap();
        let mut theirs = Vec::new();
        crate::expo::text::encode_text_004(
            &mut theirs,
            &prometheus_protobuf::encode(&reference.reg).unwrap(),
        );
        same_samples(&ours, &String::from_utf8(theirs).unwrap());

        // OpenMetrics: prometheus-client's own text encoder.
        let ours = String::from_utf8(store.render(Format::OpenMetrics)).unwrap();
        let mut theirs = String::new();
        prometheus_client::encoding::text::encode_registry(&mut theirs, &reference.reg).unwrap();
        same_samples(&ours, &theirs);
    }

    #[test]
    fn the_direct_encoders_match_prometheus_client() {
        check_against_reference(
            &[
                (0, vec![900, 1500, 2500, 40_000], 1, None),
                (0, vec![], 0, Some("peer_lost")),
                (
                    1,
                    vec![1, 250, 251, 999_999, 10_000_000, 10_000_001, 90_000_000_000],
                    0,
                    None,
                ),
                (2, vec![], 3, None),
            ],
            &["peer\"with\\odd\nname", "b", "never-answered"],
        );
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(24))]
        #[test]
        fn the_direct_encoders_match_prometheus_client_on_any_rounds(
            rounds in prop::collection::vec(
                (0usize..3, prop::collection::vec(1u64..20_000_000, 0..60), 0u64..3, prop::option::of(Just("refused"))),
                1..12,
            )
        ) {
            check_against_reference(&rounds, &["x", "y", "z"]);
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
    fn the_window_summary_is_served_in_every_format() {
        let s = LatencyStore::new(Duration::from_secs(60));
        let samples: Vec<u64> = (1..=1000).map(|ns| ns * 10).collect();
        s.record(&key("t", 32), 1002, &round(&samples, 2, None));
        let text = String::from_utf8(s.render(Format::Text)).unwrap();
        let (_, samples) = parse_text(&text);
        let get = |name: &str, extra: Option<(&str, &str)>| {
            let mut l: Vec<(String, String)> = key("t", 32)
                .pairs()
                .iter()
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .collect();
            if let Some((k, v)) = extra {
                l.push((k.into(), v.into()));
            }
            l.sort();
            samples[&(name.to_string(), l)]
        };
        assert_eq!(get("ibprobe_latency_window_seconds_count", None), 1000.0);
        assert_eq!(
            get("ibprobe_probes_total", Some(("result", "timeout"))),
            2.0
        );
        // parse_text writes bounds as `{:e}`.
        let p50 = get("ibprobe_latency_window_seconds", Some(("quantile", "5e-1")));
        // 5000 ns exactly, reported within 0.8% above (and the input
        // histogram's own 0.1%).
        assert!((5000e-9..=5000e-9 * 1.009).contains(&p50), "p50 {p50}");
        let max = get("ibprobe_latency_window_max_seconds", None);
        assert!((10_000e-9..=10_010e-9).contains(&max), "max {max}");
        let sum = get("ibprobe_latency_window_seconds_sum", None);
        assert!(close(sum, 5_005_000e-9), "sum {sum}");

        let pb = decode(&s.render(Format::Protobuf));
        let w = pb
            .iter()
            .find(|f| f.name == "ibprobe_latency_window_seconds")
            .unwrap();
        let summary = w.metric[0].summary.as_ref().unwrap();
        assert_eq!(summary.sample_count, 1000);
        assert_eq!(summary.quantile[0].value, p50);
        assert_eq!(w.r#type, pb::MetricType::Summary as i32);

        let om = String::from_utf8(s.render(Format::OpenMetrics)).unwrap();
        assert!(om.contains("# TYPE ibprobe_latency_window_seconds summary\n# UNIT ibprobe_latency_window_seconds seconds\n"), "{om}");
        assert!(om.contains("# TYPE ibprobe_probes counter\n"), "{om}");
    }

    #[test]
    fn scrapes_between_rounds_share_one_encoding() {
        let s = LatencyStore::new(Duration::from_secs(60)).with_min_encode_interval(Duration::ZERO);
        s.declare(&key("t", 32));
        let a = s.encoded(Format::Text).unwrap();
        let b = s.encoded(Format::Text).unwrap();
        assert_eq!(
            a.as_ptr(),
            b.as_ptr(),
            "no round in between: the same buffer"
        );
        s.record(&key("t", 32), 1, &round(&[1000], 0, None));
        let c = s.encoded(Format::Text).unwrap();
        assert_ne!(a.as_ptr(), c.as_ptr(), "a round ended: encoded again");
        let text = String::from_utf8(c.to_vec()).unwrap();
        assert!(
            text.contains("ibprobe_latency_window_seconds_count{"),
            "{text}"
        );
    }

    #[test]
    fn the_window_keeps_a_few_small_slices() {
        let s = LatencyStore::new(Duration::from_millis(500));
        let samples: Vec<u64> = (1..=100).map(|ns| ns * 1000).collect();
        for _ in 0..20 {
            s.record(&key("t", 32), 100, &round(&samples, 0, None));
            std::thread::sleep(Duration::from_millis(30));
        }
        let st = s.lock();
        let w = &st.series[&key("t", 32)].window;
        assert!(
            w.slices() <= WINDOW_SLICES as usize + 1,
            "{} slices",
            w.slices()
        );
        // 100 distinct values a round: at most 100 buckets of 8 bytes per
        // slice, whatever the number of rounds in it.
        assert!(
            w.bucket_bytes() <= w.slices() * 100 * 8,
            "{} bytes in {} slices",
            w.bucket_bytes(),
            w.slices()
        );
    }

    #[test]
    fn a_failed_round_counts_an_error_and_its_reason() {
        let s = LatencyStore::new(Duration::from_secs(60));
        s.record(&key("t", 32), 0, &round(&[], 0, Some("peer_lost")));
        let text = String::from_utf8(s.render(Format::Text)).unwrap();
        assert!(text.contains("ibprobe_probes_total{source=\"a\",target=\"t\",transport=\"udp\",op=\"send\",size_bytes=\"32\",result=\"error\"} 1\n"), "{text}");
        assert!(text.contains("ibprobe_probe_errors_total{source=\"a\",target=\"t\",transport=\"udp\",reason=\"peer_lost\"} 1\n"), "{text}");
        assert!(
            !text.contains("ibprobe_latency_window_seconds_count"),
            "{text}"
        );
        assert!(
            !text.contains("ibprobe_last_success_timestamp_seconds{"),
            "{text}"
        );
    }

    #[test]
    fn the_window_forgets_old_rounds_and_the_histogram_keeps_them() {
        let s = LatencyStore::new(Duration::from_millis(50));
        s.record(&key("t", 32), 1, &round(&[1000], 0, None));
        let count = "ibprobe_latency_window_seconds_count{";
        assert!(String::from_utf8(s.render(Format::Text))
            .unwrap()
            .contains(count));
        std::thread::sleep(Duration::from_millis(80));
        let text = String::from_utf8(s.render(Format::Text)).unwrap();
        assert!(!text.contains(count), "{text}");
        assert!(text.contains("ibprobe_latency_seconds_count{source=\"a\",target=\"t\",transport=\"udp\",op=\"send\",size_bytes=\"32\"} 1\n"), "{text}");
    }

    #[test]
    fn scrapes_within_the_min_interval_share_one_encoding() {
        let s = LatencyStore::new(Duration::from_secs(60))
            .with_min_encode_interval(Duration::from_millis(300));
        s.declare(&key("t", 32));
        let a = s.encoded(Format::Protobuf).unwrap();
        s.record(&key("t", 32), 1, &round(&[1000], 0, None));
        let b = s.encoded(Format::Protobuf).unwrap();
        assert_eq!(a.as_ptr(), b.as_ptr(), "within 300 ms: the same buffer");
        std::thread::sleep(Duration::from_millis(350));
        let c = s.encoded(Format::Protobuf).unwrap();
        assert_ne!(a.as_ptr(), c.as_ptr(), "after 300 ms the round shows");
        let w = decode(&c);
        assert!(w
            .iter()
            .any(|f| f.name == "ibprobe_latency_window_seconds" && f.metric.len() == 1));
    }

    #[test]
    fn a_forgotten_series_is_no_longer_written() {
        let s = LatencyStore::new(Duration::from_secs(60)).with_min_encode_interval(Duration::ZERO);
        s.record(&key("gone", 32), 1, &round(&[1000], 0, None));
        s.declare(&key("kept", 32));
        s.forget(&key("gone", 32));
        assert_eq!(s.len(), 1);
        let text = String::from_utf8(s.encoded(Format::Text).unwrap().to_vec()).unwrap();
        assert!(!text.contains("target=\"gone\""), "{text}");
        assert!(text.contains("target=\"kept\""), "{text}");
    }
}
