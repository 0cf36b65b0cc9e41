//! The reference transports end to end: shm and udp, one-way loopback,
//! in-process round trip and client/server, through the real CLI; and the
//! measurement loop's no-allocation promise over a real transport.
//!
//! Why it exists: these transports run on any machine, so every statistic
//! and output path of the probe is exercised here without an HCA.

use std::alloc::{GlobalAlloc, Layout, System};
use std::cell::Cell;
use std::sync::atomic::AtomicBool;

use serde_json::Value;

mod common;

use common::{ibprobe, Server};

// ---------------------------------------------------------------- helpers

fn json_run(args: &[&str]) -> Value {
    let mut a = args.to_vec();
    a.extend(["--json", "--no-mlock"]);
    let (code, out, err) = ibprobe(&a);
    assert_eq!(code, 0, "ibprobe {a:?} failed: {err}");
    serde_json::from_str(&out).unwrap_or_else(|e| panic!("not JSON ({e}): {out}"))
}

fn dist<'a>(v: &'a Value, name: &str) -> &'a Value {
    v["distributions"]
        .as_array()
        .expect("distributions")
        .iter()
        .find(|d| d["name"] == name)
        .unwrap_or_else(|| panic!("no {name} distribution in {v}"))
}

fn u(v: &Value, k: &str) -> u64 {
    v[k].as_u64()
        .unwrap_or_else(|| panic!("{k} missing in {v}"))
}

/// Checks the invariants every distribution must hold.
fn check_dist(d: &Value, count: u64) {
    assert_eq!(u(d, "count"), count, "{d}");
    let (min, p50, p99, max) = (
        u(d, "min_ns"),
        u(d, "p50_ns"),
        u(d, "p99_ns"),
        u(d, "max_ns"),
    );
    assert!(min > 0, "a latency of 0 ns is not a measurement: {d}");
    assert!(min <= p50 && p50 <= p99, "percentiles out of order: {d}");
    // max is exact, p99 is bucketed (within 0.1%).
    assert!(p99 as f64 <= max as f64 * 1.001 + 1.0, "p99 above max: {d}");
}

// ------------------------------------------------------------- loopback

#[test]
fn shm_one_way_loopback_counts_and_orders() {
    let v = json_run(&[
        "loopback",
        "--transport",
        "shm",
        "--count",
        "20000",
        "--warmup",
        "50",
    ]);
    check_dist(dist(&v, "one_way"), 20000);
    assert_eq!(u(&v["run"], "sent"), 20000);
    assert_eq!(u(&v["run"], "lost"), 0);
    assert_eq!(u(&v["run"], "warmup_count"), 50);
    assert!(u(&v["run"], "warmup_max_ns") > 0);
    assert_eq!(v["transport"]["name"], "shm");
    assert_eq!(v["mode"], "loopback");
}

#[test]
fn udp_one_way_loopback_counts_and_orders() {
    let v = json_run(&[
        "loopback",
        "--transport",
        "udp",
        "--count",
        "3000",
        "--size",
        "64",
    ]);
    check_dist(dist(&v, "one_way"), 3000 - u(&v["run"], "lost"));
    assert_eq!(u(&v["run"], "sent"), 3000);
    assert_eq!(v["transport"]["name"], "udp");
    assert_eq!(u(&v, "message_size"), 64);
}

#[test]
fn in_process_round_trips_report_rtt_and_half() {
    for t in ["shm", "udp"] {
        let v = json_run(&[
            "loopback",
            "--transport",
            t,
            "--round-trip",
            "--count",
            "2000",
        ]);
        let rtt = dist(&v, "rtt");
        check_dist(rtt, 2000 - u(&v["run"], "lost"));
        let half = dist(&v, "rtt_half");
        assert!(
            u(half, "p50_ns").abs_diff(u(rtt, "p50_ns") / 2) <= u(rtt, "p50_ns") / 100 + 1,
            "{half} vs {rtt}"
        );
    }
}

#[test]
fn duration_mode_and_rate_pacing() {
    let v = json_run(&[
        "loopback",
        "--transport",
        "shm",
        "--duration",
        "400ms",
        "--rate",
        "5000",
        "--warmup",
        "0",
    ]);
    let run = &v["run"];
    let (sent, steps, missed) = (u(run, "sent"), u(run, "steps"), u(run, "missed_steps"));
    check_dist(dist(&v, "one_way"), sent);
    assert_eq!(steps, sent + missed);
    // 5 kHz for 0.4 s: 2000 steps at 0, 200 us, ..., 399.8 ms, sent or
    // missed (a loaded machine misses some; rounding of the period in
    // clock ticks may add one).
    assert!((1999..=2001).contains(&steps), "steps {steps}");
    let elapsed = u(run, "elapsed_ns");
    assert!(
        (400_000_000..600_000_000).contains(&elapsed),
        "elapsed {elapsed}"
    );
}

