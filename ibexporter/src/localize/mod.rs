//! Localization: from one round of rack-mesh probes to ranked suspects
//! (a host, its NIC, its link, a dead host, a rack pair's path, one host
//! pair), each with a confidence and the counts that accuse it.
//!
//! Why it exists: detection says "a probe is slow"; an operator needs
//! "host h07 is slow: its probes to 19 peers are slow while those peers'
//! other probers see them fine". One definition, pure, fed by the
//! simulator ([`sim`]) and by Prometheus query results or saved snapshots
//! (`ibexporter localize`: [`prom`], [`snapshot`], [`report`], [`command`]).
//!
//! # The method (voting, in the spirit of Pingmesh, 007 and R-Pingmesh)
//!
//! Every probe of a round is one observation of an ordered pair (prober,
//! target): messages sent and lost, median and 10th percentile round
//! trip. A probe is **slow** when its median exceeds [`SLOW_RATIO`] times
//! the round's median of its class (same-rack probes, cross-rack
//! probes) and so does its 10th percentile (where known): a fault moves
//! the whole distribution, while a healthy host's slow episode adds a
//! second mode that leaves the fast messages fast; **dead**
//! when nothing came back, and a host side (its probes as prober, or the
//! probes to it as target) is **lossy** when it lost at least
//! [`LOSS_FLOOR`] of its messages and [`LOSS_BACKGROUND_FACTOR`] times
//! the cluster's loss ratio.
//!
//! Each host has two sides. A side is **bad** when it has at least
//! [`MIN_OBS`] probes, at least [`SIDE_FRAC`] of them slow (and at least
//! [`MIN_PEERS`], each a different peer), or it is lossy, **while its
//! peers are fine**: the probes the same peers made to others (or
//! received from others) are slow in at most [`PEER_BACKGROUND_MAX`] of
//! cases (lossy at most the lossy threshold). That is the vote: the
//! peers exonerate themselves, so the host is left. Then, per round:
//!
//! - **dead**: every probe to it unanswered (at least [`MIN_OBS`]) and
//!   it reported nothing as prober (its exporter is silent too);
//! - **link**: both sides lossy while it still reports (a bad cable, a
//!   flapping port: whole probes lost both ways);
//! - **host** / **nic**: both sides slow (or one slow, one lossy); `host` when its own wake-up
//!   latency is above [`SELF_RATIO`] times the cluster's median (the CPU
//!   side is slow too), else `nic` (its NIC's transmit path: requests it
//!   sends as prober and replies it sends as target). Without self-health
//!   the suspect is `nic` and its evidence says the wake-up latency is
//!   unknown;
//!   every host suspect's evidence also gives the error events its HCA
//!   ports counted over the window, where known ([`PORT_ERROR_FILES`]: a
//!   link or NIC fault counts there, a slow CPU does not): evidence, not
//!   a verdict;
//! - **prober** / **target**: only that side bad;
//! - **rack-pair**: the cross probes between two racks that involve no
//!   host suspect: at least [`RACK_PAIR_MIN`] of them bad (slow, lossy or
//!   dead), from at least [`RACK_PAIR_PROBERS`] probers, at least [`RACK_PAIR_FRAC`] of
//!   those probes, while each rack's inside probes are bad in at most
//!   [`RACK_INSIDE_MAX`] of cases;
//! - **path**: a bad probe whose prober and target are otherwise fine
//!   (each side bad in at most [`PEER_BACKGROUND_MAX`] of its probes) and
//!   whose racks are no rack-pair suspect.
//!
//! # Hardware timestamps (R-Pingmesh's split), where present
//!
//! Where a probe carries the split of its round trip by the NICs'
//! hardware timestamps ([`HwSplit`]: prober delay, responder delay,
//! network), a slow probe is not counted against both its hosts: it is
//! attributed by the part that moved against the round's median of that
//! part in its class. The prober delay above [`HW_PART_RATIO`] times its
//! class median (and the largest such excess, in microseconds) makes it
//! slow on the prober's side only; the responder delay, on the target's
//! side only; the network, on neither host's side (it still counts as a
//! bad probe for rack pairs and paths). A slow probe whose parts none
//! moved counts on both sides, as without a split. So a host slow only
//! as target no longer makes its probers look slow (the vote's blind
//! spot in a small rack with several such hosts), and a slow path no
//! longer accuses its hosts. The evidence says where the split decided
//! ("by hardware timestamps: responder delay 85.0 us vs 9.0 us class
//! median"). Host vs NIC is still told by the wake-up latency: a NIC's
//! transmit queueing lies before its departure stamp, on its host's
//! side. Probes without a split vote as above, unchanged. Unverified on
//! hardware: no device of this project stamps completions, so this is
//! tested on synthetic splits only.
//!
//! A suspect's per-round **strength** is its excess over the background
//! (a side's slow share minus its peers', a rack pair's bad share minus
//! its racks' inside share), in 0..=1. [`Localizer`] keeps the last
//! [`WINDOW_ROUNDS`] rounds and **names** a suspect accused in at least
//! [`CONFIRM_ROUNDS`] of them when the accusation is slowness (one slow
//! round of a healthy host is not named), in one when it is loss (`dead`,
//! `link`: a healthy path loses almost nothing, and a flapping link is up
//! in some rounds); its confidence is the sum of its strengths over the
//! window divided by [`WINDOW_ROUNDS`]. Suspects are ranked by confidence.

