//! Probe plans at cluster scale, on the virtual clock (issue 17): for 100,
//! 1,000 and 10,000 hosts in racks of 20-40, `rack-mesh` keeps each
//! node's load within one round's budget while `full` grows with N; every
//! rack pair is covered every round; every host pair within the
//! documented bound; a dead host or rack uplink is detected within the
//! documented bound in >= 99% of simulated failures; a host added or
//! removed changes each node's round by at most two targets; two
//! processes derive the same plan from the same list. At 100,000 hosts
//! (racks of 25 and of 40) the rack pairs rotate: every round fits, every
//! rack pair is probed within the stated K rounds (and not fewer), dead
//! hosts and uplinks are still detected within one round.

use ibexporter::targets::cardinality::FleetSeries;
use ibexporter::targets::plan::{ClusterPlan, Figures, PlanKind, Timing};
use ibexporter::targets::simulate::{
    detection, host_pair_rounds, rack_pairs_covered, round_load, synthetic, Failure,
};
use std::process::Command;

/// The defaults: a 10 s round, 100 messages per target at 1 kHz, 1 s timeout.
const T: Timing = Timing {
    interval: 10.0,
    probes: 100.0,
    rate_hz: 1000.0,
    timeout: 1.0,
};

/// (hosts, racks): racks of 20-40 hosts.
const CLUSTERS: [(usize, usize); 6] = [
    (100, 4),
    (100, 5),
    (1000, 25),
    (1000, 50),
    (10000, 250),
    (10000, 500),
];

fn rack_mesh(hosts: usize, racks: usize) -> ClusterPlan {
    ClusterPlan::new(synthetic(hosts, racks), PlanKind::RackMesh, 1)
}

/// (hosts, racks): 100,000 hosts in racks of 25 and of 40.
const FLEETS: [(usize, usize); 2] = [(100_000, 4000), (100_000, 2500)];

/// The plan as every exporter builds it: fitted to the round's budget.
fn fitted(hosts: usize, racks: usize) -> ClusterPlan {
    ClusterPlan::new(synthetic(hosts, racks), PlanKind::RackMesh, 1).fitted(T.full_max())
}

/// The other racks that rack `a` (members `a·s..(a+1)·s`, racks of equal
/// size in index order) probes in epoch `e`.
fn partner_racks(p: &ClusterPlan, a: usize, s: usize, e: u64, out: &mut Vec<u32>) -> Vec<usize> {
    let mut racks = std::collections::BTreeSet::new();
    for m in (a * s..(a + 1) * s).map(|m| m as u32) {
        p.targets_of(m, e, out);
        racks.extend(out.iter().map(|&x| p.rack_of(x)).filter(|&b| b != a));
    }
    racks.into_iter().collect()
}

