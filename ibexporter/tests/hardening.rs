//! Issue 14, the network half: the responder cannot be locked, /metrics
//! cannot be delayed by slow clients, and files named in a config are
//! neither echoed nor allowed to hang or flood the exporter.
//!
//! Each test runs the real binary (`common::start`). The figures the issue
//! asks for (the client's time under the flood, the scrapes' p50/max under
//! slowloris, the exporter's peak RSS) are printed: run with
//! `cargo test -p ibexporter --test hardening -- --nocapture`.

mod common;

use std::io::{Read, Write};
use std::net::{Shutdown, SocketAddr, TcpStream};
use std::path::Path;
use std::process::{Command, Output};
use std::time::{Duration, Instant};

use common::{free_port, get, ibprobe, sample, scrape_until, start};
use ibprobe::probe::session::oob::{Hello, Oob, Reply};

/// `ibprobe client ADDR --transport udp --count 200 [ARGS]`: its output
/// and how long it took.
fn client(addr: &str, args: &[&str]) -> (Output, Duration) {
    let t = Instant::now();
    let out = Command::new(ibprobe())
        .args(["client", addr, "--transport", "udp", "--count", "200"])
        .args(args)
        .output()
        .unwrap();
    (out, t.elapsed())
}

/// This process opens thousands of sockets: lift its open-files limit
/// to the hard one (the exporter it starts inherits it, and raises its
/// own too; nothing outside this process changes). False, after saying
/// SKIPPED, where the hard limit is under 8192: a normal user's may be,
/// and only root may raise it.
fn more_files(test: &str) -> bool {
    let n = ibexporter::sys::raise_open_files_limit().unwrap_or(0);
    n >= 8192
        || !ibtools_tests::skip(
            test,
            &format!(
                "RLIMIT_NOFILE's hard limit is {n}; this test needs 8192 (ulimit -Hn 8192 as root)"
            ),
        )
}

/// A TCP connection to `to` from `from` (any 127.0.0.0/8 address is this
/// host, so each is a different source for the responder).
fn connect_from(rt: &tokio::runtime::Runtime, from: [u8; 4], to: SocketAddr) -> TcpStream {
    rt.block_on(async {
        let s = tokio::net::TcpSocket::new_v4().unwrap();
        s.bind(SocketAddr::from((from, 0))).unwrap();
        let s = s.connect(to).await.unwrap().into_std().unwrap();
        s.set_nonblocking(false).unwrap();
        s
    })
}

/// A valid udp Hello; the endpoint is a port nobody listens on.
fn hello() -> Hello {
    Hello {
        transport: "udp".into(),
        size: 32,
        params: serde_json::json!({}),
        endpoint: serde_json::json!({ "port": 9 }),
    }
}

fn refused(m: &str, reason: &str) -> f64 {
    sample(
        m,
        "ibexporter_responder_sessions_refused_total{",
        &[&format!("reason=\"{reason}\"")],
    )
    .unwrap_or(0.0)
}

