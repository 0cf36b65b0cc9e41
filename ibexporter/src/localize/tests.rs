//! The method on hand-made rounds: each suspect kind, two at once, and
//! noise that names nobody.

use super::*;

/// 4 racks of 6 hosts; every host probes every other (a `full` mesh, so
/// each round sees every pair).
const RACKS: u32 = 4;
const PER_RACK: u32 = 6;

fn topo() -> Topology {
    Topology {
        rack_of: (0..RACKS * PER_RACK).map(|h| h / PER_RACK).collect(),
        racks: RACKS,
    }
}

/// A healthy round: medians 2 us inside, 3.5 us across, spread ±10% by
/// a fixed pattern; no loss; wake-up 10 us. `tweak` edits each probe
/// (return None to drop it, as a silent prober's).
fn round(mut tweak: impl FnMut(&mut PairObs) -> bool) -> Round {
    let t = topo();
    let mut pairs = Vec::new();
    for p in 0..t.hosts() as HostId {
        for q in 0..t.hosts() as HostId {
            if p == q {
                continue;
            }
            let base = if t.rack(p) == t.rack(q) { 2.0 } else { 3.5 };
            let wiggle = 0.9 + 0.2 * f64::from((p * 7 + q * 13) % 11) / 10.0;
            let mut o = PairObs {
                prober: p,
                target: q,
                sent: 100,
                lost: 0,
                p50_us: (base * wiggle) as f32,
                p10_us: (0.8 * base * wiggle) as f32,
                hw: None,
            };
            if tweak(&mut o) {
                if o.dead() {
                    o.p50_us = f32::NAN;
                    o.p10_us = f32::NAN;
                }
                pairs.push(o);
            }
        }
    }
    Round {
        pairs,
        self_health_us: vec![10.0; t.hosts()],
        port_errors: vec![],
    }
}

/// Every message of the probe `f` times slower.
fn slow(o: &mut PairObs, f: f32) {
    o.p50_us *= f;
    o.p10_us *= f;
}

/// The named suspects after `rounds` identical rounds.
fn named(r: &Round, rounds: usize) -> Vec<Suspect> {
    let mut l = Localizer::new(topo());
    let mut out = Vec::new();
    for _ in 0..rounds {
        out = l.push(r);
    }
    out
}

fn top(s: &[Suspect]) -> (SuspectKind, Entity) {
    assert!(!s.is_empty(), "no suspect named");
    (s[0].kind, s[0].entity)
}

#[test]
fn noise_alone_names_nobody() {
    // One slow probe here and there, never the same pair twice.
    let mut l = Localizer::new(topo());
    for i in 0..10u32 {
        let r = round(|o| {
            if (o.prober * 31 + o.target * 17 + i * 5) % 97 == 0 {
                slow(o, 3.0);
            }
            if (o.prober + o.target * 3 + i) % 89 == 0 {
                o.lost = 1;
            }
            true
        });
        assert!(
            assess(&topo(), &r)
                .iter()
                .all(|s| s.kind == SuspectKind::Path),
            "round {i}: {:?}",
            assess(&topo(), &r)
        );
        let n = l.push(&r);
        assert!(n.is_empty(), "round {i}: {n:?}");
    }
}

#[test]
fn a_second_mode_that_leaves_fast_messages_fast_is_not_a_fault() {
    // A busy episode: the median doubles, the 10th percentile stays.
    let mut r = round(|o| {
        if o.prober == 9 || o.target == 9 {
            o.p50_us *= 2.5;
        }
        true
    });
    r.self_health_us[9] = 30.0;
    assert!(named(&r, 3).is_empty(), "{:?}", named(&r, 3));
    // Without a low quantile the same round is a slow host.
    for o in &mut r.pairs {
        o.p10_us = f32::NAN;
    }
    assert_eq!(top(&named(&r, 2)), (SuspectKind::Host, Entity::Host(9)));
}

#[test]
fn a_slow_host_with_slow_wake_ups_is_a_host_suspect() {
    let mut r = round(|o| {
        if o.prober == 9 || o.target == 9 {
            slow(o, 2.5);
        }
        true
    });
    r.self_health_us[9] = 30.0;
    assert!(named(&r, 1).is_empty(), "one round names nobody");
    let s = named(&r, 2);
    assert_eq!(top(&s), (SuspectKind::Host, Entity::Host(9)), "{s:?}");
    assert_eq!(s.len(), 1, "{s:?}");
    assert!(
        s[0].evidence.contains("as prober: 23 of 23 probes slow"),
        "{}",
        s[0].evidence
    );
    assert!(
        s[0].evidence.contains("own wake-up p99 30.0 us"),
        "{}",
        s[0].evidence
    );
    assert!(s[0].confidence > 0.6, "{s:?}");
}

