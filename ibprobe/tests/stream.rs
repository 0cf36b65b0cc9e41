//! `ibprobe stream` end to end over the reference transports (shm, udp),
//! through the real CLI and its JSON (`ibprobe.stream/1`): what the stream
//! promises (docs/stream-design.md), each as an assertion that can fail.
//!
//! One test function on purpose: every run spins two threads, and runs in
//! parallel on a 2-core CI machine would measure each other.

use std::path::{Path, PathBuf};
use std::process::Command;

use assert_cmd::cargo::cargo_bin;
use serde_json::Value;

mod common;

use common::{ibprobe, one_line_exit_2, Server};

fn stream(args: &[&str]) -> Value {
    let mut a = vec!["stream"];
    a.extend(args);
    a.extend(["--json", "--no-mlock"]);
    let (code, out, err) = ibprobe(&a);
    assert_eq!(code, 0, "ibprobe {a:?} failed: {err}");
    serde_json::from_str(&out).unwrap_or_else(|e| panic!("not JSON ({e}): {out}"))
}

fn u(v: &Value, k: &str) -> u64 {
    v[k].as_u64().unwrap_or_else(|| panic!("no {k} in {v}"))
}

fn f(v: &Value, k: &str) -> f64 {
    v[k].as_f64().unwrap_or_else(|| panic!("no {k} in {v}"))
}

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(f64::total_cmp);
    v[v.len() / 2]
}

#[test]
fn stream_over_shm_and_udp_keeps_its_promises() {
    examples_work_as_written();
    batches_of_k_cost_one_post_per_k_messages();
    a_slow_rate_flushes_every_batch_by_timer_within_t();
    a_slow_consumer_stalls_the_window_and_never_sees_more_than_n();
    the_pipeline_never_has_more_than_d_unacked();
    stop_and_wait_runs_at_one_message_per_round_trip();
    bad_input_is_one_line_and_exit_2();
    memory_does_not_grow_with_the_message_count();
    the_sweep_grows_stream_axes();
    a_stream_runs_against_ibprobe_server();
}

fn a_stream_runs_against_ibprobe_server() {
    for (t, args) in [
        ("udp", &["--batch", "4", "--window", "8"][..]),
        ("shm", &["--pipeline", "2"][..]),
        ("udp", &["--window", "4", "--consume-delay", "20us"][..]),
    ] {
        let server = Server::start(t, &[]);
        let mut a = vec![server.addr.as_str(), "-t", t, "--count", "20000"];
        a.extend(args);
        let v = stream(&a);
        assert_eq!(v["mode"], "client");
        assert_eq!(v["latency_kind"], "credit_round_trip");
        // The receiver's counters came back from the server.
        assert_eq!(
            u(&v, "delivered") + u(&v, "lost"),
            20_000,
            "{t} {args:?}: {v}"
        );
        assert!(u(&v, "delivered") > 0);
        assert!(u(&v["latency"], "count") > 0 && f(&v, "msgs_per_sec") > 0.0);
        assert!(u(&v, "max_unconsumed") <= u(&v, "window"), "{v}");
        let (code, err) = server.wait();
        assert_eq!(code, 0, "server: {err}");
        assert!(err.contains("stream done: "), "{err}");
    }
    // A server that refuses: another transport than the client's.
    let server = Server::start("udp", &[]);
    let (code, out, err) = ibprobe(&["stream", server.addr.as_str(), "-t", "shm"]);
    assert_eq!(code, 2, "{out} {err}");
    assert!(err.contains("--transport udp"), "{err}");
}

