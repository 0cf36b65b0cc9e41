//! The Grafana dashboards in `dashboards/`, checked two ways.
//!
//! 1. [`dashboards_are_well_formed_and_queries_parse`] (no server): every
//!    `dashboards/*.json` parses, has `uid`, `title`, the tags
//!    `rdma`/`ibexporter`, the `datasource`, `job` and `instance` variables;
//!    every panel (rows aside) has a unit and targets with a non-empty
//!    `expr`; every selector of an `ibprobe_*`/`ibexporter_*` metric filters
//!    on `job=~"$job"` and `instance=~"$instance"`; every data source is the
//!    `${datasource}` variable; every `$variable` used is defined; no string
//!    looks like a hard-coded host (`host:9427`, an IPv4 address,
//!    `localhost`, `instance="..."`). Then every query (panel targets and
//!    `label_values` variable queries) is extracted with the variables
//!    substituted ([`extract_queries`]) and the lot is handed to
//!    `promtool check rules`, so a PromQL syntax error fails here.
//!
//! 2. [`every_dashboard_query_returns_data_from_a_real_exporter`]: the real
//!    `ibexporter` binary, a real Prometheus (`ibtools_tests::prom`, native
//!    histograms on) scraping it, and every extracted query must return a
//!    non-empty result. There is no RDMA device on a CI machine, so each
//!    query is run against the exporter configuration that can feed it
//!    ([`Feed`], chosen from the metric names in the query; `$job` is
//!    substituted with that feed's job):
//!
//!    | feed | exporter started as | feeds | on a real host this needs |
//!    |---|---|---|---|
//!    | `Probe` | `ibexporter --listen ADDR --interval 1s` | `ibprobe_*` latency, loss, the exporter's self metrics; scraped twice: negotiated (protobuf, native histograms) and `?format=openmetrics` (classic buckets, which Prometheus 2.42-2.44 drops from a protobuf scrape) | nothing more for the shm/UDP `loopback` target it probes by default; targets over rc/uc/ud need an HCA and peers |
//!    | `Hca` | `ibexporter --listen ADDR --root <copy of ibexporter/tests/fixtures/hca-mixed>`, the copy with one unparsable `hw_counters` file | every `ibexporter_hca_*` family, `ibexporter_hca_read_errors_total` included | a real HCA (`/sys/class/infiniband`); the CNP/ECN panel needs mlx5 on RoCE |
//!    | `Tuning` | `ibexporter --listen ADDR --root <copy of tests/fixtures/thesis-2s-mlx5> --profile <thesis-2hca + [dma_latency] us = 10>` | every `ibexporter_tuning_*` family; the fixture is not tuned, so settings drift and IRQs are not placed; the `[dma_latency]` section makes `holder_up` appear, the fixture's `/dev/cpu_dma_latency` is a readable file | a watched profile; `cpu_dma_latency_seconds` needs root (opening `/dev/cpu_dma_latency`), `holder_up` a profile with `[dma_latency]` |
//!
//!    Queries that may rightly be empty are listed in [`may_be_empty`]
//!    (with why); they are still run, and must be accepted by Prometheus.
//!
//! The flags used are named once, in [`ROOT_FLAG`], [`PROFILE_FLAG`],
//! [`INTERVAL_FLAG`] and [`NO_PROBE_FLAG`]. The `Hca` and `Tuning`
//! exporters probe nothing (`--no-probe hca,shm,udp,wakeup`): their root is
//! a fixture without devices, and the `Probe` exporter feeds the latency
//! panels. ibtune's state directory stays the default (`/var/lib/ibtune`,
//! which has no `hold.pid` here), so `holder_up` reads 0: a sample all the
//! same.

use ibtools_tests::grafana::{
    all_panels, label_values_query, panel_name, raw_queries, substitute, substitutions,
    variable_query, variables, Subs,
};
use ibtools_tests::prom::{url_encode, Prometheus, Target};
use serde_json::Value;
use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// Host root for sysfs, procfs and /dev.
const ROOT_FLAG: &str = "--root";
/// The ibtune profile to watch for drift.
const PROFILE_FLAG: &str = "--profile";
/// Time between two probe rounds (the default, 10 s, would make the test slow).
const INTERVAL_FLAG: &str = "--interval";
/// Probes to leave out (`hca,shm,udp,wakeup`).
const NO_PROBE_FLAG: &str = "--no-probe";

/// How long the live test waits for every query to return data.
const WAIT: Duration = Duration::from_secs(150);