#[test]
fn port_errors_are_evidence_where_known_and_change_no_verdict() {
    let mut r = round(|o| {
        if o.prober == 3 || o.target == 3 {
            slow(o, 2.0);
        }
        true
    });
    let without = named(&r, 2);
    assert!(
        !without[0].evidence.contains("HCA ports"),
        "{}",
        without[0].evidence
    );
    r.port_errors = vec![f32::NAN; r.self_health_us.len()];
    r.port_errors[3] = 20.0;
    let with = named(&r, 2);
    assert_eq!(top(&with), top(&without));
    assert!(
        with[0]
            .evidence
            .contains("; its HCA ports counted 20 error events (symbol, receive, link)"),
        "{}",
        with[0].evidence
    );
}

#[test]
fn slow_both_ways_with_normal_wake_ups_is_its_nic() {
    let mut r = round(|o| {
        if o.prober == 3 || o.target == 3 {
            slow(o, 2.0);
        }
        true
    });
    assert_eq!(top(&named(&r, 2)), (SuspectKind::Nic, Entity::Host(3)));
    r.self_health_us.clear();
    let s = named(&r, 2);
    assert_eq!(top(&s), (SuspectKind::Nic, Entity::Host(3)));
    assert!(
        s[0].evidence.contains("wake-up latency unknown"),
        "{}",
        s[0].evidence
    );
}

#[test]
fn one_slow_side_is_told_apart() {
    let r = round(|o| {
        if o.prober == 5 {
            slow(o, 3.0);
        }
        if o.target == 17 {
            slow(o, 3.0);
        }
        true
    });
    let s = named(&r, 2);
    let kinds: Vec<(SuspectKind, Entity)> = s.iter().map(|s| (s.kind, s.entity)).collect();
    assert!(
        kinds.contains(&(SuspectKind::Prober, Entity::Host(5))),
        "{s:?}"
    );
    assert!(
        kinds.contains(&(SuspectKind::Target, Entity::Host(17))),
        "{s:?}"
    );
    assert_eq!(s.len(), 2, "{s:?}");
}

#[test]
fn a_silent_host_nobody_reaches_is_dead() {
    let r = round(|o| {
        if o.target == 12 {
            o.lost = o.sent;
        }
        o.prober != 12
    });
    let s = named(&r, 2);
    assert_eq!(top(&s), (SuspectKind::Dead, Entity::Host(12)), "{s:?}");
    assert_eq!(s.len(), 1, "{s:?}");
}

#[test]
fn loss_both_ways_while_it_reports_is_its_link() {
    // Lossy: 4% of messages both ways.
    let lossy = round(|o| {
        if o.prober == 20 || o.target == 20 {
            o.lost = 4;
        }
        true
    });
    let s = named(&lossy, 2);
    assert_eq!(top(&s), (SuspectKind::Link, Entity::Host(20)), "{s:?}");
    assert_eq!(s.len(), 1, "{s:?}");
    // Flapping: a third of its probes lost whole, either way.
    let flapping = round(|o| {
        if (o.prober == 8 || o.target == 8) && (o.prober + o.target) % 3 == 0 {
            o.lost = o.sent;
        }
        true
    });
    let s = named(&flapping, 2);
    assert_eq!(top(&s), (SuspectKind::Link, Entity::Host(8)), "{s:?}");
    assert_eq!(s.len(), 1, "{s:?}");
}

/// Whether `o` crosses between racks 1 and 3 (either way).
fn between_racks_1_3(t: &Topology, o: &PairObs) -> bool {
    let (a, b) = (t.rack(o.prober), t.rack(o.target));
    (a, b) == (1, 3) || (a, b) == (3, 1)
}

/// A round whose probes between racks 1 and 3 are 2.2x slow both ways.
fn slow_racks_1_3() -> Round {
    let t = topo();
    round(|o| {
        if between_racks_1_3(&t, o) {
            slow(o, 2.2);
        }
        true
    })
}

