//! `ibexporter localize`: rounds from saved snapshots and from a real
//! Prometheus, ranked suspects in three formats, exit codes, and hostile
//! input (a snapshot file or a Prometheus answer that is truncated,
//! oversized, of another schema, with negative values or too many hosts)
//! refused with one line naming the file or URL.

use std::io::{Read, Write};
use std::net::TcpListener;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::time::{Duration, Instant};

use ibexporter::limits::MAX_HOSTS;
use ibexporter::localize::model::Entity;
use ibexporter::localize::sim::{self, parse_scenarios};
use ibexporter::localize::snapshot::{Snapshot, SCHEMA};
use ibexporter::targets::plan::{ClusterPlan, PlanKind};
use ibexporter::targets::simulate::synthetic;

/// The shipped example (`--help`, the docs).
const FIXTURE: &str = "tests/fixtures/localize/slow-host.json";

fn bin() -> Command {
    Command::new(env!("CARGO_BIN_EXE_ibexporter"))
}

fn localize(args: &[&str]) -> Output {
    bin().arg("localize").args(args).output().unwrap()
}

fn text(b: &[u8]) -> String {
    String::from_utf8_lossy(b).into_owned()
}

/// A simulated mesh of 16 hosts (`rdma01`...) in 4 racks (`rack-a`...),
/// every pair probed, 3 rounds of `faults`; with the names the injected
/// faults should be reported under (kind, entity).
fn simulated(faults: &str, seed: u64) -> (Snapshot, Vec<(String, String)>) {
    let plan = ClusterPlan::new(synthetic(16, 4), PlanKind::Full, 1);
    let scenario = if faults.is_empty() {
        sim::Scenario(Vec::new())
    } else {
        parse_scenarios(faults).unwrap().remove(0)
    };
    let (rounds, want) = sim::rounds(&plan, 100, &scenario, seed, 3);
    let topo = sim::topology(&plan);
    let names: Vec<String> = (1..=16).map(|i| format!("rdma{i:02}")).collect();
    let racks: Vec<String> = ["a", "b", "c", "d"]
        .iter()
        .map(|r| format!("rack-{r}"))
        .collect();
    let snap = Snapshot::from_rounds(
        &format!("simulation: 16 hosts, 4 racks, {faults}, seed {seed}"),
        &names,
        &racks,
        &topo,
        &rounds,
        300.0,
        1_795_863_600.0,
    );
    let want = want
        .into_iter()
        .map(|(k, e)| {
            let e = match e {
                Entity::Host(h) => names[h as usize].clone(),
                Entity::Racks(a, b) => format!("{} <-> {}", racks[a as usize], racks[b as usize]),
                Entity::Pair(p, t) => format!("{} -> {}", names[p as usize], names[t as usize]),
            };
            (k.name().to_string(), e)
        })
        .collect();
    (snap, want)
}

fn write(dir: &Path, name: &str, bytes: &[u8]) -> PathBuf {
    let p = dir.join(name);
    std::fs::write(&p, bytes).unwrap();
    p
}

fn json(o: &Output) -> serde_json::Value {
    serde_json::from_slice(&o.stdout)
        .unwrap_or_else(|e| panic!("{e}: {}\n{}", text(&o.stdout), text(&o.stderr)))
}

fn suspects(v: &serde_json::Value) -> Vec<(String, String)> {
    v["suspects"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| {
            (
                s["kind"].as_str().unwrap().to_string(),
                s["entity"].as_str().unwrap().to_string(),
            )
        })
        .collect()
}

#[test]
fn the_shipped_example_is_what_the_simulator_makes() {
    let (snap, _) = simulated("slow-host+slow-rack-pair", 3);
    let made = serde_json::to_string(&snap).unwrap() + "\n";
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join(FIXTURE);
    if std::env::var_os("GOLDEN_UPDATE").is_some() {
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(&path, &made).unwrap();
    }
    let shipped = std::fs::read_to_string(&path).unwrap();
    assert!(
        shipped == made,
        "{FIXTURE} differs from the simulator's rounds (GOLDEN_UPDATE=1 rewrites it)"
    );
}