#[test]
fn bursts_with_pauses_take_the_pauses() {
    // 10 bursts of 10 with 20 ms pauses: at least 180 ms (the last pause may end the run).
    let v = json_run(&[
        "loopback",
        "--transport",
        "shm",
        "--count",
        "100",
        "--burst",
        "10",
        "--pause",
        "20ms",
    ]);
    check_dist(dist(&v, "one_way"), 100);
    assert!(u(&v["run"], "elapsed_ns") >= 180_000_000, "{}", v["run"]);
}

#[test]
fn every_format_renders_and_files_are_written() {
    let dir = tempfile::tempdir().unwrap();
    let log = dir.path().join("run.hlog");
    let svg = dir.path().join("run.svg");
    let (code, out, err) = ibprobe(&[
        "loopback",
        "--transport",
        "udp",
        "--duration",
        "300ms",
        "--log-interval",
        "100ms",
        "--hdr-log",
        log.to_str().unwrap(),
        "--plot",
        svg.to_str().unwrap(),
        "--format",
        "csv",
    ]);
    assert_eq!(code, 0, "{err}");
    assert!(out.lines().count() >= 2 && out.contains("one_way"), "{out}");
    let hlog = std::fs::read_to_string(&log).unwrap();
    let intervals = hlog
        .lines()
        .filter(|l| l.starts_with("Tag=one_way,"))
        .count();
    assert!(
        (2..=4).contains(&intervals),
        "expected about 3 intervals of 100 ms:\n{hlog}"
    );
    assert!(std::fs::read_to_string(&svg).unwrap().contains("<svg"));
    for f in ["table", "markdown", "perftest"] {
        let (code, out, err) = ibprobe(&[
            "loopback",
            "--transport",
            "shm",
            "--count",
            "500",
            "--format",
            f,
            "--no-mlock",
        ]);
        assert_eq!(code, 0, "{f}: {err}");
        assert!(!out.trim().is_empty(), "{f}: empty output");
    }
}

// --------------------------------------------------------- client/server

fn client_server(transport: &str, extra: &[&str]) -> Value {
    let server = Server::start(transport, extra);
    let mut args = vec![
        "client",
        &server.addr,
        "--transport",
        transport,
        "--count",
        "3000",
        "--warmup",
        "20",
    ];
    args.extend_from_slice(extra);
    let v = json_run(&args);
    check_dist(dist(&v, "rtt"), 3000 - u(&v["run"], "lost"));
    assert_eq!(u(&v["run"], "sent"), 3000);
    assert_eq!(v["mode"], "client");
    let (code, err) = server.wait();
    assert_eq!(code, 0, "server: {err}");
    assert!(
        err.contains("done"),
        "server should report the client's end: {err}"
    );
    v
}

#[test]
fn udp_client_server_round_trip() {
    let v = client_server("udp", &[]);
    assert_eq!(v["transport"]["facts"]["poll"], "busy", "{v}");
}

#[test]
fn shm_client_server_round_trip() {
    client_server("shm", &[]);
}

/// `--consume-delay T`: the receiver spends T on each message. In a
/// round trip that is the echo (the in-process echo thread, and `ibprobe
/// server`, which learns it in the handshake), so every RTT grows by T;
/// in one-way loopback it is the measuring thread after each arrival, so
/// the one-way latency does not include it but the run takes count x T.
#[test]
fn consume_delay_is_spent_by_the_receiver() {
    let t = 200_000u64;
    let rtt_p50 = |v: &Value| u(dist(v, "rtt"), "p50_ns");
    let v = json_run(&[
        "loopback",
        "-t",
        "shm",
        "--round-trip",
        "--count",
        "300",
        "--consume-delay",
        "200us",
    ]);
    assert!(rtt_p50(&v) >= t, "in-process echo: {v}");
    assert_eq!(v["config"]["consume_delay"], "200µs", "{v}");
    let server = Server::start("udp", &[]);
    let v = json_run(&[
        "client",
        &server.addr,
        "-t",
        "udp",
        "--count",
        "300",
        "--consume-delay",
        "200us",
    ]);
    assert!(rtt_p50(&v) >= t, "ibprobe server: {v}");
    assert_eq!(server.wait().0, 0);
    let v = json_run(&[
        "loopback",
        "-t",
        "shm",
        "--count",
        "300",
        "--consume-delay",
        "200us",
    ]);
    let one_way = dist(&v, "one_way");
    assert!(u(one_way, "p50_ns") < t, "consumed after the arrival: {v}");
    assert!(u(&v["run"], "elapsed_ns") >= 300 * t, "{v}");
    // Without the knob the same runs are far faster (the delay is what
    // made the difference above).
    let v = json_run(&["loopback", "-t", "shm", "--round-trip", "--count", "300"]);
    assert!(rtt_p50(&v) < t / 4, "{v}");
}

