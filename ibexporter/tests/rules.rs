//! The Prometheus rules shipped in `deploy/prometheus/rules/`, checked with
//! Debian 12's promtool and against the exporter and the runbook:
//!
//! - every rule file passes `promtool check rules` (syntax, PromQL, lint);
//! - the unit tests `deploy/prometheus/rules/tests/*.yml` pass
//!   (`promtool test rules`), and hold, for every alert, a case where it
//!   fires and one where it does not: a new alert without both fails here;
//! - each unit test can fail: with one alert's expression replaced by one
//!   that never fires, promtool reports a failure, for every alert;
//! - every alert has a severity, a summary, a description and a
//!   `runbook_url` whose section exists in `deploy/prometheus/RUNBOOK.md`
//!   (and the runbook has no section for an alert that does not exist);
//! - every `ibprobe_*` / `ibexporter_*` metric a rule reads is one the
//!   exporter serves (the metric-family snapshot, or the HCA counter table);
//! - every `ibprobe` / `ibtune` command line in the runbook parses with the
//!   tool's own argument parser.
//!
//! `ibexporter/tests/prometheus.rs` loads the same files into a real
//! Prometheus and sees an alert go from pending to firing.

mod common;

use clap::Parser;
use common::rules::{all_rules, edited_copy, rule_files, rules_of, unit_test_files};
use ibtools_tests::prom::{promtool_check_rules, promtool_test_rules};
use serde::Deserialize;
use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

/// Where each alert's `runbook_url` points, before `#<alert name in lower case>`.
const RUNBOOK_URL: &str = "https://example.invalid/ibtools/blob/main/deploy/prometheus/RUNBOOK.md";

fn repo(path: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("..").join(path)
}

fn alert_names() -> BTreeSet<String> {
    all_rules().into_iter().filter_map(|r| r.alert).collect()
}

/// Runs a promtool check on `files` (at least one) and returns what it
/// printed; panics with its complaints.
fn promtool_on(files: Vec<PathBuf>, check: fn(&[PathBuf]) -> Result<String, String>) -> String {
    assert!(!files.is_empty(), "no files in deploy/prometheus/rules");
    let out = check(&files).unwrap_or_else(|e| panic!("{e}"));
    eprintln!("{out}");
    out
}

#[test]
fn every_rule_file_passes_promtool_check_rules() {
    let out = promtool_on(rule_files(), promtool_check_rules);
    let found: usize = out
        .lines()
        .filter_map(|l| l.trim().strip_prefix("SUCCESS: "))
        .filter_map(|l| l.split_whitespace().next()?.parse::<usize>().ok())
        .sum();
    assert_eq!(
        found,
        all_rules().len(),
        "promtool counted other rules: {out}"
    );
    assert!(
        alert_names().len() >= 8,
        "at least 8 alerts: {:?}",
        alert_names()
    );
}

#[test]
fn promtool_unit_tests_pass() {
    let t = std::time::Instant::now();
    let out = promtool_on(unit_test_files(), promtool_test_rules);
    assert!(out.contains("SUCCESS"), "{out}");
    eprintln!("promtool test rules: {:.1} s", t.elapsed().as_secs_f64());
}

#[derive(Debug, Deserialize)]
struct AlertTest {
    alertname: String,
    #[serde(default)]
    exp_alerts: Vec<serde_norway::Value>,
}

#[derive(Debug, Deserialize)]
struct TestGroup {
    #[serde(default)]
    alert_rule_test: Vec<AlertTest>,
}

#[derive(Debug, Deserialize)]
struct TestFile {
    rule_files: Vec<String>,
    tests: Vec<TestGroup>,
}

