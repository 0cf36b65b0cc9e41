//! Faults on a simulated rack mesh, and how well [`super`] localizes
//! them: `ibexporter mesh --simulate --faults LIST`.
//!
//! Why it exists: localization must be measured at 10,000 hosts, with the
//! plan's real schedule (who probes whom each round, from
//! [`ClusterPlan::targets_of`]) and with noise that looks like a real
//! mesh, before any rule or alert relies on it. Pure and seeded: the same
//! inputs give the same numbers.
//!
//! # The noise (every host, faults or not)
//!
//! - A probe is `Timing::probes` messages (`--count`); its median
//!   round trip is drawn as the order statistic of that many messages: a
//!   lognormal body ([`BODY_SIGMA`]) around [`BASE_INSIDE_US`] (same rack)
//!   or [`BASE_CROSS_US`] (cross rack), times a fixed factor per host pair
//!   within ±[`PAIR_SPREAD`], plus a heavy tail: [`TAIL_SHARE`] of the
//!   messages are Pareto outliers (they move the median only a little, as
//!   in a real window).
//! - **Bimodal episodes**: each round a healthy host enters a slow mode
//!   with probability [`EPISODE_START`] for 1 to 3 rounds; in it a share
//!   of 10-60% of the messages it sends or answers are 2-4x slower and its
//!   own wake-up latency is 2-4x higher. Episodes whose share passes one
//!   half move the medians: they are what a false suspect is made of.
//! - Every message is lost with probability [`LOSS_PER_MESSAGE`].
//! - Own wake-up latency p99 around [`SELF_HEALTH_US`] (lognormal, 0.2).
//!
//! # The faults (magnitudes drawn per trial)
//!
//! | fault | what it does | the suspect that localizes it |
//! |---|---|---|
//! | `slow-host` | every message it sends or answers 2-4x slower, its wake-up latency too | `host` of that host |
//! | `slow-nic-tx` | what its NIC transmits (its requests, its replies) 2-4x slower; wake-up latency normal | `nic` of that host |
//! | `dead-host` | answers nothing, reports nothing | `dead` of that host |
//! | `slow-rack-pair` | every probe between two racks 2-4x slower, both ways | `rack-pair` of the two racks |
//! | `lossy-link` | its link loses 1-5% of messages each way | `link` of that host |
//! | `flapping-link` | in 70% of rounds its link is down for 20-60% of the round: those probes (either way) lose every message | `link` of that host |

//!
//! # Hardware timestamps (synthetic)
//!
//! With [`SimOptions::hw_timestamps`] every answered probe also carries
//! the split of its round trip that NICs stamping completions would give
//! ([`super::HwSplit`]): of the pair's healthy median, [`HW_PROBER_SHARE`]
//! on the prober's host, [`HW_RESPONDER_SHARE`] on the responder's, the
//! rest on the network, each with lognormal noise ([`HW_SIGMA`]). A slow
//! host or slow NIC transmit path (queueing before the departure stamp)
//! multiplies both delays of that host; a slow rack pair, the network
//! part; a healthy host's episode that moves the median, its delays.
//! These splits are made up to be consistent with the injected faults:
//! they test the method, not any NIC.

use std::collections::BTreeMap;

use super::{
    Entity, HostId, HwSplit, Localizer, PairObs, Round, Suspect, SuspectKind, Topology,
    CONFIRM_ROUNDS, WINDOW_ROUNDS,
};
use crate::targets::plan::{ClusterPlan, MemberId, Timing};
use crate::targets::simulate::Rng;

/// Median round trip of a same-rack probe, microseconds.
pub const BASE_INSIDE_US: f64 = 2.0;
/// Median round trip of a cross-rack probe, microseconds.
pub const BASE_CROSS_US: f64 = 3.5;
/// A host pair's fixed factor lies within 1 ± this.
pub const PAIR_SPREAD: f64 = 0.15;
/// Lognormal sigma of one message's round trip.
pub const BODY_SIGMA: f64 = 0.25;
/// Share of messages in the Pareto tail.
pub const TAIL_SHARE: f64 = 0.02;
/// Loss of a message on a healthy path.
pub const LOSS_PER_MESSAGE: f64 = 1e-5;
/// Probability per round that a healthy host starts a slow episode.
pub const EPISODE_START: f64 = 0.002;
/// Median of a host's own wake-up latency p99, microseconds.
pub const SELF_HEALTH_US: f64 = 10.0;
/// Rounds after which precision and recall are read (the goal: localized
/// within 3 rounds).
pub const HORIZON_ROUNDS: usize = 3;
/// Most rounds one trial runs (`rounds_to_localize` above it: not
/// localized), or [`CONFIRM_ROUNDS`] coverage periods when the rack pairs
/// rotate through more rounds ([`max_rounds`]).
pub const MAX_ROUNDS: usize = 5;
/// Rounds of one fault-free trial (false suspects).
pub const HEALTHY_ROUNDS: usize = 10;
/// With hardware timestamps: share of a healthy round trip spent on the
/// prober's host...
pub const HW_PROBER_SHARE: f64 = 0.3;
/// ...and on the responder's host (the rest is the network).
pub const HW_RESPONDER_SHARE: f64 = 0.2;
/// Lognormal sigma of each part of a split.
pub const HW_SIGMA: f64 = 0.1;