pub mod command;
pub mod model;
pub mod prom;
pub mod report;
pub mod rules;
pub mod sim;
pub mod snapshot;

use std::collections::{HashMap, VecDeque};
use std::fmt::Write as _;

pub use model::{
    Entity, HostId, HwSplit, PairObs, Round, Suspect, SuspectKind, Topology, CONFIRM_ROUNDS,
    WINDOW_ROUNDS,
};

/// A probe is slow above this multiple of its class's median (same rack,
/// cross rack). Faults below about 1.7x are not told from per-pair
/// spread (±15% between pairs).
pub const SLOW_RATIO: f64 = 1.5;
/// A side is lossy from this share of lost messages...
pub const LOSS_FLOOR: f64 = 0.005;
/// ...and from this multiple of the cluster's loss ratio.
pub const LOSS_BACKGROUND_FACTOR: f64 = 10.0;
/// Fewest probes on a side (or answered, for slowness) to judge it.
pub const MIN_OBS: u32 = 4;
/// Fewest slow probes (different peers) for a slow side.
pub const MIN_PEERS: u32 = 3;
/// A side is slow when at least this share of its answered probes is.
pub const SIDE_FRAC: f64 = 0.5;
/// The peers exonerate themselves when at most this share of their other
/// probes is slow.
pub const PEER_BACKGROUND_MAX: f64 = 0.2;
/// Own wake-up latency above this multiple of the cluster's median: the
/// host's CPU side is slow (`host`), else its NIC (`nic`).
pub const SELF_RATIO: f64 = 1.5;
/// Fewest bad cross probes for a rack-pair suspect.
pub const RACK_PAIR_MIN: u32 = 2;
/// Least share of the rack pair's cross probes that are bad.
pub const RACK_PAIR_FRAC: f64 = 0.75;
/// Most share of bad probes inside either rack for a rack-pair suspect.
pub const RACK_INSIDE_MAX: f64 = 0.2;
/// Fewest distinct probers among a rack pair's bad cross probes.
pub const RACK_PAIR_PROBERS: u32 = 2;
// The vote below keeps "a second prober" per rack pair, not a count.
const _: () = assert!(
    RACK_PAIR_PROBERS == 2,
    "assess() tracks a second prober only"
);

/// The HCA port counters (`counters/` files) whose increase is a host's
/// port error evidence ([`Round::port_errors`], [`port_errors_increase`]): a link or NIC fault
/// counts here; a slow CPU does not.
pub const PORT_ERROR_FILES: [&str; 7] = [
    "symbol_error",
    "port_rcv_errors",
    "port_rcv_remote_physical_errors",
    "local_link_integrity_errors",
    "link_error_recovery",
    "link_downed",
    "port_xmit_discards",
];