fn the_sweep_grows_stream_axes() {
    // The example, as written.
    let a = [
        "sweep",
        "-t",
        "shm",
        "--batches",
        "1,4,16",
        "--sizes",
        "32,256",
        "--json",
    ];
    let (code, out, err) = ibprobe(&a);
    assert_eq!(code, 0, "{err}");
    let v: Value = serde_json::from_str(&out).unwrap();
    assert_eq!(v["schema"], "ibprobe.stream-sweep/1");
    let cells = v["cells"].as_array().unwrap();
    assert_eq!(cells.len(), 2 * 4 * 3, "sizes x default rates x batches");
    for c in cells {
        assert_eq!(c["schema"], "ibprobe.stream/1");
        let (b, n) = (u(c, "batch"), u(c, "messages"));
        assert_eq!(u(c, "data_posts"), n.div_ceil(b), "{c}");
    }
    // Windows against rates, as CSV and a throughput heatmap.
    let dir = tempfile::tempdir().unwrap();
    let svg = dir.path().join("w.svg");
    let (code, out, err) = ibprobe(&[
        "sweep",
        "-t",
        "udp",
        "--windows",
        "1,8",
        "--sizes",
        "32",
        "--rates",
        "0,20k",
        "--count",
        "2000",
        "--format",
        "csv",
        "--plot",
        svg.to_str().unwrap(),
        "--no-mlock",
    ]);
    assert_eq!(code, 0, "{err}");
    assert_eq!(out.lines().count(), 1 + 4, "{out}");
    assert!(out.starts_with("transport,size,rate_hz,window,batch"));
    let pic = std::fs::read_to_string(&svg).unwrap();
    assert!(
        pic.contains("messages/s") && pic.contains("w8"),
        "heatmap of throughput by window"
    );
    // A bad list is one line, exit 2, before anything runs.
    let (code, out, err) = ibprobe(&["sweep", "-t", "shm", "--windows", "4,0"]);
    one_line_exit_2(code, &out, &err, &["--windows", "\"0\""]);
}

fn examples_work_as_written() {
    // The examples (without --no-mlock, exactly as written).
    for ex in [
        "stream -t shm --batch 8 --count 200000 --json",
        "stream -t udp --window 4 --consume-delay 20us --count 20000 --json",
    ] {
        let a: Vec<&str> = ex.split(' ').collect();
        let (code, out, err) = ibprobe(&a);
        assert_eq!(code, 0, "{ex}: {err}");
        let v: Value = serde_json::from_str(&out).unwrap();
        assert_eq!(v["schema"], "ibprobe.stream/1");
        for k in [
            "msgs_per_sec",
            "bytes_per_sec",
            "ops_per_msg",
            "ops_per_msg_total",
            "credit_stalls",
            "window",
            "batch",
            "pipeline",
            "size",
            "transport",
            "flush_ns",
        ] {
            assert!(v.get(k).is_some(), "{ex}: no {k}");
        }
        for k in ["fill", "timer", "explicit"] {
            assert!(v["flushes"][k].is_u64(), "{ex}: flushes.{k}");
        }
        for k in ["p50", "p99", "p999", "p9999", "max"] {
            assert!(v["latency"][k].as_u64().unwrap() > 0, "{ex}: latency.{k}");
        }
    }
    let (code, out, err) = ibprobe(&[
        "stream",
        "-t",
        "shm",
        "--pipeline",
        "2",
        "--count",
        "100000",
        "--format",
        "table",
    ]);
    assert_eq!(code, 0, "{err}");
    assert!(
        out.contains("throughput") && out.contains("pipeline 2"),
        "{out}"
    );
}

fn batches_of_k_cost_one_post_per_k_messages() {
    for t in ["shm", "udp"] {
        for k in [4u64, 16] {
            let n: u64 = 16_000 + 3; // a last, partial batch
            let v = stream(&[
                "-t",
                t,
                "--batch",
                &k.to_string(),
                "--count",
                &n.to_string(),
            ]);
            let want = n.div_ceil(k);
            assert_eq!(u(&v, "data_posts"), want, "{t} batch {k}: {v}");
            let ops = f(&v, "ops_per_msg");
            assert!(
                (ops - 1.0 / k as f64).abs() <= 1.0 / n as f64 + 1e-12,
                "{t} batch {k}: ops_per_msg {ops}"
            );
            assert_eq!(v["flushes"]["timer"], 0);
            assert_eq!(v["flushes"]["explicit"], 1, "the last partial batch");
            assert_eq!(u(&v, "delivered") + u(&v, "lost"), n);
        }
    }
}

fn a_slow_rate_flushes_every_batch_by_timer_within_t() {
    // 2k msg/s = one message per 500 us; a batch of 16 never fills in
    // 100 us, so every post is the timer's (the run's end: explicit).
    // The p99 bound is the timer's promise; a preempted sender (other load
    // on a 2-CPU CI machine) breaks it without the timer being wrong, so
    // the best of three runs must keep it, and every run the causes.
    for t in ["shm", "udp"] {
        let mut p99s = Vec::new();
        for _ in 0..3 {
            let v = stream(&[
                "-t", t, "--batch", "16", "--flush", "100us", "--rate", "2k", "--count", "400",
                "--warmup", "0",
            ]);
            let fl = &v["flushes"];
            assert_eq!(fl["fill"], 0, "{t}: {v}");
            assert!(fl["explicit"].as_u64().unwrap() <= 1, "{t}: {fl}");
            assert_eq!(
                fl["timer"].as_u64().unwrap() + fl["explicit"].as_u64().unwrap(),
                u(&v, "data_posts")
            );
            let p99 = u(&v["time_in_batch"], "p99");
            assert!(
                p99 >= 100_000,
                "{t}: the timer cannot fire early ({p99} ns)"
            );
            p99s.push(p99);
            if p99 <= 100_000 + 50_000 {
                break;
            }
        }
        let best = *p99s.iter().min().unwrap();
        assert!(
            best <= 100_000 + 50_000,
            "{t}: time-in-batch p99 above T + 50 us in every run: {p99s:?} ns"
        );
    }
}