#[test]
fn a_hundred_thousand_hosts_fit_a_round_by_rotating_rack_pairs() {
    for (hosts, racks) in FLEETS {
        let s = hosts / racks;
        // Every rack pair every round would not fit: 184 and 102 targets.
        let all = Figures::of(&rack_mesh(hosts, racks), T);
        assert!(!all.round_fits, "{all:?}");
        assert_eq!(all.max_targets_per_round, s - 1 + (racks - 1).div_ceil(s));
        let p = fitted(hosts, racks);
        let f = Figures::of(&p, T);
        let k = p.rack_pair_rounds();
        assert!(f.round_fits, "{hosts}/{racks}: {f:?}");
        assert!(f.max_targets_per_round <= T.full_max(), "{f:?}");
        assert!((2..=4).contains(&k), "{hosts}/{racks}: K = {k}");
        assert_eq!(f.rack_pair_cover_rounds, k);
        assert_eq!(f.rack_pair_cover_seconds, k as f64 * T.interval);
        // K is the fewest windows that fit: one fewer would not.
        let fewer = (k - 1).max(1);
        assert!(
            s - 1 + (racks as u64 - 1).div_ceil(fewer).div_ceil(s as u64) as usize > T.full_max()
        );
        // Sampled source racks (members in index order, racks of equal
        // size): every round of every member within the bound, and every
        // other rack probed within K rounds from any boundary, not fewer.
        let mut out = Vec::new();
        for e0 in [0, 999_999_937] {
            for a in [0, racks / 2, racks - 1] {
                let mut first = vec![u64::MAX; racks];
                for e in e0..e0 + k {
                    let partners = partner_racks(&p, a, s, e, &mut out);
                    for m in (a * s..(a + 1) * s).map(|m| m as u32) {
                        assert_eq!(p.rack_of(m), a);
                        p.targets_of(m, e, &mut out);
                        assert!(out.len() <= f.max_targets_per_round, "{}", out.len());
                        assert_eq!(
                            out.iter().filter(|&&x| p.rack_of(x) == a).count(),
                            s - 1,
                            "its own rack every round"
                        );
                        for &x in &out {
                            let b = p.rack_of(x);
                            first[b] = first[b].min(e - e0);
                        }
                    }
                    // Both directions of a rack pair in the same round
                    // (what a rack-pair suspect needs): sampled partners
                    // probe rack a back in this epoch.
                    for &b in partners.iter().step_by(partners.len() / 4 + 1) {
                        assert!(
                            partner_racks(&p, b, s, e, &mut out).contains(&a),
                            "{hosts}/{racks} epoch {e}: {a} -> {b} without {b} -> {a}"
                        );
                    }
                }
                let missed: Vec<usize> = (0..racks)
                    .filter(|&b| b != a && first[b] == u64::MAX)
                    .collect();
                assert!(
                    missed.is_empty(),
                    "{hosts}/{racks} rack {a} from {e0}: {missed:?}"
                );
                assert!(
                    first.iter().any(|&r| r == k - 1),
                    "the bound is tight: some rack pair waits K rounds"
                );
            }
        }
        // Dead hosts and dead uplinks: still within one round (own rack,
        // and each rack's window, every round).
        for fail in [Failure::DeadHost, Failure::DeadUplink] {
            let d = detection(&p, T, fail, 50, 7);
            assert_eq!(d.within_bound, 1.0, "{hosts}/{racks}: {d:?}");
            assert!(d.bound <= 2.0 * T.interval + T.timeout, "{d:?}");
        }
    }
}

#[test]
fn rotating_rack_pairs_cover_every_pair_of_the_whole_cluster_within_k_rounds() {
    // 2,000 hosts in racks of 10 under a budget of 20 targets: 199 rack
    // pairs per rack would need 29 targets; K windows make it fit.
    let p = ClusterPlan::new(synthetic(2000, 200), PlanKind::RackMesh, 1).fitted(20);
    let k = p.rack_pair_rounds();
    assert!(k > 1, "K = {k}");
    assert!(p.max_targets() <= 20, "{}", p.max_targets());
    for e0 in [0, 123_457] {
        assert_eq!(rack_pairs_covered(&p, e0, k), 200 * 199, "from {e0}");
        assert!(rack_pairs_covered(&p, e0, k - 1) < 200 * 199);
        // Every rack is probed from other racks in every round.
        let l = round_load(&p, T, e0);
        // Its own rack (9) and at least one rack pair.
        assert!(l.max_targets <= 20 && l.min_targets >= 10, "{l:?}");
    }
    // Every host pair within K·⌈s_A·s_B/k⌉ rounds.
    let bound = p.host_pair_rounds();
    assert_eq!(bound, 100 * k);
    let took = host_pair_rounds(&p, &[0, 199], 5, bound);
    assert!(took.is_some_and(|r| r <= bound), "{took:?} > {bound}");
    // A plan that fits is left as it was: K = 1.
    assert_eq!(fitted(10000, 500).rack_pair_rounds(), 1);
}

#[test]
fn series_per_exporter_and_in_total_at_ten_and_a_hundred_thousand_hosts() {
    // Racks of 20 at 10,000 hosts; of 25 and 40 at 100,000: above 200
    // peers the series are grouped by rack, one value per rack.
    for (hosts, racks, per_exporter) in [
        (10_000, 500, 500 * 50),
        (100_000, 4000, 4000 * 50),
        (100_000, 2500, 2500 * 50),
    ] {
        let s = FleetSeries::of(&fitted(hosts, racks), 200, 1);
        assert_eq!(s.target_values_per_exporter, racks);
        assert_eq!(s.per_exporter, per_exporter);
        assert_eq!(s.total, per_exporter as u64 * hosts as u64);
    }
    // Up to 200 peers: one value per peer.
    let s = FleetSeries::of(&fitted(150, 5), 200, 2);
    assert_eq!(s.per_exporter, 149 * (2 * 49 + 1));
}