/// The PromQL of every exported counter of [`PORT_ERROR_FILES`]
/// (`..._total`) increased over `window`, one series per counter and port
/// (a `counter` label keeps them apart), joined by `sep` (an `or`); sum it
/// by instance for a host's port error events. Read by
/// `ibexporter localize` and written into the rules.
pub fn port_errors_increase(window: &str, sep: &str) -> String {
    crate::collect::hca::PORT_COUNTERS
        .iter()
        .filter(|c| PORT_ERROR_FILES.contains(&c.file))
        .map(|c| {
            let m = format!("{}_total", c.name);
            format!("label_replace(increase({m}[{window}]), \"counter\", \"{m}\", \"\", \"\")")
        })
        .collect::<Vec<_>>()
        .join(sep)
}

/// A part of a hardware-timestamp split counts as moved above this
/// multiple of its class's median (the same bar as [`SLOW_RATIO`]).
pub const HW_PART_RATIO: f64 = 1.5;

/// Where a slow probe's slowness lies ([`HwSplit`], else both ends).
#[derive(Debug, Clone, Copy, PartialEq)]
enum Blame {
    /// No split, or no part moved: the vote's reading, both sides.
    Both,
    /// The prober's host delay moved: (its value, its class median).
    Prober(f32, f64),
    /// The responder's host delay moved.
    Responder(f32, f64),
    /// The network part moved: neither host.
    Network,
}

impl Blame {
    fn on_prober(self) -> bool {
        matches!(self, Blame::Both | Blame::Prober(..))
    }

    fn on_target(self) -> bool {
        matches!(self, Blame::Both | Blame::Responder(..))
    }
}

/// One side of a host in one round (as prober, or as target).
#[derive(Debug, Clone, Copy, Default)]
struct Side {
    probes: u32,
    answered: u32,
    slow: u32,
    dead: u32,
    sent: u64,
    lost: u64,
    /// Slow probes the hardware split put on this side, and the sums of
    /// the moved part and of its class median (the evidence's means).
    hw_slow: u32,
    hw_part: f64,
    hw_median: f64,
}

impl Side {
    fn add(&mut self, o: &PairObs, slow: bool) {
        self.probes += 1;
        self.answered += u32::from(!o.dead());
        self.slow += u32::from(slow);
        self.dead += u32::from(o.dead());
        self.sent += u64::from(o.sent);
        self.lost += u64::from(o.lost);
    }

    fn add_hw(&mut self, part: f32, median: f64) {
        self.hw_slow += 1;
        self.hw_part += f64::from(part);
        self.hw_median += median;
    }

    fn slow_share(&self) -> f64 {
        ratio(self.slow as f64, self.answered as f64)
    }

    fn loss(&self) -> f64 {
        ratio(self.lost as f64, self.sent as f64)
    }
}

/// What the peers of one side saw with everyone else (sums over the
/// side's probes of the peer's opposite side, less this probe).
#[derive(Debug, Clone, Copy, Default)]
struct Background {
    answered: u64,
    slow: u64,
    sent: u64,
    lost: u64,
}

impl Background {
    fn add(&mut self, peer: &Side, o: &PairObs, slow: bool) {
        self.answered += u64::from(peer.answered - u32::from(!o.dead()));
        self.slow += u64::from(peer.slow - u32::from(slow));
        self.sent += peer.sent - u64::from(o.sent);
        self.lost += peer.lost - u64::from(o.lost);
    }

    fn slow_share(&self) -> f64 {
        ratio(self.slow as f64, self.answered as f64)
    }

    fn loss(&self) -> f64 {
        ratio(self.lost as f64, self.sent as f64)
    }
}

fn ratio(a: f64, b: f64) -> f64 {
    if b > 0.0 {
        a / b
    } else {
        0.0
    }
}

/// The median of `v` (reordered), NaN when empty.
fn median(v: &mut [f32]) -> f64 {
    if v.is_empty() {
        return f64::NAN;
    }
    let mid = v.len() / 2;
    let (_, m, _) = v.select_nth_unstable_by(mid, f32::total_cmp);
    f64::from(*m)
}

/// Why a side is bad, if it is.
#[derive(Debug, Clone, Copy, PartialEq)]
enum Verdict {
    Fine,
    Slow(f64),
    Lossy(f64),
}

impl Verdict {
    fn bad(self) -> bool {
        self != Verdict::Fine
    }

    fn strength(self) -> f64 {
        match self {
            Verdict::Fine => 0.0,
            Verdict::Slow(s) | Verdict::Lossy(s) => s.clamp(0.0, 1.0),
        }
    }
}

