//! The topology of a large mesh, for real: a Prometheus scraping a real
//! ibexporter (probing a second exporter's responder) ships its samples
//! with the shipped `remote_write` stanza
//! (`deploy/victoriametrics/prometheus.yml`) into Debian's VictoriaMetrics,
//! and vmalert evaluates the shipped recording rules there. Also: the
//! series one remote target costs an exporter, counted on its `/metrics`,
//! are the figure `ibexporter mesh` sizes a fleet with
//! (`targets::cardinality::SERIES_PER_VALUE_SIZE`).

mod common;

use common::{free_port, scrape_until, start};
use ibexporter::targets::cardinality::{SERIES_PER_VALUE, SERIES_PER_VALUE_SIZE};
use ibtools_tests::prom::{promtool_check_config, Prometheus, Target};
use ibtools_tests::victoria::{VictoriaMetrics, VmAlert};
use std::path::PathBuf;
use std::time::{Duration, Instant};

fn repo(p: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("..").join(p)
}

const SHIPPED: &str = "deploy/victoriametrics/prometheus.yml";
const STORE: &str = "http://victoria-metrics.example.org:8428/api/v1/write";

/// The shipped `remote_write:` section (the file's last), sending to
/// `url`, its batches sent after 1 s instead of 5 (the test waits less).
fn shipped_remote_write(url: &str) -> String {
    let text = std::fs::read_to_string(repo(SHIPPED)).unwrap();
    let at = text
        .find("\nremote_write:\n")
        .expect("a top-level remote_write section");
    let stanza = &text[at + 1..];
    assert!(stanza.contains(STORE), "{stanza}");
    assert!(stanza.contains("batch_send_deadline: 5s"), "{stanza}");
    stanza
        .replace(STORE, url)
        .replace("batch_send_deadline: 5s", "batch_send_deadline: 1s")
}

#[test]
fn the_shipped_remote_write_config_loads_in_debians_prometheus() {
    let dir = tempfile::tempdir().unwrap();
    let text = std::fs::read_to_string(repo(SHIPPED)).unwrap().replace(
        "/etc/ibexporter/pinglist.json",
        repo("deploy/prometheus/pinglist.json").to_str().unwrap(),
    );
    let p = dir.path().join("prometheus.yml");
    std::fs::write(&p, text).unwrap();
    promtool_check_config(&p).unwrap();
}

/// Sample lines of `body` that belong to the series of target value `t`,
/// leaving out the families only a CPU PMU or a readable MSR gives.
fn series_of(body: &str, t: &str) -> Vec<String> {
    let label = format!("target=\"{t}\"");
    body.lines()
        .filter(|l| !l.starts_with('#') && l.contains(&label))
        .filter(|l| {
            !["cycles", "instructions", "cache_misses", "smis"]
                .iter()
                .any(|c| l.starts_with(&format!("ibprobe_probe_{c}_total")))
        })
        .map(str::to_string)
        .collect()
}

