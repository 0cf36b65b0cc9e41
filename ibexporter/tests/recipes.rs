//! Two recipes of `docs/recipes/` run end to end from their own text
//! (`ibtools_tests::recipe`: the page's ```` ```sh ```` blocks in order,
//! each with `bash -euo pipefail` where its title says, through one
//! printed mapping of what differs from a real site):
//!
//! - `probe-a-cluster.md`: four hosts, each a network namespace with its
//!   own hostname (`tests/src/netns.rs`, a UTS namespace), and a fifth
//!   for Prometheus; the exporters from the recipe's config, the
//!   pinglist, Prometheus with the shipped `deploy/prometheus/` scrape
//!   configuration and rules. Asserted: each exporter reads 3 peers from
//!   the pinglist; the rules pass `promtool check config` (the recipe runs
//!   it) and evaluate (their rack-pair series exist); Prometheus scrapes
//!   the four hosts in their racks; every query of the mesh dashboard
//!   returns data; a stopped exporter makes IBExporterDown pending and its
//!   peers count lost probes of it; the undo stops every exporter and
//!   removes what the recipe wrote.
//! - `tail-latency-dashboards.md`: one host (a namespace), the exporter,
//!   Prometheus with native histograms and the rules; every query of the
//!   tail-latency dashboard returns data (the alerts panel and probe
//!   errors may rightly be empty, as in `tests/dashboards.rs`).
//!
//! A host's `/etc` is a directory of the test's own (the mapping's `/etc/`
//! row), so nothing outside the test's directories and namespaces is
//! touched. Needs root (`ip netns`); without it each test says SKIPPED,
//! and fails under `CI=true`.

use ibtools_tests::netns::NetnsMesh;
use ibtools_tests::recipe::{self, Block, Mapping};
use serde_json::Value;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

/// The repository's top directory (recipes run from a checkout).
fn repo() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("..")
}

/// The processes the recipe's blocks started in the background (their
/// pid files, `*.pid` under the test's directory), killed on drop, before
/// the namespaces go.
struct Started(PathBuf);

impl Started {
    /// Pids of the pid files under the directory, with their files.
    fn pids(&self) -> Vec<(PathBuf, String)> {
        let mut out = Vec::new();
        for host in std::fs::read_dir(&self.0).into_iter().flatten().flatten() {
            for f in std::fs::read_dir(host.path())
                .into_iter()
                .flatten()
                .flatten()
            {
                let p = f.path();
                if p.extension().is_some_and(|x| x == "pid") {
                    let pid = std::fs::read_to_string(&p).unwrap_or_default();
                    out.push((p, pid.trim().to_string()));
                }
            }
        }
        out
    }

    /// Whether a started process still runs.
    fn alive(pid: &str) -> bool {
        !pid.is_empty() && Path::new(&format!("/proc/{pid}")).exists()
    }
}

impl Drop for Started {
    fn drop(&mut self) {
        for (_, pid) in self.pids() {
            if Started::alive(&pid) {
                let _ = Command::new("kill").arg(&pid).status();
            }
        }
    }
}

