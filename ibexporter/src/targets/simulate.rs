//! A probe plan on a virtual clock: load, coverage and failure detection
//! of a whole cluster, without probing anything.
//!
//! Why it exists: the plan's promises ([`super::plan`]) must hold at
//! 10,000 hosts, which no test can run for real. This module runs every
//! member's rounds as the engine does (round `e` starts at `e · round`,
//! targets one after the other, `d` seconds each, a dead one the timeout
//! `c`) and measures what the formulas bound. Pure computation, seeded:
//! the same inputs give the same numbers.

use super::cardinality::FleetSeries;
use super::plan::{ClusterPlan, Figures, MemberId, PlanKind, Timing};
use crate::config::DEFAULT_MAX_PEER_SERIES;

/// A synthetic cluster: `hosts` members named `h00000`…, in `racks` racks
/// `r0000`… of sizes differing by at most one.
pub fn synthetic(hosts: usize, racks: usize) -> Vec<(String, String)> {
    let racks = racks.clamp(1, hosts.max(1));
    (0..hosts)
        .map(|i| (format!("h{i:05}"), format!("r{:04}", i * racks / hosts)))
        .collect()
}

/// What fails.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Failure {
    /// One host stops answering (its exporter is dead too).
    DeadHost,
    /// One rack's uplink: every cross-rack path of the rack fails.
    DeadUplink,
    /// One path between two hosts of different racks becomes slow; seen
    /// when either probes the other.
    SlowPath,
}

impl Failure {
    /// Every failure, in report order.
    pub const ALL: [Failure; 3] = [Failure::DeadHost, Failure::DeadUplink, Failure::SlowPath];

    /// Its name in reports.
    pub fn name(self) -> &'static str {
        match self {
            Failure::DeadHost => "dead-host",
            Failure::DeadUplink => "dead-uplink",
            Failure::SlowPath => "slow-path",
        }
    }
}

/// A small fixed generator (splitmix64): reproducible runs.
#[derive(Debug, Clone)]
pub struct Rng(u64);

impl Rng {
    /// A generator from `seed`.
    pub fn new(seed: u64) -> Rng {
        Rng(seed)
    }

    /// The next 64 random bits.
    pub fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }

    /// Uniform in `0..n` (n > 0).
    pub fn below(&mut self, n: u64) -> u64 {
        self.next_u64() % n
    }

    /// Uniform in [0, 1).
    pub fn unit(&mut self) -> f64 {
        (self.next_u64() >> 11) as f64 / (1u64 << 53) as f64
    }
}

/// Detection times of one kind of failure, seconds.
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub struct Detection {
    /// The failure.
    pub failure: &'static str,
    /// Simulated failures.
    pub trials: usize,
    /// Median detection time.
    pub p50: f64,
    /// 99th percentile.
    pub p99: f64,
    /// Slowest.
    pub max: f64,
    /// The documented bound.
    pub bound: f64,
    /// Share of failures detected within the bound.
    pub within_bound: f64,
}

/// The `q` quantile (nearest rank) of sorted `v`.
fn quantile(v: &[f64], q: f64) -> f64 {
    if v.is_empty() {
        return f64::NAN;
    }
    let i = ((q * v.len() as f64).ceil() as usize).clamp(1, v.len()) - 1;
    v[i]
}

/// The virtual clock of one plan: round length and per-target costs.
struct Clock {
    round: f64,
    d: f64,
    c: f64,
}

impl Clock {
    fn of(plan: &ClusterPlan, t: Timing) -> Clock {
        let d = t.per_target();
        Clock {
            round: t.interval.max(plan.max_targets() as f64 * d),
            d,
            c: t.timeout.max(d),
        }
    }

    /// When the probe at `pos` of a round of epoch `e` starts.
    fn start(&self, e: u64, pos: usize) -> f64 {
        e as f64 * self.round + pos as f64 * self.d
    }
}

/// One failure's detection time: the first failed probe that starts at or
/// after `t0` and completes (`cost` later). `hits(e, out)` lists the
/// (prober, position) whose probe in epoch `e` sees the failure.
fn first_detection(
    clock: &Clock,
    t0: f64,
    e0: u64,
    max_epochs: u64,
    cost: f64,
    mut hits: impl FnMut(u64, &mut Vec<(MemberId, usize)>),
) -> f64 {
    let mut buf = Vec::new();
    for e in e0..e0 + max_epochs + 2 {
        hits(e, &mut buf);
        let best = buf
            .iter()
            .map(|&(_, pos)| clock.start(e, pos))
            .filter(|&s| s >= t0)
            .fold(f64::INFINITY, f64::min);
        if best.is_finite() {
            return best + cost - t0;
        }
    }
    f64::INFINITY
}

