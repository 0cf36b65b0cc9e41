//! Probe plans: whom each exporter probes in each round, derived by every
//! exporter alone from the same target list (no controller).
//!
//! Why it exists: probing every peer costs O(N) per node and O(N²) per
//! cluster. Every exporter already discovers the same list (file_sd, DNS,
//! static) with rack labels, so each can compute its share of one
//! cluster-wide plan: same list, same plan, on every host (the hash is a
//! fixed FNV-1a, not std's randomised hasher). Pure computation: no I/O,
//! no clock (the caller passes the epoch).
//!
//! # The plans
//!
//! - `full`: every node probes every other member every round.
//! - `rack-mesh`: every node probes every member of its own rack every
//!   round; and for every ordered pair of racks (A, B), `k` probes go from
//!   A to B every round (`targets.plan_rack_peers`). The (A → B) probes of
//!   epoch `e` are the slots `q = e·k + j`, `j < k`; slot `q` is probed by
//!   member `(r·k + q) mod s_A` of A (`r`: B's rank among A's other racks)
//!   and targets member `π_AB((q div s_A) mod s_B)` of B, where `π_AB` is
//!   an affine permutation of B's members seeded by the hash of the two
//!   rack names. So each member of A carries `⌊k(R−1)/s_A⌋` or
//!   `⌈k(R−1)/s_A⌉` of A's rack pairs (dealt round-robin, never more), the
//!   probers rotate every epoch, and the slots of any `s_A·s_B`
//!   consecutive values of `q` are every (a, b) pair exactly once.
//!
//! A member's round is its own rack first (in name order), then its
//! cross-rack slots in slot order. Members without the rack label form
//! one rack, `""`.
//!
//! # Rotating rack pairs (large clusters)
//!
//! A rack's `S = k(R − 1)` cross-rack slots grow with the number of racks
//! R: at 100,000 hosts in racks of 25 a member would carry 160 rack pairs
//! a round, more than a 10 s round holds. When the round budget is known
//! ([`ClusterPlan::fitted`], as every exporter and `ibexporter mesh`
//! build the plan), the rack pairs are split into `K` windows, `K` the
//! smallest that makes the busiest member fit the budget (1, the plan
//! above, whenever it already fits). The unordered rack pair {A, B} (A,
//! B: the racks' indices) is probed in the epochs `e` with
//! `(A + B) mod K = e mod K`, **both directions in the same round**: A
//! runs the slots of the racks `B ≡ e − A (mod K)` and B those of the
//! racks `A ≡ e − B`, so a slow inter-rack path is seen from both sides
//! at once (a rack-pair suspect needs probes from two probers in one
//! round, [`crate::localize`]). Each rack's partners in a round are one
//! residue class of the racks, `⌈R/K⌉` at most (less itself), so the
//! probes into a rack are spread evenly over the rounds. The active slots
//! are dealt as above (r: the partner's rank in the round's class) with
//! the epoch replaced by the visit
//! `v = ⌊e / K⌋` (each pair's turns are K epochs apart, so `v` counts
//! them). So every rack pair is probed within `K` rounds from any round
//! boundary (the coverage time, printed by `ibexporter mesh`), each
//! member carries `⌈k⌈R/K⌉/s_A⌉` rack pairs at most, and the host pairs
//! of (A, B) repeat every `⌈s_A·s_B/k⌉` visits, that is within
//! `K·⌈s_A·s_B/k⌉` rounds. Nothing is random and nothing is exchanged:
//! the turn is a function of the epoch, the racks' indices and the
//! member list, so every exporter computes the same schedule alone.
//!
//! # Formulas (R racks, rack sizes `s`, `k` = plan_rack_peers)
//!
//! With interval `I` (one epoch), `P` messages per target per round at
//! `rate_hz` (one target costs `d = P / rate_hz` seconds; a dead one the
//! probe timeout `c`):
//!
//! - targets per node per round: `full` `N − 1`; `rack-mesh`
//!   `T = (s_A − 1) + ⌈k(R − 1)/s_A⌉` at most, with K > 1 windows
//!   `(s_A − 1) + ⌈k⌈R/K⌉/s_A⌉`;
//! - probe messages per node per second: `T · P / I` (the round must fit:
//!   `T · d ≤ I`);
//! - every rack pair is covered (k probes, each direction) in every round,
//!   or with rotating windows within `K` rounds (both directions in the
//!   same round);
//! - every host pair: the same rack every round; racks A and B within
//!   `K·⌈s_A·s_B / k⌉` rounds, from any round boundary (both directions);
//! - worst-case detection of a dead host, or of a dead rack uplink (every
//!   cross-rack path of a rack fails): `D = I + (T_max − 1)·d + c` (the
//!   next round's probe of it, at worst last in the round), provided its
//!   rack has another member or (with K = 1) there are two racks;
//! - a slow path between two hosts of different racks: within the host
//!   pair bound plus one round.
//!
//! [`Figures`] computes these for a given cluster; `ibexporter mesh`
//! prints them and checks them by simulation.