/// The rows both recipes share: the units as their commands, a host's
/// `/etc` as a directory of its own (`dir`), the intervals shortened.
fn site_rows(dir: &str) -> Mapping {
    let unit = repo().join("deploy/systemd/ibexporter.service");
    let args = ibtools_tests::systemd::exec_start_args(&unit, "ibexporter", "")
        .unwrap_or_else(|e| panic!("{e}"))
        .join(" ");
    let exporter =
        format!("ibexporter {args} > {dir}/ibexporter.log 2>&1 < /dev/null & echo $! > {dir}/ibexporter.pid");
    let stop = format!("{{ kill $(cat {dir}/ibexporter.pid) 2>/dev/null || true; }}");
    let prometheus = format!(
        "ARGS=''; if [ -e /etc/default/prometheus ]; then . /etc/default/prometheus; fi; \
         prometheus $ARGS --config.file=/etc/prometheus/prometheus.yml \
         --storage.tsdb.path={dir}/prometheus-data > {dir}/prometheus.log 2>&1 < /dev/null & \
         echo $! > {dir}/prometheus.pid"
    );
    Mapping::new()
        .row(
            "systemctl enable --now ibexporter",
            &exporter,
            "no systemd in a namespace: the unit's ExecStart (deploy/systemd/ibexporter.service), in the background",
        )
        .row(
            "systemctl stop ibexporter",
            &stop,
            "the unit's stop: SIGTERM to its process; stopping a stopped unit succeeds",
        )
        .row(
            "systemctl disable --now ibexporter",
            &stop,
            "the unit's stop (nothing starts at boot here)",
        )
        .row(
            "systemctl restart prometheus",
            &prometheus,
            "Debian's prometheus.service: `prometheus $ARGS` from /etc/default/prometheus, its \
             default config file; its data in the test's directory",
        )
        .row(
            "interval = \"10s\"",
            "interval = \"1s\"",
            "one probe round a second, so the test sees data in seconds",
        )
        .row(
            "scrape_interval: 15s",
            "scrape_interval: 1s",
            "scrapes every second (in the recipe's blocks and the deploy/ files they install)",
        )
        .row(
            "scrape_timeout: 10s",
            "scrape_timeout: 1s",
            "within the shortened scrape interval",
        )
        .row(
            "evaluation_interval: 15s",
            "evaluation_interval: 1s",
            "rules evaluated every second",
        )
        .row(
            "/etc/",
            &format!("{dir}/etc/"),
            "a host's /etc is a directory of the test's own",
        )
        .note(
            "a host",
            "a network namespace with its own hostname (UTS namespace)",
            "one machine plays the hosts; each has its own ports 9427, 18515 and 9090",
        )
        .note(
            "ibexporter installed",
            "the built binary first on PATH",
            "the binary under test",
        )
}

/// Prints the mapping, and makes the checkout the blocks run in (the
/// `deploy/` files through `map`); returns the recipe's texts the mapping
/// must match (its blocks and those files), the checkout, and the guard
/// of what its blocks start.
fn prepare(
    name: &str,
    scratch: &Path,
    map: &Mapping,
    blocks: &[Block],
) -> (Vec<String>, PathBuf, Started) {
    eprintln!(
        "{}",
        map.table(name)
            .replace(&scratch.display().to_string(), "<test dir>")
    );
    let started = Started(scratch.to_path_buf());
    let checkout = scratch.join("checkout");
    let mut texts = checkout_copy(&checkout, map);
    texts.extend(blocks.iter().map(|b| b.code.clone()));
    (texts, checkout, started)
}