#[test]
fn a_saved_snapshot_names_the_injected_faults_first() {
    let dir = tempfile::tempdir().unwrap();
    for (faults, seed) in [
        ("slow-host", 11),
        ("slow-rack-pair", 12),
        ("slow-host+slow-rack-pair", 3),
    ] {
        let (snap, want) = simulated(faults, seed);
        let saved = snap.save(&dir.path().join(faults)).unwrap();
        let o = localize(&["--snapshot", saved.to_str().unwrap(), "--json"]);
        assert_eq!(o.status.code(), Some(1), "{faults}: {}", text(&o.stderr));
        let v = json(&o);
        assert_eq!(v["schema"], "ibexporter.localize/1");
        assert_eq!(v["hosts"], 16);
        assert_eq!(v["racks"], 4);
        assert_eq!(v["rounds_at"].as_array().unwrap().len(), 3);
        let got = suspects(&v);
        assert_eq!(
            got[..want.len()]
                .iter()
                .collect::<std::collections::BTreeSet<_>>(),
            want.iter().collect(),
            "{faults}: {v:#}"
        );
        let top = &v["suspects"][0];
        assert_eq!(top["rank"], 1);
        let c = top["confidence"].as_f64().unwrap();
        assert!(c > 0.3 && c <= 1.0, "{top}");
        let accused = top["accused_in"].as_array().unwrap();
        assert!(accused.len() >= 2, "slowness needs 2 rounds: {top}");
        assert!(top["evidence"].as_str().unwrap().contains("slow"), "{top}");
        if top["kind"] == "rack-pair" {
            assert_eq!(top["racks"].as_array().unwrap().len(), 2, "{top}");
            // The evidence names the racks, not their indices.
            let ev = top["evidence"].as_str().unwrap();
            assert!(ev.contains("racks rack-"), "{ev}");
        } else {
            assert_eq!(top["hosts"][0], top["entity"], "{top}");
        }
    }
}

#[test]
fn a_healthy_mesh_names_nobody_and_exits_0() {
    let dir = tempfile::tempdir().unwrap();
    let (snap, _) = simulated("", 5);
    let saved = snap.save(dir.path()).unwrap();
    let o = localize(&["--snapshot", saved.to_str().unwrap()]);
    assert_eq!(
        o.status.code(),
        Some(0),
        "{}{}",
        text(&o.stdout),
        text(&o.stderr)
    );
    assert!(
        text(&o.stdout).contains("no suspect"),
        "{}",
        text(&o.stdout)
    );
    // Several snapshots replay as one run of their rounds.
    let o = localize(&[
        "--snapshot",
        saved.to_str().unwrap(),
        saved.to_str().unwrap(),
        "--json",
    ]);
    assert_eq!(json(&o)["rounds_at"].as_array().unwrap().len(), 6);
}

#[test]
fn table_and_markdown_are_as_snapshotted() {
    let fixture = Path::new(env!("CARGO_MANIFEST_DIR")).join(FIXTURE);
    let f = fixture.to_str().unwrap();
    let table = localize(&["--snapshot", f]);
    assert_eq!(table.status.code(), Some(1), "{}", text(&table.stderr));
    insta::assert_snapshot!("localize-table", text(&table.stdout));
    let md = localize(&["--snapshot", f, "-f", "markdown"]);
    assert_eq!(md.status.code(), Some(1));
    insta::assert_snapshot!("localize-markdown", text(&md.stdout));
}