/// Simulates `trials` failures of kind `f` at random members and times,
/// seeded by `seed`.
pub fn detection(plan: &ClusterPlan, t: Timing, f: Failure, trials: usize, seed: u64) -> Detection {
    let clock = Clock::of(plan, t);
    let fig = Figures::of(plan, t);
    let n = plan.len() as u64;
    let mut rng = Rng::new(seed ^ 0x5eed);
    let mut times = Vec::with_capacity(trials);
    let pair_rounds = plan.host_pair_rounds();
    let mut scratch = Vec::new();
    let mut scratch2 = Vec::new();
    for _ in 0..trials {
        if n < 2 {
            break;
        }
        let e0 = rng.below(1_000_000);
        let t0 = (e0 as f64 + rng.unit()) * clock.round;
        let time = match f {
            Failure::DeadHost => {
                let h = rng.below(n) as MemberId;
                first_detection(&clock, t0, e0, 2, clock.c, |e, out| {
                    plan.probers_of(h, e, out)
                })
            }
            Failure::DeadUplink => {
                let a = plan.rack_of(rng.below(n) as MemberId);
                let members: Vec<MemberId> = (0..n as MemberId)
                    .filter(|&m| plan.rack_of(m) == a)
                    .collect();
                // Only the cross-rack parts: walking each member's whole
                // round would cost the rack's size squared per epoch.
                first_detection(&clock, t0, e0, 2, clock.c, |e, out| {
                    out.clear();
                    for &m in &members {
                        plan.cross_targets_of(m, e, &mut scratch);
                        out.extend(scratch.iter().map(|&(_, pos)| (m, pos)));
                        plan.cross_probers_of(m, e, &mut scratch2);
                        out.extend_from_slice(&scratch2);
                    }
                })
            }
            Failure::SlowPath => {
                if plan.racks() < 2 {
                    break;
                }
                let a = rng.below(n) as MemberId;
                let b = loop {
                    let b = rng.below(n) as MemberId;
                    if plan.rack_of(b) != plan.rack_of(a) {
                        break b;
                    }
                };
                first_detection(&clock, t0, e0, pair_rounds + 1, clock.d, |e, out| {
                    out.clear();
                    for (x, y) in [(a, b), (b, a)] {
                        plan.cross_targets_of(x, e, &mut scratch);
                        if let Some(&(_, pos)) = scratch.iter().find(|&&(z, _)| z == y) {
                            out.push((x, pos));
                        }
                    }
                })
            }
        };
        times.push(time);
    }
    times.sort_by(f64::total_cmp);
    let bound = match f {
        Failure::DeadHost | Failure::DeadUplink => fig.detect_bound_seconds,
        Failure::SlowPath => fig.slow_path_bound_seconds,
    };
    let within = times.iter().filter(|&&x| x <= bound + 1e-9).count();
    Detection {
        failure: f.name(),
        trials: times.len(),
        p50: quantile(&times, 0.5),
        p99: quantile(&times, 0.99),
        max: times.last().copied().unwrap_or(f64::NAN),
        bound,
        within_bound: if times.is_empty() {
            1.0
        } else {
            within as f64 / times.len() as f64
        },
    }
}

/// One round of the whole cluster, measured.
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub struct RoundLoad {
    /// Fewest targets of a member.
    pub min_targets: usize,
    /// Mean targets per member.
    pub mean_targets: f64,
    /// Most targets of a member.
    pub max_targets: usize,
    /// Most probers of one member (inbound).
    pub max_inbound: usize,
    /// Ordered rack pairs (A ≠ B) probed this round.
    pub rack_pairs_covered: usize,
    /// Ordered rack pairs in the cluster.
    pub rack_pairs: usize,
    /// Probe messages per node per second at the busiest member.
    pub probes_per_node_per_second: f64,
}

/// Every member's round of epoch `e`: load and rack-pair coverage.
pub fn round_load(plan: &ClusterPlan, t: Timing, e: u64) -> RoundLoad {
    let n = plan.len();
    let r = plan.racks();
    let mut covered = vec![false; r * r];
    let mut inbound = vec![0usize; n];
    let (mut lo, mut hi, mut sum) = (usize::MAX, 0usize, 0usize);
    // Every member probes the rest of its rack (both plans): counted, not
    // walked; only the cross-rack targets are listed.
    let mut cross = Vec::new();
    for m in 0..n as MemberId {
        plan.cross_targets_of(m, e, &mut cross);
        let a = plan.rack_of(m);
        let own = plan.rack(a).1 - 1;
        let targets = own + cross.len();
        lo = lo.min(targets);
        hi = hi.max(targets);
        sum += targets;
        inbound[m as usize] += own;
        for &(x, _) in &cross {
            inbound[x as usize] += 1;
            covered[a * r + plan.rack_of(x)] = true;
        }
    }
    let clock = Clock::of(plan, t);
    RoundLoad {
        min_targets: if n == 0 { 0 } else { lo },
        mean_targets: sum as f64 / n.max(1) as f64,
        max_targets: hi,
        max_inbound: inbound.iter().copied().max().unwrap_or(0),
        rack_pairs_covered: (0..r * r).filter(|&i| i / r != i % r && covered[i]).count(),
        rack_pairs: r * r.saturating_sub(1),
        probes_per_node_per_second: hi as f64 * t.probes / clock.round,
    }
}