/// How the simulated mesh reports, beyond the faults and the noise.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct SimOptions {
    /// Every answered probe carries a synthetic hardware-timestamp split.
    pub hw_timestamps: bool,
}

/// A fault the simulation injects.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum FaultKind {
    /// The host's CPU side is slow.
    SlowHost,
    /// The host is dead.
    DeadHost,
    /// The host's NIC transmits slowly.
    SlowNicTx,
    /// The path between two racks is slow.
    SlowRackPair,
    /// The host's link loses messages.
    LossyLink,
    /// The host's link goes down and up.
    FlappingLink,
}

impl FaultKind {
    /// Every fault, in report order.
    pub const ALL: [FaultKind; 6] = [
        FaultKind::SlowHost,
        FaultKind::DeadHost,
        FaultKind::SlowNicTx,
        FaultKind::SlowRackPair,
        FaultKind::LossyLink,
        FaultKind::FlappingLink,
    ];

    /// Its spelling in `--faults` and reports.
    pub fn name(self) -> &'static str {
        match self {
            FaultKind::SlowHost => "slow-host",
            FaultKind::DeadHost => "dead-host",
            FaultKind::SlowNicTx => "slow-nic-tx",
            FaultKind::SlowRackPair => "slow-rack-pair",
            FaultKind::LossyLink => "lossy-link",
            FaultKind::FlappingLink => "flapping-link",
        }
    }

    /// The suspect kind that localizes it.
    pub fn suspect(self) -> SuspectKind {
        match self {
            FaultKind::SlowHost => SuspectKind::Host,
            FaultKind::DeadHost => SuspectKind::Dead,
            FaultKind::SlowNicTx => SuspectKind::Nic,
            FaultKind::SlowRackPair => SuspectKind::RackPair,
            FaultKind::LossyLink | FaultKind::FlappingLink => SuspectKind::Link,
        }
    }
}

/// One scenario: one fault, or several at once (`a+b`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Scenario(pub Vec<FaultKind>);

impl Scenario {
    /// Its spelling (`slow-host+lossy-link`).
    pub fn name(&self) -> String {
        let names: Vec<&str> = self.0.iter().map(|f| f.name()).collect();
        names.join("+")
    }
}

/// `--faults LIST`: comma-separated scenarios, each a fault or `a+b`
/// (two at once); `all` is every single fault.
pub fn parse_scenarios(list: &str) -> Result<Vec<Scenario>, String> {
    let known = || {
        let n: Vec<&str> = FaultKind::ALL.iter().map(|f| f.name()).collect();
        n.join(", ")
    };
    let mut out = Vec::new();
    for item in list.split(',').map(str::trim).filter(|s| !s.is_empty()) {
        if item.eq_ignore_ascii_case("all") {
            out.extend(FaultKind::ALL.iter().map(|&f| Scenario(vec![f])));
            continue;
        }
        let mut faults = Vec::new();
        for part in item.split('+').map(str::trim) {
            let f = FaultKind::ALL
                .iter()
                .find(|f| f.name().eq_ignore_ascii_case(part))
                .ok_or_else(|| {
                    format!(
                        "{list:?}: unknown fault {part:?}; use {}, `all`, or two joined by + (e.g. slow-host+lossy-link)",
                        known()
                    )
                })?;
            faults.push(*f);
        }
        if faults.len() > 2 {
            return Err(format!("{item:?}: at most two faults at once"));
        }
        out.push(Scenario(faults));
    }
    if out.is_empty() {
        return Err(format!("{list:?}: give at least one fault: {}", known()));
    }
    Ok(out)
}