/// For each unit-test file: the alerts it tests firing and not firing.
fn cases() -> BTreeMap<PathBuf, (BTreeSet<String>, BTreeSet<String>)> {
    let mut out = BTreeMap::new();
    for f in unit_test_files() {
        let text = std::fs::read_to_string(&f).unwrap();
        let t: TestFile = serde_norway::from_str(&text)
            .unwrap_or_else(|e| panic!("{}: not a promtool test file: {e}", f.display()));
        assert!(!t.rule_files.is_empty(), "{}: no rule_files", f.display());
        let (mut firing, mut quiet) = (BTreeSet::new(), BTreeSet::new());
        for c in t.tests.iter().flat_map(|g| &g.alert_rule_test) {
            if c.exp_alerts.is_empty() {
                quiet.insert(c.alertname.clone());
            } else {
                firing.insert(c.alertname.clone());
            }
        }
        out.insert(f, (firing, quiet));
    }
    out
}

#[test]
fn every_alert_has_a_firing_and_a_not_firing_unit_test() {
    let alerts = alert_names();
    let cases = cases();
    let firing: BTreeSet<&String> = cases.values().flat_map(|(f, _)| f).collect();
    let quiet: BTreeSet<&String> = cases.values().flat_map(|(_, q)| q).collect();
    let mut missing = Vec::new();
    for a in &alerts {
        if !firing.contains(a) {
            missing.push(format!(
                "{a}: no case where it fires (exp_alerts non-empty)"
            ));
        }
        if !quiet.contains(a) {
            missing.push(format!(
                "{a}: no case where it does not fire (exp_alerts: [])"
            ));
        }
    }
    for a in firing.iter().chain(&quiet) {
        if !alerts.contains(*a) {
            missing.push(format!("{a}: tested, but no rule defines it"));
        }
    }
    assert!(
        missing.is_empty(),
        "deploy/prometheus/rules/tests/*.yml must test every alert both ways:\n{}",
        missing.join("\n")
    );
    eprintln!("{} alerts, each tested firing and not firing", alerts.len());
}

#[test]
fn each_alert_unit_test_fails_when_the_alert_cannot_fire() {
    let cases = cases();
    // Control: the copy as written (through the same YAML round trip) passes.
    let dir = tempfile::tempdir().unwrap();
    let (_, tests) = edited_copy(dir.path(), |_, _| {});
    if let Err(e) = promtool_test_rules(&tests) {
        panic!("the unedited copy of the rules fails its unit tests:\n{e}");
    }
    let mut not_caught = Vec::new();
    for alert in alert_names() {
        let dir = tempfile::tempdir().unwrap();
        let (_, tests) = edited_copy(dir.path(), |name, rule| {
            if name == alert {
                rule.insert("expr".into(), "vector(1) == 0".into());
            }
        });
        // Only the files that test this alert (the week-long one is slow).
        let mine: Vec<PathBuf> = tests
            .into_iter()
            .filter(|t| {
                cases
                    .iter()
                    .any(|(f, (fire, _))| f.file_name() == t.file_name() && fire.contains(&alert))
            })
            .collect();
        if mine.is_empty() || promtool_test_rules(&mine).is_ok() {
            not_caught.push(alert);
        }
    }
    assert!(
        not_caught.is_empty(),
        "promtool test rules still passed with these alerts unable to fire: {not_caught:?}"
    );
}

/// Lower-case anchors of the `## Name` sections of RUNBOOK.md.
fn runbook_sections() -> BTreeSet<String> {
    let text = std::fs::read_to_string(repo("deploy/prometheus/RUNBOOK.md")).unwrap();
    text.lines()
        .filter_map(|l| l.strip_prefix("## "))
        .map(|h| h.trim().to_lowercase())
        .collect()
}