/// The suspects of one round, unranked: every accusation with its
/// strength (0..=1) and evidence.
pub fn assess(topo: &Topology, round: &Round) -> Vec<Suspect> {
    let n = topo.hosts();
    let same = |o: &PairObs| topo.rack(o.prober) == topo.rack(o.target);
    // The class medians.
    // [inside, cross] x [p50, p10].
    let mut classes: [[Vec<f32>; 2]; 2] = Default::default();
    let (mut sent, mut lost) = (0u64, 0u64);
    for o in &round.pairs {
        sent += u64::from(o.sent);
        lost += u64::from(o.lost);
        if !o.dead() {
            let c = &mut classes[usize::from(!same(o))];
            c[0].push(o.p50_us);
            if o.p10_us.is_finite() {
                c[1].push(o.p10_us);
            }
        }
    }
    let [[i50, i10], [c50, c10]] = &mut classes;
    let base = [median(i50), median(c50)];
    let base10 = [median(i10), median(c10)];
    let loss_bad = LOSS_FLOOR.max(LOSS_BACKGROUND_FACTOR * ratio(lost as f64, sent as f64));
    let slow_of = |o: &PairObs| {
        let c = usize::from(!same(o));
        !o.dead()
            && f64::from(o.p50_us) > SLOW_RATIO * base[c]
            && (!o.p10_us.is_finite() || f64::from(o.p10_us) > SLOW_RATIO * base10[c])
    };
    let bad_probe = |o: &PairObs, slow: bool| {
        slow || o.dead() || (o.lost >= 2 && ratio(f64::from(o.lost), f64::from(o.sent)) >= loss_bad)
    };
    let slow: Vec<bool> = round.pairs.iter().map(slow_of).collect();
    let blame = hw_blame(round, &slow, same);

    let mut out_side = vec![Side::default(); n];
    let mut in_side = vec![Side::default(); n];
    for ((o, &s), &b) in round.pairs.iter().zip(&slow).zip(&blame) {
        out_side[o.prober as usize].add(o, s && b.on_prober());
        in_side[o.target as usize].add(o, s && b.on_target());
        match b {
            Blame::Prober(v, m) if s => out_side[o.prober as usize].add_hw(v, m),
            Blame::Responder(v, m) if s => in_side[o.target as usize].add_hw(v, m),
            _ => {}
        }
    }
    let mut out_bg = vec![Background::default(); n];
    let mut in_bg = vec![Background::default(); n];
    for ((o, &s), &b) in round.pairs.iter().zip(&slow).zip(&blame) {
        out_bg[o.prober as usize].add(&in_side[o.target as usize], o, s && b.on_target());
        in_bg[o.target as usize].add(&out_side[o.prober as usize], o, s && b.on_prober());
    }
    let verdict = |side: &Side, bg: &Background| {
        let loss = side.loss();
        if side.probes >= MIN_OBS && loss >= loss_bad && bg.loss() < loss_bad {
            return Verdict::Lossy(1.0 - bg.loss() / loss);
        }
        let share = side.slow_share();
        if side.answered >= MIN_OBS
            && side.slow >= MIN_PEERS
            && share >= SIDE_FRAC
            && bg.slow_share() <= PEER_BACKGROUND_MAX
        {
            return Verdict::Slow(share - bg.slow_share());
        }
        Verdict::Fine
    };
    let mut self_known: Vec<f32> = round
        .self_health_us
        .iter()
        .copied()
        .filter(|v| v.is_finite())
        .collect();
    let self_median = median(&mut self_known);

    let mut suspects = Vec::new();
    let mut host_suspect = vec![false; n];
    for h in 0..n {
        let (o, i) = (&out_side[h], &in_side[h]);
        if o.probes == 0 && i.probes == 0 {
            continue;
        }
        if o.probes == 0 && i.probes >= MIN_OBS && i.dead == i.probes {
            suspects.push(Suspect {
                kind: SuspectKind::Dead,
                entity: Entity::Host(h as HostId),
                confidence: 1.0 - in_bg[h].loss(),
                rounds: 1,
                evidence: format!(
                    "no answer to any of {} probes, and no report of its own; its probers lose {:.2}% with others",
                    i.probes,
                    100.0 * in_bg[h].loss()
                ),
            });
            host_suspect[h] = true;
            continue;
        }
        let (vo, vi) = (verdict(o, &out_bg[h]), verdict(i, &in_bg[h]));
        let kind = match (vo, vi) {
            (Verdict::Lossy(_), Verdict::Lossy(_)) => SuspectKind::Link,
            (Verdict::Slow(_), Verdict::Slow(_)) => {
                let own = round.self_health_us.get(h).copied().unwrap_or(f32::NAN);
                if own.is_finite() && f64::from(own) > SELF_RATIO * self_median {
                    SuspectKind::Host
                } else {
                    SuspectKind::Nic
                }
            }
            (a, b) if a.bad() && b.bad() => SuspectKind::Nic,
            (a, _) if a.bad() => SuspectKind::Prober,
            (_, b) if b.bad() => SuspectKind::Target,
            _ => continue,
        };
        let mut evidence = String::new();
        for (name, side, bg, v) in [
            ("as prober", o, &out_bg[h], vo),
            ("as target", i, &in_bg[h], vi),
        ] {
            if !evidence.is_empty() {
                evidence.push_str("; ");
            }
            let _ = match v {
                Verdict::Lossy(_) => write!(
                    evidence,
                    "{name}: lost {:.2}% of {} messages over {} probes ({} whole probes) while its peers lose {:.2}% with others",
                    100.0 * side.loss(),
                    side.sent,
                    side.probes,
                    side.dead,
                    100.0 * bg.loss()
                ),
                _ => write!(
                    evidence,
                    "{name}: {} of {} probes slow while its peers see {:.0}% slow with others",
                    side.slow,
                    side.answered,
                    100.0 * bg.slow_share()
                ),
            };
            if v.bad() && side.hw_slow > 0 {
                let k = f64::from(side.hw_slow);
                let _ = write!(
                    evidence,
                    " (by hardware timestamps, {} of them: {} delay {:.1} us vs {:.1} us class median)",
                    side.hw_slow,
                    if name == "as prober" { "prober" } else { "responder" },
                    side.hw_part / k,
                    side.hw_median / k
                );
            }
        }
        if matches!(kind, SuspectKind::Host | SuspectKind::Nic) {
            let own = round.self_health_us.get(h).copied().unwrap_or(f32::NAN);
            let _ = if own.is_finite() {
                write!(
                    evidence,
                    "; own wake-up p99 {own:.1} us (cluster median {self_median:.1} us)"
                )
            } else {
                write!(evidence, "; own wake-up latency unknown")
            };
        }
        let errors = round.port_errors.get(h).copied().unwrap_or(f32::NAN);
        if errors.is_finite() {
            let _ = write!(
                evidence,
                "; its HCA ports counted {errors:.0} error events (symbol, receive, link)"
            );
        }
        suspects.push(Suspect {
            kind,
            entity: Entity::Host(h as HostId),
            confidence: vo.strength().max(vi.strength()),
            rounds: 1,
            evidence,
        });
        host_suspect[h] = true;
    }

    // Rack pairs and paths: the probes no host suspect explains.
    let racks = topo.racks as usize;
    let mut inside_probes = vec![(0u32, 0u32); racks];
    let mut pairs: HashMap<(u32, u32), (u32, u32, HostId, bool)> = HashMap::new();
    for (o, &s) in round.pairs.iter().zip(&slow) {
        if host_suspect[o.prober as usize] || host_suspect[o.target as usize] {
            continue;
        }
        let (a, b) = (topo.rack(o.prober), topo.rack(o.target));
        let bad = bad_probe(o, s);
        if a == b {
            let c = &mut inside_probes[a as usize];
            c.0 += 1;
            c.1 += u32::from(bad);
        } else if bad {
            let e = pairs
                .entry((a.min(b), a.max(b)))
                .or_insert((0, 0, o.prober, false));
            e.1 += 1;
            e.3 |= e.2 != o.prober;
        }
    }
    if !pairs.is_empty() {
        for o in &round.pairs {
            let (a, b) = (topo.rack(o.prober), topo.rack(o.target));
            if a != b && !host_suspect[o.prober as usize] && !host_suspect[o.target as usize] {
                if let Some(e) = pairs.get_mut(&(a.min(b), a.max(b))) {
                    e.0 += 1;
                }
            }
        }
    }
    let inside_share = |r: u32| {
        let (n, bad) = inside_probes[r as usize];
        ratio(f64::from(bad), f64::from(n))
    };
    let mut pair_suspect: Vec<(u32, u32)> = Vec::new();
    for (&(a, b), &(total, bad, _, two_probers)) in &pairs {
        let share = ratio(f64::from(bad), f64::from(total));
        let inside = inside_share(a).max(inside_share(b));
        if bad >= RACK_PAIR_MIN
            && two_probers
            && share >= RACK_PAIR_FRAC
            && inside <= RACK_INSIDE_MAX
        {
            suspects.push(Suspect {
                kind: SuspectKind::RackPair,
                entity: Entity::Racks(a, b),
                confidence: (share - inside).clamp(0.0, 1.0),
                rounds: 1,
                evidence: format!(
                    "{bad} of {total} cross probes between racks {a} and {b} bad (slow, lossy or dead) while {:.0}% of rack {a}'s and {:.0}% of rack {b}'s inside probes are",
                    100.0 * inside_share(a),
                    100.0 * inside_share(b)
                ),
            });
            pair_suspect.push((a, b));
        }
    }
    for (o, &s) in round.pairs.iter().zip(&slow) {
        let (p, t) = (o.prober as usize, o.target as usize);
        if host_suspect[p] || host_suspect[t] || !bad_probe(o, s) {
            continue;
        }
        let (a, b) = (topo.rack(o.prober), topo.rack(o.target));
        if pair_suspect.contains(&(a.min(b), a.max(b))) {
            continue;
        }
        let others = out_side[p]
            .slow_share()
            .max(in_side[t].slow_share())
            .max(ratio(
                f64::from(out_side[p].dead + in_side[t].dead),
                f64::from(out_side[p].probes + in_side[t].probes),
            ));
        if others > PEER_BACKGROUND_MAX {
            continue;
        }
        suspects.push(Suspect {
            kind: SuspectKind::Path,
            entity: Entity::Pair(o.prober, o.target),
            confidence: (1.0 - others).clamp(0.0, 1.0),
            rounds: 1,
            evidence: format!(
                "this probe {} ({} of {} lost, median {:.1} us against {:.1} us for its class) while both hosts are fine with others",
                if s { "slow" } else { "lossy" },
                o.lost,
                o.sent,
                o.p50_us,
                base[usize::from(a != b)]
            ),
        });
    }
    suspects
}

