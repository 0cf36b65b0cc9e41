//! Exporters as a mesh on one host over UDP: each probes the other's
//! responder; a peer killed mid-run costs timeouts, counted, while the
//! survivor keeps probing and serving; `ibprobe client` can probe a
//! responder too. Faults: a slow peer (it accepts and never answers) costs
//! a timeout per round, counted, while the other target and the scrape go
//! on; a malformed pinglist keeps the exporter serving and is counted; a
//! malformed config is one line and exit 2.

mod common;

use common::{free_port, get, sample, scrape_until, start};
use std::process::Command;
use std::time::{Duration, Instant};

/// Fast udp probing of remote targets only: a round a second, 20 probes.
const FAST_UDP: [&str; 8] = [
    "--interval",
    "1s",
    "--count",
    "20",
    "--no-probe",
    "hca,shm,udp,wakeup",
    "--target-transport",
    "udp",
];

fn responder_args(port: u16) -> String {
    format!("127.0.0.1:{port}")
}

/// Whether `m` has a window summary of `src` probing `dst` over udp.
fn seen(m: &str, src: &str, dst: &str) -> bool {
    m.lines().any(|l| {
        l.starts_with("ibprobe_latency_window_seconds_count{")
            && l.contains(&format!(
                "source=\"{src}\",target=\"{dst}\",transport=\"udp\""
            ))
    })
}

#[test]
fn two_exporters_probe_each_other_and_survive_a_dead_peer() {
    let (pa, pb) = (free_port(), free_port());
    let (ra, rb) = (responder_args(pa), responder_args(pb));
    let mut a_args = vec!["--source", "a", "--responder", &ra, "--target", &rb];
    a_args.extend(FAST_UDP);
    let mut b_args = vec!["--source", "b", "--responder", &rb, "--target", &ra];
    b_args.extend(FAST_UDP);
    let a = start(&a_args);
    let mut b = start(&b_args);
    let ma = scrape_until(&a.addr, 30, "a -> b round trips", |m| seen(m, "a", &rb));
    scrape_until(&b.addr, 30, "b -> a round trips", |m| seen(m, "b", &ra));
    let sessions = sample(
        &ma,
        "ibexporter_responder_sessions_total{",
        &["result=\"ok\""],
    );
    assert!(
        sessions.unwrap_or(0.0) >= 1.0,
        "a answered b's probes: {ma}"
    );
    assert_eq!(
        sample(&ma, "ibexporter_targets{", &["origin=\"static\""]),
        Some(1.0),
        "{ma}"
    );

    // Kill b: a's next rounds fail (connect refused or timeouts), counted
    // as errors, and a keeps serving and probing.
    let _ = b.child.kill();
    let _ = b.child.wait();
    let t0 = Instant::now();
    let m = scrape_until(&a.addr, 30, "errors counted for the dead peer", |m| {
        sample(
            m,
            "ibprobe_probes_total{",
            &[&format!("target=\"{rb}\""), "result=\"error\""],
        )
        .unwrap_or(0.0)
            >= 1.0
    });
    assert!(t0.elapsed() < Duration::from_secs(30));
    assert!(
        m.contains(&format!(
            "ibprobe_probe_errors_total{{source=\"a\",target=\"{rb}\",transport=\"udp\",reason="
        )),
        "the reason is exported: {m}"
    );
    let before = sample(&m, "ibexporter_probe_rounds_total", &[]).unwrap();
    scrape_until(&a.addr, 20, "rounds going on after the peer died", |m| {
        sample(m, "ibexporter_probe_rounds_total", &[]).unwrap_or(0.0) > before
    });
    assert!(get(&a.addr, "/healthz").unwrap().contains("200"));
}