use std::collections::BTreeMap;

pub use crate::config::PlanChoice;

/// The plan in force (what `auto` resolved to).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum PlanKind {
    /// Every member every round.
    Full,
    /// Own rack every round, k probes per rack pair per round.
    RackMesh,
}

impl PlanKind {
    /// Its spelling (the `plan` label).
    pub fn name(self) -> &'static str {
        match self {
            PlanKind::Full => "full",
            PlanKind::RackMesh => "rack-mesh",
        }
    }

    /// What `choice` means for `members` members when one round holds at
    /// most `full_max` targets: `auto` is `full` while `members − 1 <= full_max`.
    pub fn resolve(choice: PlanChoice, members: usize, full_max: usize) -> PlanKind {
        match choice {
            PlanChoice::Full => PlanKind::Full,
            PlanChoice::RackMesh => PlanKind::RackMesh,
            PlanChoice::Auto if members.saturating_sub(1) <= full_max => PlanKind::Full,
            PlanChoice::Auto => PlanKind::RackMesh,
        }
    }
}

/// The epoch a wall clock is in: `⌊unix time / interval⌋`. Every exporter
/// with the same interval agrees on it without talking (clocks within a
/// fraction of the interval, as NTP keeps them).
pub fn epoch_at(unix: std::time::Duration, interval: std::time::Duration) -> u64 {
    (unix.as_nanos() / interval.as_nanos().max(1)) as u64
}

/// FNV-1a, 64 bit: a fixed, documented hash (the same on every host and
/// every build, unlike std's randomly keyed `DefaultHasher`).
pub fn fnv1a(parts: &[&[u8]]) -> u64 {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for p in parts {
        for &b in *p {
            h ^= u64::from(b);
            h = h.wrapping_mul(0x0000_0100_0000_01b3);
        }
        // A separator, so ("ab", "c") and ("a", "bc") differ.
        h ^= 0xff;
        h = h.wrapping_mul(0x0000_0100_0000_01b3);
    }
    h
}

fn gcd(mut a: u64, mut b: u64) -> u64 {
    while b != 0 {
        (a, b) = (b, a % b);
    }
    a
}

/// One rack: its name, members (indices into the plan's members, by name).
#[derive(Debug, Clone)]
struct Rack {
    name: String,
    members: Vec<u32>,
    /// FNV-1a of the name.
    hash: u64,
}

/// Which cross-rack slots a rack runs in one epoch (its turn).
#[derive(Debug, Clone, Copy)]
struct Turn {
    /// With K windows: the partner racks are those of index ≡ this
    /// (mod K); `None`: every other rack.
    class: Option<u64>,
    /// Active slots: k per partner rack.
    slots: u64,
    /// The visit `v`: how many turns each partner pair had before.
    visit: u64,
}

/// One cluster's plan: every member's targets in every epoch.
///
/// Why it exists: each exporter builds it from its target list (plus
/// itself) and asks for its own row; `ibexporter mesh` asks for every row.
#[derive(Debug, Clone)]
pub struct ClusterPlan {
    kind: PlanKind,
    k: u64,
    /// K: the windows a rack's cross-rack slots rotate through (1: all
    /// every round).
    windows: u64,
    names: Vec<String>,
    rack_of: Vec<u32>,
    pos_in_rack: Vec<u32>,
    racks: Vec<Rack>,
}

/// One entry of a member's round: whom it probes.
pub type MemberId = u32;

impl ClusterPlan {
    /// The plan `kind` over `members` (name, rack), `k` probes per rack
    /// pair per round (`rack-mesh`; at least 1). Duplicate names count once
    /// (the first rack wins). Deterministic: the same set gives the same
    /// plan whatever its order.
    pub fn new<I, S1, S2>(members: I, kind: PlanKind, k: usize) -> ClusterPlan
    where
        I: IntoIterator<Item = (S1, S2)>,
        S1: Into<String>,
        S2: Into<String>,
    {
        let mut by_name: BTreeMap<String, String> = BTreeMap::new();
        for (n, r) in members {
            by_name.entry(n.into()).or_insert_with(|| r.into());
        }
        // Racks in name order.
        let rack_names: std::collections::BTreeSet<&String> = by_name.values().collect();
        let order: BTreeMap<&str, u32> = rack_names
            .iter()
            .enumerate()
            .map(|(i, r)| (r.as_str(), i as u32))
            .collect();
        let mut racks: Vec<Rack> = rack_names
            .iter()
            .map(|n| Rack {
                name: (*n).clone(),
                members: Vec::new(),
                hash: fnv1a(&[n.as_bytes()]),
            })
            .collect();
        let mut names = Vec::with_capacity(by_name.len());
        let mut rack_of = Vec::with_capacity(by_name.len());
        let mut pos_in_rack = Vec::with_capacity(by_name.len());
        for (i, (n, r)) in by_name.iter().enumerate() {
            let ri = order[r.as_str()];
            pos_in_rack.push(racks[ri as usize].members.len() as u32);
            racks[ri as usize].members.push(i as u32);
            rack_of.push(ri);
            names.push(n.clone());
        }
        ClusterPlan {
            kind,
            k: k.max(1) as u64,
            windows: 1,
            names,
            rack_of,
            pos_in_rack,
            racks,
        }
    }