/// `--poll event` on UDP: both ends sleep in poll(2) between datagrams.
#[test]
fn udp_event_polling_everywhere() {
    let v = client_server("udp", &["--poll", "event"]);
    assert_eq!(v["transport"]["facts"]["poll"], "event", "{v}");
    for extra in [&[][..], &["--round-trip"][..]] {
        let mut args = vec![
            "loopback",
            "--transport",
            "udp",
            "--poll",
            "event",
            "--count",
            "2000",
        ];
        args.extend_from_slice(extra);
        let v = json_run(&args);
        let name = if extra.is_empty() { "one_way" } else { "rtt" };
        check_dist(dist(&v, name), 2000 - u(&v["run"], "lost"));
        assert_eq!(v["transport"]["facts"]["poll"], "event", "{v}");
    }
}

// ------------------------------------------------ hot loop: no allocation

thread_local! {
    static ALLOCS: Cell<u64> = const { Cell::new(0) };
}

struct PerThreadCounting;

// SAFETY: forwards every call to `System` unchanged; only counts, in a
// const-initialised thread-local that never allocates itself.
unsafe impl GlobalAlloc for PerThreadCounting {
    unsafe fn alloc(&self, l: Layout) -> *mut u8 {
        ALLOCS.with(|c| c.set(c.get() + 1));
        // SAFETY: our caller's contract.
        unsafe { System.alloc(l) }
    }
    unsafe fn alloc_zeroed(&self, l: Layout) -> *mut u8 {
        ALLOCS.with(|c| c.set(c.get() + 1));
        // SAFETY: our caller's contract.
        unsafe { System.alloc_zeroed(l) }
    }
    unsafe fn realloc(&self, p: *mut u8, l: Layout, n: usize) -> *mut u8 {
        ALLOCS.with(|c| c.set(c.get() + 1));
        // SAFETY: our caller's contract.
        unsafe { System.realloc(p, l, n) }
    }
    unsafe fn dealloc(&self, p: *mut u8, l: Layout) {
        // SAFETY: our caller's contract.
        unsafe { System.dealloc(p, l) }
    }
}

#[global_allocator]
static GLOBAL: PerThreadCounting = PerThreadCounting;

#[test]
fn the_measurement_loop_allocates_nothing() {
    use ibprobe::clock::Clock;
    use ibprobe::probe::config::{Length, Plan, ProbeConfig};
    use ibprobe::probe::workload::{stop_wait::measure, Histos};
    use ibprobe::transport::shm::ShmChannel;
    use ibprobe::transport::udp::UdpChannel;
    use ibprobe::transport::Channel;

    let clock = Clock::calibrate();
    let cfg = ProbeConfig {
        length: Length::Count(50_000),
        rate_hz: Some(2_000_000.0),
        ..ProbeConfig::default()
    };
    let plan = Plan::measured(&cfg, &clock);
    let stop = AtomicBool::new(false);
    let mut shm = ShmChannel::loopback(64).unwrap();
    let mut udp = UdpChannel::loopback("127.0.0.1".parse().unwrap(), 64).unwrap();
    let chans: [&mut dyn Channel; 2] = [&mut shm, &mut udp];
    for ch in chans {
        let (mut cur, mut total) = (Histos::default(), Histos::default());
        let before = ALLOCS.with(|c| c.get());
        let t = measure(ch, &clock, &plan, 0, &stop, &mut cur, &mut total, None).unwrap();
        let after = ALLOCS.with(|c| c.get());
        assert_eq!(t.sent, 50_000);
        assert_eq!(total.primary.len(), 50_000 - t.lost);
        assert_eq!(
            after - before,
            0,
            "{}: the loop allocated {} times",
            ch.info().name,
            after - before
        );
    }
}