/// Where each slow probe's slowness lies, by its hardware split against
/// the round's class medians of each part ([`Blame::Both`] for every
/// probe without a split, or whose parts none moved).
fn hw_blame(round: &Round, slow: &[bool], same: impl Fn(&PairObs) -> bool) -> Vec<Blame> {
    // [inside, cross] x [prober, responder, network].
    let mut parts: [[Vec<f32>; 3]; 2] = Default::default();
    for o in &round.pairs {
        if let Some(h) = o.hw.filter(|h| !o.dead() && h.valid()) {
            let c = &mut parts[usize::from(!same(o))];
            c[0].push(h.prober_us);
            c[1].push(h.responder_us);
            c[2].push(h.network_us);
        }
    }
    if parts.iter().all(|c| c[0].is_empty()) {
        return vec![Blame::Both; round.pairs.len()];
    }
    let medians = parts.map(|mut c| [median(&mut c[0]), median(&mut c[1]), median(&mut c[2])]);
    round
        .pairs
        .iter()
        .zip(slow)
        .map(|(o, &s)| {
            let Some(h) = o.hw.filter(|h| s && h.valid()) else {
                return Blame::Both;
            };
            let m = medians[usize::from(!same(o))];
            let moved = |v: f32, med: f64| {
                let excess = f64::from(v) - med;
                (f64::from(v) > HW_PART_RATIO * med).then_some(excess)
            };
            let candidates = [
                (moved(h.prober_us, m[0]), Blame::Prober(h.prober_us, m[0])),
                (
                    moved(h.responder_us, m[1]),
                    Blame::Responder(h.responder_us, m[1]),
                ),
                (moved(h.network_us, m[2]), Blame::Network),
            ];
            candidates
                .into_iter()
                .filter_map(|(e, b)| e.map(|e| (e, b)))
                .max_by(|a, b| a.0.total_cmp(&b.0))
                .map_or(Blame::Both, |(_, b)| b)
        })
        .collect()
}

