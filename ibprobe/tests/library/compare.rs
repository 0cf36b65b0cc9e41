//! `report::compare`.

use ibprobe::report::compare::*;
use ibprobe::report::format::{render, Format};

fn round(p50: f64, p99: f64) -> RoundValues {
    [Some(p50), Some(p99), Some(p99 * 1.5), Some(p99 * 3.0), None]
}

#[test]
fn a_slower_variant_is_called_slower_in_every_format() {
    let base: Vec<RoundValues> = (0..8)
        .map(|i| round(1000.0 + i as f64, 2000.0 + i as f64))
        .collect();
    let udp: Vec<RoundValues> = (0..8)
        .map(|i| round(9000.0 + i as f64 * 7.0, 20000.0 - i as f64))
        .collect();
    let order: Vec<Vec<usize>> = ibstats::schedule(2, 8, 1);
    let r = CompareReport::new(
        vec!["loopback".into()],
        "transport".into(),
        1,
        order,
        &["shm".into(), "udp".into()],
        &[base, udp],
    );
    let j: serde_json::Value = serde_json::from_str(&render(&r, Format::Json).unwrap()).unwrap();
    assert_eq!(j["schema"], "ibprobe.compare/1");
    let v1 = &j["variants"][1];
    assert_eq!(v1["value"], "udp");
    assert_eq!(v1["effects"]["p50"]["verdict"], "slower");
    assert_eq!(v1["effects"]["p99"]["verdict"], "slower");
    assert!(v1["effects"]["p99"]["ci"][0].as_f64().unwrap() > 1.0);
    assert!(v1["effects"].get("msgs_per_sec").is_none());
    assert!(j["variants"][0]["effects"].as_object().unwrap().is_empty());
    let t = render(&r, Format::Table).unwrap();
    assert!(
        t.contains("udp") && t.contains("slower") && t.contains("shm (baseline)"),
        "{t}"
    );
    assert!(!t.contains("msgs_per_sec"), "{t}");
    let md = render(&r, Format::Markdown).unwrap();
    assert!(
        md.contains("| --transport | p50 | p99 | p999 | max |"),
        "{md}"
    );
    assert!(r.warnings.is_empty());
}

#[test]
fn too_few_rounds_for_holm_are_warned_about() {
    let v: Vec<RoundValues> = (0..6).map(|i| round(1000.0 + i as f64, 2000.0)).collect();
    let r = CompareReport::new(
        vec!["loopback".into()],
        "size".into(),
        1,
        ibstats::schedule(3, 6, 1),
        &["32".into(), "64".into(), "128".into()],
        &[v.clone(), v.clone(), v],
    );
    assert_eq!(r.warnings.len(), 1, "{:?}", r.warnings);
    assert!(r.warnings[0].contains("use --rounds 7"), "{:?}", r.warnings);
}

/// A median at the clock's step: shm at 10 ns (one step) against 2980 ns.
fn at_step() -> CompareReport {
    let base: Vec<RoundValues> = (0..8).map(|_| round(10.0, 5000.0)).collect();
    let slow: Vec<RoundValues> = (0..8).map(|i| round(2980.0 + i as f64, 9000.0)).collect();
    CompareReport::new(
        vec!["loopback".into()],
        "transport".into(),
        1,
        ibstats::schedule(2, 8, 1),
        &["shm".into(), "udp".into()],
        &[base, slow],
    )
}

#[test]
fn a_ratio_against_a_value_at_the_clock_resolution_is_not_printed() {
    // Reports without a resolution: nothing changes (x298 stays).
    let mut old = at_step();
    old.mark_clock_resolution(&[None, None]);
    let t = render(&old, Format::Table).unwrap();
    assert!(t.contains("x298") && !t.contains("clock resolution"), "{t}");

    // 10 ns resolution: shm's p50 is one step, so udp's p50 effect is
    // marked; p99 (5000 ns) is far from it and keeps its ratio.
    let mut r = at_step();
    r.mark_clock_resolution(&[Some(10.0), Some(10.0)]);
    let t = render(&r, Format::Table).unwrap();
    assert!(!t.contains("x298"), "{t}");
    assert!(t.contains("0.01 us at clock resolution"), "{t}");
    assert!(t.contains("2.98 us (baseline at clock resolution)"), "{t}");
    assert!(t.contains("x1.80"), "p99 keeps its ratio: {t}");
    assert!(
        t.contains("warning: shm: p50 0.01 us within 10 steps of the clock's 0.010 us resolution"),
        "{t}"
    );
    let j: serde_json::Value = serde_json::from_str(&render(&r, Format::Json).unwrap()).unwrap();
    assert_eq!(j["variants"][0]["at_clock_resolution"][0], "p50");
    assert_eq!(j["variants"][0]["clock_resolution_ns"], 10.0);
    assert_eq!(
        j["variants"][1]["effects"]["p50"]["at_clock_resolution"],
        true
    );
    assert!(j["variants"][1]["effects"]["p99"]
        .get("at_clock_resolution")
        .is_none());

    // A coarse clock (1 us steps): the p99s too; then no "+-N%" line
    // claims what the run could tell.
    let mut c = at_step();
    c.mark_clock_resolution(&[Some(1000.0), Some(1000.0)]);
    let t = render(&c, Format::Table).unwrap();
    assert!(!t.contains("could tell p99"), "{t}");
}

#[test]
fn resolution_is_read_from_both_schemas() {
    let run = serde_json::json!({"schema": "ibprobe.report/1", "clock": {"resolution_ns": 12.5}});
    let stream = serde_json::json!({"schema": "ibprobe.stream/1", "clock_resolution_ns": 20.0});
    let old = serde_json::json!({"schema": "ibprobe.report/1", "clock": {"kind": "tsc"}});
    assert_eq!(round_resolution(&run), Some(12.5));
    assert_eq!(round_resolution(&stream), Some(20.0));
    assert_eq!(round_resolution(&old), None);
    assert_eq!(coarser(Some(3.0), Some(5.0)), Some(5.0));
    assert_eq!(coarser(None, Some(5.0)), Some(5.0));
    assert_eq!(coarser(None, None), None);
}