    /// The plan `cfg` asks for over `members` (name, rack): `auto` is
    /// `full` while one round holds every other member (`full_max`
    /// targets, [`Timing::full_max`]), else `rack-mesh`.
    pub fn configured(
        members: Vec<(String, String)>,
        cfg: &crate::config::PlanConfig,
        full_max: usize,
    ) -> ClusterPlan {
        let mut names: Vec<&str> = members.iter().map(|(n, _)| n.as_str()).collect();
        names.sort_unstable();
        names.dedup();
        let kind = PlanKind::resolve(cfg.choice, names.len(), full_max);
        ClusterPlan::new(members, kind, cfg.rack_peers).fitted(full_max)
    }

    /// This plan with its rack pairs rotating through the fewest windows
    /// `K` that let every member's round hold at most `budget` targets
    /// (module docs): `K = 1`, every rack pair every round, when that
    /// fits; unchanged when no `K` fits (a rack larger than the budget)
    /// or the plan is `full`.
    pub fn fitted(mut self, budget: usize) -> ClusterPlan {
        self.windows = 1;
        if self.kind == PlanKind::Full {
            return self;
        }
        let slots = self.slots(0);
        let racks = self.racks.len() as u64;
        let mut sizes: Vec<u64> = self.racks.iter().map(|r| r.members.len() as u64).collect();
        sizes.sort_unstable();
        sizes.dedup();
        // The busiest turn under K windows: every slot, or k per rack of
        // the largest class (⌈R/K⌉ racks).
        let fits = |w: u64| {
            let per_window = if w == 1 {
                slots
            } else {
                self.k * racks.div_ceil(w)
            };
            sizes
                .iter()
                .all(|&s| (s - 1 + per_window.div_ceil(s)) as usize <= budget)
        };
        if slots == 0 || fits(1) || !fits(racks) {
            return self;
        }
        // fits is monotone in K: the smallest K that fits, by bisection.
        let (mut lo, mut hi) = (1, racks);
        while hi - lo > 1 {
            let mid = lo + (hi - lo) / 2;
            if fits(mid) {
                hi = mid;
            } else {
                lo = mid;
            }
        }
        self.windows = hi;
        self
    }

    /// K: rounds within which every rack pair is probed (1 unless the
    /// rack pairs rotate, module docs).
    pub fn rack_pair_rounds(&self) -> u64 {
        self.windows
    }

    /// The plan in force.
    pub fn kind(&self) -> PlanKind {
        self.kind
    }

    /// Probes per rack pair per round (`rack-mesh`).
    pub fn rack_peers(&self) -> usize {
        self.k as usize
    }

    /// Number of members.
    pub fn len(&self) -> usize {
        self.names.len()
    }

    /// Whether it has no member.
    pub fn is_empty(&self) -> bool {
        self.names.is_empty()
    }

    /// Number of racks.
    pub fn racks(&self) -> usize {
        self.racks.len()
    }

    /// A member's name.
    pub fn name(&self, m: MemberId) -> &str {
        &self.names[m as usize]
    }

    /// A member's rack name.
    pub fn rack_name_of(&self, m: MemberId) -> &str {
        &self.racks[self.rack_of[m as usize] as usize].name
    }

    /// A member's rack index (racks in name order).
    pub fn rack_of(&self, m: MemberId) -> usize {
        self.rack_of[m as usize] as usize
    }

    /// A rack's name and size.
    pub fn rack(&self, r: usize) -> (&str, usize) {
        (&self.racks[r].name, self.racks[r].members.len())
    }

    /// The member called `name`.
    pub fn member(&self, name: &str) -> Option<MemberId> {
        self.names
            .binary_search_by(|n| n.as_str().cmp(name))
            .ok()
            .map(|i| i as MemberId)
    }