/// Ordered rack pairs (A ≠ B) probed in the `rounds` rounds from epoch
/// `e0`: with `rounds` the plan's [`ClusterPlan::rack_pair_rounds`], every
/// one of them.
pub fn rack_pairs_covered(plan: &ClusterPlan, e0: u64, rounds: u64) -> usize {
    let r = plan.racks();
    let mut covered = vec![false; r * r];
    let mut cross = Vec::new();
    for e in e0..e0 + rounds {
        for m in 0..plan.len() as MemberId {
            plan.cross_targets_of(m, e, &mut cross);
            let a = plan.rack_of(m);
            for &(x, _) in &cross {
                covered[a * r + plan.rack_of(x)] = true;
            }
        }
    }
    covered.iter().filter(|&&c| c).count()
}

/// Rounds until every ordered cross-rack host pair with a source in
/// `racks` was probed, starting at epoch `e0` (`None`: not within
/// `limit` rounds). Same-rack pairs are covered every round by
/// construction (checked by [`round_load`]'s callers).
pub fn host_pair_rounds(plan: &ClusterPlan, racks: &[usize], e0: u64, limit: u64) -> Option<u64> {
    let n = plan.len();
    let members: Vec<MemberId> = (0..n as MemberId)
        .filter(|&m| racks.contains(&plan.rack_of(m)))
        .collect();
    let mut seen = vec![false; members.len() * n];
    let mut missing: usize = members
        .iter()
        .map(|&m| {
            (0..n as MemberId)
                .filter(|&x| plan.rack_of(x) != plan.rack_of(m))
                .count()
        })
        .sum();
    let mut out = Vec::new();
    for e in e0..e0 + limit {
        for (i, &m) in members.iter().enumerate() {
            plan.targets_of(m, e, &mut out);
            for &x in &out {
                let cell = &mut seen[i * n + x as usize];
                if !*cell && plan.rack_of(x) != plan.rack_of(m) {
                    *cell = true;
                    missing -= 1;
                }
            }
        }
        if missing == 0 {
            return Some(e - e0 + 1);
        }
    }
    None
}

/// Everything `ibexporter mesh --simulate` reports for one cluster.
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub struct Report {
    /// The formulas.
    pub figures: Figures,
    /// One measured round.
    pub round: RoundLoad,
    /// Detection of each failure kind.
    pub detection: Vec<Detection>,
    /// The fleet's remote-probe series with the default cardinality
    /// settings and one message size.
    pub series: FleetSeries,
}

/// Figures, one measured round and `trials` failures of each kind.
pub fn report(plan: &ClusterPlan, t: Timing, trials: usize, seed: u64) -> Report {
    Report {
        figures: Figures::of(plan, t),
        round: round_load(plan, t, seed % 1_000_000),
        detection: Failure::ALL
            .iter()
            .map(|&f| {
                // A slow path costs up to host_pair_rounds of plan walking.
                let n = if f == Failure::SlowPath && plan.kind() == PlanKind::RackMesh {
                    trials.min(200)
                } else {
                    trials
                };
                detection(plan, t, f, n, seed)
            })
            .collect(),
        series: FleetSeries::of(plan, DEFAULT_MAX_PEER_SERIES, 1),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn synthetic_racks_differ_by_at_most_one() {
        let l = synthetic(100, 3);
        let mut sizes = std::collections::BTreeMap::new();
        for (_, r) in &l {
            *sizes.entry(r.clone()).or_insert(0) += 1;
        }
        let v: Vec<i32> = sizes.values().copied().collect();
        assert_eq!(v.len(), 3);
        assert!(
            v.iter().max().unwrap() - v.iter().min().unwrap() <= 1,
            "{v:?}"
        );
    }

    #[test]
    fn quantiles_are_nearest_rank() {
        let v: Vec<f64> = (1..=100).map(f64::from).collect();
        assert_eq!(quantile(&v, 0.5), 50.0);
        assert_eq!(quantile(&v, 0.99), 99.0);
        assert_eq!(quantile(&v, 1.0), 100.0);
    }
}