#[test]
fn rack_mesh_load_stays_within_one_round_while_full_grows_with_n() {
    let mut per_node = Vec::new();
    for (hosts, racks) in CLUSTERS {
        let p = rack_mesh(hosts, racks);
        let s_min = hosts / racks;
        for e in [0, 1, 977] {
            let l = round_load(&p, T, e);
            // The budget: a round's targets fit the interval.
            assert!(
                l.probes_per_node_per_second <= T.rate_hz,
                "{hosts} hosts / {racks} racks: {l:?}"
            );
            assert!(l.max_targets <= T.full_max(), "{hosts}/{racks}: {l:?}");
            // The formula: own rack plus ceil(k(R-1)/s) rack pairs.
            assert!(
                l.max_targets <= s_min + (racks - 1).div_ceil(s_min),
                "{hosts}/{racks}: {l:?}"
            );
            assert_eq!(l.max_targets, p.max_targets().min(l.max_targets));
        }
        let f = Figures::of(&p, T);
        assert!(f.round_fits, "{f:?}");
        per_node.push((hosts, racks, f.probes_per_node_per_second));
    }
    // Racks of 20 and of 40: from 100 to 10,000 hosts the per-node rate
    // grows by less than 2.5x (the rack-pair share, k(R-1)/s); full grows 100x.
    for (small, big) in [(1, 5), (0, 4)] {
        let (a, b) = (per_node[small].2, per_node[big].2);
        assert!(b <= 2.5 * a, "{per_node:?}");
    }
    let full_small = Figures::of(&ClusterPlan::new(synthetic(100, 4), PlanKind::Full, 1), T);
    let full_big = Figures::of(
        &ClusterPlan::new(synthetic(10000, 250), PlanKind::Full, 1),
        T,
    );
    assert_eq!(full_small.max_targets_per_round, 99);
    assert_eq!(full_big.max_targets_per_round, 9999);
    assert!(!full_big.round_fits);
}

#[test]
fn every_rack_pair_is_covered_in_every_round() {
    for (hosts, racks) in CLUSTERS {
        let p = rack_mesh(hosts, racks);
        for e in [0, 5, 123_456] {
            let l = round_load(&p, T, e);
            assert_eq!(l.rack_pairs, racks * (racks - 1));
            assert_eq!(
                l.rack_pairs_covered, l.rack_pairs,
                "{hosts}/{racks} epoch {e}"
            );
        }
        // And every member probes its whole rack every round.
        let mut out = Vec::new();
        for m in (0..hosts as u32).step_by(97) {
            p.targets_of(m, 42, &mut out);
            let same = out
                .iter()
                .filter(|&&x| p.rack_of(x) == p.rack_of(m))
                .count();
            assert_eq!(same, p.rack(p.rack_of(m)).1 - 1);
        }
    }
}

#[test]
fn every_host_pair_is_probed_within_the_documented_bound() {
    for (hosts, racks) in CLUSTERS {
        let p = rack_mesh(hosts, racks);
        let bound = p.host_pair_rounds();
        // Every source rack for 100 hosts; three for the larger clusters.
        let sources: Vec<usize> = if hosts <= 100 {
            (0..racks).collect()
        } else {
            vec![0, racks / 2, racks - 1]
        };
        for e0 in [0, 31_337] {
            let took = host_pair_rounds(&p, &sources, e0, bound);
            assert!(
                took.is_some_and(|r| r <= bound),
                "{hosts}/{racks} from epoch {e0}: {took:?} > {bound}"
            );
        }
        // The bound is tight: one round short misses some pair.
        assert_eq!(
            host_pair_rounds(&p, &[0], 0, bound - 1),
            None,
            "{hosts}/{racks}"
        );
    }
}

#[test]
fn dead_hosts_and_uplinks_are_detected_within_the_bound() {
    for (hosts, racks) in CLUSTERS {
        let p = rack_mesh(hosts, racks);
        let trials = if hosts >= 10000 { 200 } else { 500 };
        for f in [Failure::DeadHost, Failure::DeadUplink] {
            let d = detection(&p, T, f, trials, 7);
            assert_eq!(d.trials, trials);
            assert!(d.within_bound >= 0.99, "{hosts}/{racks}: {d:?}");
            // Never later than the next round plus the probe's timeout.
            assert!(d.p99 <= T.interval + p.max_targets() as f64 * 0.1 + T.timeout);
            assert!(d.p50 > 0.0 && d.p50 < d.bound, "{d:?}");
        }
    }
    // A slow path, on the smallest cluster: within the host-pair bound.
    let p = rack_mesh(100, 4);
    let d = detection(&p, T, Failure::SlowPath, 100, 3);
    assert!(d.within_bound >= 0.99, "{d:?}");
    assert!(
        d.p99 > T.interval,
        "a slow path takes more than a round: {d:?}"
    );
}

