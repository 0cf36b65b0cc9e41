//! Target discovery: static, file_sd (reload on change, SIGHUP, bad JSON
//! kept out), DNS with a bounded wait, self-skipping, dedup, cardinality.

use ibexporter::config::{self, Config, Op, Transport};
use ibexporter::targets::cardinality::{estimate_series, series_labels};
use ibexporter::targets::{dns, sighup_flag, Origin, Target, TargetSet};
use std::collections::BTreeMap;
use std::path::Path;
use std::time::{Duration, Instant};

mod common;

fn cfg(text: &str) -> Config {
    config::parse(text, "test.toml").unwrap_or_else(|e| panic!("{e}"))
}

fn file_sd_cfg(path: &Path, refresh: &str) -> Config {
    cfg(&format!(
        "[targets]\nskip_self = false\n[[targets.file_sd]]\npath = {:?}\nrefresh = \"{refresh}\"\nlabels = {{ pinglist = \"main\", rack = \"default\" }}\n",
        path.display().to_string()
    ))
}

fn names(set: &TargetSet) -> Vec<String> {
    set.current().iter().map(|t| t.name.clone()).collect()
}

/// Writes through a temporary file and a rename, as pinglist generators do.
fn write_atomic(path: &Path, text: &str) {
    let tmp = path.with_extension("tmp");
    std::fs::write(&tmp, text).unwrap();
    std::fs::rename(&tmp, path).unwrap();
}