/// One injected fault, with whom it hits and how hard.
#[derive(Debug, Clone, Copy, PartialEq)]
enum Active {
    SlowHost { h: HostId, g: f64 },
    DeadHost { h: HostId },
    SlowNicTx { h: HostId, g: f64 },
    SlowRackPair { a: u32, b: u32, g: f64 },
    LossyLink { h: HostId, p: f64 },
    FlappingLink { h: HostId },
}

impl Active {
    /// The suspect that names it.
    fn want(self) -> (SuspectKind, Entity) {
        match self {
            Active::SlowHost { h, .. } => (SuspectKind::Host, Entity::Host(h)),
            Active::DeadHost { h } => (SuspectKind::Dead, Entity::Host(h)),
            Active::SlowNicTx { h, .. } => (SuspectKind::Nic, Entity::Host(h)),
            Active::SlowRackPair { a, b, .. } => {
                (SuspectKind::RackPair, Entity::Racks(a.min(b), a.max(b)))
            }
            Active::LossyLink { h, .. } | Active::FlappingLink { h } => {
                (SuspectKind::Link, Entity::Host(h))
            }
        }
    }
}

/// Inverse of the standard normal CDF (Acklam's rational approximation,
/// relative error below 1.2e-9).
fn probit(p: f64) -> f64 {
    const A: [f64; 6] = [
        -3.969_683_028_665_376e1,
        2.209_460_984_245_205e2,
        -2.759_285_104_469_687e2,
        1.383_577_518_672_69e2,
        -3.066_479_806_614_716e1,
        2.506_628_277_459_239,
    ];
    const B: [f64; 5] = [
        -5.447_609_879_822_406e1,
        1.615_858_368_580_409e2,
        -1.556_989_798_598_866e2,
        6.680_131_188_771_972e1,
        -1.328_068_155_288_572e1,
    ];
    const C: [f64; 6] = [
        -7.784_894_002_430_293e-3,
        -3.223_964_580_411_365e-1,
        -2.400_758_277_161_838,
        -2.549_732_539_343_734,
        4.374_664_141_464_968,
        2.938_163_982_698_783,
    ];
    const D: [f64; 4] = [
        7.784_695_709_041_462e-3,
        3.224_671_290_700_398e-1,
        2.445_134_137_142_996,
        3.754_408_661_907_416,
    ];
    let p = p.clamp(1e-12, 1.0 - 1e-12);
    let tail = |q: f64| {
        (((((C[0] * q + C[1]) * q + C[2]) * q + C[3]) * q + C[4]) * q + C[5])
            / ((((D[0] * q + D[1]) * q + D[2]) * q + D[3]) * q + 1.0)
    };
    if p < 0.02425 {
        tail((-2.0 * p.ln()).sqrt())
    } else if p > 1.0 - 0.02425 {
        -tail((-2.0 * (1.0 - p).ln()).sqrt())
    } else {
        let q = p - 0.5;
        let r = q * q;
        (((((A[0] * r + A[1]) * r + A[2]) * r + A[3]) * r + A[4]) * r + A[5]) * q
            / (((((B[0] * r + B[1]) * r + B[2]) * r + B[3]) * r + B[4]) * r + 1.0)
    }
}

/// A standard normal draw (Box-Muller, one of the pair).
fn normal(rng: &mut Rng) -> f64 {
    let u = rng.unit().max(1e-300);
    let v = rng.unit();
    (-2.0 * u.ln()).sqrt() * (std::f64::consts::TAU * v).cos()
}

/// A Poisson draw of small mean `lambda` (inversion).
fn poisson(rng: &mut Rng, lambda: f64) -> u32 {
    let l = (-lambda).exp();
    let (mut k, mut p) = (0u32, rng.unit());
    let mut cdf = l;
    let mut term = l;
    while p > cdf && k < 10_000 {
        k += 1;
        term *= lambda / f64::from(k);
        cdf += term;
        if term == 0.0 {
            p = 0.0;
        }
    }
    k
}

fn uniform(rng: &mut Rng, lo: f64, hi: f64) -> f64 {
    lo + (hi - lo) * rng.unit()
}

/// A healthy host's slow episode: rounds left, share of its messages
/// slowed, by how much.
#[derive(Debug, Clone, Copy, Default)]
struct Episode {
    left: u8,
    share: f32,
    factor: f32,
}