    /// The member of rack `b` at permuted position `x` for probes from rack `a`.
    fn permuted(&self, a: usize, b: usize, x: u64) -> MemberId {
        let rb = &self.racks[b];
        let s = rb.members.len() as u64;
        let h = fnv1a(&[&self.racks[a].hash.to_le_bytes(), &rb.hash.to_le_bytes()]);
        let mut mult = 1 + (h >> 32) % s.max(1);
        while gcd(mult, s) != 1 {
            mult += 1;
        }
        let off = h % s.max(1);
        rb.members[((mult * x + off) % s) as usize]
    }

    /// The rack of rank `r` among the racks other than `a`.
    fn other_rack(a: usize, r: u64) -> usize {
        if (r as usize) < a {
            r as usize
        } else {
            r as usize + 1
        }
    }

    /// Rack `a`'s turn in epoch `e` (module docs): with one window, every
    /// other rack and visit `v = e`; with `K`, the racks `B ≠ a` with
    /// `(a + B) mod K = e mod K` and visit `v = ⌊e / K⌋`.
    fn turn(&self, a: usize, e: u64) -> Turn {
        if self.windows <= 1 {
            return Turn {
                class: None,
                slots: self.slots(a),
                visit: e,
            };
        }
        let kk = self.windows;
        let c = (e % kk + kk - a as u64 % kk) % kk;
        let own = u64::from(a as u64 % kk == c);
        Turn {
            class: Some(c),
            slots: self.k * (self.class_size(c) - own),
            visit: e / kk,
        }
    }

    /// Racks whose index is `c` modulo K.
    fn class_size(&self, c: u64) -> u64 {
        let r = self.racks.len() as u64;
        if c < r {
            (r - c).div_ceil(self.windows)
        } else {
            0
        }
    }

    /// The rack and probe number `j < k` of rack `a`'s active slot `w`.
    fn slot_pair(&self, a: usize, turn: &Turn, w: u64) -> (usize, u64) {
        let (x, j) = (w / self.k, w % self.k);
        match turn.class {
            None => (Self::other_rack(a, x), j),
            Some(c) => {
                let mut b = c + self.windows * x;
                if a as u64 % self.windows == c && b >= a as u64 {
                    b += self.windows;
                }
                (b as usize, j)
            }
        }
    }

    /// Rack `a`'s active slot of probe `j` towards rack `b`, if `b` is in
    /// `a`'s turn (the inverse of [`ClusterPlan::slot_pair`]).
    fn slot_index(&self, a: usize, turn: &Turn, b: usize, j: u64) -> Option<u64> {
        let x = match turn.class {
            None => (if b < a { b } else { b - 1 }) as u64,
            Some(c) => {
                if b as u64 % self.windows != c {
                    return None;
                }
                b as u64 / self.windows - u64::from(a < b && a as u64 % self.windows == c)
            }
        };
        Some(x * self.k + j)
    }

    /// The first active slot of member `m` in its rack's turn, the stride.
    fn first_slot(&self, m: MemberId, turn: &Turn) -> (u64, u64) {
        let s = self.racks[self.rack_of(m)].members.len() as u64;
        let i = u64::from(self.pos_in_rack[m as usize]);
        // Member i probes the active slots w with (w + v·k) ≡ i (mod s).
        let shift = (turn.visit % s).wrapping_mul(self.k % s) % s;
        ((i + s - shift) % s, s)
    }

    /// The target of rack `a`'s active slot `w` in its turn.
    fn slot_target(&self, a: usize, turn: &Turn, w: u64) -> MemberId {
        let (b, j) = self.slot_pair(a, turn, w);
        let sa = self.racks[a].members.len() as u64;
        let sb = self.racks[b].members.len() as u64;
        let q = turn.visit.wrapping_mul(self.k).wrapping_add(j);
        // k probes of a pair are at most s_A·s_B distinct pairs.
        self.permuted(a, b, (q / sa) % sb)
    }

    /// Whom member `m` probes in epoch `e`, in round order, into `out`
    /// (cleared first).
    pub fn targets_of(&self, m: MemberId, e: u64, out: &mut Vec<MemberId>) {
        out.clear();
        match self.kind {
            PlanKind::Full => {
                out.extend((0..self.names.len() as MemberId).filter(|&x| x != m));
            }
            PlanKind::RackMesh => {
                let a = self.rack_of(m);
                out.extend(self.racks[a].members.iter().copied().filter(|&x| x != m));
                self.each_slot_target(m, e, |x| out.push(x));
            }
        }
    }

