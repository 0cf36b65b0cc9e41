//! The localizer's Prometheus twin (`deploy/prometheus/rules/
//! ibexporter-localize.rules.yml`) and its promtool test
//! (`deploy/prometheus/rules/tests/localize.test.yml`) are what the code
//! writes, and the Rust localizer agrees with the alerts on the same data:
//!
//! - the shipped rules equal `localize::rules::text` for the default
//!   `probe.interval` (the thresholds exist once, as Rust constants);
//! - the promtool test file equals what [`scenarios`] write: a mesh of 3
//!   racks of 4 hosts probing each other, a healthy one with a host in a
//!   bimodal episode, a slow host, a slow rack pair, a lossy host side
//!   with a slow prober elsewhere; the
//!   alerts it expects (every label and annotation) are written here by
//!   hand;
//! - fed the same probes as one round (p50 and p10 from the same buckets,
//!   as `histogram_quantile` reads them), `Localizer` names the same hosts
//!   (and side) and rack pairs as the alerts, and nothing more.
//!
//! `promtool test rules` itself runs in `tests/rules.rs` (every file of
//! `rules/tests/`), which also checks that each alert case fails when the
//! alert cannot fire. `RULES_UPDATE=1` rewrites both files.

use ibexporter::localize::model::{Entity, HwSplit, PairObs, Round, SuspectKind, Topology};
use ibexporter::localize::{rules, Localizer, CONFIRM_ROUNDS};
use std::collections::BTreeSet;
use std::fmt::Write as _;
use std::path::PathBuf;

const RACKS: usize = 3;
const PER_RACK: usize = 4;
const HOSTS: usize = RACKS * PER_RACK;
/// Messages a probe sends per scrape (15 s).
const PER_SCRAPE: u32 = 15;
/// Scrapes of the input series after the first (2 minutes).
const SCRAPES: u32 = 8;
/// The rules judge a probe once its counter existed a window (1 minute)
/// ago: the first evaluation that accuses is at 60 s (the fault is there
/// from the start; without that gate it would be at 15 s and fire at
/// 45 s); `for: 20s` has not passed at 75 s (pending, no alert yet) and
/// has at 90 s, when the alerts are read.
const PENDING: &str = "75s";
/// An evaluation before the window filled (nothing accused yet).
const EARLY: &str = "45s";
const EVAL: &str = "90s";

fn repo(p: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("..").join(p)
}

/// Compares `path` with `want`; with RULES_UPDATE=1 writes it instead.
fn same_as_generated(path: &str, want: &str) {
    let file = repo(path);
    if std::env::var_os("RULES_UPDATE").is_some() {
        std::fs::write(&file, want).unwrap();
        eprintln!("wrote {path}");
        return;
    }
    let have = std::fs::read_to_string(&file).unwrap_or_default();
    if have != want {
        let line = have
            .lines()
            .zip(want.lines())
            .position(|(a, b)| a != b)
            .unwrap_or_else(|| have.lines().count().min(want.lines().count()));
        panic!(
            "{path} is not what the code writes (first difference at line {}); regenerate it:\n  RULES_UPDATE=1 cargo test -p ibexporter --test localize_rules",
            line + 1
        );
    }
}

fn default_interval() -> std::time::Duration {
    ibexporter::config::parse("", "defaults")
        .expect("the empty config")
        .probe
        .interval
}

#[test]
fn the_shipped_rules_are_what_the_constants_give() {
    let text = rules::text(default_interval());
    assert!(text.contains("for: 20s"), "2 rounds of 10 s");
    same_as_generated(
        "deploy/prometheus/rules/ibexporter-localize.rules.yml",
        &text,
    );
}

/// How one probe's messages come back.
#[derive(Clone, Copy, PartialEq)]
enum Lat {
    /// The class's normal latency.
    Fast,
    /// Every message 3x slower (a fault moves the whole distribution).
    Slow,
    /// 60% of the messages 3x slower, 40% normal (a busy host's episode:
    /// p50 slow, p10 still fast).
    Bimodal,
}

