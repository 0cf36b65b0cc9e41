//! What localization reads and what it names: one round of mesh
//! observations in, ranked suspects with their evidence out.
//!
//! Why it is its own file: the simulator builds [`Round`]s, and so do the
//! Prometheus reader ([`super::prom`]: histogram quantiles and the probe
//! loss counters per ordered target pair) and saved snapshots
//! ([`super::snapshot`]); the method in [`super`] never knows which one
//! fed it.

use std::fmt;

/// Rounds the localizer remembers.
pub const WINDOW_ROUNDS: usize = 3;
/// Rounds of the window that must accuse a slowness suspect to name it.
pub const CONFIRM_ROUNDS: usize = 2;

/// A host: its index in [`Topology`].
pub type HostId = u32;

/// Which rack each host is in (racks `0..racks`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Topology {
    /// `rack_of[h]`: host `h`'s rack.
    pub rack_of: Vec<u32>,
    /// Number of racks.
    pub racks: u32,
}

impl Topology {
    /// Number of hosts.
    pub fn hosts(&self) -> usize {
        self.rack_of.len()
    }

    /// Host `h`'s rack.
    pub fn rack(&self, h: HostId) -> u32 {
        self.rack_of[h as usize]
    }
}

/// One probe of one round: `prober` sent `sent` messages to `target`,
/// `lost` went unanswered, and the answered ones had median round trip
/// `p50_us` and 10th percentile `p10_us` (NaN when none was answered;
/// `p10_us` NaN also where the source has no low quantile).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct PairObs {
    /// Who probed.
    pub prober: HostId,
    /// Whom.
    pub target: HostId,
    /// Messages sent.
    pub sent: u32,
    /// Messages without an answer.
    pub lost: u32,
    /// Median round trip of the answered messages, microseconds.
    pub p50_us: f32,
    /// Their 10th percentile, microseconds: it tells a shifted
    /// distribution (all messages slower: a fault) from a second mode
    /// (some messages slower: a busy host's episode).
    pub p10_us: f32,
    /// The round trip split by hardware timestamps, where the NICs stamp
    /// completions (R-Pingmesh's split); None elsewhere, and then the
    /// localizer votes as without it.
    pub hw: Option<HwSplit>,
}

/// One probe's round trip split by the NICs' hardware timestamps (the
/// medians of the window, microseconds): the time on the prober's host
/// (request posted to its wire departure, reply's arrival to its
/// completion), on the responder's host (request's arrival to the reply's
/// departure), and on the network between the two wires. A NIC's own
/// transmit queueing lies before its departure stamp, so it counts on its
/// host's side. Unverified on hardware: no device of this project stamps
/// completions; the localizer is tested on synthetic splits only.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct HwSplit {
    /// Median delay on the prober's host, microseconds.
    pub prober_us: f32,
    /// Median delay on the responder's host, microseconds.
    pub responder_us: f32,
    /// Median network round trip (wire to wire), microseconds.
    pub network_us: f32,
}

impl HwSplit {
    /// Whether every part is a finite non-negative number (a split a
    /// source may carry).
    pub fn valid(&self) -> bool {
        [self.prober_us, self.responder_us, self.network_us]
            .iter()
            .all(|v| v.is_finite() && *v >= 0.0)
    }
}

impl PairObs {
    /// Whether no message was answered.
    pub fn dead(&self) -> bool {
        self.sent > 0 && self.lost >= self.sent
    }
}

/// One round (one probe interval) of the whole mesh.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Round {
    /// Every probe the reporting hosts made this round. A host that
    /// reported nothing (its exporter silent) has no row as prober.
    pub pairs: Vec<PairObs>,
    /// Per host, its own wake-up latency p99 in microseconds (ibprobe's
    /// host probe, `ibprobe_latency_window{transport="wakeup"}`); NaN
    /// where unknown. Empty: unknown for all.
    pub self_health_us: Vec<f32>,
    /// Per host, the error events its HCA ports counted over the round's
    /// window (the counters of [`super::PORT_ERROR_FILES`], summed); NaN
    /// where unknown. Empty: unknown for all. Evidence only.
    pub port_errors: Vec<f32>,
}

/// What a suspect is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, serde::Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum SuspectKind {
    /// Slow as prober and as target, and its own wake-up latency is slow
    /// too: the host (CPU, scheduling), not the network.
    Host,
    /// Slow as prober and as target while its own wake-up latency is
    /// normal (or unknown): its NIC or the NIC's transmit path.
    Nic,
    /// Slow only as prober: its probes are slow, probes to it are fine.
    Prober,
    /// Slow only as target: probes to it are slow, its own are fine.
    Target,
    /// Answers nobody and reports nothing.
    Dead,
    /// Loses messages both ways (or drops out whole probes) while it
    /// still reports: its link to the rack switch.
    Link,
    /// The path between two racks: cross probes slow or lossy over
    /// several host pairs while both racks inside are fine.
    RackPair,
    /// One host pair, while both hosts are fine with everyone else.
    Path,
}

impl SuspectKind {
    /// Rounds of the window that must accuse it before it is named:
    /// loss (a dead host, a lossy or flapping link) is named from one
    /// round, since a healthy path loses almost nothing; slowness from
    /// [`CONFIRM_ROUNDS`], since healthy hosts have slow episodes.
    pub fn confirm_rounds(self) -> usize {
        match self {
            SuspectKind::Dead | SuspectKind::Link => 1,
            _ => CONFIRM_ROUNDS,
        }
    }

    /// Its spelling in reports.
    pub fn name(self) -> &'static str {
        match self {
            SuspectKind::Host => "host",
            SuspectKind::Nic => "nic",
            SuspectKind::Prober => "prober",
            SuspectKind::Target => "target",
            SuspectKind::Dead => "dead",
            SuspectKind::Link => "link",
            SuspectKind::RackPair => "rack-pair",
            SuspectKind::Path => "path",
        }
    }
}

/// Whom a suspect names.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Entity {
    /// One host (kinds host, nic, prober, target, dead, link).
    Host(HostId),
    /// Two racks, lower index first (kind rack-pair).
    Racks(u32, u32),
    /// An ordered host pair (kind path).
    Pair(HostId, HostId),
}

impl fmt::Display for Entity {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Entity::Host(h) => write!(f, "host {h}"),
            Entity::Racks(a, b) => write!(f, "racks {a}-{b}"),
            Entity::Pair(p, t) => write!(f, "path {p}->{t}"),
        }
    }
}

/// One suspect of one round, or of the window.
#[derive(Debug, Clone, PartialEq)]
pub struct Suspect {
    /// What it is.
    pub kind: SuspectKind,
    /// Whom it names.
    pub entity: Entity,
    /// How sure, 0..=1: the share of the window's rounds that accused
    /// it, times the mean strength of those accusations (each an excess
    /// of bad probes over the background its peers see).
    pub confidence: f64,
    /// Rounds of the window that accused it (1 for one round's verdict).
    pub rounds: usize,
    /// The evidence, as counts in a sentence.
    pub evidence: String,
}