#[test]
fn held_sessions_and_garbage_do_not_lock_the_responder_out() {
    if !more_files("held_sessions_and_garbage_do_not_lock_the_responder_out") {
        return;
    }
    let port = free_port();
    let r = format!("127.0.0.1:{port}");
    let srv = start(&["--responder", &r, "--no-probe", "hca,shm,udp,wakeup"]);
    let to: SocketAddr = r.parse().unwrap();
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();

    // 1,000 garbage connections from 127.0.0.1, the client's own address:
    // a third send an HTTP request, a third a partial frame, a third
    // nothing. All are held open.
    let mut garbage = Vec::new();
    for i in 0..1000 {
        let mut s = TcpStream::connect(to).unwrap();
        match i % 3 {
            0 => {
                let _ = s.write_all(b"GET / HTTP/1.1\r\nHost: x\r\n\r\n");
            }
            1 => {
                let _ = s.write_all(b"IBPROBE\0\0\0");
            }
            _ => {}
        }
        garbage.push(s);
    }
    // 500 sessions that send a valid Hello, get their Welcome, and hold:
    // 5 from each of 100 sources (under the per-source limit, far over
    // the global one). Their Hello asks for the default, busy polling:
    // only one session at a time may spin a core, the rest sleep.
    let mut held = Vec::new();
    let mut welcomed = 0;
    for i in 0..500u32 {
        let from = [127, 0, 1, (1 + i / 5) as u8];
        let s = connect_from(&rt, from, to);
        let mut o = Oob::from_stream(s, Duration::from_secs(5)).unwrap();
        o.send(&hello()).unwrap();
        match o.recv::<Reply>("waiting for the welcome") {
            Ok(Reply::Welcome { .. }) => welcomed += 1,
            other if i < 3 => println!("hold {i}: {other:?}"),
            _ => {}
        }
        held.push(o);
    }
    println!("responder flood: {welcomed} of 500 held sessions were welcomed");
    assert!(
        welcomed >= 400,
        "only {welcomed} of 500 Hellos were answered"
    );

    // With all of that held, a normal client completes, quickly.
    let (out, took) = client(&r, &[]);
    println!(
        "responder flood: ibprobe client took {:.0} ms (rc {:?})",
        took.as_secs_f64() * 1e3,
        out.status.code()
    );
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(took < Duration::from_secs(2), "client took {took:?}");

    // The room was made by closing the stalest sessions, and counted.
    let m = scrape_until(&srv.addr, 10, "refusals counted", |m| {
        refused(m, "evicted") > 0.0 && refused(m, "per_source_limit") > 0.0
    });
    for reason in ["evicted", "per_source_limit", "handshake_timeout", "idle"] {
        println!(
            "responder flood: refused_total{{reason=\"{reason}\"}} = {}",
            refused(&m, reason)
        );
    }
    // Most held sessions were closed to make room: the responder kept 64
    // at most, 8 at most of 127.0.0.1.
    assert!(refused(&m, "evicted") >= 300.0, "{m}");
    assert!(refused(&m, "per_source_limit") >= 500.0, "{m}");
    drop((garbage, held));
}

#[test]
fn a_stalled_handshake_and_an_idle_session_are_closed_and_counted() {
    let port = free_port();
    let r = format!("127.0.0.1:{port}");
    let srv = start(&["--responder", &r, "--no-probe", "hca,shm,udp,wakeup"]);
    // One byte every second never completes a handshake: closed at 5 s.
    let mut slow = TcpStream::connect(&r).unwrap();
    let t = Instant::now();
    let mut closed_after = None;
    for b in b"IBPROBE\0\0\0\0\x01\0\0\x01\0" {
        if slow.write_all(&[*b]).is_err() {
            closed_after = Some(t.elapsed());
            break;
        }
        std::thread::sleep(Duration::from_millis(1000));
    }
    // A welcomed session that sends nothing: closed at 10 s.
    let mut o = Oob::from_stream(TcpStream::connect(&r).unwrap(), Duration::from_secs(15)).unwrap();
    o.send(&hello()).unwrap();
    assert!(matches!(
        o.recv::<Reply>("waiting for the welcome"),
        Ok(Reply::Welcome { .. })
    ));
    let m = scrape_until(&srv.addr, 20, "handshake_timeout and idle", |m| {
        refused(m, "handshake_timeout") >= 1.0 && refused(m, "idle") >= 1.0
    });
    assert!(
        closed_after.is_some_and(|d| d < Duration::from_secs(8)),
        "a trickling handshake was kept open: {closed_after:?}"
    );
    assert_eq!(refused(&m, "evicted"), 0.0, "{m}");
}