/// Which exporter configuration can feed a query (see the module docs).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
enum Feed {
    /// `ibexporter --listen ADDR`: probes of the local loopback targets and
    /// the self metrics.
    Probe,
    /// `--root` on the hca-mixed fixture: `ibexporter_hca_*`.
    Hca,
    /// `--root` on a thesis host copy and `--profile`: `ibexporter_tuning_*`.
    Tuning,
}

impl Feed {
    /// The Prometheus jobs that scrape this feed's exporter, as a regex for `$job`.
    fn jobs(self) -> &'static str {
        match self {
            Feed::Probe => "ibexporter-probe|ibexporter-probe-classic",
            Feed::Hca => "ibexporter-hca",
            Feed::Tuning => "ibexporter-tuning",
        }
    }
}

/// One query of a dashboard, variables substituted.
#[derive(Debug, Clone)]
struct Query {
    /// Dashboard file name.
    dashboard: String,
    /// Panel title and refId, or `variable <name>`.
    origin: String,
    /// The expression as written in the dashboard.
    raw: String,
    /// Which exporter configuration feeds it.
    feed: Feed,
    /// Variables substituted, `$job` as `.*`.
    expr: String,
    /// The same with `$job` as the jobs scraping [`Query::feed`]'s exporter.
    live: String,
}

fn dashboards_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../dashboards")
}

/// Every `dashboards/*.json`, parsed, by file name.
fn load_dashboards() -> Vec<(String, Value)> {
    let dir = dashboards_dir();
    let mut files: Vec<PathBuf> = std::fs::read_dir(&dir)
        .unwrap_or_else(|e| panic!("reading {}: {e}", dir.display()))
        .map(|e| e.expect("dir entry").path())
        .filter(|p| p.extension().is_some_and(|x| x == "json"))
        .collect();
    files.sort();
    assert!(!files.is_empty(), "no dashboards in {}", dir.display());
    files
        .into_iter()
        .map(|p| {
            let text = std::fs::read_to_string(&p)
                .unwrap_or_else(|e| panic!("reading {}: {e}", p.display()));
            let v: Value = serde_json::from_str(&text)
                .unwrap_or_else(|e| panic!("{} is not JSON: {e}", p.display()));
            (p.file_name().unwrap().to_string_lossy().into_owned(), v)
        })
        .collect()
}

/// The feed of an expression, from the metric names in it; `None` when it
/// mixes the metrics of two feeds.
fn feed_of(expr: &str) -> Option<Feed> {
    let hca = expr.contains("ibexporter_hca_");
    let tuning = expr.contains("ibexporter_tuning_");
    match (hca, tuning) {
        (true, true) => None,
        (true, false) => Some(Feed::Hca),
        (false, true) => Some(Feed::Tuning),
        (false, false) => Some(Feed::Probe),
    }
}

/// Extracts every query of a dashboard, variables substituted: each panel
/// target's `expr` (once per option of the custom variables it uses) and
/// each query variable's `label_values(...)` (as `count by`).
fn extract_queries(file: &str, dash: &Value) -> Result<Vec<Query>, String> {
    let subs = substitutions(dash);
    let mut out = Vec::new();
    for (origin, raw) in raw_queries(dash)? {
        let feed =
            feed_of(&raw).ok_or_else(|| format!("{origin}: mixes HCA and tuning metrics"))?;
        let generic =
            substitute(&raw, &subs, &BTreeMap::new()).map_err(|e| format!("{origin}: {e}"))?;
        let mut over = BTreeMap::new();
        over.insert("job".to_string(), feed.jobs().to_string());
        let live = substitute(&raw, &subs, &over).map_err(|e| format!("{origin}: {e}"))?;
        // Same order: `job` has one option either way.
        for (expr, live) in generic.into_iter().zip(live) {
            out.push(Query {
                dashboard: file.to_string(),
                origin: origin.clone(),
                raw: raw.clone(),
                feed,
                expr,
                live,
            });
        }
    }
    Ok(out)
}

/// Queries that may rightly return nothing on the test's exporters, and why.
fn may_be_empty(expr: &str) -> Option<&'static str> {
    if expr.contains("ALERTS{") {
        return Some(
            "alerts exist only while one is pending or firing; this test's Prometheus loads no \
             rules (tests/prometheus.rs loads them and sees one fire)",
        );
    }
    if expr.contains("ibexporter_plan_peer_rack") {
        return Some(
            "needs remote targets with a rack label; tests/plan_mesh.rs runs this query on a real mesh",
        );
    }
    if expr.contains("ibprobe_probe_errors_total") {
        return Some(
            "counts probe errors by reason; no probe fails against the local loopback targets",
        );
    }
    None
}