#[test]
fn hostile_snapshots_are_refused_naming_the_file() {
    let dir = tempfile::tempdir().unwrap();
    let (snap, _) = simulated("slow-host", 11);
    let good = serde_json::to_string(&snap).unwrap();
    let mut cases: Vec<(PathBuf, &str)> = vec![
        (
            write(
                dir.path(),
                "truncated.json",
                &good.as_bytes()[..good.len() / 2],
            ),
            "not JSON",
        ),
        (
            write(
                dir.path(),
                "v9.json",
                good.replace(SCHEMA, "ibexporter.localize-snapshot/9")
                    .as_bytes(),
            ),
            "not a snapshot this version reads",
        ),
        (
            write(
                dir.path(),
                "nan.json",
                good.replacen("\"p50_us\":", "\"p50_us\":NaN,\"x\":", 1)
                    .as_bytes(),
            ),
            "not JSON",
        ),
        (
            write(
                dir.path(),
                "negative.json",
                good.replacen("\"p50_us\":", "\"p50_us\":-", 1).as_bytes(),
            ),
            "p50_us must be a number >= 0",
        ),
        (
            write(
                dir.path(),
                "lost.json",
                good.replacen("\"lost\":0", "\"lost\":1000", 1).as_bytes(),
            ),
            "lost 1000 of 100 sent",
        ),
    ];
    // One host more than the limit.
    let mut many = snap.clone();
    many.hosts = (0..=MAX_HOSTS)
        .map(|i| ibexporter::localize::snapshot::Host {
            name: format!("h{i}"),
            rack: "r".into(),
        })
        .collect();
    many.rounds[0].probes.clear();
    let many_path = write(
        dir.path(),
        "many.json",
        serde_json::to_string(&many).unwrap().as_bytes(),
    );
    cases.push((many_path, "more than the limit of 100000"));
    // Larger than the file limit: refused from its size, never read.
    let huge = dir.path().join("huge.json");
    std::fs::File::create(&huge)
        .unwrap()
        .set_len(ibexporter::limits::MAX_SNAPSHOT_BYTES + 1)
        .unwrap();
    cases.push((huge, "is larger than"));
    cases.push((dir.path().to_path_buf(), "not a regular file"));
    for (path, why) in &cases {
        let t = Instant::now();
        let o = localize(&["--snapshot", path.to_str().unwrap()]);
        let err = text(&o.stderr);
        assert_eq!(o.status.code(), Some(2), "{}: {err}", path.display());
        assert!(
            err.contains(path.to_str().unwrap()) && err.contains(why),
            "{}: wanted {why:?} in {err}",
            path.display()
        );
        assert_eq!(err.lines().count(), 1, "{err}");
        assert!(o.stdout.is_empty());
        assert!(t.elapsed() < Duration::from_secs(10), "{}", path.display());
    }
}

/// A server answering every connection with `reply` (after the request).
fn fake_prometheus(reply: Vec<u8>) -> String {
    let l = TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = l.local_addr().unwrap();
    std::thread::spawn(move || {
        for s in l.incoming() {
            let Ok(mut s) = s else { return };
            let mut buf = [0u8; 8192];
            let _ = s.read(&mut buf);
            let _ = s.write_all(&reply);
        }
    });
    format!("http://{addr}")
}