    /// The members of other racks that `m` probes in epoch `e`, each with
    /// its position in `m`'s round, into `out` (cleared first): the part
    /// of [`ClusterPlan::targets_of`] that crosses `m`'s rack uplink.
    ///
    /// Why it exists: the simulation and the round's load need only this
    /// part; for `rack-mesh` it costs the member's cross-rack slots, not
    /// its rack's size (a rack of 10,000 would make every caller that
    /// walks a rack quadratic).
    pub fn cross_targets_of(&self, m: MemberId, e: u64, out: &mut Vec<(MemberId, usize)>) {
        out.clear();
        let a = self.rack_of(m);
        match self.kind {
            PlanKind::Full => out.extend(
                (0..self.names.len() as MemberId)
                    .filter(|&x| self.rack_of(x) != a)
                    .map(|x| (x, Self::full_position(m, x))),
            ),
            PlanKind::RackMesh => {
                let own = self.racks[a].members.len() - 1;
                self.each_slot_target(m, e, |x| out.push((x, own + out.len())));
            }
        }
    }

    /// Calls `f` with each cross-rack target of member `m` in epoch `e`
    /// (`rack-mesh`), in slot order.
    fn each_slot_target(&self, m: MemberId, e: u64, mut f: impl FnMut(MemberId)) {
        let a = self.rack_of(m);
        let turn = self.turn(a, e);
        let (mut w, stride) = self.first_slot(m, &turn);
        while w < turn.slots {
            f(self.slot_target(a, &turn, w));
            w += stride;
        }
    }

    /// Cross-rack slots of rack `a` per round: k per other rack, at most
    /// s_A·s_B for each.
    fn slots(&self, _a: usize) -> u64 {
        if self.racks.len() < 2 {
            return 0;
        }
        (self.racks.len() as u64 - 1) * self.k
    }

    /// Most active slots of rack `a` in any turn: all of them with one
    /// window; with K, the largest class of racks (class 0 holds
    /// `⌈R/K⌉`), less `a` itself where it belongs to it.
    fn busiest_turn(&self, a: usize) -> u64 {
        if self.windows <= 1 {
            return self.slots(a);
        }
        let own = a as u64 % self.windows;
        let largest = (0..2.min(self.windows))
            .map(|c| self.class_size(c) - u64::from(own == c))
            .max()
            .unwrap_or(0);
        self.k * largest
    }

    /// Who probes `t` in epoch `e`, with `t`'s position in the prober's
    /// round (0 = first), in prober order. For simulation.
    pub fn probers_of(&self, t: MemberId, e: u64, out: &mut Vec<(MemberId, usize)>) {
        out.clear();
        match self.kind {
            PlanKind::Full => {
                for p in 0..self.names.len() as MemberId {
                    if p != t {
                        out.push((p, Self::full_position(p, t)));
                    }
                }
            }
            PlanKind::RackMesh => {
                let b = self.rack_of(t);
                let pt = self.pos_in_rack[t as usize];
                for &p in &self.racks[b].members {
                    if p != t {
                        let pp = self.pos_in_rack[p as usize];
                        out.push((p, (pt - u32::from(pp < pt)) as usize));
                    }
                }
                self.push_cross_probers(t, e, out);
            }
        }
    }

    /// Who in other racks probes `t` in epoch `e`, with `t`'s position in
    /// the prober's round, into `out` (cleared first): the part of
    /// [`ClusterPlan::probers_of`] that crosses `t`'s rack uplink, at the
    /// cost of the racks' slots towards `t`'s rack (`rack-mesh`), not of
    /// its rack's size. For simulation.
    pub fn cross_probers_of(&self, t: MemberId, e: u64, out: &mut Vec<(MemberId, usize)>) {
        out.clear();
        let b = self.rack_of(t);
        match self.kind {
            PlanKind::Full => out.extend(
                (0..self.names.len() as MemberId)
                    .filter(|&p| self.rack_of(p) != b)
                    .map(|p| (p, Self::full_position(p, t))),
            ),
            PlanKind::RackMesh => self.push_cross_probers(t, e, out),
        }
    }

    /// `t`'s position in `p`'s round under `full` (every other member in
    /// index order).
    fn full_position(p: MemberId, t: MemberId) -> usize {
        (t - MemberId::from(p < t)) as usize
    }

    /// Appends to `out` who in other racks probes `t` in epoch `e`
    /// (`rack-mesh`), with `t`'s position in the prober's round.
    fn push_cross_probers(&self, t: MemberId, e: u64, out: &mut Vec<(MemberId, usize)>) {
        let b = self.rack_of(t);
        for a in 0..self.racks.len() {
            if a == b {
                continue;
            }
            let sa = self.racks[a].members.len() as u64;
            let turn = self.turn(a, e);
            for j in 0..self.k {
                let Some(w) = self.slot_index(a, &turn, b, j) else {
                    break;
                };
                if self.slot_target(a, &turn, w) != t {
                    continue;
                }
                let i = (w + (turn.visit % sa) * (self.k % sa)) % sa;
                let p = self.racks[a].members[i as usize];
                let (w0, stride) = self.first_slot(p, &turn);
                let before = if w > w0 { (w - w0).div_ceil(stride) } else { 0 };
                out.push((p, sa as usize - 1 + before as usize));
            }
        }
    }

