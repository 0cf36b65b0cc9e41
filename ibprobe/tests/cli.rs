//! The command line's contract: bad input exits 2 with exactly one line on
//! stderr saying what, with what input, and what to do; a dead peer ends
//! with a clear error (exit 3) within the timeout, never a hang; Ctrl-C
//! prints the statistics so far and exits 130; --help teaches by example.

use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use assert_cmd::cargo::cargo_bin;

mod common;

fn ibprobe(args: &[&str]) -> (i32, String, String) {
    common::run_within(
        Command::new(cargo_bin("ibprobe")).args(args),
        Duration::from_secs(30),
    )
}

/// Asserts exit 2 and exactly `line` (plus a newline) on stderr, nothing on stdout.
fn bad_input(args: &[&str], line: &str) {
    let (code, out, err) = ibprobe(args);
    assert_eq!(code, 2, "{args:?}: stderr {err}");
    assert_eq!(err, format!("{line}\n"), "{args:?}");
    assert_eq!(out, "", "{args:?}");
}

/// Asserts exit 2 and one line on stderr that contains every `parts`.
fn bad_input_like(args: &[&str], parts: &[&str]) {
    let (code, _, err) = ibprobe(args);
    assert_eq!(code, 2, "{args:?}: stderr {err}");
    assert_eq!(err.lines().count(), 1, "{args:?}: not one line: {err}");
    assert!(err.starts_with("ibprobe: "), "{err}");
    for p in parts {
        assert!(err.contains(p), "{args:?}: {err:?} lacks {p:?}");
    }
}

#[test]
fn unknown_transport() {
    bad_input(
        &["loopback", "--transport", "tcp"],
        r#"ibprobe: invalid value "tcp" for --transport: use one of shm, udp, rc, uc, ud, model (see ibprobe --help)"#,
    );
}

#[test]
fn size_zero() {
    bad_input(
        &["loopback", "--transport", "shm", "--size", "0"],
        "ibprobe: --size 0: a message needs at least 1 byte; pass --size N with N >= 1 (e.g. 32)",
    );
}

#[test]
fn count_zero() {
    bad_input(
        &["loopback", "--transport", "shm", "--count", "0"],
        "ibprobe: --count 0: nothing to measure; pass --count N with N >= 1, or --duration",
    );
}

#[test]
fn impossible_rates() {
    bad_input(
        &["loopback", "--transport", "shm", "--rate", "0"],
        "ibprobe: --rate 0: a rate must be a positive number of messages per second; e.g. --rate 10000, or omit it to send back to back",
    );
    bad_input(
        &["loopback", "--transport", "shm", "--rate=-5"],
        "ibprobe: --rate -5: a rate must be a positive number of messages per second; e.g. --rate 10000, or omit it to send back to back",
    );
    bad_input(
        &["loopback", "--transport", "shm", "--rate", "1e9"],
        "ibprobe: --rate 1000000000: above the highest supported rate 10000000 Hz (a 100 ns period); lower it, or omit --rate to send back to back",
    );
    bad_input_like(
        &["loopback", "--transport", "shm", "--rate", "fast"],
        &["--rate", "fast"],
    );
}

#[test]
fn other_bad_values_are_one_line() {
    bad_input_like(
        &["loopback", "--transport", "udp", "--size", "4"],
        &["udp message size 4", "--size"],
    );
    bad_input_like(
        &["loopback", "--transport", "shm", "--duration", "10x"],
        &["--duration", "unknown unit"],
    );
    bad_input_like(
        &["loopback", "--transport", "shm", "--burst", "5"],
        &["--pause"],
    );
    bad_input_like(
        &["loopback", "--transport", "shm", "--consume-delay", "2s"],
        &["--consume-delay 2s", "--timeout 1s"],
    );
    bad_input_like(
        &[
            "loopback",
            "--transport",
            "shm",
            "--count",
            "5",
            "--duration",
            "1s",
        ],
        &["--count", "--duration"],
    );
    bad_input_like(
        &["loopback", "--transport", "shm", "--cpu", "4096"],
        &["--cpu 4096"],
    );
    bad_input_like(
        &["loopback", "--transport", "shm", "--poll", "event"],
        &["--poll event", "udp|rc|uc|ud"],
    );
    bad_input_like(
        &["loopback", "--transport", "udp", "--format", "xml"],
        &["--format", "json"],
    );
    bad_input_like(
        &["client", "127.0.0.1", "--transport", "shm", "--size", "0"],
        &["--size 0"],
    );
    bad_input_like(
        &["server", "--transport", "udp", "--bind", "256.1.1.1:1"],
        &["--bind 256.1.1.1:1"],
    );
}