/// One probe per scrape: latency, and messages lost of [`PER_SCRAPE`].
#[derive(Clone, Copy)]
struct Probe {
    lat: Lat,
    lost: u32,
}

/// One side's evidence as the alert's description prints it.
struct SideEv {
    slow: &'static str,
    answered: &'static str,
    bg_slow: &'static str,
    loss: &'static str,
    probes: &'static str,
    bg_loss: &'static str,
    /// The hardware-timestamp clause ("" without one).
    hw: &'static str,
}

struct Scenario {
    name: &'static str,
    /// A host whose own wake-up p99 is 30 us (the others' 10 us).
    slow_cpu: Option<usize>,
    probe: fn(usize, usize) -> Probe,
    /// The hardware-timestamp split of every answered probe, where served:
    /// which parts moved (prober, responder, network).
    hw: Option<fn(usize, usize) -> [bool; 3]>,
    /// IBHostSuspect: (host index, side, as prober, as target).
    hosts: Vec<(usize, &'static str, SideEv, SideEv)>,
    /// IBRackPairSuspect: (rack a, rack b, bad, probes, share, probers),
    /// fired once per direction.
    pairs: Vec<(
        usize,
        usize,
        &'static str,
        &'static str,
        &'static str,
        &'static str,
    )>,
}

/// Host `h`'s own wake-up p99 in `sc`, microseconds.
fn wakeup_us(sc: &Scenario, h: usize) -> f64 {
    if sc.slow_cpu == Some(h) {
        30.0
    } else {
        10.0
    }
}

/// Symbol errors host `h`'s HCA port counts per scrape in `sc`: the host
/// that loses messages sent to it has a bad receive link.
fn port_errors_per_scrape(sc: &Scenario, h: usize) -> u32 {
    if h == LOSSY_HOST && sc.hosts.iter().any(|x| x.0 == LOSSY_HOST) {
        5
    } else {
        0
    }
}

/// Scrapes (of 15 s) in the rules' 1 minute window.
const SCRAPES_PER_WINDOW: u32 = 4;

fn rack(h: usize) -> usize {
    h / PER_RACK
}

fn host(h: usize) -> String {
    format!("n{h:02}")
}

const OK: Probe = Probe {
    lat: Lat::Fast,
    lost: 0,
};
/// The host in a bimodal episode in the healthy and the slow-host meshes.
const BUSY: usize = 5;
const SLOW_HOST: usize = 1;
const LOSSY_HOST: usize = 10;
const SLOW_PROBER: usize = 6;
/// Hosts slow only as responders, two of them in one rack.
const SLOW_RESPONDERS: [usize; 4] = [2, 3, 7, 11];

fn fine() -> SideEv {
    SideEv {
        slow: "0",
        answered: "11",
        bg_slow: "0%",
        loss: "0%",
        probes: "11",
        bg_loss: "0%",
        hw: "",
    }
}

fn scenarios() -> Vec<Scenario> {
    vec![
        Scenario {
            name: "healthy mesh, one host in a bimodal episode: no suspect",
            slow_cpu: None,
            hw: None,
            probe: |p, t| Probe {
                lat: if p == BUSY || t == BUSY {
                    Lat::Bimodal
                } else {
                    Lat::Fast
                },
                lost: 0,
            },
            hosts: vec![],
            pairs: vec![],
        },
        Scenario {
            name: "one slow host (both sides, its CPU too), and the busy host: only the slow one",
            slow_cpu: Some(SLOW_HOST),
            hw: None,
            probe: |p, t| Probe {
                lat: if p == SLOW_HOST || t == SLOW_HOST {
                    Lat::Slow
                } else if p == BUSY || t == BUSY {
                    Lat::Bimodal
                } else {
                    Lat::Fast
                },
                lost: 0,
            },
            hosts: vec![(
                SLOW_HOST,
                "both",
                SideEv {
                    slow: "11",
                    ..fine()
                },
                SideEv {
                    slow: "11",
                    ..fine()
                },
            )],
            pairs: vec![],
        },
        Scenario {
            name: "a slow rack pair (racks 0 and 2, both ways): only the pair",
            slow_cpu: None,
            hw: None,
            probe: |p, t| {
                if (rack(p), rack(t)) == (0, 2) || (rack(p), rack(t)) == (2, 0) {
                    Probe {
                        lat: Lat::Slow,
                        lost: 0,
                    }
                } else {
                    OK
                }
            },
            hosts: vec![],
            pairs: vec![(0, 2, "32", "32", "100%", "8")],
        },
        Scenario {
            name: "a lossy host side (1 of 15 messages to n10 lost) and a slow prober (n06's own probes): each, with its side",
            slow_cpu: None,
            hw: None,
            probe: |p, t| Probe {
                lat: if p == SLOW_PROBER {
                    Lat::Slow
                } else {
                    Lat::Fast
                },
                lost: u32::from(t == LOSSY_HOST),
            },
            // n06's probe to each host is slow: n10 as target has 1 slow
            // probe, and its peers' sides hold one each (10 of 110 with
            // others); n06's peers: the probes to n10 lose 4 of 60 messages
            // in a minute (40 of 6600 with others).
            hosts: vec![
                (
                    LOSSY_HOST,
                    "target",
                    SideEv {
                        bg_slow: "9.091%",
                        ..fine()
                    },
                    SideEv {
                        slow: "1",
                        bg_slow: "9.091%",
                        loss: "6.667%",
                        ..fine()
                    },
                ),
                (
                    SLOW_PROBER,
                    "prober",
                    SideEv {
                        slow: "11",
                        loss: "0.6061%",
                        bg_loss: "0.6061%",
                        ..fine()
                    },
                    SideEv {
                        bg_loss: "0.6061%",
                        ..fine()
                    },
                ),
            ],
            pairs: vec![],
        },
        Scenario {
            name: "four hosts slow as responders, with hardware splits: each on its target side alone (without the split the vote names none)",
            slow_cpu: None,
            hw: Some(|_, t| [false, SLOW_RESPONDERS.contains(&t), false]),
            probe: |_, t| Probe {
                lat: if SLOW_RESPONDERS.contains(&t) {
                    Lat::Slow
                } else {
                    Lat::Fast
                },
                lost: 0,
            },
            // Each responder's own probes go to the 3 others: 30 of their
            // 110 probes with others are slow as targets.
            hosts: SLOW_RESPONDERS
                .iter()
                .map(|&h| {
                    (
                        h,
                        "target",
                        SideEv {
                            bg_slow: "27.27%",
                            ..fine()
                        },
                        SideEv {
                            slow: "11",
                            hw: " (by hardware timestamps, 11 of them: responder delay 3.5us vs 350ns class median)",
                            ..fine()
                        },
                    )
                })
                .collect(),
            pairs: vec![],
        },
        Scenario {
            name: "a slow prober by its own delay and a slow network between racks 0 and 2, with hardware splits: the prober side and the pair",
            slow_cpu: None,
            hw: Some(|p, t| {
                [
                    p == SLOW_PROBER,
                    false,
                    (rack(p), rack(t)) == (0, 2) || (rack(p), rack(t)) == (2, 0),
                ]
            }),
            probe: |p, t| Probe {
                lat: if p == SLOW_PROBER
                    || (rack(p), rack(t)) == (0, 2)
                    || (rack(p), rack(t)) == (2, 0)
                {
                    Lat::Slow
                } else {
                    Lat::Fast
                },
                lost: 0,
            },
            hosts: vec![(
                SLOW_PROBER,
                "prober",
                SideEv {
                    slow: "11",
                    hw: " (by hardware timestamps, 11 of them: prober delay 3.5us vs 350ns class median)",
                    ..fine()
                },
                fine(),
            )],
            pairs: vec![(0, 2, "32", "32", "100%", "8")],
        },
    ]
}

/// Bucket bounds (seconds) of one part of the hardware split: (normal,
/// moved), by part (prober, responder, network) and class.
fn hw_modes(part: usize, same_rack: bool) -> ((f64, f64), (f64, f64)) {
    match (part, same_rack) {
        (2, true) => ((5e-7, 1e-6), (5e-6, 1e-5)),
        (2, false) => ((1e-6, 2e-6), (1e-5, 2e-5)),
        _ => ((2e-7, 5e-7), (2e-6, 5e-6)),
    }
}

/// Cumulative bucket counts per scrape of one part of a probe's split.
fn hw_buckets(part: usize, same_rack: bool, moved: bool, answered: u32) -> Vec<(f64, u32)> {
    let (normal, slow) = hw_modes(part, same_rack);
    let b = if moved { slow } else { normal };
    vec![(b.0, 0), (b.1, answered), (f64::INFINITY, answered)]
}

/// The histograms of the split's parts, as the exporter names them.
const HW_FAMILIES: [&str; 3] = [
    "ibprobe_hw_prober_delay_seconds_bucket",
    "ibprobe_hw_responder_delay_seconds_bucket",
    "ibprobe_hw_network_rtt_seconds_bucket",
];

/// Bucket bounds (seconds) a probe's answered messages fall between:
/// (lower, upper) of the fast and of the slow mode, by class.
fn modes(same_rack: bool) -> ((f64, f64), (f64, f64)) {
    if same_rack {
        ((1e-6, 2e-6), (5e-6, 1e-5))
    } else {
        ((2e-6, 5e-6), (1e-5, 2e-5))
    }
}

/// Cumulative bucket counts per scrape (le, count) of one probe, +Inf last.
fn buckets(same_rack: bool, pr: Probe) -> Vec<(f64, u32)> {
    let n = PER_SCRAPE - pr.lost;
    let (fast, slow) = modes(same_rack);
    match pr.lat {
        Lat::Fast => vec![(fast.0, 0), (fast.1, n), (f64::INFINITY, n)],
        Lat::Slow => vec![(slow.0, 0), (slow.1, n), (f64::INFINITY, n)],
        Lat::Bimodal => {
            let f = n * 2 / 5;
            vec![
                (fast.0, 0),
                (fast.1, f),
                (slow.0, f),
                (slow.1, n),
                (f64::INFINITY, n),
            ]
        }
    }
}

/// `histogram_quantile` on cumulative buckets (linear in a bucket, from
/// 0 below the first bound as Prometheus does).
fn quantile(q: f64, b: &[(f64, u32)]) -> f64 {
    let total = f64::from(b.last().unwrap().1);
    let rank = q * total;
    let mut lower = (0.0, 0.0);
    for &(le, c) in b {
        let c = f64::from(c);
        if c >= rank {
            if le.is_infinite() {
                return lower.0;
            }
            return lower.0 + (le - lower.0) * (rank - lower.1) / (c - lower.1);
        }
        lower = (le, c);
    }
    unreachable!()
}

fn le(v: f64) -> String {
    if v.is_infinite() {
        "+Inf".into()
    } else {
        format!("{v:e}").replace("e-", "e-0")
    }
}

fn series(out: &mut String, name: &str, labels: &str, values: &str) {
    let _ = writeln!(out, "      - series: '{name}{{{labels}}}'");
    let _ = writeln!(out, "        values: '{values}'");
}

fn counter(per_scrape: u32) -> String {
    if per_scrape == 0 {
        format!("0x{SCRAPES}")
    } else {
        format!("0+{per_scrape}x{SCRAPES}")
    }
}

fn side_text(side: &str, e: &SideEv) -> String {
    format!(
        "as {side}: {} of {} answered probes slow (each a different peer) while its peers see {} slow with others; {} of messages lost over {} probes while its peers lose {} with others{}",
        e.slow, e.answered, e.bg_slow, e.loss, e.probes, e.bg_loss, e.hw
    )
}

/// One `alert_rule_test` case's head; `exp_alerts: []` unless `expected`.
fn case(out: &mut String, alert: &str, at: &str, expected: bool) {
    let _ = writeln!(out, "      - eval_time: {at}\n        alertname: {alert}");
    out.push_str(if expected {
        "        exp_alerts:\n"
    } else {
        "        exp_alerts: []\n"
    });
}

const RUNBOOK: &str = "https://example.invalid/ibtools/blob/main/deploy/prometheus/RUNBOOK.md";

fn test_file() -> String {
    let wait = rules::confirm_for(default_interval());
    let mut out = String::from(
        "# GENERATED by ibexporter/tests/localize_rules.rs (the scenarios and the\n\
         # alerts they expect are written there); regenerate with\n\
         #   RULES_UPDATE=1 cargo test -p ibexporter --test localize_rules\n\
         #\n\
         # 3 racks (r0-r2) of 4 hosts (n00-n11), every host probing every other\n\
         # (132 probes), 15 messages a probe per 15 s scrape, classic buckets\n\
         # only (promtool 2.42 has no native histograms in its input series):\n\
         # 1-2 us inside a rack, 2-5 us across, a slow probe 3x (5-10, 10-20 us),\n\
         # a bimodal one 40% fast and 60% slow.\n\
         rule_files:\n  - ../ibexporter-localize.rules.yml\nevaluation_interval: 15s\ntests:\n",
    );
    for sc in scenarios() {
        let _ = writeln!(out, "  - name: \"{}\"", sc.name);
        out.push_str("    interval: 15s\n    input_series:\n");
        for h in 0..HOSTS {
            series(
                &mut out,
                "ibexporter_plan",
                &format!(
                    "instance=\"{}:9427\",job=\"ibexporter\",plan=\"rack-mesh\",source_rack=\"r{}\"",
                    host(h),
                    rack(h)
                ),
                &format!("1x{SCRAPES}"),
            );
        }
        for h in 0..HOSTS {
            series(
                &mut out,
                "ibprobe_latency_window_seconds",
                &format!(
                    "instance=\"{}:9427\",job=\"ibexporter\",target=\"cpu2\",transport=\"host\",op=\"wakeup\",size_bytes=\"0\",quantile=\"0.99\"",
                    host(h)
                ),
                &format!("{}e-6x{SCRAPES}", wakeup_us(&sc, h)),
            );
        }
        for h in 0..HOSTS {
            series(
                &mut out,
                "ibexporter_hca_port_symbol_errors_total",
                &format!(
                    "instance=\"{}:9427\",job=\"ibexporter\",device=\"mlx5_0\",port=\"1\"",
                    host(h)
                ),
                &counter(port_errors_per_scrape(&sc, h)),
            );
        }
        for p in 0..HOSTS {
            for t in (0..HOSTS).filter(|&t| t != p) {
                let pr = (sc.probe)(p, t);
                let id = format!(
                    "instance=\"{}:9427\",job=\"ibexporter\",target=\"{}:18515\"",
                    host(p),
                    host(t)
                );
                series(
                    &mut out,
                    "ibexporter_plan_peer_rack",
                    &format!("{id},target_rack=\"r{}\"", rack(t)),
                    &format!("1x{SCRAPES}"),
                );
                for (result, n) in [("ok", PER_SCRAPE - pr.lost), ("timeout", pr.lost)] {
                    series(
                        &mut out,
                        "ibprobe_probes_total",
                        &format!("{id},result=\"{result}\""),
                        &counter(n),
                    );
                }
                for (bound, n) in buckets(rack(p) == rack(t), pr) {
                    series(
                        &mut out,
                        "ibprobe_latency_seconds_bucket",
                        &format!("{id},le=\"{}\"", le(bound)),
                        &counter(n),
                    );
                }
                if let Some(hw) = sc.hw {
                    let moved = hw(p, t);
                    for (part, family) in HW_FAMILIES.iter().enumerate() {
                        let b =
                            hw_buckets(part, rack(p) == rack(t), moved[part], PER_SCRAPE - pr.lost);
                        for (bound, n) in b {
                            series(
                                &mut out,
                                family,
                                &format!("{id},le=\"{}\"", le(bound)),
                                &counter(n),
                            );
                        }
                    }
                }
            }
        }
        // Before a full window no probe is judged: no suspect, not even
        // pending (the gate; without it the faults here accuse at 15 s).
        let _ = write!(
            out,
            "    promql_expr_test:\n      - expr: host:ibexporter_localize_suspect:{w} or rack_pair:ibexporter_localize_cross_bad:sum{w}_both_ways > 0\n        eval_time: {EARLY}\n        exp_samples: []\n",
            w = rules::WINDOW,
        );
        out.push_str("    alert_rule_test:\n");
        for (alert, expected) in [
            ("IBHostSuspect", !sc.hosts.is_empty()),
            ("IBRackPairSuspect", !sc.pairs.is_empty()),
        ] {
            if expected {
                case(&mut out, alert, PENDING, false);
            }
        }
        case(&mut out, "IBHostSuspect", EVAL, !sc.hosts.is_empty());
        for (host_index, side, pe, te) in &sc.hosts {
            let host_index = *host_index;
            let h = host(host_index);
            let _ = write!(
                out,
                "          - exp_labels: {{severity: warning, host: {h}}}\n            exp_annotations:\n              side: \"{side}\"\n              summary: \"{h} makes the mesh's probes bad (as {side}) while its peers are fine with others\"\n              description: \"{}; {}; own wake-up p99 {}us against the mesh's median 10us (above {}x: its CPU side, else its NIC); its HCA ports counted {} error events (symbol, receive, link). Held for {wait} ({CONFIRM_ROUNDS} probe intervals), over {w}.\"\n              runbook_url: \"{RUNBOOK}#ibhostsuspect\"\n",
                side_text("prober", pe),
                side_text("target", te),
                wakeup_us(&sc, host_index),
                ibexporter::localize::SELF_RATIO,
                port_errors_per_scrape(&sc, host_index) * SCRAPES_PER_WINDOW,
                w = rules::WINDOW,
            );
        }
        case(&mut out, "IBRackPairSuspect", EVAL, !sc.pairs.is_empty());
        for &(a, b, bad, all, share, probers) in &sc.pairs {
            for (s, t) in [(a, b), (b, a)] {
                let _ = write!(
                    out,
                    "          - exp_labels: {{severity: warning, source_rack: r{s}, target_rack: r{t}}}\n            exp_annotations:\n              summary: \"The path between racks r{s} and r{t} is slow or lossy while both racks are fine inside\"\n              description: \"{bad} of {all} cross probes between racks r{s} and r{t} (both directions, hosts not suspected) are bad ({share}), from {probers} probers, while 0% of rack r{s}'s and 0% of rack r{t}'s inside probes are. Held for {wait} ({CONFIRM_ROUNDS} probe intervals), over {w}.\"\n              runbook_url: \"{RUNBOOK}#ibrackpairsuspect\"\n",
                    w = rules::WINDOW,
                );
            }
        }
    }
    out
}

#[test]
fn the_promtool_test_file_is_what_the_scenarios_give() {
    same_as_generated(
        "deploy/prometheus/rules/tests/localize.test.yml",
        &test_file(),
    );
}

/// Hosts with a side, and rack pairs.
type Names = (BTreeSet<(usize, &'static str)>, BTreeSet<(usize, usize)>);

/// What the Rust localizer names on one scenario's probes: hosts with
/// the side the alert would say, and rack pairs (lower rack first).
fn rust_names(sc: &Scenario, with_hw: bool) -> Names {
    let topo = Topology {
        rack_of: (0..HOSTS).map(|h| rack(h) as u32).collect(),
        racks: RACKS as u32,
    };
    let mut pairs = Vec::new();
    for p in 0..HOSTS {
        for t in (0..HOSTS).filter(|&t| t != p) {
            let pr = (sc.probe)(p, t);
            let b = buckets(rack(p) == rack(t), pr);
            pairs.push(PairObs {
                prober: p as u32,
                target: t as u32,
                sent: PER_SCRAPE * 4,
                lost: pr.lost * 4,
                p50_us: (quantile(0.5, &b) * 1e6) as f32,
                p10_us: (quantile(0.1, &b) * 1e6) as f32,
                hw: sc.hw.filter(|_| with_hw).map(|hw| {
                    let moved = hw(p, t);
                    let part = |i: usize| {
                        let b = hw_buckets(i, rack(p) == rack(t), moved[i], PER_SCRAPE - pr.lost);
                        (quantile(0.5, &b) * 1e6) as f32
                    };
                    HwSplit {
                        prober_us: part(0),
                        responder_us: part(1),
                        network_us: part(2),
                    }
                }),
            });
        }
    }
    let round = Round {
        pairs,
        self_health_us: (0..HOSTS).map(|h| wakeup_us(sc, h) as f32).collect(),
        port_errors: (0..HOSTS)
            .map(|h| (port_errors_per_scrape(sc, h) * SCRAPES_PER_WINDOW) as f32)
            .collect(),
    };
    let mut loc = Localizer::new(topo);
    let mut named = Vec::new();
    for _ in 0..CONFIRM_ROUNDS {
        named = loc.push(&round);
    }
    let (mut hosts, mut racks) = (BTreeSet::new(), BTreeSet::new());
    for s in named {
        match (s.entity, s.kind) {
            (Entity::Host(h), k) => {
                let side = match k {
                    SuspectKind::Prober => "prober",
                    SuspectKind::Target | SuspectKind::Dead => "target",
                    _ => "both",
                };
                hosts.insert((h as usize, side));
            }
            (Entity::Racks(a, b), _) => {
                racks.insert((a as usize, b as usize));
            }
            (Entity::Pair(p, t), _) => panic!("{}: Rust names the path {p}->{t}", sc.name),
        }
    }
    (hosts, racks)
}

#[test]
fn the_rust_localizer_names_what_the_alerts_name() {
    // The quantiles the rules read from these buckets.
    let b = buckets(
        true,
        Probe {
            lat: Lat::Bimodal,
            lost: 0,
        },
    );
    assert!(
        (quantile(0.5, &b) - 5.8333e-6).abs() < 1e-9 && (quantile(0.1, &b) - 1.25e-6).abs() < 1e-12
    );
    for sc in scenarios() {
        let (hosts, racks) = rust_names(&sc, true);
        let want_hosts: BTreeSet<(usize, &str)> = sc.hosts.iter().map(|h| (h.0, h.1)).collect();
        let want_racks: BTreeSet<(usize, usize)> = sc.pairs.iter().map(|p| (p.0, p.1)).collect();
        assert_eq!(hosts, want_hosts, "{}: hosts", sc.name);
        assert_eq!(racks, want_racks, "{}: rack pairs", sc.name);
    }
}

#[test]
fn without_the_split_the_vote_misses_the_slow_responders() {
    // The same probes without their splits: four slow targets make every
    // prober's other probes 27% slow, above the peers' background bar, so
    // the vote exonerates no one and names no one. The alerts of that
    // scenario (above) name all four: the split is what finds them.
    let sc = scenarios()
        .into_iter()
        .find(|sc| sc.name.starts_with("four hosts slow as responders"))
        .expect("the scenario");
    assert_eq!(sc.hosts.len(), SLOW_RESPONDERS.len());
    let (hosts, racks) = rust_names(&sc, false);
    assert!(hosts.is_empty() && racks.is_empty(), "{hosts:?} {racks:?}");
}