/// The simulated mesh: the plan, the noise's state, the faults.
struct Mesh<'a> {
    plan: &'a ClusterPlan,
    topo: Topology,
    probes: u32,
    hw: bool,
    rng: Rng,
    episodes: Vec<Episode>,
    faults: Vec<Active>,
    /// Per host: factor on every probe it sends or answers.
    host_factor: Vec<f32>,
    /// Per host: factor on its own wake-up latency.
    self_factor: Vec<f32>,
    dead: Vec<bool>,
    /// Per host: its link's loss per message, each way.
    link_loss: Vec<f32>,
    flapping: Vec<bool>,
    /// Per host: share of this round's probes lost whole (flapping).
    down: Vec<f32>,
    targets: Vec<MemberId>,
}

impl<'a> Mesh<'a> {
    fn new(plan: &'a ClusterPlan, probes: u32, seed: u64, opt: SimOptions) -> Mesh<'a> {
        let n = plan.len();
        let topo = topology(plan);
        let mut rng = Rng::new(seed);
        // Start in the steady state: about START x mean length in an episode.
        let episodes = (0..n)
            .map(|_| {
                if rng.unit() < EPISODE_START * 2.0 {
                    new_episode(&mut rng)
                } else {
                    Episode::default()
                }
            })
            .collect();
        Mesh {
            plan,
            topo,
            probes,
            hw: opt.hw_timestamps,
            rng,
            episodes,
            faults: Vec::new(),
            host_factor: vec![1.0; n],
            self_factor: vec![1.0; n],
            dead: vec![false; n],
            link_loss: vec![0.0; n],
            flapping: vec![false; n],
            down: vec![0.0; n],
            targets: Vec::new(),
        }
    }

    /// Injects one fault of `kind` at a random place no fault holds yet.
    fn inject(&mut self, kind: FaultKind) {
        let n = self.plan.len() as u64;
        let host = |m: &mut Mesh| loop {
            let h = m.rng.below(n) as HostId;
            if !m.faults.iter().any(|f| f.want().1 == Entity::Host(h)) {
                break h;
            }
        };
        let g = uniform(&mut self.rng, 2.0, 4.0);
        let f = match kind {
            FaultKind::SlowHost => Active::SlowHost { h: host(self), g },
            FaultKind::DeadHost => Active::DeadHost { h: host(self) },
            FaultKind::SlowNicTx => Active::SlowNicTx { h: host(self), g },
            FaultKind::LossyLink => Active::LossyLink {
                h: host(self),
                p: uniform(&mut self.rng, 0.01, 0.05),
            },
            FaultKind::FlappingLink => Active::FlappingLink { h: host(self) },
            FaultKind::SlowRackPair => {
                let r = u64::from(self.topo.racks);
                let a = self.rng.below(r) as u32;
                let b = (a + 1 + self.rng.below(r - 1) as u32) % r as u32;
                Active::SlowRackPair { a, b, g }
            }
        };
        match f {
            Active::SlowHost { h, g } => {
                self.host_factor[h as usize] = g as f32;
                self.self_factor[h as usize] = g as f32;
            }
            Active::SlowNicTx { h, g } => self.host_factor[h as usize] = g as f32,
            Active::DeadHost { h } => self.dead[h as usize] = true,
            Active::LossyLink { h, p } => self.link_loss[h as usize] = p as f32,
            Active::FlappingLink { h } => self.flapping[h as usize] = true,
            Active::SlowRackPair { .. } => {}
        }
        self.faults.push(f);
    }

    /// One round of epoch `e` into `out`.
    fn round(&mut self, e: u64, out: &mut Round) {
        let n = self.plan.len();
        for h in 0..n {
            let ep = &mut self.episodes[h];
            ep.left = ep.left.saturating_sub(1);
            if ep.left == 0 && self.rng.unit() < EPISODE_START {
                *ep = new_episode(&mut self.rng);
            }
            self.down[h] = if self.flapping[h] && self.rng.unit() < 0.7 {
                uniform(&mut self.rng, 0.2, 0.6) as f32
            } else {
                0.0
            };
        }
        out.pairs.clear();
        out.self_health_us.clear();
        for h in 0..n {
            let ep = self.episodes[h];
            let g = if ep.left > 0 { ep.factor } else { 1.0 };
            let v = SELF_HEALTH_US * (0.2 * normal(&mut self.rng)).exp();
            out.self_health_us.push(v as f32 * g * self.self_factor[h]);
        }
        let mut targets = std::mem::take(&mut self.targets);
        for m in 0..n as MemberId {
            if self.dead[m as usize] {
                continue;
            }
            self.plan.targets_of(m, e, &mut targets);
            for &t in &targets {
                let o = self.observe(m, t);
                out.pairs.push(o);
            }
        }
        self.targets = targets;
    }

    /// One probe from `p` to `t`.
    fn observe(&mut self, p: HostId, t: HostId) -> PairObs {
        let (pu, tu) = (p as usize, t as usize);
        let sent = self.probes;
        let whole_loss = self.dead[tu] || {
            let d = self.down[pu].max(self.down[tu]);
            d > 0.0 && self.rng.unit() < f64::from(d)
        };
        if whole_loss {
            return PairObs {
                prober: p,
                target: t,
                sent,
                lost: sent,
                p50_us: f32::NAN,
                p10_us: f32::NAN,
                hw: None,
            };
        }
        let (ra, rb) = (self.topo.rack(p), self.topo.rack(t));
        let mut base = if ra == rb {
            BASE_INSIDE_US
        } else {
            BASE_CROSS_US
        } * pair_factor(p, t);
        let healthy = base;
        base *= f64::from(self.host_factor[pu] * self.host_factor[tu]);
        let mut path = 1.0;
        for f in &self.faults {
            if let Active::SlowRackPair { a, b, g } = *f {
                if (ra, rb) == (a, b) || (ra, rb) == (b, a) {
                    path *= g;
                }
            }
        }
        base *= path;
        // The episode's share of slowed messages (either end's), and by how much.
        let (ep, et) = (self.episodes[pu], self.episodes[tu]);
        let share_of = |e: Episode| if e.left > 0 { f64::from(e.share) } else { 0.0 };
        let share = 1.0 - (1.0 - share_of(ep)) * (1.0 - share_of(et));
        let factor = f64::from(ep.factor.max(et.factor)).max(1.0);
        // Each quantile's rank among the messages (the order statistic's
        // Beta law ~ normal), past the tail's share, then the mixture's
        // quantile: the fast body, or the episode's slow mode above it.
        let mut quantile = |q: f64| {
            let sd = (q * (1.0 - q) / f64::from(sent)).sqrt();
            let u = ((q + sd * normal(&mut self.rng)) / (1.0 - TAIL_SHARE)).clamp(1e-9, 1.0 - 1e-9);
            if u < 1.0 - share {
                base * (BODY_SIGMA * probit(u / (1.0 - share))).exp()
            } else {
                base * factor * (BODY_SIGMA * probit((u - (1.0 - share)) / share)).exp()
            }
        };
        let (p50, p10) = (quantile(0.5), quantile(0.1));
        let keep = (1.0 - f64::from(self.link_loss[pu])).powi(2)
            * (1.0 - f64::from(self.link_loss[tu])).powi(2);
        let q = 1.0 - keep * (1.0 - LOSS_PER_MESSAGE);
        let lost = poisson(&mut self.rng, f64::from(sent) * q).min(sent);
        let hw = (self.hw && lost < sent).then(|| {
            // A host's part moves with its fault and with an episode that
            // moves the median (more than half its messages slowed).
            let moved = |e: Episode| {
                if e.left > 0 && e.share > 0.5 {
                    f64::from(e.factor)
                } else {
                    1.0
                }
            };
            let mut part = |share: f64, g: f64| {
                (healthy * share * g * (HW_SIGMA * normal(&mut self.rng)).exp()) as f32
            };
            HwSplit {
                prober_us: part(HW_PROBER_SHARE, f64::from(self.host_factor[pu]) * moved(ep)),
                responder_us: part(
                    HW_RESPONDER_SHARE,
                    f64::from(self.host_factor[tu]) * moved(et),
                ),
                network_us: part(1.0 - HW_PROBER_SHARE - HW_RESPONDER_SHARE, path),
            }
        });
        PairObs {
            prober: p,
            target: t,
            sent,
            lost,
            p50_us: if lost == sent { f32::NAN } else { p50 as f32 },
            p10_us: if lost == sent {
                f32::NAN
            } else {
                p10.min(p50) as f32
            },
            hw,
        }
    }
}

fn new_episode(rng: &mut Rng) -> Episode {
    Episode {
        left: 1 + rng.below(3) as u8,
        share: uniform(rng, 0.1, 0.6) as f32,
        factor: uniform(rng, 2.0, 4.0) as f32,
    }
}

/// A host pair's fixed latency factor, the same both ways.
fn pair_factor(p: HostId, t: HostId) -> f64 {
    let key = (u64::from(p.min(t)) << 32) | u64::from(p.max(t));
    let mut r = Rng::new(key);
    1.0 - PAIR_SPREAD + 2.0 * PAIR_SPREAD * r.unit()
}

/// The plan's racks as a localization topology.
pub fn topology(plan: &ClusterPlan) -> Topology {
    Topology {
        rack_of: (0..plan.len() as MemberId)
            .map(|m| plan.rack_of(m) as u32)
            .collect(),
        racks: plan.racks() as u32,
    }
}

/// How well one scenario was localized.
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub struct FaultScore {
    /// The scenario (`slow-host`, `slow-host+lossy-link`).
    pub fault: String,
    /// Trials run.
    pub trials: usize,
    /// Of the trials that named any suspect after [`HORIZON_ROUNDS`]
    /// rounds, the share whose top suspect is an injected fault (its kind
    /// and whom it names). None when no trial named one.
    pub top1_precision: Option<f64>,
    /// Share of injected faults among the top 3 suspects after
    /// [`HORIZON_ROUNDS`] rounds.
    pub top3_recall: f64,
    /// Share of injected faults among all named suspects after
    /// [`HORIZON_ROUNDS`] rounds.
    pub recall: f64,
    /// Median over trials of the first round after which every injected
    /// fault is among the top n suspects (n faults); None when more than
    /// half the trials did not get there within [`max_rounds`].
    pub rounds_to_localize: Option<usize>,
    /// Its 95th percentile, None likewise.
    pub rounds_to_localize_p95: Option<usize>,
    /// top1_precision >= 0.95 and recall >= 0.95.
    pub meets_goal: bool,
}

/// Everything `mesh --faults` adds to the report.
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub struct Localization {
    /// One row per scenario.
    pub localization: Vec<FaultScore>,
    /// Suspects named in fault-free trials (counted when first named),
    /// per hour of the whole simulated cluster.
    pub false_suspects_per_healthy_hour: f64,
    /// Those false suspects by kind.
    pub false_suspects_by_kind: BTreeMap<&'static str, usize>,
    /// Simulated fault-free hours (trials x [`HEALTHY_ROUNDS`] rounds).
    pub healthy_hours: f64,
    /// Rounds after which precision and recall are read.
    pub horizon_rounds: usize,
    /// The localizer's window, rounds.
    pub window_rounds: usize,
    /// Rounds of the window that must accuse a suspect.
    pub confirm_rounds: usize,
    /// The localizer's window for a rack pair, rounds: [`WINDOW_ROUNDS`]
    /// coverage periods of K rounds (K = 1: the same as `window_rounds`).
    pub rack_pair_window_rounds: usize,
    /// Most rounds one trial runs ([`max_rounds`]).
    pub max_rounds: usize,
}

/// Most rounds one trial of `plan` runs: [`MAX_ROUNDS`], or the
/// [`CONFIRM_ROUNDS`] coverage periods a rotating rack pair needs to be
/// accused often enough to be named, if more.
pub fn max_rounds(plan: &ClusterPlan) -> usize {
    let k = usize::try_from(plan.rack_pair_rounds()).unwrap_or(usize::MAX);
    MAX_ROUNDS.max(CONFIRM_ROUNDS.saturating_mul(k))
}

/// The `q` quantile (nearest rank) of sorted rounds, None past `max`.
fn rounds_quantile(v: &[usize], q: f64, max: usize) -> Option<usize> {
    if v.is_empty() {
        return None;
    }
    let i = ((q * v.len() as f64).ceil() as usize).clamp(1, v.len()) - 1;
    Some(v[i]).filter(|&r| r <= max)
}

fn found(named: &[Suspect], want: (SuspectKind, Entity)) -> bool {
    named.iter().any(|s| (s.kind, s.entity) == want)
}

/// Runs `trials` trials of one scenario.
fn score(
    plan: &ClusterPlan,
    t: Timing,
    s: &Scenario,
    trials: usize,
    seed: u64,
    opt: SimOptions,
) -> FaultScore {
    let (mut named_any, mut top1_right) = (0usize, 0usize);
    let (mut faults, mut in_top3, mut in_all) = (0usize, 0usize, 0usize);
    let mut rounds = Vec::with_capacity(trials);
    let mut round = Round::default();
    let max = max_rounds(plan);
    for trial in 0..trials {
        let mut mesh = Mesh::new(
            plan,
            t.probes as u32,
            trial_seed(seed, &s.name(), trial),
            opt,
        );
        for &f in &s.0 {
            mesh.inject(f);
        }
        let want: Vec<(SuspectKind, Entity)> = mesh.faults.iter().map(|f| f.want()).collect();
        let mut loc = Localizer::rotating(mesh.topo.clone(), plan.rack_pair_rounds());
        let e0 = mesh.rng.below(1_000_000);
        let mut localized = max + 1;
        for r in 1..=max {
            mesh.round(e0 + r as u64, &mut round);
            let named = loc.push(&round);
            let top = &named[..named.len().min(want.len())];
            if localized > max && want.iter().all(|&w| found(top, w)) {
                localized = r;
            }
            if r == HORIZON_ROUNDS {
                if let Some(first) = named.first() {
                    named_any += 1;
                    top1_right += usize::from(want.contains(&(first.kind, first.entity)));
                }
                let top3 = &named[..named.len().min(3)];
                faults += want.len();
                in_top3 += want.iter().filter(|&&w| found(top3, w)).count();
                in_all += want.iter().filter(|&&w| found(&named, w)).count();
            }
            if r >= HORIZON_ROUNDS && localized <= max {
                break;
            }
        }
        rounds.push(localized);
    }
    rounds.sort_unstable();
    let share = |a: usize, b: usize| if b == 0 { 0.0 } else { a as f64 / b as f64 };
    let top1_precision = (named_any > 0).then(|| share(top1_right, named_any));
    let recall = share(in_all, faults);
    FaultScore {
        fault: s.name(),
        trials,
        top1_precision,
        top3_recall: share(in_top3, faults),
        recall,
        rounds_to_localize: rounds_quantile(&rounds, 0.5, max),
        rounds_to_localize_p95: rounds_quantile(&rounds, 0.95, max),
        meets_goal: top1_precision.is_some_and(|p| p >= 0.95) && recall >= 0.95,
    }
}

/// Seconds of one round: the interval, or the busiest round if longer.
fn round_seconds(plan: &ClusterPlan, t: Timing) -> f64 {
    t.interval.max(plan.max_targets() as f64 * t.per_target())
}

/// A trial's seed: the user's seed, the scenario and the trial number.
fn trial_seed(seed: u64, scenario: &str, trial: usize) -> u64 {
    crate::targets::plan::fnv1a(&[
        &seed.to_le_bytes(),
        scenario.as_bytes(),
        &(trial as u64).to_le_bytes(),
    ])
}

/// Fault-free trials: suspects named, counted when first named, by kind.
fn healthy(
    plan: &ClusterPlan,
    t: Timing,
    trials: usize,
    seed: u64,
    opt: SimOptions,
) -> BTreeMap<&'static str, usize> {
    let mut by_kind = BTreeMap::new();
    let mut round = Round::default();
    for trial in 0..trials {
        let mut mesh = Mesh::new(
            plan,
            t.probes as u32,
            trial_seed(seed, "healthy", trial),
            opt,
        );
        let mut loc = Localizer::rotating(mesh.topo.clone(), plan.rack_pair_rounds());
        let e0 = mesh.rng.below(1_000_000);
        let mut before: Vec<Entity> = Vec::new();
        for r in 1..=HEALTHY_ROUNDS {
            mesh.round(e0 + r as u64, &mut round);
            let named = loc.push(&round);
            for s in &named {
                if !before.contains(&s.entity) {
                    *by_kind.entry(s.kind.name()).or_insert(0) += 1;
                }
            }
            before = named.iter().map(|s| s.entity).collect();
        }
    }
    by_kind
}