fn a_slow_consumer_stalls_the_window_and_never_sees_more_than_n() {
    for t in ["shm", "udp"] {
        let v = stream(&[
            "-t",
            t,
            "--window",
            "4",
            "--consume-delay",
            "20us",
            "--count",
            "5000",
        ]);
        assert!(u(&v, "credit_stalls") > 0, "{t}: {v}");
        // Checked inside the run too: a fifth unconsumed slot ends it.
        assert!(u(&v, "max_unconsumed") <= 4, "{t}: {v}");
        assert!(u(&v, "max_in_flight") <= 4, "{t}: {v}");
        assert!(
            u(&v, "max_unconsumed") >= 2,
            "{t}: the window was never used: {v}"
        );
    }
}

fn the_pipeline_never_has_more_than_d_unacked() {
    for t in ["shm", "udp"] {
        for d in [1u64, 2, 4] {
            let v = stream(&["-t", t, "--pipeline", &d.to_string(), "--count", "20000"]);
            assert!(u(&v, "max_unacked") <= d, "{t} D={d}: {v}");
            assert!(u(&v, "max_unacked") >= 1);
            assert!(u(&v, "ack_msgs") >= 20_000, "one ack per slot: {v}");
        }
    }
}

fn stop_and_wait_runs_at_one_message_per_round_trip() {
    // udp: the test build will do (a system call each way dominates).
    saw_against_round_trip(&cargo_bin("ibprobe"), "udp", "20000", 7, (0.8, 1.2));
    // shm: two spin loops of tens of ns each way, which an unoptimized
    // build distorts (there the stream runs at 0.2 of 1/RTT), so this
    // one runs the release build, for both sides. Like with like: both
    // rings are as long as what can be in flight (the stream's
    // `StreamSpec::shm_ring_slots`, 8 here; the round trip's
    // `transport::shm::SLOTS`, 8), and both pinned alike.
    // The lower bound is against the round trip's own rate (round trips
    // per second of its run), not 1 / its mean RTT: on shm the RTT is tens
    // of ns, and the round trip's loop spends ~35 ns a message outside it
    // (clock reads, recording), as the stream's loops do inside their rate.
    // Measured on VMs with an RTT near 60 ns, the stream reads 0.76-0.90 of
    // the round trip's rate (0.48-0.60 of 1 / mean RTT, which the round
    // trip's own loop, at 0.63, does not reach either). The bound 0.6 holds
    // there and still fails a stream that takes two round trips per
    // message (~0.4). The upper bound stays against 1 / mean RTT (up to
    // 1.20 seen there; against the round trip's rate that would be ~1.5).
    // See ibprobe/docs/stream-design.md.
    saw_against_round_trip(&release_ibprobe(), "shm", "300000", 7, (0.6, 1.35));
}

