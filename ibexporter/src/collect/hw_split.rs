//! The R-Pingmesh split of remote probes (`[probe] hw_timestamps = true`):
//! where each round trip's time went, from the HCAs' completion timestamps.
//!
//! Why it exists: a round trip's tail can be the network's or either
//! host's; R-Pingmesh (SIGCOMM'24) tells them apart with hardware
//! completion timestamps (`ibprobe::clock::hwts`). The probe round
//! computes the split (`engine/round.rs`); this collector counts it.
//!
//! | family | type | labels | unit |
//! |---|---|---|---|
//! | `ibprobe_hw_network_rtt_seconds` | histogram, the classic buckets of `ibprobe_latency_seconds` | source, target, transport, op, size_bytes | seconds: (T5 - T2) - (T4 - T3), the wire and both HCAs |
//! | `ibprobe_hw_prober_delay_seconds` | same | same | seconds: (T6 - T1) - (T5 - T2), this host |
//! | `ibprobe_hw_responder_delay_seconds` | same | same | seconds: T4 - T3, the peer host |
//! | `ibprobe_hw_split_left_out_total` | counter | same + reason = missing_prober, missing_responder, invalid, no_report | answered probes not split |
//!
//! T1/T6: this host posts the probe / sees the echo (host clock); T2/T5:
//! its send / receive completions (its HCA); T3/T4: the peer's receive /
//! send completions (the peer's HCA). Series appear once a verbs target
//! with timestamps was probed. Unverified on hardware: no device of this
//! project stamps completions (rxe does not); tested on synthetic splits.

use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::histogram::Histogram;
use prometheus_client::registry::{Registry, Unit};

use super::latency::{classic_buckets, SeriesKey};
use ibprobe::clock::hwts::HwSplit;
use ibstats::latency::LatencyHistogram;

/// `ibprobe_hw_split_left_out_total` labels.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct LeftOutKey {
    /// As [`SeriesKey`].
    pub source: String,
    /// As [`SeriesKey`].
    pub target: String,
    /// As [`SeriesKey`].
    pub transport: String,
    /// As [`SeriesKey`].
    pub op: String,
    /// As [`SeriesKey`].
    pub size_bytes: String,
    /// missing_prober, missing_responder, invalid, no_report.
    pub reason: String,
}

type Hists = Family<SeriesKey, Histogram, fn() -> Histogram>;

fn histogram() -> Histogram {
    Histogram::new(classic_buckets())
}

/// The split's families (cheap clones share the same series).
#[derive(Clone, Debug)]
pub struct HwSplitMetrics {
    network: Hists,
    prober: Hists,
    responder: Hists,
    left_out: Family<LeftOutKey, Counter>,
}

impl Default for HwSplitMetrics {
    fn default() -> Self {
        let h = || Hists::new_with_constructor(histogram as fn() -> Histogram);
        HwSplitMetrics {
            network: h(),
            prober: h(),
            responder: h(),
            left_out: Family::default(),
        }
    }
}

fn observe(h: &Histogram, l: &LatencyHistogram) {
    for (ns, n) in l.buckets() {
        for _ in 0..n {
            h.observe(ns as f64 / 1e9);
        }
    }
}

impl HwSplitMetrics {
    /// Registers the four families.
    pub fn register(&self, reg: &mut Registry) {
        reg.register_with_unit(
            "ibprobe_hw_network_rtt",
            "Remote probes with [probe] hw_timestamps: (T5 - T2) - (T4 - T3) from the HCAs' completion timestamps, the wire and both HCAs (R-Pingmesh network RTT)",
            Unit::Seconds,
            self.network.clone(),
        );
        reg.register_with_unit(
            "ibprobe_hw_prober_delay",
            "Remote probes with [probe] hw_timestamps: (T6 - T1) - (T5 - T2), the probing host's part of the round trip",
            Unit::Seconds,
            self.prober.clone(),
        );
        reg.register_with_unit(
            "ibprobe_hw_responder_delay",
            "Remote probes with [probe] hw_timestamps: T4 - T3 on the peer's HCA, the answering host's part of the round trip",
            Unit::Seconds,
            self.responder.clone(),
        );
        reg.register(
            "ibprobe_hw_split_left_out",
            "Answered probes left out of the hardware-timestamp split, by reason (missing_prober, missing_responder, invalid: a negative part, no_report: the peer sent no timestamps)",
            self.left_out.clone(),
        );
    }