#[test]
fn unknown_device_for_verbs() {
    // With no RDMA device this says so; with devices it names the unknown one.
    let (code, _, err) = ibprobe(&["loopback", "--transport", "rc", "--dev", "nosuchdev0"]);
    assert_eq!(code, 2, "{err}");
    assert_eq!(err.lines().count(), 1, "{err}");
    assert!(
        err.contains("nosuchdev0") || err.contains("no RDMA device"),
        "{err}"
    );
}

#[test]
fn help_teaches_with_examples() {
    for args in [
        vec!["--help"],
        vec!["loopback", "--help"],
        vec!["server", "--help"],
        vec!["client", "--help"],
        vec!["devices", "--help"],
    ] {
        let (code, out, _) = ibprobe(&args);
        assert_eq!(code, 0, "{args:?}");
        assert!(
            out.contains("Examples:"),
            "{args:?} has no examples:\n{out}"
        );
    }
    let (_, out, _) = ibprobe(&["loopback", "--help"]);
    for opt in [
        "--transport",
        "--size",
        "--count",
        "--duration",
        "--warmup",
        "--rate",
        "--burst",
        "--pause",
        "--cpu",
        "--format",
        "--json",
        "--hdr-log",
        "--plot",
        "--dev",
        "--inline",
        "--signal",
        "--poll",
    ] {
        assert!(out.contains(opt), "loopback --help lacks {opt}");
    }
}

#[test]
fn devices_says_what_it_found() {
    let (code, out, err) = ibprobe(&["devices", "--json"]);
    assert_eq!(code, 0, "{err}");
    let v: serde_json::Value = serde_json::from_str(&out).expect("devices --json prints JSON");
    if v.as_array().is_some_and(|a| a.is_empty()) {
        assert!(
            err.contains("no RDMA device")
                && err.contains("rdma link add")
                && err.contains("--transport shm|udp|model")
                && !err.contains("tests/lab"),
            "{err}"
        );
    }
}

// ------------------------------------------------------------ dead peers

#[test]
fn client_against_nothing_listening_fails_fast() {
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let t = Instant::now();
    let (code, _, err) = ibprobe(&["client", &format!("127.0.0.1:{port}"), "--transport", "udp"]);
    assert_eq!(code, 3, "{err}");
    assert!(
        err.starts_with(&format!(
            "ibprobe: cannot connect to ibprobe server at 127.0.0.1:{port}"
        )),
        "{err}"
    );
    assert_eq!(err.lines().count(), 1, "{err}");
    assert!(t.elapsed() < Duration::from_secs(10));
}

#[test]
fn client_against_a_silent_tcp_peer_times_out() {
    // Something accepts the connection but never answers the handshake.
    let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = l.local_addr().unwrap().to_string();
    std::thread::spawn(move || {
        let conn = l.accept();
        std::thread::sleep(Duration::from_secs(8));
        drop(conn);
    });
    let t = Instant::now();
    let (code, _, err) = ibprobe(&[
        "client",
        &addr,
        "--transport",
        "udp",
        "--connect-timeout",
        "1s",
    ]);
    assert_eq!(code, 3, "{err}");
    assert!(err.contains("sent nothing for 1 s"), "{err}");
    assert!(
        t.elapsed() < Duration::from_secs(6),
        "took {:?}",
        t.elapsed()
    );
}

fn start_server(transport: &str) -> (std::process::Child, String) {
    start_server_with(transport, &[])
}

fn start_server_with(transport: &str, extra: &[&str]) -> (std::process::Child, String) {
    let (child, addr, mut stderr) = common::spawn_server(transport, extra);
    // Keep reading, so the server never writes to a closed pipe.
    std::thread::spawn(move || std::io::copy(&mut stderr, &mut std::io::sink()));
    (child, addr)
}