    /// Most targets any member has in one round, over all epochs (a
    /// turn of at most `k⌈R/K⌉` slots dealt round-robin over the rack).
    pub fn max_targets(&self) -> usize {
        match self.kind {
            PlanKind::Full => self.names.len().saturating_sub(1),
            PlanKind::RackMesh => self
                .racks
                .iter()
                .enumerate()
                .map(|(a, r)| {
                    let s = r.members.len() as u64;
                    (s as usize - 1) + self.busiest_turn(a).div_ceil(s) as usize
                })
                .max()
                .unwrap_or(0),
        }
    }

    /// Rounds within which every ordered host pair of different racks is
    /// probed at least once, from any round boundary (`full`: 1): a rack
    /// pair's host pairs take `⌈s_A·s_B/k⌉` visits, one every `K` rounds.
    pub fn host_pair_rounds(&self) -> u64 {
        match self.kind {
            PlanKind::Full => 1,
            PlanKind::RackMesh => {
                let mut sizes: Vec<u64> =
                    self.racks.iter().map(|r| r.members.len() as u64).collect();
                sizes.sort_unstable();
                let n = sizes.len();
                if n < 2 {
                    return 1;
                }
                (sizes[n - 1] * sizes[n - 2]).div_ceil(self.k).max(1) * self.windows
            }
        }
    }
}

/// How long probing takes: what turns rounds into seconds.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Timing {
    /// The probe interval = one epoch (seconds).
    pub interval: f64,
    /// Messages per target per round.
    pub probes: f64,
    /// Messages per second inside a round.
    pub rate_hz: f64,
    /// What a probe of a dead target costs (the probe timeout), seconds.
    pub timeout: f64,
}

impl Timing {
    /// Seconds one live target costs: `probes / rate_hz`.
    pub fn per_target(&self) -> f64 {
        self.probes / self.rate_hz
    }

    /// Most targets one round holds: `⌊interval · rate_hz / probes⌋`.
    pub fn full_max(&self) -> usize {
        (self.interval * self.rate_hz / self.probes).floor() as usize
    }
}

/// The documented figures of one plan.
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub struct Figures {
    /// `full` or `rack-mesh`.
    pub plan: &'static str,
    /// Members.
    pub hosts: usize,
    /// Racks.
    pub racks: usize,
    /// k.
    pub rack_peers: usize,
    /// Most targets of any member in one round.
    pub max_targets_per_round: usize,
    /// Probe messages per node per second at the most: `T·P / I`.
    pub probes_per_node_per_second: f64,
    /// Whether the busiest round fits the interval (`T·d ≤ I`).
    pub round_fits: bool,
    /// K: every rack pair is probed within this many rounds (1 unless
    /// the rack pairs rotate to fit the round).
    pub rack_pair_cover_rounds: u64,
    /// Every rack pair is covered within: seconds (K rounds).
    pub rack_pair_cover_seconds: f64,
    /// Every host pair within: seconds.
    pub host_pair_cover_seconds: f64,
    /// Worst-case detection of a dead host or a dead rack uplink, seconds.
    pub detect_bound_seconds: f64,
    /// Worst-case detection of a slow cross-rack host path, seconds.
    pub slow_path_bound_seconds: f64,
}