#[test]
fn with_a_mesh_secret_only_members_are_served() {
    use std::os::unix::fs::PermissionsExt;
    let dir = tempfile::tempdir().unwrap();
    let key = |name: &str, text: &str| ibtools_tests::private_file(dir.path(), name, text);
    let good = key("mesh.key", "c2VjcmV0LW1lc2gta2V5LTAxMjM0NTY3\n");
    let wrong = key("other.key", "b3RoZXItbWVzaC1rZXktNzY1NDMyMTA=\n");
    let port = free_port();
    let r = format!("127.0.0.1:{port}");
    let srv = start(&[
        "--responder",
        &r,
        "--no-probe",
        "hca,shm,udp,wakeup",
        "--secret-file",
        &good,
    ]);
    let (out, _) = client(&r, &[]);
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success(), "served without the secret: {err}");
    assert!(err.contains("mesh secret"), "{err}");
    let (out, _) = client(&r, &["--secret-file", &wrong]);
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success(), "served with a wrong secret: {err}");
    assert!(err.contains("different mesh secret"), "{err}");
    let m = scrape_until(&srv.addr, 10, "auth refusals", |m| {
        refused(m, "auth") >= 2.0
    });
    println!(
        "mesh secret: refused_total{{reason=\"auth\"}} = {}",
        refused(&m, "auth")
    );
    let (out, took) = client(&r, &["--secret-file", &good]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    println!("mesh secret: the member's client took {took:?}");
    // The secret's file itself is checked at start: not world-readable.
    std::fs::set_permissions(&good, std::fs::Permissions::from_mode(0o644)).unwrap();
    let out = Command::new(env!("CARGO_BIN_EXE_ibexporter"))
        .args(["--listen", "127.0.0.1:0", "--secret-file", &good])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("chmod 600") && !err.contains("c2VjcmV0"),
        "{err}"
    );
}

/// One scrape on a fresh connection: status line and time taken.
fn timed_scrape(addr: &str) -> (bool, Duration) {
    let t = Instant::now();
    let ok = get(addr, "/metrics").is_ok_and(|r| r.starts_with("HTTP/1.0 200"));
    (ok, t.elapsed())
}