/// A client of `transport` to `addr` set to measure for a minute (with
/// `extra`), its stdout and stderr made by `out`: a peer dies long before.
fn minute_client(addr: &str, transport: &str, extra: &[&str], out: fn() -> Stdio) -> Child {
    Command::new(cargo_bin("ibprobe"))
        .args(["client", addr, "--transport", transport])
        .args(["--duration", "60s", "--no-mlock"])
        .args(extra)
        .stdout(out())
        .stderr(out())
        .spawn()
        .unwrap()
}

fn server_dies_mid_run(transport: &str) {
    let (mut server, addr) = start_server(transport);
    let client = minute_client(&addr, transport, &["--timeout", "500ms"], Stdio::piped);
    std::thread::sleep(Duration::from_millis(800));
    server.kill().unwrap();
    server.wait().unwrap();
    let t = Instant::now();
    let out = client.wait_with_output().unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(3), "{transport}: {err}");
    assert!(err.contains("peer lost"), "{transport}: {err}");
    assert!(
        err.contains(&format!("(peer {addr})")),
        "{transport}: {err}"
    );
    assert_eq!(err.lines().count(), 1, "{transport}: {err}");
    // 3 losses of 500 ms in a row, plus slack for a loaded machine.
    assert!(
        t.elapsed() < Duration::from_secs(5),
        "{transport}: took {:?}",
        t.elapsed()
    );
}

#[test]
fn udp_server_dying_mid_run_ends_the_client() {
    server_dies_mid_run("udp");
}

#[test]
fn shm_server_dying_mid_run_ends_the_client() {
    server_dies_mid_run("shm");
}