#[test]
fn series_arrive_in_victoriametrics_and_the_shipped_rules_evaluate_there() {
    let t0 = Instant::now();
    let store = VictoriaMetrics::start();
    let rules = [
        repo("deploy/prometheus/rules/ibexporter-recording.rules.yml"),
        repo("deploy/prometheus/rules/ibexporter-plan.rules.yml"),
        repo("deploy/prometheus/rules/ibexporter-localize.rules.yml"),
    ];
    // The localizer's file has alerts: vmalert wants somewhere to send
    // them; none fires here (one exporter, no mesh).
    let vmalert = VmAlert::start(&store, &rules, &["-notifier.url=http://127.0.0.1:9/"]);
    // A responder-only exporter, and one that probes it over udp.
    let port = free_port();
    let peer = format!("127.0.0.1:{port}");
    let _b = start(&["--responder", &peer, "--no-probe", "hca,shm,udp,wakeup"]);
    let a = start(&[
        "--interval",
        "1s",
        "--count",
        "20",
        "--no-probe",
        "hca,wakeup",
        "--target",
        &peer,
        "--target-transport",
        "udp",
    ]);
    let body = scrape_until(&a.addr, 30, "a probed round of the peer", |m| {
        let s = series_of(m, &peer);
        s.iter()
            .any(|l| l.starts_with("ibprobe_probe_context_switches_total{"))
            && s.iter().any(|l| l.starts_with("ibprobe_probes_total{"))
    });
    // The fleet's sizing counts this: every series of one remote target
    // of one size, and its peer-rack gauge.
    let one = series_of(&body, &peer);
    assert_eq!(
        one.len(),
        SERIES_PER_VALUE_SIZE + SERIES_PER_VALUE,
        "series of one remote target:\n{}",
        one.join("\n")
    );

    let t_prom = Instant::now();
    let prom = Prometheus::start_with(
        &[Target::new("ibexporter", &a.addr)],
        false,
        &[],
        &shipped_remote_write(&store.write_url()),
    );
    let why_not = || {
        format!(
            "prometheus targets: {}\nprometheus log:\n{}\nvmalert log:\n{}",
            prom.targets_summary(),
            prom.log_tail(),
            vmalert.log_tail()
        )
    };
    let within = Duration::from_secs(60);
    // The exporter's series arrive, labelled by the scraping job.
    let sel = format!("{{job=\"ibexporter\",target=\"{peer}\"}}");
    store.wait_for(&format!("ibprobe_probes_total{sel}"), within, why_not);
    let count = |q: &str| {
        store
            .query(q)
            .first()
            .and_then(|r| r["value"][1].as_str()?.parse::<f64>().ok())
            .unwrap_or(0.0)
    };
    let deadline = Instant::now() + within;
    while count(&format!("count({sel})")) < (SERIES_PER_VALUE_SIZE - 6) as f64 {
        assert!(Instant::now() < deadline, "{}", why_not());
        std::thread::sleep(Duration::from_millis(250));
    }
    // A shipped recording rule, evaluated by vmalert in the store from the
    // remote-written classic buckets: the udp peer's p99 over 5 m.
    let p99 = store.wait_for(
        &format!(
            "target_size:ibprobe_latency_seconds:p99_5m{{target=\"{peer}\",transport=\"udp\"}}"
        ),
        within,
        why_not,
    );
    let v: f64 = p99[0]["value"][1].as_str().unwrap().parse().unwrap();
    assert!(v > 0.0 && v < 1.0, "p99 {v} s: {p99:?}");
    // And one of the plan's: the exporters per plan in force.
    let plans = store.wait_for("job:ibexporter_plan:count", within, why_not);
    assert_eq!(plans[0]["metric"]["plan"], "full", "{plans:?}");
    // And the localizer's: the probe's 10th percentile from the classic
    // buckets, which the slow-probe vote reads. Its rules judge a probe
    // only once its counter existed a minute before (the start-up gate,
    // `ibprobe_probes_total offset 1m`, localize/rules.rs): this probe's
    // series are younger, so the gate is still closed here ...
    let info = format!("probe:ibexporter_localize_probe:info{{target=\"{peer}\"}}");
    let since_prometheus = t_prom.elapsed();
    if since_prometheus < Duration::from_secs(50) {
        assert!(
            store.query(&info).is_empty(),
            "the gate opened {since_prometheus:?} after the first scrape, before its counter existed a minute: {:?}",
            store.query(&info)
        );
    } else {
        eprintln!(
            "the first scrape was {since_prometheus:?} ago: the gate may be open, not checked closed"
        );
    }
    // ... and opens when the counter is found a minute back: the probe's
    // counters as the exporter served them above, dated 90 s back, as if
    // Prometheus had scraped them then (the same series: the scrape's job
    // and instance labels). Without this the test would wait a minute of
    // real data for vmalert's first result.
    let back_ms = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_millis()
        - 90_000;
    let counters: String = one
        .iter()
        .filter(|l| l.starts_with("ibprobe_probes_total{"))
        .map(|l| format!("{l} {back_ms}\n"))
        .collect();
    store.import(&counters, &[("job", "ibexporter"), ("instance", &a.addr)]);
    let p10 = store.wait_for(
        &format!("probe:ibprobe_latency_seconds:p10_1m{{target=\"{peer}\"}}"),
        within,
        why_not,
    );
    let v10: f64 = p10[0]["value"][1].as_str().unwrap().parse().unwrap();
    assert!(v10 > 0.0 && v10 <= v, "p10 {v10} s, p99 {v} s: {p10:?}");
    eprintln!(
        "remote_write into VictoriaMetrics, rules by vmalert: {:.1} s",
        t0.elapsed().as_secs_f64()
    );
}
