//! A real Prometheus (Debian's, with native histograms enabled) scrapes the
//! in-process server: once negotiated (it asks for protobuf) and once with
//! `?format=text`, and PromQL over what it stored gives the right answers.
//! With the shipped rules (`deploy/prometheus/rules/`) loaded, it scrapes a
//! real `ibexporter` probing a port nothing listens on and sees
//! IBPeerUnreachable go from pending to firing, the latency rules give one
//! percentile per probe from native and classic scrapes, and no rule fails.

mod common;

use common::rules::{all_rules, edited_copy};
use common::{free_port, observe_batch, test_registry, InProcess};
use ibexporter::http::{Metrics, ServeOptions};
use ibtools_tests::prom::{Prometheus, Target};
use prometheus_client::registry::Registry;
use serde_json::Value;
use std::collections::BTreeSet;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

const WAIT: Duration = Duration::from_secs(40);

fn start_server(reg: Registry) -> InProcess {
    InProcess::start(Metrics::new(reg), None, ServeOptions::default())
}

/// The single sample value of an instant-vector result.
fn scalar(result: &[Value], what: &str) -> f64 {
    assert_eq!(result.len(), 1, "{what}: {result:?}");
    let v = result[0]["value"][1]
        .as_str()
        .unwrap_or_else(|| panic!("{what}: no value in {result:?}"));
    v.parse()
        .unwrap_or_else(|e| panic!("{what}: {v:?} is not a number: {e}"))
}

#[test]
fn real_prometheus_scrapes_protobuf_native_and_classic() {
    let (reg, hist) = test_registry();
    let srv = start_server(reg);
    // Keep observing so rate() over the classic buckets is not zero.
    let running = Arc::new(AtomicBool::new(true));
    let observer = {
        let running = Arc::clone(&running);
        std::thread::spawn(move || {
            while running.load(Ordering::Relaxed) {
                observe_batch(&hist);
                std::thread::sleep(Duration::from_millis(50));
            }
        })
    };

    let addr = srv.addr.to_string();
    let prom = Prometheus::start(
        &[
            Target::new("ibexporter", &addr),
            Target::new("ibexporter-text", &addr).param("format", "text"),
        ],
        true,
    );
    eprintln!(
        "prometheus {:?} on {}, classic_with_native={}",
        prom.version, prom.address, prom.classic_with_native
    );

    for job in ["ibexporter", "ibexporter-text"] {
        let r = prom.wait_for(&format!("up{{job=\"{job}\"}} == 1"), WAIT);
        assert_eq!(scalar(&r, "up"), 1.0);
        let r = prom.wait_for(&format!("test_requests_total{{job=\"{job}\"}}"), WAIT);
        assert_eq!(scalar(&r, "counter"), 42.0, "{job}");
        let r = prom.wait_for(&format!("test_temperature_celsius{{job=\"{job}\"}}"), WAIT);
        assert_eq!(scalar(&r, "gauge"), 37.0, "{job}");
    }

    // The negotiated job was answered in protobuf: our own self metric
    // counted protobuf encodes, and the histogram arrived native.
    let r = prom.wait_for(
        "ibexporter_scrape_duration_seconds_count{job=\"ibexporter\",format=\"protobuf\"} > 0",
        WAIT,
    );
    assert!(scalar(&r, "protobuf encodes") >= 1.0);
    let r = prom.wait_for("test_rdma_latency_seconds{job=\"ibexporter\"}", WAIT);
    assert_eq!(r.len(), 1, "{r:?}");
    let native = &r[0]["histogram"];
    assert!(
        native.is_array(),
        "the negotiated job should hold a native histogram: {r:?}"
    );
    let count: f64 = native[1]["count"].as_str().unwrap().parse().unwrap();
    assert!(count >= 160.0, "native count {count}: {r:?}");

    // Native: histogram_quantile straight on the histogram.
    let r = prom.wait_for(
        "histogram_quantile(0.5, test_rdma_latency_seconds{job=\"ibexporter\"}) > 0",
        WAIT,
    );
    let q = scalar(&r, "native median");
    eprintln!("native median: {q}");
    assert!(
        (1.5e-6..=2.6e-6).contains(&q),
        "native median {q} should be near 2 µs (schema 3 buckets are ~9% wide)"
    );

    // Classic: histogram_quantile over rate() of the _bucket series.
    let classic = |job: &str| {
        let r = prom.wait_for(
            &format!(
                "histogram_quantile(0.5, rate(test_rdma_latency_seconds_bucket{{job=\"{job}\"}}[10s])) > 0"
            ),
            WAIT,
        );
        scalar(&r, "classic median")
    };
    let q = classic("ibexporter-text");
    eprintln!("classic median (text job): {q}");
    assert!(
        q > 1e-6 && q <= 2.5e-6,
        "classic median {q} should fall in the (1 µs, 2.5 µs] bucket"
    );
    if prom.classic_with_native {
        // 2.45+: scrape_classic_histograms keeps both from one protobuf scrape.
        let q = classic("ibexporter");
        assert!(q > 1e-6 && q <= 2.5e-6, "classic median {q} (protobuf job)");
    } else {
        // 2.42-2.44: a histogram with native buckets is stored only as native.
        let r = prom.query("count(test_rdma_latency_seconds_bucket{job=\"ibexporter\"})");
        assert_eq!(
            r["data"]["result"],
            Value::Array(vec![]),
            "Prometheus {:?} was expected to drop classic buckets of native histograms: {r}",
            prom.version
        );
    }

    running.store(false, Ordering::Relaxed);
    observer.join().unwrap();
    drop(prom);
    drop(srv);
}