#[test]
fn mismatched_transport_is_refused_on_both_ends() {
    let (mut server, addr) = start_server("udp");
    let (code, _, err) = ibprobe(&["client", &addr, "--transport", "shm"]);
    assert_eq!(code, 2, "{err}");
    assert_eq!(
        err,
        "ibprobe: server refused: the server runs --transport udp, the client asked for shm; pass --transport udp to the client (or restart the server with --transport shm)\n"
    );
    let t = Instant::now();
    while server.try_wait().unwrap().is_none() {
        assert!(
            t.elapsed() < Duration::from_secs(10),
            "server did not end after refusing"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
    assert_eq!(server.wait().unwrap().code(), Some(3));
}

#[test]
fn ctrl_c_prints_the_statistics_so_far_and_exits_130() {
    let child = Command::new(cargo_bin("ibprobe"))
        .args([
            "loopback",
            "--transport",
            "shm",
            "--duration",
            "60s",
            "--rate",
            "10000",
            "--no-mlock",
            "--json",
        ])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    std::thread::sleep(Duration::from_millis(700));
    nix::sys::signal::kill(
        nix::unistd::Pid::from_raw(child.id() as i32),
        nix::sys::signal::Signal::SIGINT,
    )
    .unwrap();
    let t = Instant::now();
    let out = child.wait_with_output().unwrap();
    assert!(t.elapsed() < Duration::from_secs(5));
    assert_eq!(
        out.status.code(),
        Some(130),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let v: serde_json::Value =
        serde_json::from_slice(&out.stdout).expect("the statistics are printed as JSON");
    assert_eq!(v["run"]["interrupted"], true);
    let sent = v["run"]["sent"].as_u64().unwrap();
    assert!(sent > 100, "sent {sent}");
}

#[test]
fn server_reports_a_client_that_dies_mid_run() {
    for transport in ["udp", "shm"] {
        let (mut server, addr) = start_server(transport);
        let mut client = minute_client(&addr, transport, &[], Stdio::null);
        std::thread::sleep(Duration::from_millis(800));
        client.kill().unwrap();
        client.wait().unwrap();
        let t = Instant::now();
        let status = loop {
            if let Some(s) = server.try_wait().unwrap() {
                break s;
            }
            assert!(
                t.elapsed() < Duration::from_secs(5),
                "{transport}: server still waits for a dead client"
            );
            std::thread::sleep(Duration::from_millis(20));
        };
        assert_eq!(status.code(), Some(3), "{transport}");
    }
}

#[test]
fn ctrl_c_stops_a_waiting_server() {
    let (mut server, _addr) = start_server("udp");
    nix::sys::signal::kill(
        nix::unistd::Pid::from_raw(server.id() as i32),
        nix::sys::signal::Signal::SIGINT,
    )
    .unwrap();
    let t = Instant::now();
    let status = loop {
        if let Some(s) = server.try_wait().unwrap() {
            break s;
        }
        assert!(
            t.elapsed() < Duration::from_secs(3),
            "server ignored Ctrl-C"
        );
        std::thread::sleep(Duration::from_millis(10));
    };
    assert_eq!(status.code(), Some(130));
}

#[test]
fn a_mesh_secret_is_required_and_proved_both_ways() {
    let dir = tempfile::tempdir().unwrap();
    let key = |name: &str, text: &str| ibtools_tests::private_file(dir.path(), name, text);
    let good = key("mesh.key", "0123456789abcdef0123456789abcdef\n");
    let other = key("other.key", "fedcba9876543210fedcba9876543210\n");
    let (mut server, addr) = start_server_with("udp", &["--forever", "--secret-file", &good]);
    let run = |extra: &[&str]| {
        let mut argv = vec!["client", addr.as_str(), "--transport", "udp", "-n", "50"];
        argv.extend_from_slice(extra);
        ibprobe(&argv)
    };
    let (code, _, err) = run(&[]);
    assert_eq!(code, 2, "{err}");
    assert!(err.contains("requires the mesh secret"), "{err}");
    let (code, _, err) = run(&["--secret-file", &other]);
    assert_eq!(code, 2, "{err}");
    assert!(err.contains("different mesh secret"), "{err}");
    let (code, _, err) = run(&["--secret-file", &good]);
    assert_eq!(code, 0, "{err}");
    server.kill().unwrap();
    server.wait().unwrap();
    // A server without the secret is not a mesh member to a client with one.
    let (mut server, addr) = start_server_with("udp", &[]);
    let (code, _, err) = ibprobe(&[
        "client",
        &addr,
        "--transport",
        "udp",
        "--secret-file",
        &good,
    ]);
    assert_eq!(code, 2, "{err}");
    assert!(err.contains("did not prove"), "{err}");
    server.kill().unwrap();
    server.wait().unwrap();
}

/// A process allowed one CPU only (a cpuset, a container, `taskset`) is
/// told before the run that its measuring thread and the busy-polling
/// peer share that CPU, with what to do; with two CPUs nothing is said.
#[test]
fn a_run_confined_to_one_cpu_is_told_before_it_starts() {
    const TEST: &str = "a_run_confined_to_one_cpu_is_told_before_it_starts";
    let cpus = ibhost::rt::allowed_cpus();
    if cpus.len() < 2
        && ibtools_tests::skip(
            TEST,
            "this process may use one CPU only: no two-CPU case to compare",
        )
    {
        return;
    }
    let only = cpus[cpus.len() - 1].to_string();
    // Few messages: on one CPU each waits a scheduler tick for the other.
    let runs: [&[&str]; 3] = [
        &[
            "loopback",
            "-t",
            "shm",
            "--round-trip",
            "--count",
            "40",
            "--warmup",
            "0",
            "--quiet",
        ],
        &[
            "stream", "-t", "shm", "--count", "40", "--warmup", "0", "--quiet",
        ],
        &[
            "loopback",
            "-t",
            "udp",
            "--round-trip",
            "--count",
            "40",
            "--warmup",
            "0",
            "--quiet",
        ],
    ];
    for args in runs {
        let (code, out, err) = common::run_within(
            Command::new("taskset")
                .args(["-c", &only])
                .arg(cargo_bin("ibprobe"))
                .args(args),
            Duration::from_secs(60),
        );
        assert_eq!(code, 0, "taskset -c {only} ibprobe {args:?}: {err}");
        assert!(!out.is_empty(), "{args:?}: no report");
        let first = err.lines().next().unwrap_or_default();
        assert!(
            first.starts_with(&format!("warning: this process may run on CPU {only} only")),
            "{args:?}: the warning is not the first thing said: {err}"
        );
        assert!(
            first.contains("allow a second CPU (e.g. taskset -c "),
            "{first}"
        );
        let (code, _, err) = ibprobe(args);
        assert_eq!(code, 0, "ibprobe {args:?}: {err}");
        assert!(
            !err.contains("may run on CPU"),
            "{args:?} with {} CPUs: {err}",
            cpus.len()
        );
    }
}