#[test]
fn adding_or_removing_a_host_changes_each_round_by_at_most_two_targets() {
    let base = synthetic(1000, 33);
    let before = ClusterPlan::new(base.clone(), PlanKind::RackMesh, 1);
    let mut more = base.clone();
    more.push(("h99999".into(), "r0010".into()));
    let mut fewer = base.clone();
    fewer.remove(500);
    let (mut x, mut y) = (Vec::new(), Vec::new());
    for after in [
        ClusterPlan::new(more, PlanKind::RackMesh, 1),
        ClusterPlan::new(fewer, PlanKind::RackMesh, 1),
    ] {
        let mut total = (0usize, 0usize);
        for (name, _) in &base {
            let (Some(a), Some(b)) = (before.member(name), after.member(name)) else {
                continue;
            };
            before.targets_of(a, 9, &mut x);
            after.targets_of(b, 9, &mut y);
            assert!(
                x.len().abs_diff(y.len()) <= 2,
                "{name}: {} -> {}",
                x.len(),
                y.len()
            );
            total.0 += x.len();
            total.1 += y.len();
        }
        // No storm: the cluster's probes per round change by under 1%.
        assert!(total.0.abs_diff(total.1) * 100 < total.0, "{total:?}");
    }
}

fn plan_cmd(args: &[&str]) -> String {
    let out = Command::new(env!("CARGO_BIN_EXE_ibexporter"))
        .arg("mesh")
        .args(args)
        .output()
        .expect("running ibexporter mesh");
    assert!(
        out.status.success(),
        "ibexporter mesh {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).unwrap()
}

#[test]
fn two_processes_derive_the_same_plan_from_the_same_list() {
    let dir = tempfile::tempdir().unwrap();
    // 300 hosts in 12 racks, written in two different orders.
    let mut groups: Vec<serde_json::Value> = (0..12)
        .map(|r| {
            let targets: Vec<String> = (0..25)
                .map(|i| format!("10.0.{r}.{}:18515", i + 1))
                .collect();
            serde_json::json!({"targets": targets, "labels": {"rack": format!("rack{r}")}})
        })
        .collect();
    let a = dir.path().join("a.json");
    std::fs::write(&a, serde_json::to_string(&groups).unwrap()).unwrap();
    groups.reverse();
    let b = dir.path().join("b.json");
    std::fs::write(&b, serde_json::to_string(&groups).unwrap()).unwrap();
    let all = |f: &std::path::Path, epoch: &str| {
        plan_cmd(&[
            "--file-sd",
            f.to_str().unwrap(),
            "--plan",
            "rack-mesh",
            "--all",
            "--epoch",
            epoch,
            "--json",
        ])
    };
    let (x, y) = (all(&a, "7"), all(&b, "7"));
    assert_eq!(x, y, "the same list gives the same plan in two processes");
    let v: serde_json::Value = serde_json::from_str(&x).unwrap();
    let rounds = v["rounds"].as_object().unwrap();
    assert_eq!(rounds.len(), 300);
    // 24 rack peers + 11 rack pairs dealt over 25 members: 24 or 25 targets.
    for (m, t) in rounds {
        let n = t.as_array().unwrap().len();
        assert!(n == 24 || n == 25, "{m}: {n}");
    }
    // A later epoch rotates the cross-rack targets.
    let z = all(&a, "8");
    assert_ne!(x, z);
    // One node's view is its row of the whole.
    let node = plan_cmd(&[
        "--file-sd",
        a.to_str().unwrap(),
        "--plan",
        "rack-mesh",
        "--node",
        "10.0.3.4:18515",
        "--epoch",
        "7",
        "--json",
    ]);
    let n: serde_json::Value = serde_json::from_str(&node).unwrap();
    let names: Vec<&str> = n["targets"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["target"].as_str().unwrap())
        .collect();
    let row: Vec<&str> = rounds["10.0.3.4:18515"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t.as_str().unwrap())
        .collect();
    assert_eq!(names, row);
    assert_eq!(n["rack"], "rack3");
}

#[test]
fn the_cluster_report_and_its_mistakes() {
    let text = plan_cmd(&[
        "--simulate",
        "--hosts",
        "1000",
        "--racks",
        "33",
        "--trials",
        "50",
    ]);
    assert!(
        text.contains("plan rack-mesh: 1000 hosts in 33 racks"),
        "{text}"
    );
    assert!(text.contains("1056 of 1056"), "{text}");
    assert!(text.contains("dead-host"), "{text}");
    let json = plan_cmd(&[
        "--simulate",
        "--hosts",
        "60",
        "--racks",
        "3",
        "--trials",
        "20",
        "--json",
    ]);
    let v: serde_json::Value = serde_json::from_str(&json).unwrap();
    assert_eq!(
        v["figures"]["plan"], "full",
        "60 hosts fit one round: auto is full"
    );
    assert_eq!(v["detection"].as_array().unwrap().len(), 3);
    let out = Command::new(env!("CARGO_BIN_EXE_ibexporter"))
        .args(["mesh", "--simulate", "--hosts", "10", "--racks", "20"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("--racks 20") && err.lines().count() == 1,
        "{err}"
    );
    let out = Command::new(env!("CARGO_BIN_EXE_ibexporter"))
        .args([
            "mesh",
            "--simulate",
            "--hosts",
            "10",
            "--racks",
            "2",
            "--plan",
            "ring",
        ])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("rack-mesh"));
}

/// One rack of 10,000 members: the report (round load, every failure's
/// simulation with the default 1,000 trials) completes well within a
/// minute even unoptimised; the simulation walks only the cross-rack
/// parts of each round, not the rack's 10,000 x 9,999 pairs per trial.
#[test]
fn one_rack_of_ten_thousand_is_planned_in_bounded_time() {
    let t = std::time::Instant::now();
    let mut child = Command::new(env!("CARGO_BIN_EXE_ibexporter"))
        .args(["mesh", "--simulate", "--hosts", "10000", "--racks", "1"])
        .args(["--plan", "rack-mesh", "--json"])
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    // The output is read on a thread so a full pipe cannot stall the child.
    let mut stdout = child.stdout.take().unwrap();
    let reader = std::thread::spawn(move || {
        let mut s = String::new();
        std::io::Read::read_to_string(&mut stdout, &mut s).map(|_| s)
    });
    let deadline = t + std::time::Duration::from_secs(60);
    let status = loop {
        if let Some(st) = child.try_wait().unwrap() {
            break st;
        }
        if std::time::Instant::now() > deadline {
            let _ = child.kill();
            let _ = child.wait();
            panic!("plan of one rack of 10,000 still running after 60 s");
        }
        std::thread::sleep(std::time::Duration::from_millis(50));
    };
    eprintln!("one rack of 10,000: {:.1} s", t.elapsed().as_secs_f64());
    assert!(status.success(), "{status:?}");
    let v: serde_json::Value = serde_json::from_str(&reader.join().unwrap().unwrap()).unwrap();
    assert_eq!(v["figures"]["hosts"], 10000);
    assert_eq!(v["round"]["min_targets"], 9999);
    assert_eq!(v["round"]["max_targets"], 9999);
    assert_eq!(v["round"]["max_inbound"], 9999);
    let dead_host = &v["detection"][0];
    assert_eq!(dead_host["failure"], "dead-host");
    assert_eq!(dead_host["trials"], 1000);
    assert_eq!(dead_host["within_bound"], 1.0, "{dead_host}");
}

/// `-f json` and `--json` print the same document; the default is the table.
#[test]
fn mesh_takes_format_json_as_json() {
    let a = [
        "--simulate",
        "--hosts",
        "40",
        "--racks",
        "4",
        "--trials",
        "10",
    ];
    let json = plan_cmd(&[&a[..], &["--json"]].concat());
    let format = plan_cmd(&[&a[..], &["-f", "json"]].concat());
    assert_eq!(json, format);
    serde_json::from_str::<serde_json::Value>(&json).unwrap();
    assert!(plan_cmd(&a).starts_with("plan "), "the table");
}