/// Stop-and-wait (`--pipeline 1`) on `t` against `ibprobe loopback -t t
/// --round-trip` (32 B both, pinned alike): `pairs` runs of each,
/// alternated; the median of the pairs' ratios of message rates must be
/// at least `low` of the round trip's own rate (round trips per second of
/// its run, which pays a loop's per-message work as the stream does) and
/// at most `high` of 1 / its mean RTT (one message per round trip is as
/// fast as stop-and-wait goes). One pair proves nothing (the UDP round
/// trip of this VM moves by 30% between runs).
fn saw_against_round_trip(bin: &Path, t: &str, count: &str, pairs: usize, (low, high): (f64, f64)) {
    let run = |args: &[&str]| -> Value {
        let o = Command::new(bin)
            .args(args)
            .args([
                "--size",
                "32",
                "-t",
                t,
                "--count",
                count,
                "--json",
                "--no-mlock",
            ])
            .output()
            .unwrap();
        assert!(
            o.status.success(),
            "{} {args:?}: {}",
            bin.display(),
            String::from_utf8_lossy(&o.stderr)
        );
        serde_json::from_slice(&o.stdout).unwrap()
    };
    // Both pinned alike: the stream's sender and the round trip's
    // measuring end on the first allowed CPU, the receiver and the echo
    // on the second (the echo's placement with --cpu: the first other
    // allowed CPU).
    let cpus = ibhost::rt::allowed_cpus();
    let pins: Vec<String> = cpus.iter().take(2).map(|c| c.to_string()).collect();
    let (stream_pins, rt_pins): (Vec<&str>, Vec<&str>) = match &pins[..] {
        [a, b] => (vec!["--cpu", a, "--rx-cpu", b], vec!["--cpu", a]),
        _ => (vec![], vec![]),
    };
    let (mut rates, mut rt_rates, mut per_rtt) = (Vec::new(), Vec::new(), Vec::new());
    for i in 0..pairs {
        let mut saw = || {
            let a = [&["stream", "--pipeline", "1"][..], &stream_pins].concat();
            rates.push(f(&run(&a), "msgs_per_sec"));
        };
        let mut rtt = || {
            let rt = run(&[&["loopback", "--round-trip"][..], &rt_pins].concat());
            let sent = u(&rt["run"], "sent") as f64;
            let elapsed = f(&rt["run"], "elapsed_ns");
            assert!(sent > 0.0 && elapsed > 0.0, "{t}: round trip: {rt}");
            rt_rates.push(sent * 1e9 / elapsed);
            per_rtt.push(1e9 / rt["distributions"][0]["mean_ns"].as_f64().unwrap());
        };
        if i % 2 == 0 {
            saw();
            rtt();
        } else {
            rtt();
            saw();
        }
    }
    // The median of each pair's ratio: the two runs of a pair are next to
    // each other in time, and this VM's speed drifts over seconds (in one
    // CI run the udp round trips of four pairs ran ~20% slower than their
    // streams and the fifth ~15% faster: ratio of medians 1.22, median of
    // the pairs' ratios 1.11).
    let ratio = |reference: &[f64]| -> (f64, Vec<f64>) {
        let r: Vec<f64> = rates.iter().zip(reference).map(|(s, r)| s / r).collect();
        (median(r.clone()), r)
    };
    let (r, ratios) = ratio(&rt_rates);
    let (r_rtt, ratios_rtt) = ratio(&per_rtt);
    eprintln!(
        "{t}: stop-and-wait / round-trip rate, median of {pairs} pairs' ratios: {r:.3} ({ratios:.3?}); \
         / (1 / mean RTT): {r_rtt:.3} ({ratios_rtt:.3?})"
    );
    assert!(
        r >= low,
        "{t}: stop-and-wait msg/s {rates:?} over round trips/s {rt_rates:?}: median of the pairs' ratios {r:.3} ({ratios:.3?}) below {low}"
    );
    assert!(
        r_rtt <= high,
        "{t}: stop-and-wait msg/s {rates:?} over 1 / mean RTT {per_rtt:?}: median of the pairs' ratios {r_rtt:.3} ({ratios_rtt:.3?}) above {high}: faster than one message per round trip"
    );
}

/// The optimized ibprobe, built now (`cargo build --release`; a no-op
/// when it is up to date, as after `scripts/test-all`'s own release build
/// of it, which runs beside the tests).
fn release_ibprobe() -> PathBuf {
    let mut cargo = Command::new(env!("CARGO"));
    // What `cargo test` sets for this test (the package's manifest, name,
    // version, OUT_DIR) is dropped: a build script of a dependency (ring's)
    // reruns when one of them differs from the last build's, which would
    // rebuild it and ibprobe after a plain `cargo build --release`.
    for (k, _) in std::env::vars_os() {
        let k = k.to_string_lossy();
        if k.starts_with("CARGO_PKG_")
            || matches!(
                &*k,
                "CARGO_MANIFEST_DIR"
                    | "CARGO_MANIFEST_PATH"
                    | "CARGO_CRATE_NAME"
                    | "CARGO_PRIMARY_PACKAGE"
                    | "OUT_DIR"
            )
        {
            cargo.env_remove(&*k);
        }
    }
    let o = cargo
        .args(["build", "--release", "-p", "ibprobe", "--bin", "ibprobe"])
        .args(["--message-format", "json-render-diagnostics"])
        .current_dir(env!("CARGO_MANIFEST_DIR"))
        .stderr(std::process::Stdio::inherit())
        .output()
        .unwrap();
    assert!(
        o.status.success(),
        "cargo build --release -p ibprobe failed (above)"
    );
    String::from_utf8_lossy(&o.stdout)
        .lines()
        .filter_map(|l| serde_json::from_str::<Value>(l).ok())
        .filter(|v| v["target"]["name"] == "ibprobe")
        .find_map(|v| v["executable"].as_str().map(PathBuf::from))
        .expect("cargo build named no ibprobe executable")
}

