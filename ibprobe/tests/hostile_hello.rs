//! Hostile Hellos against `ibprobe server`: a raw TCP client speaking the
//! out-of-band framing (magic, version, length, JSON) asks for absurd
//! streams, waits and models. Each is refused quickly, the server's peak
//! memory stays small, SIGTERM ends a held wait, a trickled handshake is
//! cut off at `--handshake-timeout` in all, and a real `ibprobe client`
//! is served by the same `--forever` server afterwards.
//!
//! The Hellos are plain JSON (no library types), so this file also runs
//! against an older server.

mod common;

use std::io::{Read, Write};
use std::net::{TcpStream, UdpSocket};
use std::time::{Duration, Instant};

use common::{ibprobe, Server};
use ibprobe::spec::SLOT_FORMAT;
use serde_json::{json, Value};

/// The out-of-band frame of `body` (`probe/session/oob/`).
fn frame(body: &Value) -> Vec<u8> {
    let body = serde_json::to_vec(body).unwrap();
    let mut f = b"IBPROBE\0".to_vec();
    f.extend_from_slice(&1u32.to_be_bytes());
    f.extend_from_slice(&(body.len() as u32).to_be_bytes());
    f.extend_from_slice(&body);
    f
}

/// Reads one frame's body; None if the server closed or stayed silent
/// for `wait`.
fn read_frame(s: &mut TcpStream, wait: Duration) -> Option<Value> {
    s.set_read_timeout(Some(wait)).unwrap();
    let mut head = [0u8; 16];
    s.read_exact(&mut head).ok()?;
    assert_eq!(&head[..8], b"IBPROBE\0");
    let len = u32::from_be_bytes(head[12..16].try_into().unwrap()) as usize;
    let mut body = vec![0u8; len];
    s.read_exact(&mut body).ok()?;
    Some(serde_json::from_slice(&body).unwrap())
}

/// Sends `hello` to `addr`; the server's reply (None: none within 10 s)
/// and how long it took. The connection is returned open.
fn ask(addr: &str, hello: &Value) -> (Option<Value>, Duration, TcpStream) {
    let mut s = TcpStream::connect(addr).unwrap();
    let t = Instant::now();
    s.write_all(&frame(hello)).unwrap();
    let r = read_frame(&mut s, Duration::from_secs(10));
    (r, t.elapsed(), s)
}

fn secs(s: u64) -> Value {
    json!({ "secs": s, "nanos": 0 })
}

/// A stream Hello as `ibprobe stream` sends it, over `transport`, to
/// its UDP `port`.
fn stream_hello(transport: &str, port: u16, spec: Value, timeout: Value) -> Value {
    let mut s = json!({
        "slots": 64, "slot_size": 4096, "window": 64, "batch": 1, "flush": null,
        "pipeline": null, "credit_return": "piggyback", "credit_batch": 1,
    });
    for (k, v) in spec.as_object().unwrap() {
        s[k] = v.clone();
    }
    json!({
        "transport": transport,
        "size": 32,
        "params": { "op": "send", "poll": "busy", "slot_format": SLOT_FORMAT, "stream": {
            "spec": s, "warmup": 100, "consume_delay": secs(0), "timeout": timeout,
        }},
        "endpoint": { "port": port },
    })
}