#[test]
fn static_targets() {
    let c = cfg(r#"
[targets]
skip_self = false
[[targets.static]]
host = "10.0.0.2"
port = 18515
labels = { rack = "r1" }
transport = "udp"
sizes = [32, 4096]
[[targets.static]]
host = "10.0.0.2"
[[targets.static]]
host = "fe80::1"
port = 7000
op = "write"
"#);
    let mut set = TargetSet::new(&c);
    assert!(set.current().is_empty(), "nothing before the first refresh");
    let r = set.refresh();
    assert!(r.errors.is_empty(), "{:?}", r.errors);
    assert_eq!(r.added.len(), 3);
    assert!(r.changed());
    let t = set.current();
    assert_eq!(t.len(), 3);
    let udp = t.iter().find(|t| t.transport == Transport::Udp).unwrap();
    assert_eq!(udp.name, "10.0.0.2:18515");
    assert_eq!(udp.addr, "10.0.0.2:18515".parse().unwrap());
    assert_eq!(udp.sizes, vec![32, 4096]);
    assert_eq!(udp.labels.get("rack").map(String::as_str), Some("r1"));
    assert_eq!(udp.origin, Origin::Static);
    let rc = t
        .iter()
        .find(|t| t.transport == Transport::Rc && t.addr.is_ipv4())
        .unwrap();
    assert_eq!(rc.sizes, vec![32]);
    assert_eq!(rc.op, Op::Send);
    let v6 = t.iter().find(|t| t.addr.is_ipv6()).unwrap();
    assert_eq!(v6.name, "[fe80::1]:7000");
    assert_eq!(v6.op, Op::Write);
    // Sorted by key, stable.
    let keys: Vec<_> = t.iter().map(Target::key).collect();
    let mut sorted = keys.clone();
    sorted.sort();
    assert_eq!(keys, sorted);
    let r = set.refresh();
    assert!(!r.changed() && r.errors.is_empty(), "{r:?}");
}

#[test]
fn skip_self_and_dedup() {
    let dir = tempfile::tempdir().unwrap();
    let p = dir.path().join("pinglist.json");
    std::fs::write(
        &p,
        r#"[{"targets": ["10.0.0.5:18515", "127.0.0.1:18515"], "labels": {"rack": "r9"}}]"#,
    )
    .unwrap();
    // responder.bind defaults to port 18515: 127.0.0.1:18515 is this exporter.
    let c = cfg(&format!(
        "[targets]\n[[targets.static]]\nhost = \"10.0.0.5\"\nlabels = {{ rack = \"r1\" }}\n[[targets.static]]\nhost = \"127.0.0.1\"\nport = 18600\n[[targets.file_sd]]\npath = {:?}\n",
        p.display().to_string()
    ));
    let mut set = TargetSet::new(&c);
    let r = set.refresh();
    assert!(r.errors.is_empty(), "{:?}", r.errors);
    assert_eq!(r.skipped_self, 1, "{r:?}");
    assert_eq!(r.duplicates, 1, "{r:?}");
    assert_eq!(names(&set), vec!["10.0.0.5:18515", "127.0.0.1:18600"]);
    // The first source wins: static, with its labels.
    let t = &set.current()[0];
    assert_eq!(t.origin, Origin::Static);
    assert_eq!(t.labels.get("rack").map(String::as_str), Some("r1"));
}

#[test]
fn file_sd_follows_the_file() {
    let dir = tempfile::tempdir().unwrap();
    let p = dir.path().join("pinglist.json");
    write_atomic(
        &p,
        r#"[
  {"targets": ["10.0.0.2:18515", "10.0.0.3"], "labels": {"rack": "r1"}},
  {"targets": ["[fd00::7]:9000"], "labels": {"__transport": "udp", "__sizes": "64,32", "__meta_x": "y"}}
]"#,
    );
    let c = file_sd_cfg(&p, "1ms");
    let mut set = TargetSet::new(&c);
    let r = set.refresh();
    assert!(r.errors.is_empty(), "{:?}", r.errors);
    assert_eq!(
        names(&set),
        vec!["10.0.0.2:18515", "10.0.0.3", "[fd00::7]:9000"]
    );
    let t = set.current();
    assert_eq!(t[1].addr, "10.0.0.3:18515".parse().unwrap(), "default port");
    assert_eq!(t[0].labels.get("rack").map(String::as_str), Some("r1"));
    assert_eq!(
        t[0].labels.get("pinglist").map(String::as_str),
        Some("main")
    );
    assert_eq!(t[2].labels.get("rack").map(String::as_str), Some("default"));
    assert!(!t[2].labels.keys().any(|k| k.starts_with("__")));
    assert_eq!(t[2].transport, Transport::Udp);
    assert_eq!(t[2].sizes, vec![32, 64]);
    assert_eq!(t[0].origin, Origin::FileSd(p.clone()));

    // Rewrite: one target gone, one added, one relabelled.
    write_atomic(
        &p,
        r#"[{"targets": ["10.0.0.2:18515", "10.0.0.4:18515"], "labels": {"rack": "r2"}}]"#,
    );
    std::thread::sleep(Duration::from_millis(5));
    let r = set.refresh();
    assert!(r.errors.is_empty(), "{:?}", r.errors);
    assert!(!r.reloaded);
    assert_eq!(names(&set), vec!["10.0.0.2:18515", "10.0.0.4:18515"]);
    let added: Vec<_> = r.added.iter().map(|t| t.name.as_str()).collect();
    let removed: Vec<_> = r.removed.iter().map(|t| t.name.as_str()).collect();
    let updated: Vec<_> = r.updated.iter().map(|t| t.name.as_str()).collect();
    assert_eq!(added, vec!["10.0.0.4:18515"]);
    assert_eq!(removed, vec!["10.0.0.3", "[fd00::7]:9000"]);
    assert_eq!(updated, vec!["10.0.0.2:18515"]);
    assert_eq!(
        r.updated[0].labels.get("rack").map(String::as_str),
        Some("r2")
    );
}