    fn left_out(&self, k: &SeriesKey, reason: &str, n: u64) {
        if n == 0 {
            return;
        }
        self.left_out
            .get_or_create(&LeftOutKey {
                source: k.source.clone(),
                target: k.target.clone(),
                transport: k.transport.clone(),
                op: k.op.clone(),
                size_bytes: k.size_bytes.clone(),
                reason: reason.into(),
            })
            .inc_by(n);
    }

    /// Counts one round's split for series `k`.
    pub fn record(&self, k: &SeriesKey, s: &HwSplit) {
        let sp = &s.split;
        observe(&self.network.get_or_create(k), &sp.network_rtt);
        observe(&self.prober.get_or_create(k), &sp.prober_delay);
        observe(&self.responder.get_or_create(k), &sp.responder_delay);
        self.left_out(k, "missing_prober", sp.missing_prober);
        self.left_out(k, "missing_responder", sp.missing_responder);
        self.left_out(k, "invalid", sp.invalid);
    }

    /// `n` answered probes of series `k` could not be split: the peer sent
    /// no timestamps.
    pub fn no_report(&self, k: &SeriesKey, n: u64) {
        self.left_out(k, "no_report", n);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use ibprobe::clock::hwts::Split;

    fn key() -> SeriesKey {
        SeriesKey {
            source: "node1".into(),
            target: "10.0.0.2:18515".into(),
            transport: "rc".into(),
            op: "send".into(),
            size_bytes: "32".into(),
        }
    }

    fn hist(v: &[u64]) -> LatencyHistogram {
        let mut h = LatencyHistogram::new();
        for &x in v {
            h.record(x);
        }
        h
    }

    #[test]
    fn a_split_round_becomes_histograms_and_counts() {
        let m = HwSplitMetrics::default();
        let mut reg = Registry::default();
        m.register(&mut reg);
        let split = Split {
            network_rtt: hist(&[1_200, 1_400, 2_600]),
            prober_delay: hist(&[400, 450, 900]),
            responder_delay: hist(&[600, 600, 8_000]),
            missing_prober: 0,
            missing_responder: 2,
            invalid: 1,
        };
        m.record(
            &key(),
            &HwSplit {
                one_way: false,
                split,
                notes: vec![],
            },
        );
        m.no_report(&key(), 5);
        let mut text = String::new();
        prometheus_client::encoding::text::encode(&mut text, &reg).unwrap();
        let labels =
            r#"source="node1",target="10.0.0.2:18515",transport="rc",op="send",size_bytes="32""#;
        for want in [
            format!("ibprobe_hw_network_rtt_seconds_count{{{labels}}} 3\n"),
            format!("ibprobe_hw_network_rtt_seconds_bucket{{le=\"0.0000015\",{labels}}} 2\n"),
            format!("ibprobe_hw_responder_delay_seconds_bucket{{le=\"0.000007\",{labels}}} 2\n"),
            format!("ibprobe_hw_prober_delay_seconds_bucket{{le=\"5e-7\",{labels}}} 2\n"),
            format!("ibprobe_hw_split_left_out_total{{{labels},reason=\"missing_responder\"}} 2\n"),
            format!("ibprobe_hw_split_left_out_total{{{labels},reason=\"invalid\"}} 1\n"),
            format!("ibprobe_hw_split_left_out_total{{{labels},reason=\"no_report\"}} 5\n"),
        ] {
            assert!(text.contains(&want), "{want}\n--- in:\n{text}");
        }
        assert!(!text.contains("reason=\"missing_prober\""), "{text}");
        // As /metrics serves it in text 0.0.4, which promtool reads.
        let mut served = Vec::new();
        crate::expo::text::encode_text_004(
            &mut served,
            &prometheus_client::encoding::prometheus_protobuf::encode(&reg).unwrap(),
        );
        let served = String::from_utf8(served).unwrap();
        ibtools_tests::prom::promtool_check_metrics(&served)
            .unwrap_or_else(|e| panic!("{e}\n{served}"));
    }
}