/// The rolling window: feed it rounds, read the named suspects.
#[derive(Debug, Clone)]
pub struct Localizer {
    topo: Topology,
    /// K: rounds within which the plan probes every rack pair (1: every
    /// round).
    rack_pair_rounds: usize,
    history: VecDeque<Vec<Suspect>>,
}

impl Localizer {
    /// A localizer for hosts in `topo`, with an empty window, for a plan
    /// that probes every rack pair every round.
    pub fn new(topo: Topology) -> Localizer {
        Localizer::rotating(topo, 1)
    }

    /// A localizer for a plan whose rack pairs rotate through `k` rounds
    /// ([`crate::targets::plan`]): a rack pair is probed in one round of
    /// `k`, so its window is [`WINDOW_ROUNDS`] of its coverage periods
    /// (`k` rounds each) rather than rounds, and it is named when accused
    /// in [`CONFIRM_ROUNDS`] of the last [`WINDOW_ROUNDS`] rounds that
    /// probed it. Hosts and paths keep the window of rounds.
    pub fn rotating(topo: Topology, k: u64) -> Localizer {
        let k = usize::try_from(k).unwrap_or(usize::MAX).max(1);
        Localizer {
            topo,
            rack_pair_rounds: k,
            history: VecDeque::with_capacity(WINDOW_ROUNDS.saturating_mul(k)),
        }
    }