#[test]
fn a_slow_rack_pair_is_the_path_between_racks_not_its_hosts() {
    let s = named(&slow_racks_1_3(), 2);
    assert_eq!(
        top(&s),
        (SuspectKind::RackPair, Entity::Racks(1, 3)),
        "{s:?}"
    );
    assert_eq!(s.len(), 1, "{s:?}");
    assert!(
        s[0].evidence.contains("72 of 72 cross probes"),
        "{}",
        s[0].evidence
    );
}

#[test]
fn two_faults_at_once_are_both_named() {
    let t = topo();
    let mut r = round(|o| {
        let (a, b) = (t.rack(o.prober), t.rack(o.target));
        if (a, b) == (0, 2) || (a, b) == (2, 0) {
            slow(o, 2.5);
        }
        if o.prober == 22 || o.target == 22 {
            slow(o, 3.0);
        }
        if o.target == 7 {
            o.lost = o.sent;
        }
        o.prober != 7
    });
    r.self_health_us[22] = 40.0;
    let s = named(&r, 2);
    let kinds: Vec<(SuspectKind, Entity)> = s.iter().map(|s| (s.kind, s.entity)).collect();
    for want in [
        (SuspectKind::RackPair, Entity::Racks(0, 2)),
        (SuspectKind::Host, Entity::Host(22)),
        (SuspectKind::Dead, Entity::Host(7)),
    ] {
        assert!(kinds.contains(&want), "{want:?} missing: {s:?}");
    }
    assert_eq!(s.len(), 3, "{s:?}");
}

#[test]
fn one_bad_host_pair_is_a_path_once_confirmed() {
    let r = round(|o| {
        if (o.prober, o.target) == (2, 4) {
            slow(o, 4.0);
        }
        true
    });
    assert!(named(&r, 1).is_empty());
    let s = named(&r, 2);
    assert_eq!(top(&s), (SuspectKind::Path, Entity::Pair(2, 4)), "{s:?}");
}

#[test]
fn a_suspect_of_one_round_in_three_is_not_named() {
    let slow = round(|o| {
        if o.prober == 1 || o.target == 1 {
            slow(o, 3.0);
        }
        true
    });
    let fine = round(|_| true);
    let mut l = Localizer::new(topo());
    for (i, r) in [&slow, &fine, &fine, &slow, &fine].into_iter().enumerate() {
        assert!(l.push(r).is_empty(), "round {i}");
    }
    assert_eq!(
        l.push(&slow).len(),
        1,
        "two of the last three rounds accuse it"
    );
}

#[test]
fn the_kind_is_what_most_rounds_said() {
    let nic = round(|o| {
        if o.prober == 3 || o.target == 3 {
            slow(o, 2.0);
        }
        true
    });
    let mut host = nic.clone();
    host.self_health_us[3] = 16.0;
    let mut l = Localizer::new(topo());
    l.push(&nic);
    let s = l.push(&host);
    assert_eq!(
        top(&s),
        (SuspectKind::Host, Entity::Host(3)),
        "a tie: the latest"
    );
    let mut l = Localizer::new(topo());
    l.push(&nic);
    l.push(&nic);
    let s = l.push(&host);
    assert_eq!(
        top(&s),
        (SuspectKind::Nic, Entity::Host(3)),
        "two of three: {s:?}"
    );
    assert_eq!(s[0].rounds, 3);
}

#[test]
fn a_rotating_rack_pair_is_named_over_its_turns_and_hosts_keep_rounds() {
    // Racks 1 and 3 probed in one round of three (both directions in that
    // round), slow each time; every other round carries no probe between
    // them. The pair is accused once per three rounds: never named on a
    // window of rounds, named on its second turn on a window of turns.
    let t = topo();
    let turn = slow_racks_1_3();
    let off = round(|o| !between_racks_1_3(&t, o));
    let rounds = [&turn, &off, &off, &turn, &off, &off, &turn];
    let mut by_rounds = Localizer::new(topo());
    let mut by_turns = Localizer::rotating(topo(), 3);
    for (i, r) in rounds.into_iter().enumerate() {
        assert!(by_rounds.push(r).is_empty(), "round {i}");
        let s = by_turns.push(r);
        if i < 3 {
            assert!(s.is_empty(), "round {i}: one turn is not enough: {s:?}");
        } else {
            assert_eq!(
                top(&s),
                (SuspectKind::RackPair, Entity::Racks(1, 3)),
                "round {i}: {s:?}"
            );
            assert!(
                s[0].evidence
                    .contains(&format!("of the last {} rounds", (i + 1).min(9))),
                "{}",
                s[0].evidence
            );
        }
    }
    // A host pair accused in rounds three apart is still one accusation
    // per window of rounds: the turns widen the rack pairs' window only.
    let bad_pair = round(|o| {
        if (o.prober, o.target) == (2, 4) {
            slow(o, 4.0);
        }
        true
    });
    let fine = round(|_| true);
    let mut l = Localizer::rotating(topo(), 3);
    for (i, r) in [&bad_pair, &fine, &fine, &bad_pair, &fine, &fine, &bad_pair]
        .into_iter()
        .enumerate()
    {
        assert!(l.push(r).is_empty(), "round {i}");
    }
}