#[test]
fn shipped_rules_load_and_an_alert_goes_pending_then_firing_against_a_real_exporter() {
    // A target whose port nothing listens on: every round fails (`connect`);
    // and the shm and udp loopback probes, which answer.
    let closed = format!("127.0.0.1:{}", free_port());
    let exporter = common::start(&[
        "--no-probe",
        "hca,wakeup",
        "--interval",
        "1s",
        "--target",
        &closed,
        "--target-transport",
        "udp",
    ]);
    // The shipped rules, with IBPeerUnreachable's `for: 2m` cut to 10 s.
    let dir = tempfile::tempdir().unwrap();
    let (rules, _) = edited_copy(dir.path(), |name, rule| {
        if name == "IBPeerUnreachable" {
            rule.insert("for".into(), "10s".into());
        }
    });
    let start = Instant::now();
    // Scraped as deploy/prometheus/prometheus.yml does on Prometheus 2.42:
    // negotiated (protobuf: native histograms only) and as OpenMetrics
    // (classic buckets) in a second job.
    let prom = Prometheus::start_with_rules(
        &[
            Target::new("ibexporter", &exporter.addr),
            Target::new("ibexporter-classic", &exporter.addr).param("format", "openmetrics"),
        ],
        true,
        &rules,
    );

    // Every shipped rule loaded, and healthy.
    let loaded = prom.api("/api/v1/rules");
    let groups = loaded["data"]["groups"]
        .as_array()
        .cloned()
        .unwrap_or_default();
    let rules_loaded: Vec<&Value> = groups
        .iter()
        .flat_map(|g| g["rules"].as_array().into_iter().flatten())
        .collect();
    assert_eq!(rules_loaded.len(), all_rules().len(), "{loaded}");

    let alert = |state: &str| {
        format!(r#"ALERTS{{alertname="IBPeerUnreachable",target="{closed}",alertstate="{state}"}}"#)
    };
    prom.wait_for(&alert("pending"), WAIT);
    let pending_after = start.elapsed();
    assert!(
        prom.query(&alert("firing"))["data"]["result"]
            .as_array()
            .is_some_and(|r| r.is_empty()),
        "firing before its 10 s `for:` ran out"
    );
    prom.wait_for(&alert("firing"), WAIT);
    let firing_after = start.elapsed();
    eprintln!(
        "IBPeerUnreachable pending after {:.1} s, firing after {:.1} s",
        pending_after.as_secs_f64(),
        firing_after.as_secs_f64()
    );
    assert!(firing_after - pending_after >= Duration::from_secs(8));

    // The firing alert as Alertmanager would get it: labels and rendered
    // annotations.
    let alerts = prom.api("/api/v1/alerts");
    let a = alerts["data"]["alerts"]
        .as_array()
        .into_iter()
        .flatten()
        .find(|a| a["labels"]["alertname"] == "IBPeerUnreachable" && a["state"] == "firing")
        .unwrap_or_else(|| panic!("no firing IBPeerUnreachable in {alerts}"));
    assert_eq!(a["labels"]["severity"], "critical", "{a}");
    assert_eq!(a["labels"]["transport"], "udp", "{a}");
    let summary = a["annotations"]["summary"].as_str().unwrap_or_default();
    assert!(
        summary.starts_with(&format!("{closed} does not answer probes from ")),
        "{a}"
    );
    assert!(
        a["annotations"]["runbook_url"]
            .as_str()
            .is_some_and(|u| u.ends_with("RUNBOOK.md#ibpeerunreachable")),
        "{a}"
    );
    // The latency percentiles of the loopback probes: from the native
    // histogram of one job and the classic buckets of the other, one
    // series per probe (the native one), not one per job.
    let p99 = prom.wait_for(
        r#"target_size:ibprobe_latency_seconds:p99_5m{target="loopback"} > 0"#,
        WAIT,
    );
    let transports: BTreeSet<&str> = p99
        .iter()
        .map(|r| r["metric"]["transport"].as_str().unwrap_or("?"))
        .collect();
    assert_eq!(p99.len(), 2, "one p99 per loopback probe: {p99:?}");
    assert_eq!(transports, BTreeSet::from(["shm", "udp"]), "{p99:?}");
    for r in &p99 {
        let v: f64 = r["value"][1].as_str().unwrap().parse().unwrap();
        assert!(v > 0.0 && v < 0.1, "p99 {v} s: {r}");
    }
    // Each half of the rule finds its histograms in this setup; so does
    // the localizer's 10th percentile (ibexporter-localize.rules.yml) over
    // its 1 m window.
    for half in [
        "histogram_quantile(0.99, sum by (target) (rate(ibprobe_latency_seconds{target=\"loopback\"}[5m])))",
        "histogram_quantile(0.99, sum by (target, le) (rate(ibprobe_latency_seconds_bucket{target=\"loopback\"}[5m])))",
        "histogram_quantile(0.1, sum by (target) (rate(ibprobe_latency_seconds{target=\"loopback\"}[1m])))",
        "histogram_quantile(0.1, sum by (target, le) (rate(ibprobe_latency_seconds_bucket{target=\"loopback\"}[1m])))",
    ] {
        prom.wait_for(&format!("{half} > 0"), WAIT);
    }
    let lost = prom.wait_for(
        r#"target_size:ibprobe_probes_lost:ratio_5m{target="loopback"}"#,
        WAIT,
    );
    assert!(lost.iter().all(|r| r["value"][1] == "0"), "{lost:?}");

    // Every rule evaluated without an error (a duplicate series, a bad
    // join) in a real Prometheus.
    let loaded = prom.api("/api/v1/rules");
    for g in loaded["data"]["groups"].as_array().into_iter().flatten() {
        for r in g["rules"].as_array().into_iter().flatten() {
            assert_ne!(r["health"], "err", "rule {} failed: {r}", r["name"]);
        }
    }

    // A scraped, healthy exporter: IBExporterDown stays quiet.
    let down = prom.query(r#"ALERTS{alertname="IBExporterDown"}"#);
    assert_eq!(down["data"]["result"], Value::Array(vec![]), "{down}");
    drop(prom);
    drop(exporter);
}