    /// The topology it reads.
    pub fn topology(&self) -> &Topology {
        &self.topo
    }

    /// Adds one round and returns the named suspects, most confident
    /// first: those accused in at least [`SuspectKind::confirm_rounds`]
    /// of the last [`WINDOW_ROUNDS`] rounds (a rack pair: of its last
    /// [`WINDOW_ROUNDS`] coverage periods, [`Localizer::rotating`]). A
    /// host accused as different kinds in different rounds is one
    /// suspect, of the kind most of those rounds said (a tie: the latest).
    pub fn push(&mut self, round: &Round) -> Vec<Suspect> {
        let keep = WINDOW_ROUNDS.saturating_mul(self.rack_pair_rounds);
        if self.history.len() == keep {
            self.history.pop_front();
        }
        self.history.push_back(assess(&self.topo, round));
        // Every accusation of each entity in its window, oldest first:
        // rack pairs over the whole history, the rest over the last
        // WINDOW_ROUNDS rounds.
        let recent = self.history.len().saturating_sub(WINDOW_ROUNDS);
        let mut tally: HashMap<Entity, Vec<&Suspect>> = HashMap::new();
        for (i, round) in self.history.iter().enumerate() {
            for s in round {
                if i >= recent || matches!(s.entity, Entity::Racks(..)) {
                    tally.entry(s.entity).or_default().push(s);
                }
            }
        }
        let window = |e: &Entity| match e {
            Entity::Racks(..) => self.history.len(),
            _ => self.history.len().min(WINDOW_ROUNDS),
        };
        let mut named: Vec<Suspect> = tally
            .into_values()
            .filter_map(|acc| {
                // The kind most rounds said (a tie: the latest of them), so
                // one noisy reading does not turn a nic into a host.
                let votes = |k: SuspectKind| acc.iter().filter(|s| s.kind == k).count();
                let last = acc.iter().max_by_key(|s| votes(s.kind)).copied()?;
                let rounds = acc.len();
                (rounds >= last.kind.confirm_rounds()).then(|| Suspect {
                    kind: last.kind,
                    entity: last.entity,
                    confidence: acc.iter().map(|s| s.confidence).sum::<f64>()
                        / WINDOW_ROUNDS as f64,
                    rounds,
                    evidence: format!(
                        "{} (accused in {rounds} of the last {} rounds)",
                        last.evidence,
                        window(&last.entity)
                    ),
                })
            })
            .collect();
        named.sort_by(|a, b| {
            b.confidence
                .total_cmp(&a.confidence)
                .then(a.entity.cmp(&b.entity))
        });
        named
    }
}

#[cfg(test)]
mod tests;