/// A synthetic hardware split for a healthy probe: 30% prober delay, 20%
/// responder delay, 50% network (synthetic: no device here stamps
/// completions).
fn split(o: &PairObs) -> HwSplit {
    HwSplit {
        prober_us: 0.3 * o.p50_us,
        responder_us: 0.2 * o.p50_us,
        network_us: 0.5 * o.p50_us,
    }
}

/// Whether `h` is one of the six hosts (a quarter) slow as target.
fn slow_target(h: HostId) -> bool {
    h.is_multiple_of(4)
}

/// A quarter of the hosts slow only as targets (their responders 8x):
/// every prober sees a quarter of its probes slow, more than the vote's
/// background allows, so the peers cannot exonerate themselves; the
/// split puts the slowness on the targets alone.
fn slow_targets(with_hw: bool) -> Round {
    round(|o| {
        let hit = slow_target(o.target);
        let mut h = split(o);
        if hit {
            h.responder_us *= 8.0;
            let added = h.responder_us - split(o).responder_us;
            let f = (o.p50_us + added) / o.p50_us;
            slow(o, f);
        }
        o.hw = with_hw.then_some(h);
        true
    })
}

#[test]
fn without_a_split_the_vote_misses_many_slow_targets() {
    let s = named(&slow_targets(false), 3);
    assert!(!s.iter().any(|s| s.kind == SuspectKind::Target), "{s:?}");
}

#[test]
fn the_hardware_split_puts_responder_delay_on_the_target_alone() {
    let s = named(&slow_targets(true), 3);
    let mut got: Vec<(SuspectKind, Entity)> = s.iter().map(|s| (s.kind, s.entity)).collect();
    got.sort();
    let want: Vec<(SuspectKind, Entity)> = (0..RACKS * PER_RACK)
        .filter(|&h| slow_target(h))
        .map(|h| (SuspectKind::Target, Entity::Host(h)))
        .collect();
    assert_eq!(got, want, "{s:?}");
    assert!(
        s[0].evidence.contains("by hardware timestamps")
            && s[0].evidence.contains("responder delay"),
        "{}",
        s[0].evidence
    );
}

#[test]
fn the_hardware_split_puts_network_delay_on_no_host() {
    // Every probe between racks 1 and 2 slow in the network part only.
    let r = round(|o| {
        let t = topo();
        let (a, b) = (t.rack(o.prober), t.rack(o.target));
        let mut h = split(o);
        if (a.min(b), a.max(b)) == (1, 2) {
            h.network_us *= 4.0;
            slow(o, 2.5);
        }
        o.hw = Some(h);
        true
    });
    let s = named(&r, 3);
    assert_eq!(
        top(&s),
        (SuspectKind::RackPair, Entity::Racks(1, 2)),
        "{s:?}"
    );
    assert!(
        s.iter().all(|s| !matches!(s.entity, Entity::Host(_))),
        "{s:?}"
    );
}

#[test]
fn a_split_that_moved_nowhere_or_is_not_a_number_votes_as_without() {
    // A slow host whose split is NaN: the vote, as without a split.
    let host5 = |o: &mut PairObs, hw: Option<HwSplit>| {
        if o.prober == 5 || o.target == 5 {
            slow(o, 3.0);
        }
        o.hw = hw;
        true
    };
    let nan = HwSplit {
        prober_us: f32::NAN,
        responder_us: 1.0,
        network_us: 1.0,
    };
    let plain = named(&round(|o| host5(o, None)), 3);
    assert_eq!(plain[0].entity, Entity::Host(5), "{plain:?}");
    assert_eq!(named(&round(|o| host5(o, Some(nan))), 3), plain);
    // A split whose parts all stayed at their class medians: no part
    // moved, so both sides, as the vote.
    let unmoved = |o: &mut PairObs| {
        let h = split(o);
        host5(o, Some(h))
    };
    assert_eq!(named(&round(unmoved), 3), plain);
}
