//! The probe plan's recording rules (deploy/prometheus/rules/
//! ibexporter-plan.rules.yml) pass `promtool check rules` and compute the
//! right per-rack-pair values on synthetic series (`promtool test rules`):
//! two probers of rack r1 and one of r2, probing peers of r1 and r2.

use std::path::PathBuf;
use std::process::Command;

fn rules() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("../deploy/prometheus/rules/ibexporter-plan.rules.yml")
}

fn promtool(args: &[&str]) -> (bool, String) {
    let out = Command::new("promtool")
        .args(args)
        .output()
        .expect("running promtool (installed by scripts/setup)");
    (
        out.status.success(),
        format!(
            "{}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        ),
    )
}

#[test]
fn the_rules_parse() {
    let (ok, text) = promtool(&["check", "rules", rules().to_str().unwrap()]);
    assert!(ok, "{text}");
    assert!(text.contains("4 rules found"), "{text}");
}

#[test]
fn the_rules_compute_rack_pairs() {
    let dir = tempfile::tempdir().unwrap();
    let series = |s: &str, v: &str| format!("      - series: '{s}'\n        values: '{v}'\n");
    let mut input = String::new();
    // Probers: a and c in r1, d in r2. Peers: b in r2, e in r1.
    for (inst, rack) in [("a", "r1"), ("c", "r1"), ("d", "r2")] {
        input += &series(
            &format!("ibexporter_plan{{instance=\"{inst}\",job=\"x\",plan=\"rack-mesh\",source_rack=\"{rack}\"}}"),
            "1x20",
        );
        input += &series(
            &format!("ibexporter_plan_rack_pairs{{instance=\"{inst}\",job=\"x\"}}"),
            "2x20",
        );
        input += &series(
            &format!("ibexporter_plan_rack_pairs_covered{{instance=\"{inst}\",job=\"x\"}}"),
            if inst == "d" { "1x20" } else { "2x20" },
        );
    }
    // (prober, peer, peer rack, p99, ok per minute, lost per minute)
    for (inst, target, rack, p99, ok, lost) in [
        ("a", "b", "r2", "0.00002", 5, 5),
        ("c", "b", "r2", "0.00005", 5, 5),
        ("a", "e", "r1", "0.000003", 10, 0),
        ("d", "e", "r1", "0.00004", 0, 10),
    ] {
        input += &series(
            &format!("ibexporter_plan_peer_rack{{instance=\"{inst}\",job=\"x\",target=\"{target}\",target_rack=\"{rack}\"}}"),
            "1x20",
        );
        input += &series(
            &format!("ibprobe_latency_window_seconds{{instance=\"{inst}\",job=\"x\",target=\"{target}\",quantile=\"0.99\"}}"),
            &format!("{p99}x20"),
        );
        for (result, per_min) in [("ok", ok), ("timeout", lost)] {
            input += &series(
                &format!("ibprobe_probes_total{{instance=\"{inst}\",job=\"x\",target=\"{target}\",result=\"{result}\"}}"),
                &format!("0+{per_min}x20"),
            );
        }
    }
    let sample = |name: &str, labels: &str, v: &str| {
        format!("          - labels: '{name}{{{labels}}}'\n            value: {v}\n")
    };
    let p99 = "rack_pair:ibprobe_latency_window_p99_seconds:max";
    let lost = "rack_pair:ibprobe_probes_lost:ratio_rate5m";
    let check = |expr: &str, samples: &[String]| {
        format!(
            "      - expr: {expr}\n        eval_time: 10m\n        exp_samples:\n{}",
            samples.concat()
        )
    };
    let mut test = format!(
        "rule_files:\n  - {:?}\nevaluation_interval: 1m\ntests:\n  - interval: 1m\n    input_series:\n{input}    promql_expr_test:\n",
        rules().to_str().unwrap()
    );
    test += &check(
        p99,
        &[
            sample(p99, "source_rack=\"r1\",target_rack=\"r2\"", "0.00005"),
            sample(p99, "source_rack=\"r1\",target_rack=\"r1\"", "0.000003"),
            sample(p99, "source_rack=\"r2\",target_rack=\"r1\"", "0.00004"),
        ],
    );
    test += &check(
        lost,
        &[
            sample(lost, "source_rack=\"r1\",target_rack=\"r2\"", "0.5"),
            sample(lost, "source_rack=\"r1\",target_rack=\"r1\"", "0"),
            sample(lost, "source_rack=\"r2\",target_rack=\"r1\"", "1"),
        ],
    );
    let uncovered = "job:ibexporter_plan_rack_pairs_uncovered:max";
    test += &check(uncovered, &[sample(uncovered, "job=\"x\"", "1")]);
    let count = "job:ibexporter_plan:count";
    test += &check(count, &[sample(count, "job=\"x\",plan=\"rack-mesh\"", "3")]);
    let file = dir.path().join("test.yml");
    std::fs::write(&file, &test).unwrap();
    let (ok, text) = promtool(&["test", "rules", file.to_str().unwrap()]);
    assert!(ok, "{text}\n--- test file ---\n{test}");
}