/// Every string in a JSON value, with a path for messages.
fn strings<'a>(v: &'a Value, path: String, out: &mut Vec<(String, &'a str)>) {
    match v {
        Value::String(s) => out.push((path, s)),
        Value::Array(a) => {
            for (i, x) in a.iter().enumerate() {
                strings(x, format!("{path}[{i}]"), out);
            }
        }
        Value::Object(o) => {
            for (k, x) in o {
                strings(x, format!("{path}.{k}"), out);
            }
        }
        _ => {}
    }
}

/// Why a string looks like a hard-coded host or instance, if it does.
fn hard_coded_host(s: &str) -> Option<String> {
    let lower = s.to_ascii_lowercase();
    if lower.contains("localhost") {
        return Some("names localhost".into());
    }
    let b = s.as_bytes();
    // host:port: a host-like word, ':', 2-5 digits, then not a letter/digit
    // (so `[1m:30s]` and `rxe0:1` pass).
    for (i, _) in s.match_indices(':') {
        let digits = b[i + 1..].iter().take_while(|c| c.is_ascii_digit()).count();
        let after = b.get(i + 1 + digits).copied();
        let host = b[..i]
            .iter()
            .rev()
            .take_while(|c| c.is_ascii_alphanumeric() || **c == b'.' || **c == b'-')
            .count();
        if (2..=5).contains(&digits)
            && host > 0
            && !after.is_some_and(|c| c.is_ascii_alphanumeric() || c == b'.')
        {
            return Some(format!(
                "{:?} looks like host:port",
                &s[i - host..i + 1 + digits]
            ));
        }
    }
    // An IPv4 address.
    for w in s.split(|c: char| !(c.is_ascii_digit() || c == '.')) {
        let parts: Vec<&str> = w.split('.').collect();
        if parts.len() == 4 && parts.iter().all(|p| !p.is_empty() && p.len() <= 3) {
            return Some(format!("{w:?} looks like an IPv4 address"));
        }
    }
    // instance="x" / instance=~"x" with a literal value.
    let compact: String = s.chars().filter(|c| !c.is_whitespace()).collect();
    for pat in [
        "instance=\"",
        "instance=~\"",
        "instance!=\"",
        "instance!~\"",
    ] {
        for (i, _) in compact.match_indices(pat) {
            let rest = &compact[i + pat.len()..];
            if !rest.starts_with('$') && !rest.starts_with('"') && !rest.starts_with(".*") {
                return Some(format!("filters on a literal instance: {compact:?}"));
            }
        }
    }
    None
}

/// Checks every selector of an `ibprobe_*`/`ibexporter_*` metric in a panel
/// expression: it must have braces holding `job=~"$job"` and
/// `instance=~"$instance"`.
fn selector_problems(expr: &str) -> Vec<String> {
    let mut out = Vec::new();
    let b = expr.as_bytes();
    let ident = |c: u8| c.is_ascii_alphanumeric() || c == b'_' || c == b':';
    let mut i = 0;
    while i < b.len() {
        let starts = (b[i..].starts_with(b"ibprobe_") || b[i..].starts_with(b"ibexporter_"))
            && (i == 0 || !ident(b[i - 1]));
        if !starts {
            i += 1;
            continue;
        }
        let mut j = i;
        while j < b.len() && ident(b[j]) {
            j += 1;
        }
        let name = &expr[i..j];
        let mut k = j;
        while k < b.len() && b[k] == b' ' {
            k += 1;
        }
        if k >= b.len() || b[k] != b'{' {
            out.push(format!("{name} has no label selector"));
        } else {
            let close = expr[k..].find('}').map(|e| k + e).unwrap_or(b.len());
            let sel: String = expr[k..close].chars().filter(|c| *c != ' ').collect();
            for need in ["job=~\"$job\"", "instance=~\"$instance\""] {
                if !sel.contains(need) {
                    out.push(format!("{name}{} lacks {need}", &expr[k..close + 1]));
                }
            }
        }
        i = j;
    }
    out
}

