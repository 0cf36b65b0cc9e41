//! Runs the real binary with its built-in default (local probes) and
//! scrapes it over plain HTTP/1.0.

mod common;

use common::{get, sample, scrape_until, start};
use std::process::Command;

/// The default probes (shm, udp, wake-up) show up with every latency
/// family, the text passes promtool, and the landing page links.
#[test]
fn default_probes_are_served_and_lint_clean() {
    let server = start(&["--interval", "1s", "--count", "50", "--no-probe", "wakeup"]);
    let addr = server.addr.clone();
    let metrics = scrape_until(&addr, 30, "udp and shm window summaries", |m| {
        m.contains("ibprobe_latency_window_seconds{")
            && m.contains("transport=\"udp\"")
            && m.contains("transport=\"shm\"")
    });
    assert!(
        metrics.starts_with("HTTP/1.0 200") || metrics.starts_with("HTTP/1.1 200"),
        "{metrics}"
    );
    assert!(
        metrics
            .to_ascii_lowercase()
            .contains("content-type: text/plain; version=0.0.4"),
        "{metrics}"
    );
    let version = env!("CARGO_PKG_VERSION");
    assert!(
        metrics.contains(&format!(
            "ibexporter_build_info{{version=\"{version}\"}} 1\n"
        )),
        "{metrics}"
    );
    for family in [
        "# TYPE ibprobe_latency_seconds histogram",
        "# TYPE ibprobe_latency_window_seconds summary",
        "# TYPE ibprobe_latency_window_max_seconds gauge",
        "# TYPE ibprobe_probes_total counter",
        "# TYPE ibprobe_last_success_timestamp_seconds gauge",
        "# TYPE ibexporter_throttle_level gauge",
        "# TYPE ibexporter_probe_cpu_seconds_total counter",
    ] {
        assert!(metrics.contains(family), "{family} missing: {metrics}");
    }
    for q in ["0.5", "0.9", "0.99", "0.999"] {
        assert!(
            metrics.contains(&format!(
                "transport=\"shm\",op=\"send\",size_bytes=\"32\",quantile=\"{q}\"}}"
            )),
            "quantile {q}: {metrics}"
        );
    }
    assert!(
        metrics.contains("le=\"2.5e-7\""),
        "the 250 ns bucket: {metrics}"
    );
    let ok = sample(
        &metrics,
        "ibprobe_probes_total{",
        &["transport=\"shm\"", "result=\"ok\""],
    )
    .unwrap_or_else(|| panic!("no shm ok count: {metrics}"));
    assert!(ok >= 50.0, "one round of 50 shm probes answered: {ok}");
    let body = metrics.split("\r\n\r\n").nth(1).unwrap();
    ibtools_tests::prom::promtool_check_metrics(body).unwrap_or_else(|e| panic!("promtool: {e}"));

    let index = get(&addr, "/").unwrap();
    assert!(index.contains("href=\"/metrics\""), "{index}");
}

#[test]
fn bad_options_exit_2_with_one_line() {
    for (args, want) in [
        (&["--poll", "spin"][..], "--poll spin"),
        (&["--budget", "2"][..], "--budget 2"),
        (&["--sizes", "4"][..], "--sizes"),
        (&["--no-probe", "gpu"][..], "--no-probe gpu"),
    ] {
        let out = Command::new(env!("CARGO_BIN_EXE_ibexporter"))
            .args(args)
            .output()
            .unwrap();
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{args:?}: {err}");
        assert_eq!(err.lines().count(), 1, "{args:?}: {err}");
        assert!(err.contains(want), "{args:?}: {err}");
    }
}

#[test]
fn help_teaches() {
    let out = Command::new(env!("CARGO_BIN_EXE_ibexporter"))
        .arg("--help")
        .output()
        .unwrap();
    let help = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success());
    assert!(
        help.contains("--listen") && help.contains("Examples:"),
        "{help}"
    );
    assert!(help.contains("0.0.0.0:9427"), "{help}");
}

/// On a host without RDMA (this one, unless the tests run in the lab) the
/// exporter says so in one line at start and serves everything else.
#[test]
fn no_rdma_device_is_said_once_and_the_rest_is_served() {
    if std::path::Path::new("/sys/class/infiniband").exists() {
        // A host with RDMA devices: the lab tests cover it.
        let n = std::fs::read_dir("/sys/class/infiniband").map_or(0, |d| d.count());
        assert!(n > 0, "/sys/class/infiniband exists but is empty");
        ibtools_tests::skip(
            "no_rdma_device_is_said_once_and_the_rest_is_served",
            &format!("this host has {n} RDMA device(s); the test needs none (the lab covers hosts with one)"),
        );
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let log = dir.path().join("err.log");
    let port = common::free_port();
    let addr = format!("127.0.0.1:{port}");
    let mut child = Command::new(env!("CARGO_BIN_EXE_ibexporter"))
        .args([
            "--listen",
            &addr,
            "--responder",
            "off",
            "--interval",
            "1s",
            "--no-probe",
            "wakeup",
        ])
        .stderr(std::fs::File::create(&log).unwrap())
        .spawn()
        .unwrap();
    let m = scrape_until(&addr, 30, "the udp reference", |m| {
        m.contains("transport=\"udp\"")
    });
    let _ = child.kill();
    let _ = child.wait();
    let text = std::fs::read_to_string(&log).unwrap();
    let said: Vec<&str> = text
        .lines()
        .filter(|l| l.contains("no RDMA device"))
        .collect();
    assert_eq!(said.len(), 1, "said once: {text}");
    assert!(said[0].contains("shm/udp reference probes"), "{text}");
    // Advice a packaged exporter's operator can follow: no ibprobe flag,
    // no path of this repository.
    assert!(said[0].contains("rdma link add"), "{text}");
    assert!(
        !said[0].contains("--transport") && !said[0].contains("tests/lab"),
        "{text}"
    );
    assert!(
        !m.contains("ibexporter_hca_port_info"),
        "no HCA metrics without an HCA: {m}"
    );
}