impl Figures {
    /// The formulas of the module docs for `plan` under `t`.
    pub fn of(plan: &ClusterPlan, t: Timing) -> Figures {
        let tmax = plan.max_targets();
        let d = t.per_target();
        let round = t.interval.max(tmax as f64 * d);
        let detect = round + tmax.saturating_sub(1) as f64 * d + t.timeout.max(d);
        let pairs = plan.host_pair_rounds() as f64 * round;
        Figures {
            plan: plan.kind().name(),
            hosts: plan.len(),
            racks: plan.racks(),
            rack_peers: plan.rack_peers(),
            max_targets_per_round: tmax,
            probes_per_node_per_second: tmax as f64 * t.probes / round,
            round_fits: tmax as f64 * d <= t.interval,
            rack_pair_cover_rounds: plan.rack_pair_rounds(),
            rack_pair_cover_seconds: plan.rack_pair_rounds() as f64 * round,
            host_pair_cover_seconds: pairs,
            detect_bound_seconds: detect,
            slow_path_bound_seconds: pairs + round + tmax as f64 * d,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cluster(hosts: usize, rack: usize) -> Vec<(String, String)> {
        (0..hosts)
            .map(|i| (format!("h{i:05}"), format!("r{:03}", i / rack)))
            .collect()
    }

    #[test]
    fn fnv_is_the_published_function() {
        // FNV-1a 64 of "a" is 0xaf63dc4c8601ec8c; ours adds a separator byte.
        let mut h: u64 = 0xcbf2_9ce4_8422_2325;
        h ^= u64::from(b'a');
        h = h.wrapping_mul(0x0000_0100_0000_01b3);
        assert_eq!(h, 0xaf63_dc4c_8601_ec8c);
        assert_ne!(fnv1a(&[b"ab", b"c"]), fnv1a(&[b"a", b"bc"]));
        assert_eq!(fnv1a(&[b"r1"]), fnv1a(&[b"r1"]));
    }

    #[test]
    fn order_of_the_list_does_not_matter() {
        let mut l = cluster(300, 25);
        let a = ClusterPlan::new(l.clone(), PlanKind::RackMesh, 2);
        l.reverse();
        let b = ClusterPlan::new(l, PlanKind::RackMesh, 2);
        let (mut x, mut y) = (Vec::new(), Vec::new());
        for m in 0..300 {
            for e in [0, 7, 1_000_000] {
                a.targets_of(m, e, &mut x);
                b.targets_of(m, e, &mut y);
                assert_eq!(x, y);
            }
        }
    }

    #[test]
    fn probers_of_is_the_inverse_of_targets_of() {
        let p = ClusterPlan::new(cluster(130, 20), PlanKind::RackMesh, 3);
        let mut fwd: BTreeMap<(u32, u32), usize> = BTreeMap::new();
        let mut out = Vec::new();
        let e = 12345;
        for m in 0..130 {
            p.targets_of(m, e, &mut out);
            for (pos, &t) in out.iter().enumerate() {
                assert!(fwd.insert((m, t), pos).is_none(), "{m} probes {t} twice");
            }
        }
        let mut back = BTreeMap::new();
        let mut pr = Vec::new();
        for t in 0..130 {
            p.probers_of(t, e, &mut pr);
            for &(m, pos) in &pr {
                back.insert((m, t), pos);
            }
        }
        assert_eq!(fwd, back);
    }

    #[test]
    fn the_cross_rack_parts_are_those_of_the_whole_rounds() {
        for (hosts, rack, kind, k) in [
            (130, 20, PlanKind::RackMesh, 3),
            (90, 7, PlanKind::RackMesh, 1),
            (60, 60, PlanKind::RackMesh, 2),
            (45, 10, PlanKind::Full, 1),
        ] {
            let p = ClusterPlan::new(cluster(hosts, rack), kind, k);
            let (mut whole, mut cross) = (Vec::new(), Vec::new());
            let (mut pw, mut pc) = (Vec::new(), Vec::new());
            for e in [0, 5, 977] {
                for m in 0..hosts as MemberId {
                    let a = p.rack_of(m);
                    p.targets_of(m, e, &mut whole);
                    p.cross_targets_of(m, e, &mut cross);
                    let want: Vec<(MemberId, usize)> = whole
                        .iter()
                        .enumerate()
                        .filter(|&(_, &x)| p.rack_of(x) != a)
                        .map(|(pos, &x)| (x, pos))
                        .collect();
                    assert_eq!(
                        cross, want,
                        "{hosts}/{rack} {kind:?}: member {m}, epoch {e}"
                    );
                    p.probers_of(m, e, &mut pw);
                    p.cross_probers_of(m, e, &mut pc);
                    pw.retain(|&(q, _)| p.rack_of(q) != a);
                    assert_eq!(pc, pw, "{hosts}/{rack} {kind:?}: member {m}, epoch {e}");
                }
            }
        }
    }

    #[test]
    fn rotating_windows_keep_the_inverses_and_the_cross_parts() {
        // 600 hosts in 60 racks of 10: 59 rack pairs need 15 targets; a
        // budget of 11 rotates them through 3 windows.
        let p = ClusterPlan::new(cluster(600, 10), PlanKind::RackMesh, 1).fitted(11);
        assert_eq!(p.rack_pair_rounds(), 3);
        assert_eq!(p.max_targets(), 11);
        let q = ClusterPlan::new(cluster(600, 10), PlanKind::RackMesh, 2).fitted(12);
        assert!(q.rack_pair_rounds() > 1);
        let (mut out, mut pr, mut cross, mut pc) = (Vec::new(), Vec::new(), Vec::new(), Vec::new());
        for p in [p, q] {
            for e in [0, 1, 2, 3, 77, 1_000_003] {
                let mut fwd: BTreeMap<(u32, u32), usize> = BTreeMap::new();
                for m in 0..600 {
                    p.targets_of(m, e, &mut out);
                    assert!(out.len() <= p.max_targets(), "{}", out.len());
                    for (pos, &t) in out.iter().enumerate() {
                        assert!(fwd.insert((m, t), pos).is_none(), "{m} probes {t} twice");
                    }
                    p.cross_targets_of(m, e, &mut cross);
                    let a = p.rack_of(m);
                    let want: Vec<(MemberId, usize)> = out
                        .iter()
                        .enumerate()
                        .filter(|&(_, &x)| p.rack_of(x) != a)
                        .map(|(pos, &x)| (x, pos))
                        .collect();
                    assert_eq!(cross, want, "member {m}, epoch {e}");
                }
                let mut back = BTreeMap::new();
                for t in 0..600 {
                    p.probers_of(t, e, &mut pr);
                    for &(m, pos) in &pr {
                        back.insert((m, t), pos);
                    }
                    p.cross_probers_of(t, e, &mut pc);
                    pr.retain(|&(m, _)| p.rack_of(m) != p.rack_of(t));
                    assert_eq!(pc, pr, "target {t}, epoch {e}");
                }
                assert_eq!(fwd, back, "epoch {e}");
            }
        }
    }

    #[test]
    fn rotating_windows_probe_both_directions_of_a_rack_pair_in_one_round() {
        // 61 racks of 10 (an odd count, so rack classes differ in size):
        // K > 1, every ordered rack pair probed in a round has its reverse
        // in that round, and each unordered pair has exactly one round in
        // any K consecutive ones.
        let p = ClusterPlan::new(cluster(610, 10), PlanKind::RackMesh, 1).fitted(11);
        let k = p.rack_pair_rounds();
        assert!(k > 1, "K = {k}");
        let mut out = Vec::new();
        let mut turns: BTreeMap<(usize, usize), Vec<u64>> = BTreeMap::new();
        for e in 1_000_000..1_000_000 + k {
            let mut seen = std::collections::BTreeSet::new();
            for m in 0..610 {
                p.targets_of(m, e, &mut out);
                assert!(out.len() <= 11, "{}", out.len());
                let a = p.rack_of(m);
                seen.extend(
                    out.iter()
                        .map(|&x| (a, p.rack_of(x)))
                        .filter(|&(a, b)| a != b),
                );
            }
            for &(a, b) in &seen {
                assert!(
                    seen.contains(&(b, a)),
                    "epoch {e}: {a}->{b} without {b}->{a}"
                );
                if a < b {
                    turns.entry((a, b)).or_default().push(e);
                }
            }
        }
        assert_eq!(turns.len(), 61 * 60 / 2);
        assert!(
            turns.values().all(|t| t.len() == 1),
            "one turn per K rounds"
        );
    }

    #[test]
    fn a_plan_that_fits_is_not_rotated() {
        let p = ClusterPlan::new(cluster(800, 20), PlanKind::RackMesh, 1);
        let f = p.clone().fitted(100);
        assert_eq!(f.rack_pair_rounds(), 1);
        let (mut x, mut y) = (Vec::new(), Vec::new());
        for m in 0..800 {
            p.targets_of(m, 9, &mut x);
            f.targets_of(m, 9, &mut y);
            assert_eq!(x, y);
        }
        // A rack larger than the budget: no K helps; left as it was.
        let big = ClusterPlan::new(cluster(800, 200), PlanKind::RackMesh, 1).fitted(100);
        assert_eq!(big.rack_pair_rounds(), 1);
        let full = ClusterPlan::new(cluster(800, 20), PlanKind::Full, 1).fitted(10);
        assert_eq!(full.rack_pair_rounds(), 1);
    }

    #[test]
    fn load_is_dealt_evenly() {
        // 40 racks of 20, k = 1: 39 rack pairs over 20 members: 1 or 2 each.
        let p = ClusterPlan::new(cluster(800, 20), PlanKind::RackMesh, 1);
        let mut out = Vec::new();
        for m in 0..800 {
            p.targets_of(m, 3, &mut out);
            assert!((19 + 1..=19 + 2).contains(&out.len()), "{}", out.len());
        }
        assert_eq!(p.max_targets(), 21);
    }

    #[test]
    fn auto_is_full_while_one_round_holds_everyone() {
        assert_eq!(
            PlanKind::resolve(PlanChoice::Auto, 101, 100),
            PlanKind::Full
        );
        assert_eq!(
            PlanKind::resolve(PlanChoice::Auto, 102, 100),
            PlanKind::RackMesh
        );
        assert_eq!(
            PlanKind::resolve(PlanChoice::Full, 5000, 100),
            PlanKind::Full
        );
        assert_eq!("Rack-Mesh".parse::<PlanChoice>(), Ok(PlanChoice::RackMesh));
        assert!("mesh"
            .parse::<PlanChoice>()
            .unwrap_err()
            .contains("rack-mesh"));
    }
}