/// `n` rounds of one trial of `scenario` on `plan`'s schedule, with the
/// suspects that localize its faults: what `ibexporter localize` reads
/// from a snapshot, made without Prometheus (its tests, the shipped
/// example snapshot). Same inputs, same rounds.
pub fn rounds(
    plan: &ClusterPlan,
    probes: u32,
    scenario: &Scenario,
    seed: u64,
    n: usize,
) -> (Vec<Round>, Vec<(SuspectKind, Entity)>) {
    let mut mesh = Mesh::new(
        plan,
        probes,
        trial_seed(seed, &scenario.name(), 0),
        SimOptions::default(),
    );
    for &f in &scenario.0 {
        mesh.inject(f);
    }
    let want = mesh.faults.iter().map(|f| f.want()).collect();
    let e0 = mesh.rng.below(1_000_000);
    let out = (1..=n as u64)
        .map(|r| {
            let mut round = Round::default();
            mesh.round(e0 + r, &mut round);
            round
        })
        .collect();
    (out, want)
}

/// Localization of every scenario (`trials` each) and the false suspects
/// of `trials` fault-free trials, seeded by `seed`.
pub fn measure(
    plan: &ClusterPlan,
    t: Timing,
    scenarios: &[Scenario],
    trials: usize,
    seed: u64,
) -> Localization {
    measure_with(plan, t, scenarios, trials, seed, SimOptions::default())
}