#[test]
fn malformed_pinglist_keeps_the_previous_list() {
    let dir = tempfile::tempdir().unwrap();
    let p = dir.path().join("pinglist.json");
    write_atomic(&p, r#"[{"targets": ["10.0.0.2:18515"]}]"#);
    let c = file_sd_cfg(&p, "1ms");
    let mut set = TargetSet::new(&c);
    assert!(set.refresh().errors.is_empty());
    assert_eq!(names(&set), vec!["10.0.0.2:18515"]);

    // A missing comma on line 3.
    write_atomic(
        &p,
        "[\n  {\"targets\": [\"10.0.0.2:18515\",\n   \"10.0.0.3:18515\" \"10.0.0.4:18515\"]}\n]\n",
    );
    std::thread::sleep(Duration::from_millis(5));
    let r = set.refresh();
    assert!(!r.changed(), "{r:?}");
    assert_eq!(names(&set), vec!["10.0.0.2:18515"], "previous list kept");
    assert_eq!(r.errors.len(), 1, "{:?}", r.errors);
    let m = &r.errors[0].message;
    assert!(!m.contains('\n'), "{m}");
    assert!(
        m.starts_with(&format!("{}:3:21: invalid pinglist JSON", p.display())),
        "{m}"
    );
    assert!(m.contains("keeping the previous 1 targets"), "{m}");
    assert_eq!(r.errors[0].origin, Origin::FileSd(p.clone()));
    let st = set.sources();
    assert_eq!(st[0].failures, 1);
    assert_eq!(st[0].last_error.as_deref(), Some(m.as_str()));

    // Unchanged bad file: not re-read, not counted again.
    std::thread::sleep(Duration::from_millis(5));
    assert!(set.refresh().errors.is_empty());
    assert_eq!(set.sources()[0].failures, 1);

    // A bad entry also rejects the file, pointing at the entry.
    write_atomic(
        &p,
        "[{\"targets\": [\"10.0.0.2:18515\"]},\n {\"targets\": [\"10.0.0.9:99999\"]}]",
    );
    std::thread::sleep(Duration::from_millis(5));
    let r = set.refresh();
    assert_eq!(r.errors.len(), 1);
    let m = &r.errors[0].message;
    assert!(m.starts_with(&format!("{}:2:15: ", p.display())), "{m}");
    assert!(m.contains("99999") && m.contains("1..=65535"), "{m}");
    let w = "[{\"targets\": [\"10.0.0.2:1\"], \"labels\": {\"__tranport\": \"udp\"}}]";
    write_atomic(&p, w);
    std::thread::sleep(Duration::from_millis(5));
    let r = set.refresh();
    assert!(r.errors[0].message.contains("__tranport"), "{:?}", r.errors);
    assert_eq!(names(&set), vec!["10.0.0.2:18515"]);

    // Fixed: picked up.
    write_atomic(&p, r#"[{"targets": ["10.0.0.3:18515"]}]"#);
    std::thread::sleep(Duration::from_millis(5));
    let r = set.refresh();
    assert!(r.errors.is_empty());
    assert_eq!(names(&set), vec!["10.0.0.3:18515"]);
    assert_eq!(set.sources()[0].last_error, None);
}

#[test]
fn missing_pinglist_is_an_error_not_a_crash() {
    let dir = tempfile::tempdir().unwrap();
    let p = dir.path().join("absent.json");
    let mut set = TargetSet::new(&file_sd_cfg(&p, "1h"));
    let r = set.refresh();
    assert_eq!(r.errors.len(), 1);
    assert!(
        r.errors[0].message.contains("absent.json"),
        "{:?}",
        r.errors
    );
    assert!(set.current().is_empty());
}

/// `mkfifo PATH`.
fn mkfifo(path: &Path) {
    let made = std::process::Command::new("mkfifo").arg(path).status();
    assert!(made.unwrap().success(), "mkfifo {}", path.display());
}

#[test]
fn a_fifo_or_a_device_as_pinglist_is_refused_without_waiting_or_reading_it() {
    let dir = tempfile::tempdir().unwrap();
    let fifo = dir.path().join("fifo.json");
    mkfifo(&fifo);
    let zero = dir.path().join("zero.json");
    std::os::unix::fs::symlink("/dev/zero", &zero).unwrap();
    for (p, kind) in [(fifo, "a FIFO"), (zero, "a character device")] {
        // In a thread: a refresh that blocks (opening a FIFO waits for a
        // writer) or reads for ever (/dev/zero) fails the test instead of
        // hanging it.
        let (tx, rx) = std::sync::mpsc::channel();
        let c = file_sd_cfg(&p, "1h");
        std::thread::spawn(move || {
            let mut set = TargetSet::new(&c);
            let r = set.refresh();
            let _ = tx.send((r.errors, set.current().len()));
        });
        let (errors, targets) = rx
            .recv_timeout(Duration::from_secs(5))
            .unwrap_or_else(|_| panic!("{}: refresh still running after 5 s", p.display()));
        assert_eq!(targets, 0);
        assert_eq!(errors.len(), 1, "{errors:?}");
        let m = &errors[0].message;
        assert!(m.contains(&p.display().to_string()), "{m}");
        assert!(m.contains(kind), "{m}");
        assert!(!m.contains('\n'), "{m}");
    }
}

#[test]
fn plan_refuses_a_fifo_as_file_sd_quickly() {
    let dir = tempfile::tempdir().unwrap();
    let fifo = dir.path().join("pinglist.json");
    mkfifo(&fifo);
    let mut child = std::process::Command::new(env!("CARGO_BIN_EXE_ibexporter"))
        .args(["mesh", "--file-sd"])
        .arg(&fifo)
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let status = wait_for(&mut child, Duration::from_secs(10));
    let mut err = String::new();
    std::io::Read::read_to_string(&mut child.stderr.take().unwrap(), &mut err).unwrap();
    let status = status.unwrap_or_else(|| panic!("plan --file-sd FIFO still running after 10 s"));
    assert_eq!(status.code(), Some(2), "{err}");
    assert!(
        err.contains(&fifo.display().to_string()) && err.contains("a FIFO"),
        "{err}"
    );
}

#[test]
fn an_exporter_with_a_fifo_pinglist_still_stops_on_sigterm() {
    let dir = tempfile::tempdir().unwrap();
    let fifo = dir.path().join("pinglist.json");
    mkfifo(&fifo);
    let conf = dir.path().join("ibexporter.toml");
    std::fs::write(
        &conf,
        format!(
            "[targets]\n[[targets.file_sd]]\npath = {:?}\nrefresh = \"100ms\"\n",
            fifo.display().to_string()
        ),
    )
    .unwrap();
    let mut server = common::start(&["--config", conf.to_str().unwrap()]);
    // Long enough for the targets thread to have met the FIFO a few times.
    std::thread::sleep(Duration::from_millis(500));
    let pid = server.child.id().to_string();
    let sent = std::process::Command::new("kill")
        .args(["-TERM", &pid])
        .status();
    assert!(sent.unwrap().success());
    let status = wait_for(&mut server.child, Duration::from_secs(10))
        .expect("ibexporter ignored SIGTERM for 10 s with a FIFO as pinglist");
    assert_eq!(status.code(), Some(0), "{status:?}");
}

/// `child`'s exit status if it exits within `limit`; else it is killed
/// (and reaped) and the answer is None.
fn wait_for(child: &mut std::process::Child, limit: Duration) -> Option<std::process::ExitStatus> {
    let deadline = Instant::now() + limit;
    while Instant::now() < deadline {
        if let Some(st) = child.try_wait().unwrap() {
            return Some(st);
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    let _ = child.kill();
    let _ = child.wait();
    None
}

#[test]
fn request_reload_rereads_before_refresh_is_due() {
    let dir = tempfile::tempdir().unwrap();
    let p = dir.path().join("pinglist.json");
    write_atomic(&p, r#"[{"targets": ["10.0.0.2:18515"]}]"#);
    let mut set = TargetSet::new(&file_sd_cfg(&p, "1h"));
    set.refresh();
    write_atomic(&p, r#"[{"targets": ["10.0.0.3:18515"]}]"#);
    let r = set.refresh();
    assert!(!r.changed(), "not due for an hour");
    assert!(set.next_due().unwrap() > Instant::now() + Duration::from_secs(3000));
    set.request_reload();
    let r = set.refresh();
    assert!(r.reloaded);
    assert_eq!(names(&set), vec!["10.0.0.3:18515"]);
    // The flag form, as a signal handler would set it.
    write_atomic(&p, r#"[{"targets": ["10.0.0.4:18515"]}]"#);
    set.reload_flag()
        .store(true, std::sync::atomic::Ordering::SeqCst);
    set.refresh();
    assert_eq!(names(&set), vec!["10.0.0.4:18515"]);
}

#[test]
fn sighup_reloads() {
    let dir = tempfile::tempdir().unwrap();
    let p = dir.path().join("pinglist.json");
    write_atomic(&p, r#"[{"targets": ["10.0.0.2:18515"]}]"#);
    let mut set = TargetSet::new(&file_sd_cfg(&p, "1h"));
    let flag = sighup_flag().expect("SIGHUP handler");
    assert!(std::sync::Arc::ptr_eq(&flag, &sighup_flag().unwrap()));
    set.use_reload_flag(flag.clone());
    set.refresh();
    write_atomic(&p, r#"[{"targets": ["10.0.0.3:18515"]}]"#);
    let st = std::process::Command::new("kill")
        .args(["-HUP", &std::process::id().to_string()])
        .status()
        .expect("kill(1)");
    assert!(st.success());
    let t0 = Instant::now();
    while !flag.load(std::sync::atomic::Ordering::SeqCst) {
        assert!(t0.elapsed() < Duration::from_secs(5), "SIGHUP not seen");
        std::thread::sleep(Duration::from_millis(5));
    }
    let r = set.refresh();
    assert!(r.reloaded);
    assert_eq!(names(&set), vec!["10.0.0.3:18515"]);
    assert!(!flag.load(std::sync::atomic::Ordering::SeqCst), "consumed");
}

#[test]
fn dns_localhost_resolves() {
    let addrs = dns::resolve("localhost", 18515, Duration::from_secs(5)).unwrap();
    assert!(
        addrs.contains(&"127.0.0.1:18515".parse().unwrap()),
        "{addrs:?}"
    );
    for a in &addrs {
        assert!(a.ip().is_loopback(), "{addrs:?}");
    }
    let c = cfg(
        "[targets]\nskip_self = false\n[[targets.dns]]\nname = \"localhost\"\nport = 18515\nlabels = { zone = \"z1\" }\nsizes = [64]\n",
    );
    let mut set = TargetSet::new(&c);
    let r = set.refresh();
    assert!(r.errors.is_empty(), "{:?}", r.errors);
    let t = set
        .current()
        .iter()
        .find(|t| t.name == "127.0.0.1:18515")
        .expect("127.0.0.1 target");
    assert_eq!(t.origin, Origin::Dns("localhost".into()));
    assert_eq!(t.labels.get("zone").map(String::as_str), Some("z1"));
    assert_eq!(t.sizes, vec![64]);
    assert!(set.current().iter().all(|t| t.addr.ip().is_loopback()));
}

#[test]
fn dns_failure_is_bounded_and_keeps_nothing_stale() {
    let timeout = Duration::from_millis(1500);
    let t0 = Instant::now();
    let r = dns::resolve("no-such-host.invalid", 18515, timeout);
    let took = t0.elapsed();
    assert!(r.is_err(), "{r:?}");
    assert!(took < timeout + Duration::from_millis(500), "{took:?}");
    let m = r.unwrap_err().to_string();
    assert!(m.contains("no-such-host.invalid"), "{m}");

    let c = cfg(
        "[targets]\nresolve_timeout = \"1500ms\"\n[[targets.dns]]\nname = \"no-such-host.invalid\"\n",
    );
    let mut set = TargetSet::new(&c);
    let t0 = Instant::now();
    let r = set.refresh();
    assert!(t0.elapsed() < timeout + Duration::from_millis(500));
    assert_eq!(r.errors.len(), 1);
    assert_eq!(
        r.errors[0].origin,
        Origin::Dns("no-such-host.invalid".into())
    );
    assert!(r.errors[0].message.contains("no-such-host.invalid"));
    assert!(set.current().is_empty());
    assert_eq!(set.sources()[0].failures, 1);
}

#[test]
fn dns_many_names_share_one_timeout() {
    let names: Vec<(String, u16)> = (0..20)
        .map(|i| (format!("n{i}.no-such-host.invalid"), 1))
        .chain([("10.1.2.3".to_string(), 5)])
        .collect();
    let t0 = Instant::now();
    let r = dns::resolve_many(&names, Duration::from_secs(1));
    assert!(t0.elapsed() < Duration::from_millis(1500));
    assert_eq!(r.len(), 21);
    assert!(r[..20].iter().all(Result::is_err));
    assert_eq!(r[20], Ok(vec!["10.1.2.3:5".parse().unwrap()]));
}

fn target(name: &str, rack: Option<&str>) -> Target {
    let mut labels = BTreeMap::new();
    if let Some(r) = rack {
        labels.insert("rack".to_string(), r.to_string());
    }
    Target {
        name: name.to_string(),
        addr: name.parse().unwrap(),
        labels,
        transport: Transport::Rc,
        op: Op::Send,
        sizes: vec![32],
        origin: Origin::Static,
    }
}

#[test]
fn cardinality_per_peer_then_grouped() {
    let ts = vec![
        target("10.0.0.3:1", Some("r2")),
        target("10.0.0.1:1", Some("r1")),
        target("10.0.0.2:1", Some("r1")),
        target("10.0.0.4:1", None),
    ];
    let per_peer = series_labels(&ts, 4, "rack");
    let vals: Vec<&str> = per_peer.iter().map(|(_, v)| v.as_str()).collect();
    assert_eq!(
        vals,
        vec!["10.0.0.1:1", "10.0.0.2:1", "10.0.0.3:1", "10.0.0.4:1"]
    );
    let grouped = series_labels(&ts, 3, "rack");
    let vals: Vec<&str> = grouped.iter().map(|(_, v)| v.as_str()).collect();
    assert_eq!(
        vals,
        vec!["group:r1", "group:r1", "group:r2", "group:other"]
    );
    assert_eq!(grouped[0].0, ts[1].key());
    // Input order does not matter.
    let mut rev = ts.clone();
    rev.reverse();
    assert_eq!(series_labels(&rev, 3, "rack"), grouped);
    assert!(series_labels(&ts, 0, "rack")
        .iter()
        .all(|(_, v)| v.starts_with("group:")));
}

/// The documented series count is what the exporter really renders:
/// 7 target values x 2 sizes, counted in the text exposition.
#[test]
fn the_series_formula_matches_the_rendered_exposition() {
    use ibexporter::collect::latency::{
        classic_buckets, LatencyStore, Round, SeriesKey, QUANTILES,
    };
    use ibexporter::http::{Format, Metrics};
    use std::sync::Arc;
    let store = LatencyStore::new(std::time::Duration::from_secs(60));
    let (values, sizes) = (7, 2);
    for v in 0..values {
        for size in [32, 4096].iter().take(sizes) {
            let mut h = ibstats::latency::LatencyHistogram::new();
            h.record(1_500);
            let key = SeriesKey {
                source: "a".into(),
                target: format!("peer{v}"),
                transport: "udp".into(),
                op: "send".into(),
                size_bytes: size.to_string(),
            };
            store.declare(&key);
            store.record(
                &key,
                1,
                &Round {
                    samples: Some(h),
                    ..Round::default()
                },
            );
        }
    }
    let m = Metrics::with_registries_and_sources(
        [Arc::new(prometheus_client::registry::Registry::default())],
        vec![Arc::new(store.clone())],
    );
    let text = String::from_utf8(m.encode(Format::Text).unwrap()).unwrap();
    let rendered = text.lines().filter(|l| l.starts_with("ibprobe_")).count();
    let buckets = classic_buckets().len() + 1; // and +Inf
    assert_eq!(
        rendered,
        estimate_series(values, sizes, buckets, QUANTILES.len(), 3),
        "{text}"
    );
    // The README's figures: 43 series per (value, size).
    assert_eq!(estimate_series(200, 1, 30, 4, 3), 8_600);
}