/// `/metrics` of the exporter of namespace `i` (empty while it is not serving).
fn metrics(mesh: &NetnsMesh, i: usize) -> String {
    let out = mesh
        .command(i, "curl")
        .args(["-sf", "localhost:9427/metrics"])
        .output()
        .expect("curl");
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// Runs one block in namespace `i` of `mesh` as host `name`, from the
/// checkout copy `cwd`; fails with everything it printed.
fn run_block(
    mesh: &NetnsMesh,
    i: usize,
    name: &str,
    cwd: &Path,
    block: &Block,
    map: &Mapping,
) -> String {
    let script = format!("hostname {name}\n{}", map.script(block));
    let path = format!(
        "{}:{}",
        Path::new(env!("CARGO_BIN_EXE_ibexporter"))
            .parent()
            .expect("a bin dir")
            .display(),
        std::env::var("PATH").unwrap_or_default()
    );
    let out = mesh
        .command(i, "unshare")
        .args(["--uts", "bash", "-c", &script])
        .current_dir(cwd)
        .env("PATH", path)
        .output()
        .expect("running ip netns exec");
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    eprintln!(
        "-- line {} ({}, as {name}):\n{}",
        block.line,
        block.place(),
        text.trim_end()
    );
    assert!(
        out.status.success(),
        "the block on line {} ({}) failed on {name} ({}):\n{script}\n--- it said:\n{text}",
        block.line,
        block.place(),
        out.status
    );
    text
}

/// Copies the files a recipe installs from the checkout (`deploy/`),
/// rewritten through `map`, to `to`: the checkout the blocks run in.
fn checkout_copy(to: &Path, map: &Mapping) -> Vec<String> {
    let mut texts = Vec::new();
    for rel in [
        "deploy/prometheus/prometheus.yml",
        "deploy/prometheus/rules/ibexporter-recording.rules.yml",
        "deploy/prometheus/rules/ibexporter-plan.rules.yml",
        "deploy/prometheus/rules/ibexporter-alerts.rules.yml",
    ] {
        let text = std::fs::read_to_string(repo().join(rel)).expect("a deploy file");
        let dst = to.join(rel);
        std::fs::create_dir_all(dst.parent().unwrap()).unwrap();
        std::fs::write(&dst, map.apply(&text)).unwrap();
        texts.push(text);
    }
    texts
}

/// Polls `expr` (promtool in namespace `prom`) until `ok` holds.
fn wait_query(
    mesh: &NetnsMesh,
    prom: usize,
    expr: &str,
    secs: u64,
    ok: impl Fn(&[Value]) -> bool,
) -> Vec<Value> {
    ibtools_tests::prom::promtool_wait(
        || mesh.command(prom, "promtool"),
        "http://localhost:9090",
        expr,
        secs,
        ok,
    )
}

fn value(v: &[Value]) -> Option<f64> {
    v.first()?["value"][1].as_str()?.parse().ok()
}

/// Every query of a dashboard, `$job` as `jobs`, the other variables as
/// `.*` (or each option): run until each returns data, except those
/// `may_be_empty` names; fails listing the rest.
fn dashboard_queries_return_data(
    mesh: &NetnsMesh,
    prom: usize,
    file: &str,
    jobs: &str,
    may_be_empty: impl Fn(&str) -> bool,
) -> usize {
    let path = repo().join("dashboards").join(file);
    let dash: Value =
        serde_json::from_str(&std::fs::read_to_string(&path).expect("the dashboard")).unwrap();
    let subs = ibtools_tests::grafana::substitutions(&dash);
    let over = [("job".to_string(), jobs.to_string())]
        .into_iter()
        .collect();
    let mut pending: Vec<(String, String)> = Vec::new();
    for (origin, raw) in ibtools_tests::grafana::raw_queries(&dash).unwrap() {
        for expr in ibtools_tests::grafana::substitute(&raw, &subs, &over).unwrap() {
            pending.push((origin.clone(), expr));
        }
    }
    let total = pending.len();
    let deadline = Instant::now() + Duration::from_secs(40);
    let mut refused = Vec::new();
    loop {
        pending.retain(|(origin, expr)| {
            match ibtools_tests::prom::promtool_query(
                mesh.command(prom, "promtool"),
                "http://localhost:9090",
                expr,
            ) {
                Ok(r) => r.is_empty(),
                Err(e) => {
                    refused.push(format!("{origin}: {expr}: {e}"));
                    false
                }
            }
        });
        if pending.iter().all(|(_, e)| may_be_empty(e)) || Instant::now() > deadline {
            break;
        }
        std::thread::sleep(Duration::from_secs(1));
    }
    let empty: Vec<String> = pending
        .iter()
        .filter(|(_, e)| !may_be_empty(e))
        .map(|(o, e)| format!("{o}: {e}"))
        .collect();
    assert!(
        refused.is_empty() && empty.is_empty(),
        "{file}: {} refused, {} without data:\n{}\n{}",
        refused.len(),
        empty.len(),
        refused.join("\n"),
        empty.join("\n")
    );
    eprintln!(
        "{file}: {} of {total} queries returned data ({} allowed empty)",
        total - pending.len(),
        pending.len()
    );
    total
}

/// Asserts the recipe's blocks are where the test expects them (a
/// changed recipe fails here, naming what changed, before anything runs).
fn expect_places(name: &str, blocks: &[Block], places: &[&str]) {
    let got: Vec<&str> = blocks.iter().map(Block::place).collect();
    assert_eq!(
        got, places,
        "{name}: its blocks' places changed; update the steps of its test"
    );
}

const CLUSTER_HOSTS: usize = 4;

/// The recipe's blocks and the start time, or `None` when the test is
/// skipped (not root; a failure under `CI=true`).
fn start(test: &str, name: &str) -> Option<(Instant, Vec<Block>)> {
    if !ibtools_tests::root_or_skip(test, "network namespaces, ip netns exec") {
        return None;
    }
    Some((Instant::now(), recipe::blocks(&recipe::text(name))))
}

#[test]
fn recipe_probe_a_cluster_runs_on_a_namespace_mesh() {
    let name = "probe-a-cluster";
    let Some((t0, blocks)) = start("recipe_probe_a_cluster_runs_on_a_namespace_mesh", name) else {
        return;
    };
    let each = "on each host";
    let all = "on each host and on the Prometheus host";
    let prom_host = "on the Prometheus host";
    expect_places(
        name,
        &blocks,
        &[
            each,
            all,
            each,
            prom_host,
            prom_host,
            prom_host,
            "on rdma-node-04",
            prom_host,
            each,
        ],
    );

    let scratch = ibtools_tests::scratch_dir();
    let mesh = NetnsMesh::new(CLUSTER_HOSTS + 1).unwrap_or_else(|e| panic!("the mesh: {e}"));
    let prom = CLUSTER_HOSTS;
    let names: Vec<String> = (0..=CLUSTER_HOSTS)
        .map(|i| {
            if i == prom {
                "prometheus".to_string()
            } else {
                format!("rdma-node-{:02}", i + 1)
            }
        })
        .collect();
    let map_for = |i: usize| {
        let mut m = site_rows(&scratch.path().join(&names[i]).display().to_string())
            .row(
                "refresh = \"30s\"",
                "refresh = \"1s\"",
                "the pinglist checked every second",
            )
            .row(
                "transport = \"rc\"",
                "transport = \"udp\"",
                "no HCA in a namespace: peers are probed over udp, the transport that needs none",
            );
        for h in 0..CLUSTER_HOSTS {
            m = m.row(
                &format!("rdma-node-{:02}.example.org", h + 1),
                &mesh.ip(h),
                "a host is a network namespace on one bridge; its name is its address",
            );
        }
        m
    };
    for n in &names {
        std::fs::create_dir_all(scratch.path().join(n).join("etc")).unwrap();
    }
    // The deploy/ files are installed on the Prometheus host: its mapping.
    let (texts, checkout, started) = prepare(name, scratch.path(), &map_for(prom), &blocks);
    let texts: Vec<&str> = texts.iter().map(String::as_str).collect();
    map_for(0).assert_each_row_used(name, &texts);

    let hosts: Vec<usize> = (0..CLUSTER_HOSTS).collect();
    let run_on = |who: &[usize], b: &Block| {
        for &i in who {
            run_block(&mesh, i, &names[i], &checkout, b, &map_for(i));
        }
    };

    // 1. Exporters, then 2. the pinglist.
    run_on(&hosts, &blocks[0]);
    run_on(&[0, 1, 2, 3, prom], &blocks[1]);
    for &i in &hosts {
        let deadline = Instant::now() + Duration::from_secs(15);
        loop {
            let m = metrics(&mesh, i);
            if m.contains("ibexporter_targets{origin=\"file_sd\"} 3") {
                break;
            }
            assert!(
                Instant::now() < deadline,
                "{} never read its 3 peers from the pinglist; its targets:\n{}\nits log:\n{}",
                names[i],
                m.lines()
                    .filter(|l| l.starts_with("ibexporter_targets"))
                    .collect::<Vec<_>>()
                    .join("\n"),
                std::fs::read_to_string(scratch.path().join(&names[i]).join("ibexporter.log"))
                    .unwrap_or_default()
            );
            std::thread::sleep(Duration::from_millis(200));
        }
    }
    run_on(&hosts, &blocks[2]);

    // 3. Prometheus with the shipped configuration and rules.
    run_on(&[prom], &blocks[3]);
    let racks = wait_query(
        &mesh,
        prom,
        "count by (rack) (up{job=\"ibexporter\"} == 1)",
        30,
        |v| v.len() == 2 && v.iter().all(|s| s["value"][1] == "2"),
    );
    eprintln!("hosts up by rack: {racks:?}");
    run_on(&[prom], &blocks[4]);

    // 4. The dashboards: four hosts, the rules' rack pairs, every mesh query.
    wait_query(
        &mesh,
        prom,
        "count(count by (instance) (ibexporter_build_info))",
        10,
        |v| value(v) == Some(CLUSTER_HOSTS as f64),
    );
    wait_query(
        &mesh,
        prom,
        "rack_pair:ibprobe_latency_window_p99_seconds:max",
        30,
        |v| v.len() == 4,
    );
    run_on(&[prom], &blocks[5]);
    dashboard_queries_return_data(&mesh, prom, "mesh.json", "ibexporter", |e| {
        // Alerts exist only while one is pending or firing (step 5 makes one).
        e.contains("ALERTS{")
    });

    // 5. A fault: rdma-node-04's exporter stops.
    run_on(&[3], &blocks[6]);
    let dead = mesh.ip(3);
    wait_query(
        &mesh,
        prom,
        &format!("ALERTS{{alertname=\"IBExporterDown\", instance=\"{dead}:9427\"}}"),
        20,
        |v| !v.is_empty(),
    );
    wait_query(
        &mesh,
        prom,
        &format!(
            "count(sum by (source) (increase(ibprobe_probes_total{{target=\"{dead}\", result!=\"ok\"}}[1m])) > 0)"
        ),
        20,
        |v| value(v) == Some(3.0),
    );
    run_on(&[prom], &blocks[7]);

    // Undo: no exporter left, nothing of the recipe left in a host's /etc.
    run_on(&hosts, &blocks[8]);
    for (file, pid) in started.pids() {
        if file.ends_with("ibexporter.pid") {
            ibtools_tests::wait_until(&format!("{} to stop", file.display()), || {
                !Started::alive(&pid)
            });
        }
    }
    for &i in &hosts {
        let etc = scratch.path().join(&names[i]).join("etc");
        let left: Vec<_> = std::fs::read_dir(&etc).unwrap().flatten().collect();
        assert!(left.is_empty(), "{} left {left:?}", names[i]);
    }
    drop(started);
    drop(mesh);
    eprintln!("recipe {name}: {:.1} s", t0.elapsed().as_secs_f64());
}

#[test]
fn recipe_tail_latency_dashboards_runs_on_one_host() {
    let name = "tail-latency-dashboards";
    let Some((t0, blocks)) = start("recipe_tail_latency_dashboards_runs_on_one_host", name) else {
        return;
    };
    let host = "the host";
    expect_places(name, &blocks, &[host, host, host, host, host]);

    let scratch = ibtools_tests::scratch_dir();
    let mesh = NetnsMesh::new(1).unwrap_or_else(|e| panic!("the namespace: {e}"));
    let dir = scratch.path().join("node1");
    std::fs::create_dir_all(dir.join("etc/default")).unwrap();
    let map = site_rows(&dir.display().to_string());
    let (texts, checkout, started) = prepare(name, scratch.path(), &map, &blocks);
    let texts: Vec<&str> = texts.iter().map(String::as_str).collect();
    // The shared rows all apply but the stop of step 5 of the cluster recipe.
    assert_eq!(
        map.unused(&texts),
        ["systemctl stop ibexporter"],
        "{name}: the mapping's rows no longer match its commands"
    );

    let run = |b: &Block| run_block(&mesh, 0, "node1", &checkout, b, &map);

    // 1. The exporter; its window percentiles once a round ran.
    run(&blocks[0]);
    ibtools_tests::wait_until("a p99 in the exporter's window", || {
        metrics(&mesh, 0).contains("quantile=\"0.99\"")
    });
    let said = run(&blocks[1]);
    assert!(said.contains("target=\"loopback\""), "{said}");

    // 2. Prometheus with native histograms and the rules.
    run(&blocks[2]);
    wait_query(
        &mesh,
        0,
        "histogram_quantile(0.99, sum by (target, le) (rate(ibprobe_latency_seconds_bucket[1m])))",
        30,
        |v| !v.is_empty() && v.iter().all(|s| s["value"][1] != "NaN"),
    );
    let said = run(&blocks[3]);
    assert!(said.contains("target=\"loopback\""), "{said}");
    let native = wait_query(
        &mesh,
        0,
        "count(ibprobe_latency_seconds{job=\"ibexporter\"})",
        10,
        |v| value(v).is_some_and(|n| n > 0.0),
    );
    eprintln!("native histograms stored: {native:?}");

    // 3. The dashboard: every query returns data.
    dashboard_queries_return_data(
        &mesh,
        0,
        "tail-latency.json",
        "ibexporter|ibexporter-classic",
        |e| {
            // Alerts exist only while one fires; no probe of the loopback
            // targets fails, so no error has a reason.
            e.contains("ALERTS{") || e.contains("ibprobe_probe_errors_total")
        },
    );

    // Undo: the exporter stops; the recipe's files are gone.
    run(&blocks[4]);
    for (file, pid) in started.pids() {
        if file.ends_with("ibexporter.pid") {
            ibtools_tests::wait_until("the exporter to stop", || !Started::alive(&pid));
        }
    }
    assert!(!dir.join("etc/ibexporter").exists());
    assert!(!dir.join("etc/prometheus/rules").exists());
    drop(started);
    drop(mesh);
    eprintln!("recipe {name}: {:.1} s", t0.elapsed().as_secs_f64());
}