/// [`measure`], with the mesh reporting as `opt` says (e.g. hardware
/// timestamps).
pub fn measure_with(
    plan: &ClusterPlan,
    t: Timing,
    scenarios: &[Scenario],
    trials: usize,
    seed: u64,
    opt: SimOptions,
) -> Localization {
    let by_kind = healthy(plan, t, trials, seed, opt);
    let hours = (trials * HEALTHY_ROUNDS) as f64 * round_seconds(plan, t) / 3600.0;
    let total: usize = by_kind.values().sum();
    Localization {
        localization: scenarios
            .iter()
            .map(|s| score(plan, t, s, trials, seed, opt))
            .collect(),
        false_suspects_per_healthy_hour: if hours > 0.0 {
            total as f64 / hours
        } else {
            0.0
        },
        false_suspects_by_kind: by_kind,
        healthy_hours: hours,
        horizon_rounds: HORIZON_ROUNDS,
        window_rounds: WINDOW_ROUNDS,
        confirm_rounds: CONFIRM_ROUNDS,
        rack_pair_window_rounds: WINDOW_ROUNDS
            .saturating_mul(usize::try_from(plan.rack_pair_rounds()).unwrap_or(usize::MAX)),
        max_rounds: max_rounds(plan),
    }
}

/// Checks that `scenarios` fit `plan` (a rack pair needs two racks, two
/// host faults two hosts): one line naming what is missing.
pub fn check(plan: &ClusterPlan, scenarios: &[Scenario]) -> Result<(), String> {
    for s in scenarios {
        if s.0.contains(&FaultKind::SlowRackPair) && plan.racks() < 2 {
            return Err(format!(
                "--faults {}: slow-rack-pair needs at least 2 racks (--racks)",
                s.name()
            ));
        }
        if plan.len() < 2 * s.0.len() + 2 {
            return Err(format!(
                "--faults {}: needs at least {} hosts",
                s.name(),
                2 * s.0.len() + 2
            ));
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::targets::plan::PlanKind;
    use crate::targets::simulate::synthetic;

    #[test]
    fn probit_is_the_normal_quantile() {
        assert!(probit(0.5).abs() < 1e-9);
        assert!((probit(0.975) - 1.959_964).abs() < 1e-5);
        assert!((probit(0.01) + 2.326_348).abs() < 1e-5);
    }

    #[test]
    fn scenarios_parse_and_refuse_with_the_list() {
        let s = parse_scenarios("slow-host, dead-host+lossy-link").unwrap();
        assert_eq!(s[1].name(), "dead-host+lossy-link");
        assert_eq!(parse_scenarios("all").unwrap().len(), 6);
        let e = parse_scenarios("slow-hots").unwrap_err();
        assert!(
            e.contains("slow-hots") && e.contains("flapping-link"),
            "{e}"
        );
        assert!(parse_scenarios("a+b+c").is_err());
        assert!(parse_scenarios(" , ").is_err());
    }

    #[test]
    fn the_mesh_follows_the_plan_and_its_faults() {
        let plan = ClusterPlan::new(synthetic(200, 10), PlanKind::RackMesh, 1);
        let mut mesh = Mesh::new(&plan, 100, 7, SimOptions::default());
        mesh.inject(FaultKind::DeadHost);
        let dead = match mesh.faults[0] {
            Active::DeadHost { h } => h,
            _ => unreachable!(),
        };
        let mut r = Round::default();
        mesh.round(3, &mut r);
        let mut expect = 0;
        let mut out = Vec::new();
        for m in 0..200 {
            if m != dead {
                plan.targets_of(m, 3, &mut out);
                expect += out.len();
            }
        }
        assert_eq!(r.pairs.len(), expect);
        assert!(r.pairs.iter().all(|o| o.prober != dead));
        assert!(r
            .pairs
            .iter()
            .filter(|o| o.target == dead)
            .all(|o| o.dead()));
        // Healthy probes: medians near the class base, loss rare.
        let inside: Vec<f32> = r
            .pairs
            .iter()
            .filter(|o| o.target != dead && plan.rack_of(o.prober) == plan.rack_of(o.target))
            .map(|o| o.p50_us)
            .collect();
        let mean = inside.iter().map(|&v| f64::from(v)).sum::<f64>() / inside.len() as f64;
        assert!((1.8..2.4).contains(&mean), "{mean}");
    }
}
