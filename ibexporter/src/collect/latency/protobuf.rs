//! The latency families as length-delimited
//! `io.prometheus.client.MetricFamily` protobuf messages, written by hand.
//!
//! Why it exists: the protobuf format is the one that carries the native
//! histogram, and building prost messages for 400 series (30 bucket
//! structs, spans and label pairs each) would be most of an encode
//! (`benches/README.md` has the render times and their command).
//! Here each series' label pairs are encoded once, when it is declared,
//! and a scrape writes fields into reused buffers. Field numbers are
//! those of Prometheus' `metrics.proto` (the copy prometheus-client
//! ships); the tests in `mod.rs` decode this output with prost and
//! compare it with prometheus-client's own encoding of the same data.
//!
//! proto3 rules followed: a scalar equal to 0 is left out; a nested
//! message is always written (an empty `Gauge` still says "gauge").

use super::families::{Fam, Kind, FAMILIES, QUANTILES};
use super::native;
use super::state::State;
use super::wire::{bytes, double, label_pair, sint, uint, varint, zigzag};

/// Buffers reused across families and series (one encode allocates them
/// once and grows them to the largest family).
#[derive(Default)]
struct Scratch {
    family: Vec<u8>,
    metric: Vec<u8>,
    inner: Vec<u8>,
    small: Vec<u8>,
    spans: Vec<(i32, u32)>,
    deltas: Vec<i64>,
}

impl Scratch {
    /// `family.metric` (field 4) from `metric`: labels, then `field`
    /// holding `inner`.
    fn push_metric(&mut self, labels: &[u8], extra: Option<(&str, &str)>, field: u32) {
        self.metric.clear();
        self.metric.extend_from_slice(labels);
        if let Some((k, v)) = extra {
            label_pair(&mut self.metric, k, v);
        }
        bytes(&mut self.metric, field, &self.inner);
        bytes(&mut self.family, 4, &self.metric);
    }
}

/// `Metric` fields holding each type's message.
const GAUGE: u32 = 2;
const COUNTER: u32 = 3;
const SUMMARY: u32 = 4;
const HISTOGRAM: u32 = 7;

/// Writes every latency family of `st`, each as a varint length and a
/// `MetricFamily` message.
pub(super) fn write(out: &mut Vec<u8>, st: &State) {
    let mut x = Scratch::default();
    for f in FAMILIES {
        x.family.clear();
        bytes(&mut x.family, 1, f.name().as_bytes());
        bytes(&mut x.family, 2, st.help(f).as_bytes());
        uint(
            &mut x.family,
            3,
            match f.kind() {
                Kind::Counter => 0,
                Kind::Gauge => 1,
                Kind::Summary => 2,
                Kind::Histogram => 4,
            },
        );
        match f {
            Fam::Latency => {
                for s in st.series.values() {
                    x.inner.clear();
                    uint(&mut x.inner, 1, s.count);
                    double(&mut x.inner, 2, s.sum);
                    let mut cumulative = 0;
                    for (&le, n) in st.le_values.iter().zip(s.classic) {
                        cumulative += n;
                        x.small.clear();
                        uint(&mut x.small, 1, cumulative);
                        double(&mut x.small, 2, le);
                        bytes(&mut x.inner, 3, &x.small);
                    }
                    sint(&mut x.inner, 5, i64::from(native::SCHEMA));
                    double(&mut x.inner, 6, native::ZERO_THRESHOLD);
                    uint(&mut x.inner, 7, s.zero_count);
                    native::spans_and_deltas(&s.native, &mut x.spans, &mut x.deltas);
                    for &(offset, length) in &x.spans {
                        x.small.clear();
                        sint(&mut x.small, 1, i64::from(offset));
                        uint(&mut x.small, 2, u64::from(length));
                        bytes(&mut x.inner, 12, &x.small);
                    }
                    if !x.deltas.is_empty() {
                        x.small.clear();
                        for &d in &x.deltas {
                            varint(&mut x.small, zigzag(d));
                        }
                        bytes(&mut x.inner, 13, &x.small);
                    }
                    x.push_metric(&s.labels.protobuf, None, HISTOGRAM);
                }
            }
            Fam::Probes => {
                for s in st.series.values() {
                    for (result, n) in [("ok", s.ok), ("timeout", s.timeout), ("error", s.error)] {
                        x.inner.clear();
                        double(&mut x.inner, 1, n as f64);
                        x.push_metric(&s.labels.protobuf, Some(("result", result)), COUNTER);
                    }
                }
            }
            Fam::Errors => {
                for e in st.errors.values() {
                    x.inner.clear();
                    double(&mut x.inner, 1, e.count as f64);
                    x.push_metric(&e.labels.protobuf, None, COUNTER);
                }
            }
            Fam::LastSuccess => {
                for s in st.series.values() {
                    if let Some(t) = s.last_ok {
                        x.inner.clear();
                        double(&mut x.inner, 1, t);
                        x.push_metric(&s.labels.protobuf, None, GAUGE);
                    }
                }
            }
            Fam::Window => {
                for (s, w) in st.series.values().filter_map(|s| Some((s, s.summary?))) {
                    x.inner.clear();
                    uint(&mut x.inner, 1, w.count);
                    double(&mut x.inner, 2, w.sum_ns as f64 / 1e9);
                    for (&q, v) in QUANTILES.iter().zip(w.quantiles) {
                        x.small.clear();
                        double(&mut x.small, 1, q);
                        double(&mut x.small, 2, v as f64 / 1e9);
                        bytes(&mut x.inner, 3, &x.small);
                    }
                    x.push_metric(&s.labels.protobuf, None, SUMMARY);
                }
            }
            Fam::WindowMax => {
                for (s, w) in st.series.values().filter_map(|s| Some((s, s.summary?))) {
                    x.inner.clear();
                    double(&mut x.inner, 1, w.max_ns as f64 / 1e9);
                    x.push_metric(&s.labels.protobuf, None, GAUGE);
                }
            }
        }
        if let Some(unit) = f.unit() {
            bytes(&mut x.family, 5, unit.as_bytes());
        }
        varint(out, x.family.len() as u64);
        out.extend_from_slice(&x.family);
    }
}