#[test]
fn every_alert_is_documented_with_a_runbook_section() {
    let sections = runbook_sections();
    let mut errs = Vec::new();
    for f in rule_files() {
        for r in rules_of(&f) {
            let Some(name) = r.alert else { continue };
            let at = format!("{}: {name}", f.file_name().unwrap().to_string_lossy());
            if !name.starts_with("IB") {
                errs.push(format!(
                    "{at}: alert names start with IB (dashboards select IB.*)"
                ));
            }
            match r.labels.get("severity").map(String::as_str) {
                Some("critical" | "warning") => {}
                s => errs.push(format!("{at}: severity {s:?}, want critical or warning")),
            }
            for key in ["summary", "description"] {
                if r.annotations.get(key).is_none_or(|s| s.trim().len() < 10) {
                    errs.push(format!("{at}: no {key} annotation"));
                }
            }
            let want = format!("{RUNBOOK_URL}#{}", name.to_lowercase());
            if r.annotations.get("runbook_url") != Some(&want) {
                errs.push(format!(
                    "{at}: runbook_url {:?}, want {want:?}",
                    r.annotations.get("runbook_url")
                ));
            }
            if !sections.contains(&name.to_lowercase()) {
                errs.push(format!(
                    "{at}: no `## {name}` section in deploy/prometheus/RUNBOOK.md"
                ));
            }
        }
    }
    let alerts: BTreeSet<String> = alert_names().iter().map(|a| a.to_lowercase()).collect();
    for s in &sections {
        if !alerts.contains(s) {
            errs.push(format!(
                "RUNBOOK.md: section `{s}` is no alert of the rules"
            ));
        }
    }
    assert!(errs.is_empty(), "{}", errs.join("\n"));
}

/// `ibprobe_*` and `ibexporter_*` names in a PromQL expression.
fn metric_names(expr: &str) -> BTreeSet<String> {
    let ident = |c: char| c.is_ascii_alphanumeric() || c == '_' || c == ':';
    let mut out = BTreeSet::new();
    let mut rest = expr;
    while let Some(i) = rest.find(|c: char| c.is_ascii_alphabetic()) {
        let word_start = &rest[i..];
        let end = word_start
            .find(|c: char| !ident(c))
            .unwrap_or(word_start.len());
        let word = &word_start[..end];
        let prev = rest[..i].chars().last();
        if prev.is_none_or(|c| !ident(c))
            && (word.starts_with("ibprobe_") || word.starts_with("ibexporter_"))
        {
            out.insert(word.to_string());
        }
        rest = &word_start[end..];
    }
    out
}

#[test]
fn rules_read_only_metrics_the_exporter_serves() {
    let snap = std::fs::read_to_string(repo(
        "ibexporter/tests/snapshots/snapshots__ibexporter-metric-families.snap",
    ))
    .unwrap();
    let mut served: BTreeSet<String> = BTreeSet::new();
    for l in snap.lines() {
        if let Some(rest) = l.strip_prefix("# TYPE ") {
            let mut w = rest.split_whitespace();
            let (name, kind) = (w.next().unwrap(), w.next().unwrap_or(""));
            served.insert(name.to_string());
            if kind == "histogram" {
                for s in ["_bucket", "_sum", "_count"] {
                    served.insert(format!("{name}{s}"));
                }
            }
        }
    }
    // Port counters absent from the snapshot's fixture host are still
    // served where the kernel has the file.
    for c in ibexporter::collect::hca::PORT_COUNTERS {
        served.insert(format!("{}_total", c.name));
    }
    // Families declared per remote target, absent from the snapshot's
    // exporter (it has no remote targets): the plan's rack of each peer
    // (tests/plan_mesh.rs scrapes it from a real mesh and runs the rules).
    served.insert("ibexporter_plan_peer_rack".to_string());
    // The hardware-timestamp split's families, served once a verbs target
    // with timestamps was probed (the snapshot's exporter has none): their
    // names as the collector registers them.
    let mut reg = prometheus_client::registry::Registry::default();
    let hw_metrics = ibexporter::collect::hw_split::HwSplitMetrics::default();
    hw_metrics.register(&mut reg);
    let one = || {
        let mut h = ibstats::latency::LatencyHistogram::new();
        h.record(1_000);
        h
    };
    hw_metrics.record(
        &ibexporter::collect::latency::SeriesKey {
            source: "a".into(),
            target: "b:18515".into(),
            transport: "rc".into(),
            op: "send".into(),
            size_bytes: "32".into(),
        },
        &ibprobe::clock::hwts::HwSplit {
            one_way: false,
            split: ibprobe::clock::hwts::Split {
                network_rtt: one(),
                prober_delay: one(),
                responder_delay: one(),
                missing_prober: 0,
                missing_responder: 0,
                invalid: 0,
            },
            notes: vec![],
        },
    );
    let mut text = String::new();
    prometheus_client::encoding::text::encode(&mut text, &reg).unwrap();
    let mut hw = 0;
    for l in text.lines() {
        if let Some(rest) = l.strip_prefix("# TYPE ") {
            let mut w = rest.split_whitespace();
            if let (Some(name), Some("histogram")) = (w.next(), w.next()) {
                served.insert(format!("{name}_bucket"));
                hw += 1;
            }
        }
    }
    assert_eq!(hw, 3, "the split's three histograms:\n{text}");
    let mut unknown = Vec::new();
    for r in all_rules() {
        for m in metric_names(&r.expr) {
            if !served.contains(&m) {
                unknown.push(format!(
                    "{}: {m}",
                    r.alert.as_deref().or(r.record.as_deref()).unwrap_or("?")
                ));
            }
        }
    }
    assert!(
        unknown.is_empty(),
        "rules read metrics ibexporter does not serve:\n{}",
        unknown.join("\n")
    );
    assert!(metric_names("rate(ibprobe_x_total[5m]) / a:ibprobe_y:z").contains("ibprobe_x_total"));
    assert!(!metric_names("a:ibprobe_y:z").contains("ibprobe_y"));
}

