//! `--fail-if` (issue 19): pass/fail thresholds on loopback, client and
//! stream; exit 1 when one holds, the violated ones listed in every
//! output format, bad expressions one line with exit 2.
//!
//! The thresholds are set far on either side of anything this machine
//! measures (1 ns, 10 s, 1 G msg/s), so each verdict is certain whatever
//! the load: the test checks the mechanics, not a speed.

mod common;

use common::{ibprobe, one_line_exit_2, Server};
use serde_json::Value;

fn json(out: &str) -> Value {
    serde_json::from_str(out).unwrap_or_else(|e| panic!("{e}: {out}"))
}

#[test]
fn loopback_exits_1_when_a_threshold_holds_and_0_when_none_does() {
    let base = ["loopback", "-t", "shm", "-n", "3000", "--no-mlock"];
    // The examples, as written: none holds on shm (p99 far below
    // 20 us unless this machine is badly overloaded; lost is 0 on shm).
    let (code, out, err) = ibprobe(
        &[
            &base[..],
            &["--fail-if", "p999>100ms", "--fail-if", "lost>0", "--json"],
        ]
        .concat(),
    );
    assert_eq!(code, 0, "{err}");
    let v = json(&out);
    assert_eq!(v["fail_if"]["failed"], false, "{v}");
    assert_eq!(v["fail_if"]["violated"].as_array().unwrap().len(), 0);
    assert_eq!(v["fail_if"]["thresholds"][1]["metric"], "lost");
    assert_eq!(v["fail_if"]["thresholds"][1]["measured"], 0.0);
    // One holds: exit 1, the report is still printed, the verdict names it.
    let (code, out, err) =
        ibprobe(&[&base[..], &["--fail-if", "p99>1ns", "--fail-if", "p50>10s"]].concat());
    assert_eq!(code, 1, "{err}");
    assert!(out.contains("latency [us]"), "the table is printed: {out}");
    assert!(
        out.contains("fail-if p99>1ns: p99 = ") && out.contains("FAILED"),
        "{out}"
    );
    assert!(
        out.contains("fail-if p50>10s: ") && out.contains(": ok"),
        "{out}"
    );
    assert!(
        out.contains("fail-if: FAILED (1 of 2 thresholds hold: p99>1ns), exit 1"),
        "{out}"
    );
    // Without --fail-if nothing changes: no key, no column.
    let (code, out, _) = ibprobe(&[&base[..], &["--json"]].concat());
    assert_eq!(code, 0);
    assert!(json(&out).get("fail_if").is_none());
}

#[test]
fn every_format_lists_the_violated_thresholds() {
    let base = [
        "loopback",
        "-t",
        "shm",
        "-n",
        "2000",
        "--no-mlock",
        "--fail-if",
        "p99>1ns",
        "--fail-if",
        "max>10s",
    ];
    let run = |format: &str| {
        let (code, out, err) = ibprobe(&[&base[..], &["--format", format]].concat());
        assert_eq!(code, 1, "{format}: {err}");
        out
    };
    let v = json(&run("json"));
    assert_eq!(v["fail_if"]["violated"], serde_json::json!(["p99>1ns"]));
    assert_eq!(v["fail_if"]["thresholds"][0]["holds"], true);
    assert_eq!(v["fail_if"]["thresholds"][0]["unit"], "ns");
    assert!(v["fail_if"]["thresholds"][0]["measured"].as_f64().unwrap() > 1.0);
    let csv = run("csv");
    let mut lines = csv.lines();
    assert!(
        lines.next().unwrap().ends_with(",fail_if_violated"),
        "{csv}"
    );
    for row in lines {
        assert!(row.ends_with(",p99>1ns"), "every row carries it: {csv}");
    }
    let md = run("markdown");
    assert!(md.contains("- fail-if p99>1ns:"), "{md}");
    assert!(md.contains("- fail-if: FAILED"), "{md}");
    let pt = run("perftest");
    assert!(pt.contains("fail-if: FAILED (1 of 2"), "{pt}");
}

#[test]
fn stream_thresholds_read_rate_latency_and_losses() {
    let base = ["stream", "-t", "shm", "-n", "20000", "--no-mlock"];
    let (code, out, err) = ibprobe(
        &[
            &base[..],
            &[
                "--fail-if",
                "msgs_per_sec<1G",
                "--fail-if",
                "lost>0",
                "--json",
            ],
        ]
        .concat(),
    );
    assert_eq!(code, 1, "{err}");
    let v = json(&out);
    assert_eq!(
        v["fail_if"]["violated"],
        serde_json::json!(["msgs_per_sec<1G"])
    );
    let measured = v["fail_if"]["thresholds"][0]["measured"].as_f64().unwrap();
    assert_eq!(measured, v["msgs_per_sec"].as_f64().unwrap());
    // The stream example, and a latency one: neither holds.
    let (code, out, err) = ibprobe(
        &[
            &base[..],
            &["--fail-if", "msgs_per_sec<1", "--fail-if", "p99.99>10s"],
        ]
        .concat(),
    );
    assert_eq!(code, 0, "{err}");
    assert!(
        out.contains("fail-if: passed (2 thresholds, none holds)"),
        "{out}"
    );
    let (code, out, _) =
        ibprobe(&[&base[..], &["--fail-if", "p50>1ns", "--format", "csv"]].concat());
    assert_eq!(code, 1);
    assert!(out.lines().nth(1).unwrap().ends_with(",p50>1ns"), "{out}");
}

#[test]
fn client_against_a_server_exits_4_too() {
    let server = Server::start("udp", &[]);
    let (code, out, err) = ibprobe(&[
        "client",
        &server.addr,
        "-t",
        "udp",
        "-n",
        "500",
        "--fail-if",
        "p50>1ns",
        "--fail-if",
        "lost>0",
        "--json",
    ]);
    assert_eq!(code, 1, "{err}");
    let v = json(&out);
    // p50 reads the first distribution: the round trip.
    assert_eq!(v["distributions"][0]["name"], "rtt");
    assert_eq!(
        v["fail_if"]["thresholds"][0]["measured"].as_f64().unwrap(),
        v["distributions"][0]["p50_ns"].as_f64().unwrap()
    );
    assert_eq!(v["fail_if"]["violated"], serde_json::json!(["p50>1ns"]));
}

#[test]
fn bad_thresholds_are_one_line_exit_2() {
    for (expr, parts) in [
        ("p99", &["no comparison", "p99>20us"][..]),
        ("p98>20us", &["unknown metric \"p98\"", "p999"][..]),
        ("p99>20", &["no unit", "20us"][..]),
        ("lost>-1", &["not a count"][..]),
    ] {
        let (code, out, err) = ibprobe(&["loopback", "-t", "shm", "-n", "10", "--fail-if", expr]);
        one_line_exit_2(code, &out, &err, parts);
    }
    // A stream metric on a latency run is refused before anything runs.
    let (code, out, err) = ibprobe(&[
        "loopback",
        "-t",
        "shm",
        "-n",
        "10",
        "--fail-if",
        "msgs_per_sec<1M",
    ]);
    one_line_exit_2(code, &out, &err, &["msgs_per_sec", "ibprobe stream"]);
}
