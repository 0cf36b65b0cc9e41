//! The words of the latency families: which families there are ([`Fam`],
//! their names, kinds and units), a series' key ([`SeriesKey`]), one
//! probe's [`Round`], the classic bucket bounds, the quantiles and the
//! window's slices. Its own file so that the encoders and the series take
//! these from here, not through `mod.rs`, which uses theirs.

use prometheus_client::encoding::EncodeLabelSet;

/// Classic bucket bounds in ns: 1, 1.5, 2, 3, 5, 7 per decade from
/// 250 ns to 10 ms, so a 1-3 us tail lands in its own buckets.
pub(super) const CLASSIC_NS: [u64; 29] = [
    250, 300, 500, 700, //
    1_000, 1_500, 2_000, 3_000, 5_000, 7_000, //
    10_000, 15_000, 20_000, 30_000, 50_000, 70_000, //
    100_000, 150_000, 200_000, 300_000, 500_000, 700_000, //
    1_000_000, 1_500_000, 2_000_000, 3_000_000, 5_000_000, 7_000_000, //
    10_000_000,
];

/// The classic bucket bounds in ns (the `+Inf` bucket is implicit).
pub(super) fn classic_bounds_ns() -> &'static [u64; 29] {
    &CLASSIC_NS
}

/// The quantiles of the window summary.
pub const QUANTILES: [f64; 4] = [0.5, 0.9, 0.99, 0.999];

/// [`QUANTILES`] as their `quantile` label values.
pub(super) const QUANTILE_LABELS: [&str; 4] = ["0.5", "0.9", "0.99", "0.999"];

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
    pub(super) fn pairs(&self) -> [(&'static str, &str); 5] {
        [
            ("source", &self.source),
            ("target", &self.target),
            ("transport", &self.transport),
            ("op", &self.op),
            ("size_bytes", &self.size_bytes),
        ]
    }
}

/// What one probe round gave, as the engine hands it over.
#[derive(Debug, Default)]
pub struct Round {
    /// Latencies of the answered probes, ns (the ibprobe HDR histogram).
    pub samples: Option<ibstats::latency::LatencyHistogram>,
    /// Probes with no answer within the timeout.
    pub timeouts: u64,
    /// Set when the round failed (peer lost, device gone): a short reason
    /// such as `peer_lost`, `refused`, `transport`.
    pub error: Option<String>,
    /// `[probe] hw_timestamps`, remote verbs probes: the round's split
    /// (`collect/hw_split.rs`), or Err(answered probes) when the peer sent
    /// no timestamps.
    pub hw: Option<Result<ibprobe::clock::hwts::HwSplit, u64>>,
    /// The probing thread's counters over the round ([`counters`](super::counters)).
    pub counters: Option<ibnoise::counters::Counts>,
}

/// Slices per window: the summary covers between (1 - 1/SLICES) and 1
/// window of rounds.
pub const WINDOW_SLICES: u32 = 5;

/// The families, in the order they are written.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Fam {
    Latency,
    Probes,
    Errors,
    LastSuccess,
    Window,
    WindowMax,
}

pub(super) const FAMILIES: [Fam; 6] = [
    Fam::Latency,
    Fam::Probes,
    Fam::Errors,
    Fam::LastSuccess,
    Fam::Window,
    Fam::WindowMax,
];

/// Metric types the families use.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Kind {
    Counter,
    Gauge,
    Histogram,
    Summary,
}

impl Fam {
    /// The family name in text 0.0.4 and protobuf (counters with `_total`).
    pub(super) fn name(self) -> &'static str {
        match self {
            Fam::Latency => "ibprobe_latency_seconds",
            Fam::Probes => "ibprobe_probes_total",
            Fam::Errors => "ibprobe_probe_errors_total",
            Fam::LastSuccess => "ibprobe_last_success_timestamp_seconds",
            Fam::Window => "ibprobe_latency_window_seconds",
            Fam::WindowMax => "ibprobe_latency_window_max_seconds",
        }
    }

    /// The OpenMetrics family name: a counter's without `_total`.
    pub(super) fn om_name(self) -> &'static str {
        let n = self.name();
        n.strip_suffix("_total").unwrap_or(n)
    }

    pub(super) fn kind(self) -> Kind {
        match self {
            Fam::Latency => Kind::Histogram,
            Fam::Probes | Fam::Errors => Kind::Counter,
            Fam::LastSuccess | Fam::WindowMax => Kind::Gauge,
            Fam::Window => Kind::Summary,
        }
    }

    pub(super) fn unit(self) -> Option<&'static str> {
        match self {
            Fam::Probes | Fam::Errors => None,
            _ => Some("seconds"),
        }
    }
}