/// A peer that accepts the session's TCP connection and then never says
/// a word: each round with it ends in one timeout, counted as an error
/// with a reason, and the healthy target next to it keeps being probed
/// round after round, while every scrape is answered.
#[test]
fn a_slow_peer_costs_a_timeout_and_blocks_nothing() {
    let silent = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let slow = silent.local_addr().unwrap().to_string();
    // Accepts and holds every connection, writing nothing (until the test ends).
    std::thread::spawn(move || {
        let mut held = Vec::new();
        for c in silent.incoming().flatten() {
            held.push(c);
        }
    });
    let pb = free_port();
    let rb = responder_args(pb);
    let _b = start(&[
        "--source",
        "b",
        "--responder",
        &rb,
        "--no-probe",
        "hca,shm,udp,wakeup",
    ]);
    let mut a_args = vec!["--source", "a", "--target", &rb, "--target", &slow];
    a_args.extend(FAST_UDP);
    let a = start(&a_args);
    let ok = |m: &str| {
        sample(
            m,
            "ibprobe_probes_total{",
            &[&format!("target=\"{rb}\""), "result=\"ok\""],
        )
        .unwrap_or(0.0)
    };
    let failed = |m: &str| {
        sample(
            m,
            "ibprobe_probes_total{",
            &[&format!("target=\"{slow}\""), "result=\"error\""],
        )
        .unwrap_or(0.0)
            + sample(
                m,
                "ibprobe_probes_total{",
                &[&format!("target=\"{slow}\""), "result=\"timeout\""],
            )
            .unwrap_or(0.0)
    };
    let m = scrape_until(&a.addr, 30, "the slow peer's first failed round", |m| {
        failed(m) >= 1.0 && ok(m) > 0.0
    });
    assert!(
        m.contains(&format!(
            "ibprobe_probe_errors_total{{source=\"a\",target=\"{slow}\",transport=\"udp\",reason="
        )),
        "the slow peer's failure has a reason: {m}"
    );
    // Two more failed rounds with the slow peer (one error each, whatever
    // its reason), and the healthy target's answers keep growing meanwhile:
    // it is not stuck behind the slow one.
    let rounds_failed = |m: &str| -> f64 {
        m.lines()
            .filter(|l| {
                l.starts_with("ibprobe_probe_errors_total{")
                    && l.contains(&format!("target=\"{slow}\""))
            })
            .filter_map(|l| l.rsplit(' ').next()?.parse::<f64>().ok())
            .sum()
    };
    let (ok0, rounds0) = (ok(&m), rounds_failed(&m));
    assert!(rounds0 >= 1.0, "{m}");
    let m = scrape_until(&a.addr, 30, "more rounds of both targets", |m| {
        rounds_failed(m) >= rounds0 + 2.0 && ok(m) >= ok0 + 40.0
    });
    assert!(get(&a.addr, "/healthz").unwrap().contains("200"), "{m}");
}

#[test]
fn ibprobe_client_can_probe_a_responder() {
    let port = free_port();
    let r = responder_args(port);
    let _a = start(&["--responder", &r, "--no-probe", "hca,shm,udp,wakeup"]);
    let out = Command::new(common::ibprobe())
        .args([
            "client",
            &r,
            "--transport",
            "udp",
            "--count",
            "200",
            "--json",
        ])
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{err}");
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let rtt = v["distributions"]
        .as_array()
        .unwrap()
        .iter()
        .find(|d| d["name"] == "rtt")
        .unwrap();
    assert_eq!(
        rtt["count"].as_u64().unwrap() + v["run"]["lost"].as_u64().unwrap(),
        200
    );
}

#[test]
fn a_malformed_pinglist_is_counted_and_serving_goes_on() {
    let dir = tempfile::tempdir().unwrap();
    let list = dir.path().join("pinglist.json");
    std::fs::write(&list, "[{\"targets\": [\"127.0.0.1:1\"],}").unwrap();
    let cfg = dir.path().join("ibexporter.toml");
    std::fs::write(
        &cfg,
        format!(
            "[local]\nhca_loopback = false\nreference = []\nhost_wakeup = false\n\n[responder]\nenabled = false\n\n[[targets.file_sd]]\npath = {:?}\nrefresh = \"1s\"\n",
            list.display().to_string()
        ),
    )
    .unwrap();
    let a = start(&["--config", cfg.to_str().unwrap(), "--responder", "off"]);
    let m = scrape_until(&a.addr, 20, "the pinglist error counted", |m| {
        sample(
            m,
            "ibexporter_target_source_errors_total{",
            &["origin=\"file_sd\""],
        )
        .unwrap_or(0.0)
            >= 1.0
    });
    assert_eq!(
        sample(&m, "ibexporter_targets{", &["origin=\"file_sd\""]),
        Some(0.0),
        "{m}"
    );
    // Fix the file: the next refresh picks the target up.
    std::fs::write(
        &list,
        "[{\"targets\": [\"127.0.0.1:1\"], \"labels\": {\"rack\": \"r1\"}}]",
    )
    .unwrap();
    scrape_until(&a.addr, 20, "the fixed pinglist", |m| {
        sample(m, "ibexporter_targets{", &["origin=\"file_sd\""]) == Some(1.0)
    });
}

#[test]
fn a_malformed_config_is_one_line_and_exit_2() {
    let dir = tempfile::tempdir().unwrap();
    let cfg = dir.path().join("bad.toml");
    std::fs::write(&cfg, "[probe]\npoll = \"evnt\"\n").unwrap();
    for flag in ["--check-config", "--config"] {
        let out = Command::new(env!("CARGO_BIN_EXE_ibexporter"))
            .args([flag, cfg.to_str().unwrap()])
            .output()
            .unwrap();
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{flag}: {err}");
        assert_eq!(err.lines().count(), 1, "{flag}: {err}");
        assert!(
            err.contains("bad.toml:2:") && err.contains("evnt"),
            "{flag}: {err}"
        );
    }
    let good = Command::new(env!("CARGO_BIN_EXE_ibexporter"))
        .args([
            "--check-config",
            concat!(env!("CARGO_MANIFEST_DIR"), "/examples/ibexporter.toml"),
        ])
        .output()
        .unwrap();
    assert!(
        good.status.success(),
        "{}",
        String::from_utf8_lossy(&good.stderr)
    );
}