/// Every structural problem of one dashboard (empty when it is fine).
fn structural_problems(file: &str, dash: &Value) -> Vec<String> {
    let mut errs: Vec<String> = Vec::new();
    let mut err = |s: String| errs.push(format!("{file}: {s}"));

    for key in ["uid", "title"] {
        if dash[key].as_str().is_none_or(|s| s.trim().is_empty()) {
            err(format!("`{key}` missing or empty"));
        }
    }
    let tags: BTreeSet<&str> = dash["tags"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(Value::as_str)
        .collect();
    for t in ["rdma", "ibexporter"] {
        if !tags.contains(t) {
            err(format!("tag {t:?} missing (tags: {tags:?})"));
        }
    }
    if dash["schemaVersion"].as_u64().is_none_or(|v| v < 36) {
        err(format!(
            "schemaVersion {} is not a Grafana 10/11 one (>= 36)",
            dash["schemaVersion"]
        ));
    }

    // Variables.
    let vars = variables(dash);
    let by_name = |n: &str| vars.iter().find(|v| v["name"] == n).copied();
    match by_name("datasource") {
        Some(v) if v["type"] == "datasource" && v["query"] == "prometheus" => {}
        Some(v) => err(format!(
            "variable datasource must be type datasource, query prometheus: {v}"
        )),
        None => err("no `datasource` variable".into()),
    }
    for (name, must_use) in [("job", None), ("instance", Some("$job"))] {
        match by_name(name) {
            Some(v) => {
                let q = variable_query(v);
                if v["type"] != "query" || !q.starts_with("label_values(") {
                    err(format!(
                        "variable {name} must be a label_values query: {q:?}"
                    ));
                }
                if let Some(u) = must_use {
                    if !q.contains(u) {
                        err(format!("variable {name} must filter on {u}: {q:?}"));
                    }
                }
            }
            None => err(format!("no `{name}` variable")),
        }
    }
    for v in &vars {
        let name = v["name"].as_str().unwrap_or_default();
        if v["type"] == "query" && !["job", "instance"].contains(&name) {
            let q = variable_query(v);
            for need in ["job=~\"$job\"", "instance=~\"$instance\""] {
                if !q.replace(' ', "").contains(need) {
                    err(format!("variable {name}: query lacks {need}: {q:?}"));
                }
            }
        }
        if v["type"] == "query" && v["datasource"]["uid"] != "${datasource}" {
            err(format!(
                "variable {name}: datasource must be ${{datasource}}, is {}",
                v["datasource"]
            ));
        }
        if v["type"] == "custom" && v["options"].as_array().is_none_or(|o| o.is_empty()) {
            err(format!(
                "custom variable {name} lists no options (needed to extract its queries)"
            ));
        }
    }

    // Panels.
    let subs = substitutions(dash);
    let panels = all_panels(dash);
    if panels.iter().all(|p| p["type"] == "row") {
        err("no panels".into());
    }
    let mut ids = BTreeSet::new();
    for p in &panels {
        let name = panel_name(p);
        if !ids.insert(p["id"].to_string()) {
            err(format!("{name}: duplicate id"));
        }
        if p["gridPos"].as_object().is_none() {
            err(format!("{name}: no gridPos"));
        }
        if p["type"] == "row" {
            continue;
        }
        if p["title"].as_str().is_none_or(|t| t.trim().is_empty()) {
            err(format!("{name}: no title"));
        }
        if p["fieldConfig"]["defaults"]["unit"]
            .as_str()
            .is_none_or(|u| u.trim().is_empty())
        {
            err(format!("{name}: no unit (fieldConfig.defaults.unit)"));
        }
        if p["datasource"]["uid"] != "${datasource}" {
            err(format!(
                "{name}: datasource must be ${{datasource}}, is {}",
                p["datasource"]
            ));
        }
        let targets = p["targets"].as_array().cloned().unwrap_or_default();
        if targets.is_empty() {
            err(format!("{name}: no targets"));
        }
        for t in &targets {
            let r = t["refId"].as_str().unwrap_or("?");
            let expr = t["expr"].as_str().unwrap_or_default();
            if expr.trim().is_empty() {
                err(format!("{name} target {r}: empty expr"));
                continue;
            }
            if t["datasource"].is_object() && t["datasource"]["uid"] != "${datasource}" {
                err(format!(
                    "{name} target {r}: datasource must be ${{datasource}}"
                ));
            }
            for s in selector_problems(expr) {
                err(format!("{name} target {r}: {s}"));
            }
            if let Err(e) = substitute(expr, &subs, &BTreeMap::new()) {
                err(format!("{name} target {r}: {e}"));
            }
        }
        // Titles may use variables too.
        if let Err(e) = substitute(
            p["title"].as_str().unwrap_or_default(),
            &subs,
            &BTreeMap::new(),
        ) {
            err(format!("{name} title: {e}"));
        }
    }

    // Nothing hard-coded.
    let mut all = Vec::new();
    strings(dash, String::new(), &mut all);
    for (path, s) in all {
        if let Some(why) = hard_coded_host(s) {
            err(format!("{path}: {why}"));
        }
        if path.ends_with(".datasource.uid")
            && s != "${datasource}"
            && !path.starts_with(".annotations")
        {
            err(format!("{path}: hard-coded data source uid {s:?}"));
        }
    }
    errs
}

/// Finds a binary on PATH or in /usr/bin.
fn which(name: &str) -> PathBuf {
    std::env::var_os("PATH")
        .map(|p| std::env::split_paths(&p).collect::<Vec<_>>())
        .unwrap_or_default()
        .into_iter()
        .chain([PathBuf::from("/usr/bin")])
        .map(|d| d.join(name))
        .find(|p| p.is_file())
        .unwrap_or_else(|| {
            panic!("`{name}` not found: install it with `apt-get install prometheus` (scripts/setup does)")
        })
}

/// Runs `promtool check rules` on every expression (as alerting rules);
/// `Err` with its output when it refuses one.
fn promtool_check_exprs(exprs: &[String]) -> Result<(), String> {
    let dir = tempfile::tempdir().expect("tempdir");
    let mut yaml = String::from("groups:\n  - name: dashboards\n    rules:\n");
    for (i, e) in exprs.iter().enumerate() {
        // JSON strings are valid YAML flow scalars.
        yaml += &format!(
            "      - alert: q{i}\n        expr: {}\n",
            Value::String(e.clone())
        );
    }
    let path = dir.path().join("rules.yml");
    std::fs::write(&path, &yaml).expect("writing rules.yml");
    let out = Command::new(which("promtool"))
        .args(["check", "rules"])
        .arg(&path)
        .output()
        .expect("running promtool");
    if out.status.success() {
        Ok(())
    } else {
        Err(format!(
            "{}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        ))
    }
}

/// Every query of every dashboard, after the structural checks passed.
fn checked_queries() -> Vec<Query> {
    let dashboards = load_dashboards();
    let mut problems = Vec::new();
    let mut uids = BTreeMap::new();
    for (file, d) in &dashboards {
        problems.extend(structural_problems(file, d));
        if let Some(uid) = d["uid"].as_str() {
            if let Some(other) = uids.insert(uid.to_string(), file.clone()) {
                problems.push(format!("{file}: uid {uid:?} also used by {other}"));
            }
        }
    }
    assert!(
        problems.is_empty(),
        "dashboard problems:\n{}",
        problems.join("\n")
    );
    let mut queries = Vec::new();
    for (file, d) in &dashboards {
        queries.extend(extract_queries(file, d).unwrap_or_else(|e| panic!("{file}: {e}")));
    }
    queries
}

#[test]
fn dashboards_are_well_formed_and_queries_parse() {
    let queries = checked_queries();
    let files: BTreeSet<&str> = queries.iter().map(|q| q.dashboard.as_str()).collect();
    for f in [
        "tail-latency.json",
        "mesh.json",
        "hca.json",
        "host-tuning.json",
    ] {
        assert!(files.contains(f), "{f} missing or without queries");
    }
    for q in &queries {
        assert!(
            !q.expr.contains('$') && !q.expr.contains("[["),
            "{} {}: a variable was left in {:?}",
            q.dashboard,
            q.origin,
            q.expr
        );
    }
    let exprs: Vec<String> = queries.iter().map(|q| q.expr.clone()).collect();
    eprintln!("{} queries extracted", exprs.len());
    for q in &queries {
        eprintln!("{} | {} | {:?} | {}", q.dashboard, q.origin, q.feed, q.expr);
    }
    if let Err(out) = promtool_check_exprs(&exprs) {
        panic!("promtool refused a dashboard query:\n{out}");
    }
}

// ------------------------------------------------ Grafana's published schema

/// `tests/grafana-schema/` (package.json, package-lock.json, schema.ts).
fn schema_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../tests/grafana-schema")
}

/// Type-checks dashboards (file name, JSON text) against Grafana's
/// published schema (`@grafana/schema`'s `Dashboard`, through
/// `tests/grafana-schema/schema.ts`) with `tsc`, and returns tsc's errors
/// as `dashboards/FILE:LINE:COL: message` (empty: every file conforms).
fn schema_errors(files: &[(String, String)]) -> Vec<String> {
    let dir = schema_dir();
    let tsc = dir.join("node_modules/.bin/tsc");
    assert!(
        tsc.exists() && dir.join("node_modules/@grafana/schema").exists(),
        "{} missing: run scripts/setup (it installs nodejs and npm, then runs `npm ci` in \
         tests/grafana-schema)",
        tsc.display()
    );
    let tmp = tempfile::tempdir().expect("tempdir");
    let schema = dir.join("schema");
    let mut names = Vec::new();
    for (file, text) in files {
        let ts = format!("{}.ts", file.trim_end_matches(".json"));
        // Line 1 imports; the JSON starts on line 2, so JSON line n is
        // line n + 1 here.
        let src = format!(
            "import type {{ DashboardJson }} from {};\nexport const dashboard: DashboardJson = {text};\n",
            serde_json::Value::String(schema.display().to_string())
        );
        std::fs::write(tmp.path().join(&ts), src).expect("writing a .ts file");
        names.push(ts);
    }
    let config = serde_json::json!({
        "compilerOptions": {
            "strict": true, "noEmit": true, "module": "esnext",
            "moduleResolution": "bundler", "target": "es2022", "skipLibCheck": true
        },
        "files": names,
    });
    std::fs::write(tmp.path().join("tsconfig.json"), config.to_string()).unwrap();
    let out = Command::new(&tsc)
        .args(["--pretty", "false", "-p"])
        .arg(tmp.path().join("tsconfig.json"))
        .output()
        .unwrap_or_else(|e| panic!("running {}: {e}", tsc.display()));
    let said =
        String::from_utf8_lossy(&out.stdout).to_string() + &String::from_utf8_lossy(&out.stderr);
    let mut errs = Vec::new();
    for line in said.lines().filter(|l| !l.trim().is_empty()) {
        // `/tmp/x/hca.ts(80,9): error TS2353: ...`; continuation lines as they are.
        let located = line.split_once(".ts(").and_then(|(path, rest)| {
            let (pos, msg) = rest.split_once("): ")?;
            let (l, c) = pos.split_once(',')?;
            let file = Path::new(path).file_name()?.to_str()?.to_string();
            let l: usize = l.parse().ok()?;
            Some(format!(
                "dashboards/{file}.json:{}:{c}: {msg}",
                l.saturating_sub(1)
            ))
        });
        errs.push(located.unwrap_or_else(|| line.to_string()));
    }
    assert!(
        out.status.success() || !errs.is_empty(),
        "tsc failed without a message: {}",
        out.status
    );
    errs
}

#[test]
fn dashboards_match_grafanas_published_schema() {
    let files: Vec<(String, String)> = load_dashboards()
        .into_iter()
        .map(|(f, _)| {
            let text = std::fs::read_to_string(dashboards_dir().join(&f)).unwrap();
            (f, text)
        })
        .collect();
    assert!(files.len() >= 4, "{files:?}");
    let errs = schema_errors(&files);
    assert!(
        errs.is_empty(),
        "dashboards against @grafana/schema (tests/grafana-schema):\n{}",
        errs.join("\n")
    );
}

#[test]
fn the_schema_check_fails_on_a_broken_panel() {
    let text = std::fs::read_to_string(dashboards_dir().join("hca.json")).unwrap();
    let mut d: Value = serde_json::from_str(&text).unwrap();
    // A width that is not a number, and a misspelt key.
    d["panels"][1]["gridPos"]["w"] = Value::from("wide");
    d["panels"][2]["titel"] = Value::from("Port state");
    let broken = serde_json::to_string_pretty(&d).unwrap();
    let errs = schema_errors(&[("broken.json".to_string(), broken)]);
    let all = errs.join("\n");
    assert!(
        errs.iter()
            .any(|e| e.starts_with("dashboards/broken.json:") && e.contains("number")),
        "the non-numeric width should be refused: {all}"
    );
    assert!(
        all.contains("titel"),
        "the misspelt key should be refused: {all}"
    );
    // The intact file passes, so the errors are the breakage's.
    assert_eq!(
        schema_errors(&[("hca.json".to_string(), text)]),
        Vec::<String>::new()
    );
}

// ------------------------------------------------------------------ live test

/// A running `ibexporter`, killed on drop; its stderr goes to a log file.
struct Exporter {
    child: Child,
    address: String,
    log: PathBuf,
    _dir: tempfile::TempDir,
}

impl Exporter {
    /// Starts the binary on `127.0.0.1:<free port>` with `args` after
    /// `--listen`, and waits until it accepts connections.
    fn start(what: &str, args: &[String]) -> Exporter {
        let port = std::net::TcpListener::bind("127.0.0.1:0")
            .and_then(|l| l.local_addr())
            .expect("finding a free port")
            .port();
        let address = format!("127.0.0.1:{port}");
        let dir = tempfile::tempdir().expect("tempdir");
        let log = dir.path().join("ibexporter.log");
        let f = std::fs::File::create(&log).expect("creating the log");
        let child = Command::new(env!("CARGO_BIN_EXE_ibexporter"))
            .arg("--listen")
            .arg(&address)
            // Several exporters run at once: each responder on its own port.
            .args(["--responder", "127.0.0.1:0"])
            .args(args)
            .stdin(Stdio::null())
            .stdout(f.try_clone().expect("dup"))
            .stderr(f)
            .spawn()
            .expect("starting ibexporter");
        let mut e = Exporter {
            child,
            address,
            log,
            _dir: dir,
        };
        let deadline = Instant::now() + Duration::from_secs(20);
        loop {
            if let Some(status) = e.child.try_wait().expect("polling ibexporter") {
                panic!(
                    "ibexporter ({what}) exited at once ({status}) with args {args:?}. \
                     This test needs `--listen ADDR`, `{ROOT_FLAG} DIR`, `{PROFILE_FLAG} FILE`, \
                     `{INTERVAL_FLAG} DUR` and `{NO_PROBE_FLAG} LIST`. Its output:\n{}",
                    e.log_text()
                );
            }
            if std::net::TcpStream::connect(&e.address).is_ok() {
                return e;
            }
            assert!(
                Instant::now() < deadline,
                "ibexporter ({what}) not listening on {} after 20 s; output:\n{}",
                e.address,
                e.log_text()
            );
            std::thread::sleep(Duration::from_millis(100));
        }
    }

    fn log_text(&self) -> String {
        let t = std::fs::read_to_string(&self.log).unwrap_or_default();
        let start = t.len().saturating_sub(4096);
        let start = (start..t.len())
            .find(|i| t.is_char_boundary(*i))
            .unwrap_or(t.len());
        t[start..].to_string()
    }
}

impl Drop for Exporter {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Runs one instant query; `Err` when Prometheus refuses it.
fn run_query(prom: &Prometheus, promql: &str) -> Result<Vec<Value>, String> {
    let v = prom.api(&format!("/api/v1/query?query={}", url_encode(promql)));
    if v["status"] != "success" {
        return Err(v.to_string());
    }
    Ok(v["data"]["result"].as_array().cloned().unwrap_or_default())
}

#[test]
fn every_dashboard_query_returns_data_from_a_real_exporter() {
    let queries = checked_queries();

    // Feed Hca: the hca-mixed fixture, plus one hw_counters file that is not
    // a number, so ibexporter_hca_read_errors_total has a sample.
    let hca_root = tempfile::tempdir().expect("tempdir");
    let hca_tree = hca_root.path().join("root");
    ibtools_tests::copy_tree(
        &Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/hca-mixed"),
        &hca_tree,
    )
    .expect("copying hca-mixed");
    std::fs::write(
        hca_tree.join("sys/class/infiniband/rxe0/ports/1/hw_counters/zz_unparsable"),
        "not a number\n",
    )
    .expect("writing the unparsable counter");

    // Feed Tuning: an untuned copy of the thesis host, watched against
    // thesis-2hca plus a [dma_latency] section (for holder_up).
    let thesis = ibtools_tests::fixture_copy("thesis-2s-mlx5");
    let prof_dir = tempfile::tempdir().expect("tempdir");
    let prof = prof_dir.path().join("thesis-2hca-hold.toml");
    let base = std::fs::read_to_string(ibtools_tests::profile("thesis-2hca"))
        .expect("reading profiles/thesis-2hca.toml");
    std::fs::write(&prof, format!("{base}\n[dma_latency]\nus = 10\n")).expect("writing profile");

    let path = |p: &Path| p.to_string_lossy().into_owned();
    let no_probe = || [NO_PROBE_FLAG.to_string(), "hca,shm,udp,wakeup".to_string()];
    let probe = Exporter::start("probe", &[INTERVAL_FLAG.into(), "1s".into()]);
    let hca = Exporter::start(
        "hca",
        &[[ROOT_FLAG.into(), path(&hca_tree)], no_probe()].concat(),
    );
    let tuning = Exporter::start(
        "tuning",
        &[
            [ROOT_FLAG.into(), path(&thesis.root)],
            [PROFILE_FLAG.into(), path(&prof)],
            no_probe(),
        ]
        .concat(),
    );

    let prom = Prometheus::start(
        &[
            Target::new("ibexporter-probe", &probe.address),
            Target::new("ibexporter-probe-classic", &probe.address).param("format", "openmetrics"),
            Target::new("ibexporter-hca", &hca.address),
            Target::new("ibexporter-tuning", &tuning.address),
        ],
        true,
    );
    for job in [
        "ibexporter-probe",
        "ibexporter-probe-classic",
        "ibexporter-hca",
        "ibexporter-tuning",
    ] {
        prom.wait_for(
            &format!("up{{job=\"{job}\"}} == 1"),
            Duration::from_secs(30),
        );
    }

    // Run every query until it returns data; collect what never does.
    let mut pending: Vec<(Query, String)> = queries
        .iter()
        .map(|q| (q.clone(), q.live.clone()))
        .collect();
    let total = pending.len();
    let mut refused = Vec::new();
    let mut last: BTreeMap<String, String> = BTreeMap::new();
    let deadline = Instant::now() + WAIT;
    loop {
        pending.retain(|(q, expr)| match run_query(&prom, expr) {
            Err(e) => {
                refused.push(format!(
                    "{} {}: Prometheus refused {expr:?}: {e}",
                    q.dashboard, q.origin
                ));
                false
            }
            Ok(r) if !r.is_empty() => false,
            Ok(r) => {
                last.insert(expr.clone(), format!("{r:?}"));
                true
            }
        });
        // Done when only queries [`may_be_empty`] lists are left: each has
        // run (Prometheus parsed and answered it), and by its reason none
        // can have data on these exporters, so waiting for one checks
        // nothing.
        if pending.iter().all(|(q, _)| may_be_empty(&q.expr).is_some()) {
            break;
        }
        if Instant::now() > deadline {
            break;
        }
        std::thread::sleep(Duration::from_secs(1));
    }
    let mut empty = Vec::new();
    for (q, expr) in &pending {
        match may_be_empty(&q.expr) {
            Some(why) => eprintln!(
                "note: {} {} returned no data, allowed: {why}",
                q.dashboard, q.origin
            ),
            None => empty.push(format!(
                "{} {} [{:?} feed]: no data for {expr:?} (as written: {:?})",
                q.dashboard, q.origin, q.feed, q.raw
            )),
        }
    }
    eprintln!(
        "{} of {total} queries returned data",
        total - pending.len() - refused.len()
    );
    assert!(
        refused.is_empty() && empty.is_empty(),
        "{} refused, {} empty after {WAIT:?}:\n{}\n{}\n\ntargets: {}\n\
         exporter logs:\n-- probe --\n{}\n-- hca --\n{}\n-- tuning --\n{}",
        refused.len(),
        empty.len(),
        refused.join("\n"),
        empty.join("\n"),
        prom.targets_summary(),
        probe.log_text(),
        hca.log_text(),
        tuning.log_text()
    );
}

#[test]
fn substitution_and_extraction_helpers() {
    let mut subs = Subs::new();
    subs.insert("job".into(), vec![(".*".into(), ".*".into())]);
    subs.insert(
        "slo_us".into(),
        vec![
            ("10".into(), "1e-05|1e-5".into()),
            ("25".into(), "2.5e-05".into()),
        ],
    );
    subs.insert("__rate_interval".into(), vec![("1m".into(), "1m".into())]);
    let got = substitute(
        "f(${slo_us:text}/1e6, x{job=~\"$job\", le=~\"$slo_us\"}[$__rate_interval]) [[job]]",
        &subs,
        &BTreeMap::new(),
    )
    .unwrap();
    assert_eq!(
        got,
        [
            "f(10/1e6, x{job=~\".*\", le=~\"1e-05|1e-5\"}[1m]) .*",
            "f(25/1e6, x{job=~\".*\", le=~\"2.5e-05\"}[1m]) .*",
        ]
    );
    let mut over = BTreeMap::new();
    over.insert("job".to_string(), "a|b".to_string());
    assert_eq!(
        substitute("up{job=~\"$job\"}", &subs, &over).unwrap(),
        ["up{job=~\"a|b\"}"]
    );
    assert!(substitute("$nope", &subs, &BTreeMap::new()).is_err());
    assert_eq!(
        label_values_query("label_values(m{job=~\"$job\"}, device)").as_deref(),
        Some("count by (device) (m{job=~\"$job\"})")
    );
    assert_eq!(feed_of("rate(ibexporter_hca_x_total[1m])"), Some(Feed::Hca));
    assert_eq!(feed_of("ibexporter_throttle_level"), Some(Feed::Probe));
    assert!(hard_coded_host("up{instance=\"node1:9427\"}").is_some());
    assert!(hard_coded_host("10.0.0.1").is_some());
    assert!(hard_coded_host("rate(x[1m:30s]) rxe0:1 ${slo_us:text}").is_none());
    assert!(hard_coded_host("x{instance=~\"$instance\"}").is_none());
    assert_eq!(
        selector_problems("sum(rate(ibprobe_x{job=~\"$job\"}[1m]))"),
        ["ibprobe_x{job=~\"$job\"} lacks instance=~\"$instance\""]
    );
}