/// VmHWM (peak resident set) of `pid`, in bytes.
fn vm_hwm(pid: u32) -> u64 {
    let s = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap();
    let kb: u64 = s
        .lines()
        .find_map(|l| l.strip_prefix("VmHWM:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
        .unwrap();
    kb * 1024
}

#[test]
fn slowloris_does_not_delay_scrapes() {
    if !more_files("slowloris_does_not_delay_scrapes") {
        return;
    }
    const CONNS: usize = 3000;
    const LENGTH: Duration = Duration::from_secs(30);
    let srv = start(&["--no-probe", "hca,shm,udp,wakeup"]);
    let addr: SocketAddr = srv.addr.parse().unwrap();
    // 3,000 connections that send a partial request head and then one
    // header line every ~3 s; each reconnects when the server closes it.
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    let end = Instant::now() + LENGTH;
    let opened = std::sync::Arc::new(std::sync::atomic::AtomicUsize::new(0));
    let mut tasks = Vec::new();
    for i in 0..CONNS {
        let opened = opened.clone();
        tasks.push(rt.spawn(async move {
            use tokio::io::AsyncWriteExt;
            let jitter = Duration::from_millis((i % 100) as u64 * 10);
            while Instant::now() < end {
                let Ok(mut s) = tokio::net::TcpStream::connect(addr).await else {
                    tokio::time::sleep(Duration::from_millis(100)).await;
                    continue;
                };
                opened.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                if s.write_all(b"GET /metrics HTTP/1.1\r\nHost: x\r\n")
                    .await
                    .is_err()
                {
                    continue;
                }
                loop {
                    tokio::time::sleep(Duration::from_secs(3) + jitter).await;
                    if Instant::now() >= end || s.write_all(b"X-Slow: 1\r\n").await.is_err() {
                        break;
                    }
                }
            }
        }));
    }
    std::thread::sleep(Duration::from_secs(2));
    // Two scrapers, every ~100 ms each, for the rest of the 30 s.
    let scrapers: Vec<_> = (0..2)
        .map(|_| {
            let a = srv.addr.clone();
            std::thread::spawn(move || {
                let mut out = Vec::new();
                while Instant::now() < end {
                    out.push(timed_scrape(&a));
                    std::thread::sleep(Duration::from_millis(100));
                }
                out
            })
        })
        .collect();
    let mut all: Vec<(bool, Duration)> = Vec::new();
    for s in scrapers {
        all.extend(s.join().unwrap());
    }
    for t in tasks {
        let _ = rt.block_on(t);
    }
    let hwm = vm_hwm(srv.child.id());
    drop(rt);
    let failed = all.iter().filter(|(ok, _)| !ok).count();
    let mut times: Vec<Duration> = all.iter().map(|(_, d)| *d).collect();
    times.sort();
    let p50 = times[times.len() / 2];
    let max = *times.last().unwrap();
    println!(
        "slowloris: {CONNS} connections ({} opened in all) for {LENGTH:?}; {} scrapes, {failed} failed, p50 {:.1} ms, max {:.1} ms; exporter VmHWM {:.1} MB",
        opened.load(std::sync::atomic::Ordering::Relaxed),
        times.len(),
        p50.as_secs_f64() * 1e3,
        max.as_secs_f64() * 1e3,
        hwm as f64 / 1e6
    );
    assert!(
        opened.load(std::sync::atomic::Ordering::Relaxed) >= CONNS,
        "the slow clients did not all connect"
    );
    assert!(times.len() >= 200, "only {} scrapes", times.len());
    assert_eq!(failed, 0, "{failed} scrapes did not answer 200");
    assert!(max < Duration::from_secs(1), "slowest scrape {max:?}");
    assert!(hwm < 256 << 20, "VmHWM {hwm} bytes");
}

#[test]
fn a_client_that_half_closes_gets_its_answer() {
    let srv = start(&["--no-probe", "hca,shm,udp,wakeup"]);
    for request in [
        "GET /metrics HTTP/1.0\r\n\r\n",
        "GET /metrics HTTP/1.1\r\nHost: x\r\n\r\n",
    ] {
        let mut s = TcpStream::connect(&srv.addr).unwrap();
        s.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
        s.write_all(request.as_bytes()).unwrap();
        s.shutdown(Shutdown::Write).unwrap();
        let mut out = Vec::new();
        let _ = s.read_to_end(&mut out);
        let text = String::from_utf8_lossy(&out);
        assert!(text.contains(" 200 OK\r\n"), "{request:?}: {text:?}");
        assert!(text.contains("ibexporter_build_info"), "{request:?}");
    }
}

fn check_config(dir: &Path, toml: &str) -> Output {
    let p = dir.join("ibexporter.toml");
    std::fs::write(&p, toml).unwrap();
    let t = Instant::now();
    let out = Command::new(env!("CARGO_BIN_EXE_ibexporter"))
        .arg("--check-config")
        .arg(&p)
        .output()
        .unwrap();
    assert!(
        t.elapsed() < Duration::from_secs(5),
        "{toml}: took {:?}",
        t.elapsed()
    );
    out
}

#[test]
fn check_config_reads_the_files_it_names_and_echoes_none() {
    use std::os::unix::fs::PermissionsExt;
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let secretish =
        "root:$6$S3cr3tSaltXyZ$hashhashhash:19000:0:99999:7:::\npassword = \"hunter2\"\n";
    let shadowish = d.join("shadow");
    std::fs::write(&shadowish, secretish).unwrap();
    let fifo = d.join("fifo");
    assert!(Command::new("mkfifo")
        .arg(&fifo)
        .status()
        .unwrap()
        .success());
    let big = d.join("big");
    std::fs::File::create(&big)
        .unwrap()
        .set_len(3 << 20)
        .unwrap();
    let key = d.join("mesh.key");
    std::fs::write(&key, "0123456789abcdef0123456789abcdef\n").unwrap();
    std::fs::set_permissions(&key, std::fs::Permissions::from_mode(0o600)).unwrap();
    // The real /etc/shadow too, when this test can read it.
    let shadow = std::fs::read_to_string("/etc/shadow").ok();
    let mut refused = vec![
        (format!("web_config = {shadowish:?}"), "web config"),
        (format!("web_config = {fifo:?}"), "a FIFO"),
        (format!("web_config = {big:?}"), "larger than 1048576 bytes"),
        (format!("web_config = {d:?}"), "a directory"),
        (format!("secret_file = {fifo:?}"), "a FIFO"),
        (format!("secret_file = {:?}", d.join("absent")), "absent"),
    ];
    // TLS files named by a web config are read as a run would.
    let web = d.join("web.yml");
    std::fs::write(
        &web,
        format!(
            "tls_server_config:\n  cert_file: {}\n  key_file: {}\n",
            fifo.display(),
            big.display()
        ),
    )
    .unwrap();
    refused.push((format!("web_config = {web:?}"), "a FIFO"));
    if shadow.is_some() {
        refused.push(("web_config = \"/etc/shadow\"".into(), "web config"));
    }
    for (toml, needle) in &refused {
        let out = check_config(d, toml);
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{toml}: {err}");
        assert!(err.contains(needle), "{toml}: {err}");
        assert_eq!(err.lines().count(), 1, "{toml}: {err}");
        for secret in ["S3cr3t", "hunter2", "19000"] {
            assert!(!err.contains(secret), "{toml} echoed the file: {err}");
        }
        if let Some(first) = shadow.as_deref().and_then(|s| s.lines().next()) {
            let hash = first.split(':').nth(1).unwrap_or("");
            assert!(!err.contains(first), "{toml} echoed /etc/shadow: {err}");
            assert!(hash.len() < 4 || !err.contains(hash), "{err}");
        }
    }
    // The config file itself is read the same way.
    let out = Command::new(env!("CARGO_BIN_EXE_ibexporter"))
        .arg("--check-config")
        .arg(&shadowish)
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{err}");
    assert!(!err.contains("S3cr3t") && !err.contains("hunter2"), "{err}");
    // What names good files is valid.
    let out = check_config(d, &format!("secret_file = {key:?}"));
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    // A run refuses what --check-config refuses, with exit 2, before it
    // starts anything.
    let p = d.join("run.toml");
    std::fs::write(&p, format!("web_config = {shadowish:?}\n")).unwrap();
    let out = Command::new(env!("CARGO_BIN_EXE_ibexporter"))
        .arg("--config")
        .arg(&p)
        .args(["--listen", "127.0.0.1:0", "--responder", "off"])
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{err}");
    assert!(!err.contains("S3cr3t"), "{err}");
}

/// The responder serves what its docs list (udp, rc, uc, ud): a model
/// session (which spins a core for as long as its parameters say) is
/// refused, and so is a session whose buffers exceed `[responder]
/// max_session_memory`, naming the size and the key; a client within both
/// is served by the same responder.
#[test]
fn the_responder_refuses_the_model_and_sessions_over_its_memory_cap() {
    let dir = tempfile::tempdir().unwrap();
    let cfg = dir.path().join("ibexporter.toml");
    std::fs::write(&cfg, "[responder]\nmax_session_memory = \"16KiB\"\n").unwrap();
    let port = free_port();
    let r = format!("127.0.0.1:{port}");
    let _srv = start(&[
        "--config",
        cfg.to_str().unwrap(),
        "--responder",
        &r,
        "--no-probe",
        "hca,shm,udp,wakeup",
    ]);
    let ask = |h: &Hello| {
        let mut oob = Oob::connect(&r, port, Duration::from_secs(5)).unwrap();
        let t = Instant::now();
        let e = oob.handshake(h).expect_err("refused");
        (e.to_string(), t.elapsed())
    };
    let mut model = hello();
    model.transport = "model".into();
    model.params = serde_json::json!({ "model": "L=5us,os=1us,or=1us,g=1us,G=0ns" });
    let (e, took) = ask(&model);
    eprintln!("responder, model session: refused in {took:?}: {e}");
    assert!(e.contains("\"model\" is not served here"), "{e}");
    let mut big = hello();
    big.size = 65_000;
    let (e, took) = ask(&big);
    eprintln!("responder, 65000 B udp echo: refused in {took:?}: {e}");
    for w in ["127.0 KiB", "16.0 KiB", "[responder] max_session_memory"] {
        assert!(e.contains(w), "{e} lacks {w}");
    }
    assert!(took < Duration::from_secs(1), "{took:?}");
    let (out, _) = client(&r, &[]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    // The key is checked with the config, before anything starts.
    for (v, needle) in [("\"lots\"", "unknown unit"), ("\"0B\"", "more than zero")] {
        let out = check_config(
            dir.path(),
            &format!("[responder]\nmax_session_memory = {v}\n"),
        );
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{v}: {err}");
        assert!(
            err.contains("responder.max_session_memory") && err.contains(needle),
            "{err}"
        );
    }
}