/// The server's peak resident memory (VmHWM) in KiB.
fn vm_hwm_kib(server: &Server) -> u64 {
    let st = std::fs::read_to_string(format!("/proc/{}/status", server.child.id())).unwrap();
    st.lines()
        .find_map(|l| l.strip_prefix("VmHWM:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
        .expect("VmHWM in /proc/PID/status")
}

/// Peak memory a server may reach over these tests (a debug build idles
/// at ~10 MiB; the hostile Hellos asked for terabytes).
const HWM_LIMIT_KIB: u64 = 64 << 10;

/// Asks each `(what, hello, expected words)` of `server` and checks it
/// is refused quickly, naming what was wrong, with the server alive and
/// small afterwards.
fn refused_each(server: &mut Server, cases: &[(&str, Value, &[&str])]) {
    for (what, hello, words) in cases {
        let (reply, took, _conn) = ask(&server.addr, hello);
        let reply = reply.unwrap_or_else(|| panic!("{what}: no reply within 10 s"));
        assert_eq!(reply["type"], "refuse", "{what}: {reply}");
        let reason = reply["reason"].as_str().unwrap();
        for w in *words {
            assert!(reason.contains(w), "{what}: {reason:?} lacks {w:?}");
        }
        assert!(
            took < Duration::from_secs(2),
            "{what}: refused after {took:?}"
        );
        assert!(
            server.child.try_wait().unwrap().is_none(),
            "{what}: the server died"
        );
        let hwm = vm_hwm_kib(server);
        eprintln!("{what}: refused in {took:?}, server VmHWM {hwm} KiB: {reason}");
        assert!(hwm < HWM_LIMIT_KIB, "{what}: server VmHWM {hwm} KiB");
    }
}

#[test]
fn absurd_udp_streams_waits_and_loggp_timeouts_are_refused_and_the_server_serves_on() {
    let mut server = Server::start("udp", &["--forever"]);
    let udp = UdpSocket::bind("127.0.0.1:0").unwrap();
    let port = udp.local_addr().unwrap().port();
    let max = u64::from(u32::MAX);
    let mut loggp = stream_hello("udp", port, json!({}), secs(1 << 62));
    loggp["params"]["stream"]["workload"] = json!("loggp");
    let mut consume = json!({
        "transport": "udp", "size": 32,
        "params": { "op": "send", "poll": "busy",
            "receiver": { "poll": "busy", "consume_delay": secs(1_000_000_000) } },
        "endpoint": { "port": port },
    });
    let cases: Vec<(&str, Value, &[&str])> = vec![
        (
            "stream of 2^32-1 slots of 65507 B",
            stream_hello(
                "udp",
                port,
                json!({ "slots": max, "window": max, "slot_size": 65507 }),
                secs(1),
            ),
            &["--slots 4294967295", "at most 4096"],
        ),
        (
            "stream of 4096 x 65507 B (1 GiB of windows)",
            stream_hello(
                "udp",
                port,
                json!({ "slots": 4096, "window": 4096, "slot_size": 65507 }),
                secs(1),
            ),
            &["--max-session-memory", "256.0 MiB", "--slots 4096"],
        ),
        ("loggp timeout 2^62 s", loggp, &["--timeout", "at most 10s"]),
        (
            "stream timeout 10^12 s",
            stream_hello("udp", port, json!({}), secs(1_000_000_000_000)),
            &["--timeout"],
        ),
        (
            "round-trip consume delay 10^9 s",
            consume.clone(),
            &["--consume-delay", "at most 1ms"],
        ),
        (
            "stream flush 10^6 s",
            stream_hello("udp", port, json!({ "flush": secs(1_000_000) }), secs(1)),
            &["--flush"],
        ),
        (
            "stream batch 2^32-1",
            stream_hello(
                "udp",
                port,
                json!({ "batch": max, "slot_size": 65507 }),
                secs(1),
            ),
            &["--batch"],
        ),
        (
            "unknown stream workload",
            {
                let mut h = stream_hello("udp", port, json!({}), secs(1));
                h["params"]["stream"]["workload"] = json!("mine");
                h
            },
            &["workload"],
        ),
    ];
    refused_each(&mut server, &cases);
    // A wrong type where a number belongs: refused, not a crash.
    consume["params"]["receiver"]["consume_delay"] = json!("forever");
    refused_each(
        &mut server,
        &[("consume delay of the wrong type", consume, &["malformed"])],
    );
    let (code, out, err) = ibprobe(&["client", &server.addr, "-t", "udp", "--count", "2000"]);
    assert_eq!(
        code, 0,
        "a real client after the hostile ones: {out}\n{err}"
    );
    assert!(server.child.try_wait().unwrap().is_none());
}

#[test]
fn an_shm_ring_of_4096_mib_slots_is_refused_by_the_memory_cap() {
    let mut server = Server::start("shm", &["--forever"]);
    let big = stream_hello(
        "shm",
        0,
        json!({ "slots": 4096, "window": 4096, "slot_size": 1 << 20 }),
        secs(1),
    );
    let mut cases: Vec<(&str, Value, &[&str])> = vec![(
        "shm stream of 4096 x 1 MiB slots",
        big,
        &["--max-session-memory", "GiB"],
    )];
    refused_each(&mut server, &cases);
    // The operator may allow less: a default stream (64 x 4 KiB) is refused
    // under 512 KiB, a round trip is not.
    drop(server);
    let mut small = Server::start("shm", &["--forever", "--max-session-memory", "512KiB"]);
    cases = vec![(
        "default shm stream against a 512 KiB cap",
        stream_hello("shm", 0, json!({}), secs(1)),
        &["512.0 KiB", "--max-session-memory"],
    )];
    refused_each(&mut small, &cases);
    let (code, out, err) = ibprobe(&["client", &small.addr, "-t", "shm", "--count", "2000"]);
    assert_eq!(code, 0, "a round trip fits 512 KiB: {out}\n{err}");
    // A clean exit (not the kill on drop), so the ring file goes with it.
    let (code, _) = sigterm(&mut small, Duration::from_secs(5));
    assert_eq!(code, Some(130));
}

#[test]
fn a_model_that_would_spin_for_long_is_refused() {
    let mut server = Server::start("model", &["--forever"]);
    let udp = UdpSocket::bind("127.0.0.1:0").unwrap();
    let port = udp.local_addr().unwrap().port();
    let hello = |model: &str| {
        json!({
            "transport": "model", "size": 1024,
            "params": { "op": "send", "poll": "busy", "model": model },
            "endpoint": { "port": port },
        })
    };
    refused_each(
        &mut server,
        &[
            (
                "model with o_s = o_r = 9 s",
                hello("L=1us,os=9000ms,or=9000ms,g=1us,G=0ns"),
                &["--model", "at most 50ms"],
            ),
            (
                "model with G = 1 ms per byte",
                hello("L=1us,os=1us,or=1us,g=1us,G=1ms"),
                &["--model"],
            ),
            (
                "model that is not a string",
                {
                    let mut h = hello("");
                    h["params"]["model"] = json!({ "L": 1 });
                    h
                },
                &["malformed model"],
            ),
        ],
    );
    let (code, out, err) = ibprobe(&[
        "client",
        &server.addr,
        "-t",
        "model",
        "--model",
        "L=2us,os=1us,or=1us,g=1us,G=0ns",
        "--count",
        "500",
    ]);
    assert_eq!(code, 0, "a real model client: {out}\n{err}");
}

/// Sends SIGTERM to `server` and waits up to `within` for its exit code.
fn sigterm(server: &mut Server, within: Duration) -> (Option<i32>, Duration) {
    let pid = nix::unistd::Pid::from_raw(server.child.id() as i32);
    let t = Instant::now();
    nix::sys::signal::kill(pid, nix::sys::signal::Signal::SIGTERM).unwrap();
    while t.elapsed() < within {
        if let Some(s) = server.child.try_wait().unwrap() {
            return (s.code(), t.elapsed());
        }
        std::thread::sleep(Duration::from_millis(5));
    }
    (None, t.elapsed())
}

#[test]
fn sigterm_ends_a_held_stream_wait_and_a_held_handshake_at_once() {
    // A client that was welcomed to a stream with the longest timeout a
    // server allows, then vanished: the receiving loop waits for slots.
    let mut server = Server::start("udp", &["--forever"]);
    let udp = UdpSocket::bind("127.0.0.1:0").unwrap();
    let port = udp.local_addr().unwrap().port();
    let (reply, _, conn) = ask(
        &server.addr,
        &stream_hello("udp", port, json!({}), secs(10)),
    );
    assert_eq!(reply.unwrap()["type"], "welcome");
    drop(conn);
    std::thread::sleep(Duration::from_millis(300));
    let (code, took) = sigterm(&mut server, Duration::from_secs(2));
    eprintln!("SIGTERM in a held stream wait: exit {code:?} after {took:?}");
    assert_eq!(code, Some(130), "exit code of an interrupted server");
    assert!(took < Duration::from_millis(500), "{took:?}");

    // A client that connected and says nothing, under a long
    // --handshake-timeout.
    let mut server = Server::start("udp", &["--forever", "--handshake-timeout", "60s"]);
    let _silent = TcpStream::connect(&server.addr).unwrap();
    std::thread::sleep(Duration::from_millis(300));
    let (code, took) = sigterm(&mut server, Duration::from_secs(2));
    eprintln!("SIGTERM in a held handshake: exit {code:?} after {took:?}");
    assert_eq!(code, Some(130));
    assert!(took < Duration::from_millis(500), "{took:?}");
}

/// A child process killed on drop.
struct Killed(std::process::Child);

impl Drop for Killed {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

#[test]
fn sigterm_ends_a_model_session_at_its_slowest_allowed_within_100_ms() {
    // 10 ms of o_s, o_r, g and L: 40 ms per message, inside the bound a
    // server allows; the echo spins through each and looks at the stop
    // flag between two.
    let mut server = Server::start("model", &["--forever"]);
    let _client = Killed(
        std::process::Command::new(assert_cmd::cargo::cargo_bin("ibprobe"))
            .args(["client", &server.addr, "-t", "model", "--count", "100000"])
            .args(["--model", "L=10ms,os=10ms,or=10ms,g=10ms,G=0ns"])
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::null())
            .spawn()
            .unwrap(),
    );
    std::thread::sleep(Duration::from_millis(1500));
    let (code, took) = sigterm(&mut server, Duration::from_secs(2));
    eprintln!("SIGTERM in a model session (40 ms per message): exit {code:?} after {took:?}");
    assert_eq!(code, Some(130));
    assert!(took < Duration::from_millis(150), "{took:?}");
}

#[test]
fn a_trickled_handshake_is_cut_off_at_the_handshake_timeout_in_all() {
    let mut server = Server::start("udp", &["--forever", "--handshake-timeout", "1s"]);
    let udp = UdpSocket::bind("127.0.0.1:0").unwrap();
    let port = udp.local_addr().unwrap().port();
    let hello = frame(&stream_hello("udp", port, json!({}), secs(1)));
    let mut s = TcpStream::connect(&server.addr).unwrap();
    s.set_read_timeout(Some(Duration::from_millis(1))).unwrap();
    let t = Instant::now();
    // One byte every 250 ms (each read's timeout would never fire); the
    // whole Hello would take about 40 s.
    let mut cut = None;
    for b in &hello {
        if s.write_all(&[*b]).is_err() {
            cut = Some(t.elapsed());
            break;
        }
        let mut x = [0u8; 64];
        match s.read(&mut x) {
            Ok(0) => {
                cut = Some(t.elapsed());
                break;
            }
            Err(e) if e.kind() != std::io::ErrorKind::WouldBlock => {
                cut = Some(t.elapsed());
                break;
            }
            _ => {}
        }
        if t.elapsed() > Duration::from_secs(5) {
            break;
        }
        std::thread::sleep(Duration::from_millis(250));
    }
    let cut = cut.expect("the server still reads a trickled Hello after 5 s");
    eprintln!("trickled handshake (1 B / 250 ms, --handshake-timeout 1s): cut off after {cut:?}");
    assert!(cut < Duration::from_millis(2500), "{cut:?}");
    let (code, out, err) = ibprobe(&["client", &server.addr, "-t", "udp", "--count", "500"]);
    assert_eq!(code, 0, "{out}\n{err}");
    assert!(server.child.try_wait().unwrap().is_none());
}