#[test]
fn bad_prometheus_answers_exit_3_naming_the_url() {
    let truncated = fake_prometheus(
        b"HTTP/1.0 200 OK\r\n\r\n{\"status\":\"success\",\"data\":{\"resultType\":\"vector\",\"result\":[{\"metric\""
            .to_vec(),
    );
    let huge =
        fake_prometheus(b"HTTP/1.0 200 OK\r\nContent-Length: 300000000000\r\n\r\n{".to_vec());
    let negative = fake_prometheus(
        r#"HTTP/1.0 200 OK
Content-Type: application/json

{"status":"success","data":{"resultType":"vector","result":[{"metric":{"source":"a","target":"b:1","target_rack":"r","instance":"a:9427","source_rack":"r"},"value":[1,"-5"]}]}}"#
            .replace('\n', "\r\n")
            .into_bytes()
    );
    // One target more than the host limit, in the first answer read.
    let mut many = String::from(r#"{"status":"success","data":{"resultType":"vector","result":["#);
    for i in 0..=ibexporter::limits::MAX_HOSTS {
        if i > 0 {
            many.push(',');
        }
        many.push_str(&format!(
            r#"{{"metric":{{"target":"t{i}:1","target_rack":"r"}},"value":[1,"1"]}}"#
        ));
    }
    many.push_str("]}}");
    let many = fake_prometheus(format!("HTTP/1.0 200 OK\r\n\r\n{many}").into_bytes());
    let closed = {
        let l = TcpListener::bind("127.0.0.1:0").unwrap();
        format!("http://{}", l.local_addr().unwrap())
    };
    for (url, why) in [
        (&truncated, "not a Prometheus API answer"),
        (&huge, "more than the limit"),
        (&negative, "is -5, not a count"),
        (&many, "100001 targets, more than the limit of 100000 hosts"),
        (&closed, "cannot connect"),
    ] {
        let o = localize(&["--prometheus", url, "--at", "1795863600"]);
        let err = text(&o.stderr);
        assert_eq!(o.status.code(), Some(3), "{url}: {err}");
        assert!(
            err.contains(url.as_str()) && err.contains(why),
            "{url}: wanted {why:?} in {err}"
        );
        assert!(o.stdout.is_empty());
    }
    for (args, why) in [
        (
            vec!["--prometheus", "https://p:9090"],
            "https is not supported",
        ),
        (
            vec!["--prometheus", "http://p:9090", "--at", "yesterday"],
            "--at \"yesterday\"",
        ),
        (
            vec!["--prometheus", "http://p:9090", "--rounds", "0"],
            "--rounds 0",
        ),
        (
            vec!["--prometheus", "http://p:9090", "--round-window", "5"],
            "5 what?",
        ),
    ] {
        let o = localize(&args);
        assert_eq!(o.status.code(), Some(2), "{args:?}: {}", text(&o.stderr));
        assert!(
            text(&o.stderr).contains(why),
            "{args:?}: {}",
            text(&o.stderr)
        );
    }
}

#[test]
fn sigterm_wakes_a_wait_on_a_silent_prometheus_with_exit_130() {
    let l = TcpListener::bind("127.0.0.1:0").unwrap();
    let url = format!("http://{}", l.local_addr().unwrap());
    let mut child = bin()
        .args(["localize", "--prometheus", &url])
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    // Accepted, never answered: the command waits in a read.
    let (_conn, _) = l.accept().unwrap();
    std::thread::sleep(Duration::from_millis(300));
    let t = Instant::now();
    let pid = child.id().to_string();
    assert!(Command::new("kill")
        .args(["-TERM", &pid])
        .status()
        .unwrap()
        .success());
    let st = child.wait().unwrap();
    assert!(t.elapsed() < Duration::from_secs(3), "{:?}", t.elapsed());
    assert_eq!(st.code(), Some(130));
    let mut err = String::new();
    child
        .stderr
        .take()
        .unwrap()
        .read_to_string(&mut err)
        .unwrap();
    assert!(err.contains("interrupted"), "{err}");
}

/// OpenMetrics lines of a gauge that is 1 at every time of `times`.
fn gauge(out: &mut String, name: &str, labels: &str, times: &[i64]) {
    for t in times {
        out.push_str(&format!("{name}{{{labels}}} 1 {t}\n"));
    }
}

/// OpenMetrics lines of a counter growing by `per_step` at each time.
fn series(out: &mut String, name: &str, labels: &str, times: &[i64], per_step: f64) {
    for (i, t) in times.iter().enumerate() {
        out.push_str(&format!(
            "{name}{{{labels}}} {} {t}\n",
            per_step * (i + 1) as f64
        ));
    }
}

#[test]
fn a_real_prometheus_names_the_slowed_host() {
    // 9 exporters h0..h8 in racks ra, rb, rc, every pair probed; h4's
    // probes (both ways) and its own wake-ups are 3x slower. Backfilled
    // as 10 minutes of 10 s samples ending a minute ago. The even hosts'
    // probes also carry a synthetic hardware-timestamp split (no device
    // here stamps completions): h4's own delay is slow as prober and as
    // responder, the network never; the odd hosts' probes carry none.
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_secs() as i64;
    let end = now - now % 10 - 60;
    let times: Vec<i64> = (0..60).map(|i| end - 590 + 10 * i).collect();
    let (hosts, slow) = (9usize, 4usize);
    let rack = |i: usize| ["ra", "rb", "rc"][i / 3];
    let target = |i: usize| format!("10.0.0.{}:18515", i + 1);
    let inst = |i: usize| format!("10.0.0.{}:9427", i + 1);
    // Cumulative messages per 10 s at each bound: fast (p50 1.75 us),
    // slow (p50 6 us).
    let les = [
        "1e-06", "1.5e-06", "2e-06", "3e-06", "5e-06", "7e-06", "1e-05", "+Inf",
    ];
    let fast = [0.0, 20.0, 80.0, 100.0, 100.0, 100.0, 100.0, 100.0];
    let slowb = [0.0, 0.0, 0.0, 0.0, 20.0, 80.0, 100.0, 100.0];
    let mut om = String::new();
    for i in 0..hosts {
        let l = format!(
            "instance=\"{}\",job=\"ib\",plan=\"full\",source_rack=\"{}\"",
            inst(i),
            rack(i)
        );
        gauge(&mut om, "ibexporter_plan", &l, &times);
    }
    for i in 0..hosts {
        for j in (0..hosts).filter(|&j| j != i) {
            let l = format!(
                "instance=\"{}\",job=\"ib\",target=\"{}\",target_rack=\"{}\"",
                inst(i),
                target(j),
                rack(j)
            );
            gauge(&mut om, "ibexporter_plan_peer_rack", &l, &times);
        }
    }
    let base = |i: usize, j: &str| {
        format!("instance=\"{}\",job=\"ib\",source=\"h{i}\",target=\"{j}\",transport=\"udp\",op=\"send\",size_bytes=\"32\"", inst(i))
    };
    for i in 0..hosts {
        for j in (0..hosts).filter(|&j| j != i) {
            for (r, n) in [("ok", 100.0), ("timeout", 0.0), ("error", 0.0)] {
                series(
                    &mut om,
                    "ibprobe_probes_total",
                    &format!("{},result=\"{r}\"", base(i, &target(j))),
                    &times,
                    n,
                );
            }
        }
    }
    for i in 0..hosts {
        for j in (0..hosts).filter(|&j| j != i) {
            let b = if i == slow || j == slow {
                &slowb
            } else {
                &fast
            };
            for (le, n) in les.iter().zip(b) {
                series(
                    &mut om,
                    "ibprobe_latency_seconds_bucket",
                    &format!("{},le=\"{le}\"", base(i, &target(j))),
                    &times,
                    *n,
                );
            }
            if i % 2 == 1 {
                continue;
            }
            for (name, moved) in [
                ("ibprobe_hw_prober_delay_seconds_bucket", i == slow),
                ("ibprobe_hw_responder_delay_seconds_bucket", j == slow),
                ("ibprobe_hw_network_rtt_seconds_bucket", false),
            ] {
                let b = if moved { &slowb } else { &fast };
                for (le, n) in les.iter().zip(b) {
                    series(
                        &mut om,
                        name,
                        &format!("{},le=\"{le}\"", base(i, &target(j))),
                        &times,
                        *n,
                    );
                }
            }
        }
        // HCA port counters: h4's link counts 2 symbol errors every 10 s,
        // the others none; h8 serves no port counters.
        if i != 8 {
            series(
                &mut om,
                "ibexporter_hca_port_symbol_errors_total",
                &format!(
                    "instance=\"{}\",job=\"ib\",device=\"mlx5_0\",port=\"1\"",
                    inst(i)
                ),
                &times,
                if i == slow { 2.0 } else { 0.0 },
            );
        }
        // Own wake-ups: p99 about 15 us, 50 us on the slow host.
        let w = format!("instance=\"{}\",job=\"ib\",source=\"h{i}\",target=\"cpu0\",transport=\"host\",op=\"wakeup\",size_bytes=\"0\"", inst(i));
        let b: [f64; 4] = if i == slow {
            [0.0, 0.0, 50.0, 100.0]
        } else {
            [50.0, 100.0, 100.0, 100.0]
        };
        for (le, n) in ["1e-05", "1.5e-05", "3e-05", "+Inf"].iter().zip(b) {
            series(
                &mut om,
                "ibprobe_latency_seconds_bucket",
                &format!("{w},le=\"{le}\""),
                &times,
                n,
            );
        }
    }
    om.push_str("# EOF\n");
    let prom = ibtools_tests::prom::Prometheus::start_backfilled(&om);
    let url = format!("http://{}", prom.address);
    let dir = tempfile::tempdir().unwrap();
    let at = end.to_string();
    // Backfilled blocks may take a moment to be served after ready.
    let deadline = Instant::now() + Duration::from_secs(20);
    let o = loop {
        let o = localize(&[
            "--prometheus",
            &url,
            "--at",
            &at,
            "--round-window",
            "2m",
            "--json",
            "--save",
            dir.path().to_str().unwrap(),
        ]);
        if o.status.code() != Some(0) || Instant::now() > deadline {
            break o;
        }
        std::thread::sleep(Duration::from_millis(500));
    };
    assert_eq!(
        o.status.code(),
        Some(1),
        "{}\n{}\n{}",
        text(&o.stdout),
        text(&o.stderr),
        prom.log_tail()
    );
    let v = json(&o);
    assert_eq!(v["hosts"], 9, "{v:#}");
    assert_eq!(v["racks"], 3, "{v:#}");
    let got = suspects(&v);
    assert_eq!(got[0], ("host".to_string(), "h4".to_string()), "{v:#}");
    assert_eq!(got.len(), 1, "only the slowed host: {v:#}");
    assert_eq!(v["suspects"][0]["accused_in"], serde_json::json!([1, 2, 3]));
    let evidence = v["suspects"][0]["evidence"].as_str().unwrap_or_default();
    assert!(
        evidence.contains("by hardware timestamps") && evidence.contains("prober delay"),
        "{evidence}"
    );
    let saved = std::fs::read_dir(dir.path())
        .unwrap()
        .next()
        .unwrap()
        .unwrap()
        .path();
    let snap = Snapshot::read(&saved).unwrap();
    // The port counters: h4's errors over the 2 minute window (22 in 110
    // s of samples, extrapolated to the window), none elsewhere, unknown
    // for h8.
    let errors = &snap.rounds[2].port_errors;
    let h4 = errors.get("h4").copied().unwrap_or(-1.0);
    assert!((22.0..=24.0).contains(&h4), "{errors:?}");
    assert_eq!(errors.get("h0"), Some(&0.0), "{errors:?}");
    assert!(!errors.contains_key("h8"), "{errors:?}");
    assert!(
        evidence.contains(&format!("its HCA ports counted {h4:.0} error events")),
        "{evidence}"
    );
    // The saved rounds replay offline to the same suspects.
    let replay = localize(&["--snapshot", saved.to_str().unwrap(), "--json"]);
    assert_eq!(replay.status.code(), Some(1));
    let r = json(&replay);
    assert_eq!(r["suspects"], v["suspects"]);
    let p50 = snap.rounds[0].probes[0].p50_us.unwrap();
    // The split where the even hosts served it, none where the odd did.
    for p in &snap.rounds[0].probes {
        let even = p.prober[1..].parse::<usize>().unwrap() % 2 == 0;
        assert_eq!(p.hw_us.is_some(), even, "{p:?}");
        if let Some(h) = p.hw_us {
            let want = if p.prober == "h4" { 6.0 } else { 1.75 };
            assert!((h.prober - want).abs() < 0.01, "{p:?}");
            assert!((h.network - 1.75).abs() < 0.01, "{p:?}");
        }
    }
    assert!(
        (p50 - 1.75).abs() < 0.01 || (p50 - 6.0).abs() < 0.01,
        "{p50}"
    );
}