fn bad_input_is_one_line_and_exit_2() {
    // The thesis's stamping thread, where it means nothing (checked
    // before any device is opened).
    for (args, parts) in [
        (
            &["-t", "shm"][..],
            &["--stamp-thread with --transport shm", "rc|uc|ud"][..],
        ),
        (&["-t", "udp"], &["--transport udp"]),
        (&["-t", "rc"], &["--inline auto", "--inline off"]),
        (
            &["-t", "rc", "--inline", "off", "--size", "8"],
            &["--size 8", "24"],
        ),
        (
            &["-t", "rc", "--inline", "off", "--round-trip"],
            &["--round-trip"],
        ),
    ] {
        let mut a = vec!["loopback", "--stamp-thread"];
        a.extend(args);
        let (code, out, err) = ibprobe(&a);
        one_line_exit_2(code, &out, &err, parts);
    }
    // The stream's stamping thread: the same rules (HOST for
    // --round-trip) and a message in one slot, before any device opens.
    for (args, parts) in [
        (
            &["-t", "shm"][..],
            &["--stamp-thread with --transport shm", "rc|uc|ud"][..],
        ),
        (&["-t", "udp"], &["--transport udp"]),
        (
            &["-t", "model", "--model", "L=1us,os=1us,or=1us,g=1us,G=1ns"],
            &["--transport model"],
        ),
        (&["-t", "rc"], &["--inline auto", "--inline off"]),
        (
            &["-t", "ud", "--inline", "64"],
            &["--inline 64", "--inline off"],
        ),
        (
            &["-t", "rc", "--inline", "off", "--size", "16"],
            &["--size 16", "24"],
        ),
        (
            &[
                "-t",
                "rc",
                "--inline",
                "off",
                "--size",
                "256",
                "--slot-size",
                "128",
            ],
            &["--slot-size 128", "--slot-size 288"],
        ),
        (&["10.0.0.2", "-t", "rc", "--inline", "off"], &["drop HOST"]),
    ] {
        let mut a = vec!["stream", "--stamp-thread"];
        a.extend(args);
        let (code, out, err) = ibprobe(&a);
        one_line_exit_2(code, &out, &err, parts);
    }
    for (args, parts) in [
        (&["--window", "0"][..], &["--window 0"][..]),
        (&["--batch", "0"], &["--batch 0"]),
        (
            &["--batch", "100", "--size", "64", "--slot-size", "4096"],
            &["--batch 100", "at most --batch 51 fits"],
        ),
        (
            &["--window", "2", "--pipeline", "4"],
            &["--pipeline 4 > --window 2"],
        ),
        (
            &["--credit-return", "write"],
            &["--credit-return write", "rc"],
        ),
        (&["--format", "perftest"], &["perftest"]),
        (&["--credit-return", "carrier-pigeon"], &["carrier-pigeon"]),
    ] {
        let mut a = vec!["stream", "-t", "shm"];
        a.extend(args);
        let (code, out, err) = ibprobe(&a);
        one_line_exit_2(code, &out, &err, parts);
    }
}

/// Max RSS of the finished children so far, KiB.
fn children_max_rss_kib() -> i64 {
    // SAFETY: getrusage writes one rusage into the zeroed struct we own.
    let mut ru: libc::rusage = unsafe { std::mem::zeroed() };
    // SAFETY: RUSAGE_CHILDREN and a valid pointer.
    assert_eq!(
        unsafe { libc::getrusage(libc::RUSAGE_CHILDREN, &mut ru) },
        0
    );
    ru.ru_maxrss
}

fn memory_does_not_grow_with_the_message_count() {
    // No per-message storage: 20x the messages, the same peak memory.
    let _ = stream(&["-t", "shm", "--batch", "4", "--count", "100000"]);
    let small = children_max_rss_kib();
    let _ = stream(&["-t", "shm", "--batch", "4", "--count", "2000000"]);
    let big = children_max_rss_kib();
    assert!(
        big <= small + 2048,
        "peak RSS grew from {small} KiB to {big} KiB with 20x the messages"
    );
}