/// The command lines of the runbook's `sh` blocks, split into words
/// (single quotes, used only around a whole word, removed as the shell
/// would), `sudo` dropped.
fn runbook_commands() -> Vec<Vec<String>> {
    let text = std::fs::read_to_string(repo("deploy/prometheus/RUNBOOK.md")).unwrap();
    let mut out = Vec::new();
    let mut in_sh = false;
    for l in text.lines() {
        let t = l.trim();
        if t.starts_with("```") {
            in_sh = !in_sh && t == "```sh";
            continue;
        }
        if in_sh && !t.is_empty() {
            let words: Vec<String> = t
                .split_whitespace()
                .skip_while(|w| *w == "sudo")
                .map(|w| w.trim_matches('\'').to_string())
                .collect();
            out.push(words);
        }
    }
    out
}

fn parse_command(words: &[String]) -> Result<(), String> {
    let shown = words.join(" ");
    let res = match words.first().map(String::as_str) {
        Some("ibprobe") => ibprobe::cli::args::Cli::try_parse_from(words).map(|_| ()),
        Some("ibtune") => ibtune::cli::Cli::try_parse_from(words).map(|_| ()),
        other => {
            return Err(format!(
                "{shown}: not an ibprobe or ibtune command ({other:?})"
            ))
        }
    };
    res.map_err(|e| format!("{shown}: {e}"))?;
    // The command run by `ibprobe compare` / `ibtune experiment`, after `--`.
    if let Some(i) = words.iter().position(|w| w == "--") {
        let mut inner: Vec<String> = words[i + 1..].to_vec();
        if inner.first().map(String::as_str) != Some("ibprobe") {
            inner.insert(0, "ibprobe".into());
        }
        parse_command(&inner)?;
    }
    Ok(())
}

#[test]
fn runbook_commands_parse_with_the_tools_own_parsers() {
    let cmds = runbook_commands();
    assert!(
        cmds.len() >= 10,
        "expected the runbook's commands: {cmds:?}"
    );
    let errs: Vec<String> = cmds.iter().filter_map(|c| parse_command(c).err()).collect();
    assert!(errs.is_empty(), "{}", errs.join("\n"));
    // The check itself can fail.
    assert!(parse_command(&["ibprobe".into(), "client".into(), "--no-such-flag".into()]).is_err());
    assert!(parse_command(&["ibtune".into(), "verfy".into(), "x".into()]).is_err());
    // --fail-if expressions are checked by the parser too.
    let fail_if = |e: &str| {
        let cmd = ["ibprobe", "client", "node2", "--fail-if", e];
        parse_command(&cmd.map(String::from))
    };
    assert!(fail_if("p99>50us").is_ok());
    assert!(fail_if("p99>>50us").is_err());
}
