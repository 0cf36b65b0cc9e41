//! ibprobe on a real verbs stack: the Soft-RoCE lab (tests/lab), rxe0.
//! Runs with `--include-ignored` (scripts/test-all does); see
//! `ibtools_tests::lab::harness` for why this is not libtest.
//!
//! - Every combination of transport x op x inline x signal x poll runs
//!   through `ibprobe loopback` in one guest: the ones verbs allow deliver
//!   every message and complete every signaled send; the ones they forbid
//!   are refused with exit 2 and one line.
//! - Receive slots come back in time: round trips and one-way runs with
//!   `--rq-prepost` 1 and 2 lose nothing and meet no RNR NAK.
//! - `ibprobe stream` in one guest: every mode on rc, uc and ud.
//! - The standard kernel's half of `tests/lab_host.rs`: the auto clock
//!   picks the TSC, and `host --trace` is refused without timerlat.
//! - Client/server across two guests, and a server killed mid-run: the
//!   client ends with an error within its timeout instead of hanging.

use ibtools_tests::lab::harness::{self, Group};
use ibtools_tests::lab::{GuestOutput, Lab, LabConfig, Node};
use std::process::ExitCode;
use std::time::{Duration, Instant};

const IBPROBE: &str = env!("CARGO_BIN_EXE_ibprobe");
const COUNT: u64 = 200;

fn main() -> ExitCode {
    harness::run(vec![
        loopback_guest(),
        stream_guest(),
        stream_stamp_guest(),
        pair(),
    ])
}

/// Why verbs forbid a combination, or None when it must run.
fn forbidden(qp: &str, op: &str, poll: &str) -> Option<&'static str> {
    if qp == "ud" && (op == "write" || op == "write-imm") {
        Some("on UD: UD has no RDMA write")
    } else if op == "write" && poll == "event" {
        Some("plain RDMA write raises no receive completion")
    } else {
        None
    }
}

fn distribution<'a>(v: &'a serde_json::Value, name: &str) -> Option<&'a serde_json::Value> {
    v["distributions"]
        .as_array()?
        .iter()
        .find(|d| d["name"] == name)
}

/// Runs `cmd` in the guest, which must succeed, and parses its stdout as
/// JSON (`what` names the run in a failure).
fn json_of(lab: &Lab, what: &str, cmd: &str) -> (GuestOutput, serde_json::Value) {
    let o = lab.sh(cmd).success();
    let v = serde_json::from_str(&o.stdout).unwrap_or_else(|e| panic!("{what}: {e}: {o}"));
    (o, v)
}

fn matrix(lab: &Lab) {
    let mut combos = Vec::new();
    for qp in ["rc", "uc", "ud"] {
        for op in ["send", "send-imm", "write-imm", "write"] {
            for inline in ["auto", "off"] {
                for signal in ["every", "auto"] {
                    for poll in ["busy", "event"] {
                        combos.push((qp, op, inline, signal, poll));
                    }
                }
            }
        }
    }
    let mut script = String::from("mkdir -p $LAB_RESULTS/m; cd $LAB_RESULTS/m\n");
    for (qp, op, inline, signal, poll) in &combos {
        let name = format!("{qp}.{op}.{inline}.{signal}.{poll}");
        script.push_str(&format!(
            "timeout 60 {IBPROBE} loopback --transport {qp} --op {op} --inline {inline} --signal {signal} --poll {poll} --size 32 --count {COUNT} --warmup 20 --json > {name}.json 2> {name}.err; echo $? > {name}.rc\n"
        ));
    }
    lab.exec(Node::A, &script, Duration::from_secs(900))
        .unwrap_or_else(|e| std::panic::panic_any(e))
        .success();
    let dir = lab.results(Node::A).join("m");
    let (mut ran, mut refused) = (0, 0);
    for (qp, op, inline, signal, poll) in &combos {
        let name = format!("{qp}.{op}.{inline}.{signal}.{poll}");
        let read = |ext: &str| {
            std::fs::read_to_string(dir.join(format!("{name}.{ext}"))).unwrap_or_default()
        };
        let rc: i32 = read("rc").trim().parse().unwrap_or(-1);
        let (out, err) = (read("json"), read("err"));
        match forbidden(qp, op, poll) {
            Some(why) => {
                assert_eq!(rc, 2, "{name} must be refused ({why}): stderr {err}");
                let lines: Vec<&str> = err.lines().collect();
                assert_eq!(lines.len(), 1, "{name}: one line expected: {err}");
                assert!(lines[0].contains(why), "{name}: {err}");
                refused += 1;
            }
            None => {
                assert_eq!(rc, 0, "{name} failed: {err}");
                let v: serde_json::Value =
                    serde_json::from_str(&out).unwrap_or_else(|e| panic!("{name}: {e}: {out}"));
                assert_eq!(v["run"]["sent"], COUNT, "{name}");
                assert_eq!(v["run"]["lost"], 0, "{name}");
                let one_way = distribution(&v, "one_way")
                    .unwrap_or_else(|| panic!("{name}: no one_way: {out}"));
                assert_eq!(one_way["count"], COUNT, "{name}");
                assert!(one_way["min_ns"].as_u64().unwrap() > 0, "{name}");
                // Signaled sends complete: every one with --signal every, one per period with auto.
                let done = distribution(&v, "send_completion")
                    .map(|d| d["count"].as_u64().unwrap())
                    .unwrap_or(0);
                if *signal == "every" {
                    assert_eq!(done, COUNT, "{name}: send completions");
                } else {
                    assert!(
                        (1..COUNT).contains(&done),
                        "{name}: {done} send completions with --signal auto"
                    );
                }
                ran += 1;
            }
        }
    }
    eprintln!("verbs matrix: {ran} combinations ran with {COUNT} samples each, {refused} refused");
    assert_eq!(ran + refused, combos.len());
}

fn bad_input(lab: &Lab) {
    for (args, want) in [
        (
            "--transport rc --dev mlx5_1",
            "mlx5_1 not found; devices: rxe0",
        ),
        (
            "--transport rc --inline 1024",
            "inline 1024 > rxe0 max inline",
        ),
        ("--transport ud --size 2048", "UD message 2048 B > path MTU"),
        ("--transport rc --port 2", "port 2"),
    ] {
        let o = lab.sh(&format!("{IBPROBE} loopback {args} --count 10"));
        assert_eq!(o.status, 2, "{args}: {o}");
        assert_eq!(o.stderr.lines().count(), 1, "{args}: one line: {o}");
        assert!(o.stderr.contains(want), "{args}: wanted '{want}': {o}");
    }
}

fn port_down(lab: &Lab) {
    // Take rxe0's netdev down: the port goes DOWN and a run is refused.
    let o = lab.sh(&format!(
        "ip link set dummy0 down; for i in $(seq 50); do grep -q ACTIVE /sys/class/infiniband/rxe0/ports/1/state || break; sleep 0.1; done
         {IBPROBE} loopback --transport rc --count 10; rc=$?
         ip link set dummy0 up; for i in $(seq 100); do grep -q ACTIVE /sys/class/infiniband/rxe0/ports/1/state && break; sleep 0.1; done
         exit $rc"
    ));
    assert_eq!(o.status, 2, "{o}");
    assert_eq!(o.stderr.lines().count(), 1, "one line: {o}");
    assert!(o.stderr.contains("active"), "names the inactive port: {o}");
    lab.sh("grep -q ACTIVE /sys/class/infiniband/rxe0/ports/1/state")
        .success();
}

fn sweep(lab: &Lab) {
    let o = lab
        .sh(&format!(
            "{IBPROBE} sweep --transport rc --sizes 8,512 --rates 0,1000 --count 100 --warmup 10 --format csv --plot $LAB_RESULTS/sweep.svg"
        ))
        .success();
    let rows: Vec<&str> = o.stdout.lines().skip(1).collect();
    assert_eq!(rows.len(), 4, "{o}");
    for (row, (size, rate)) in
        rows.iter()
            .zip([("8", "0"), ("8", "1000"), ("512", "0"), ("512", "1000")])
    {
        let f: Vec<&str> = row.split(',').collect();
        assert_eq!((f[0], f[1], f[2]), ("rc", size, rate), "{row}");
        let (count, lost): (u64, u64) = (f[3].parse().unwrap(), f[15].parse().unwrap());
        assert_eq!(count + lost, 100, "{row}");
    }
    let svg = std::fs::read_to_string(lab.results(Node::A).join("sweep.svg")).unwrap();
    assert!(svg.contains("<svg"), "heatmap written");
}

fn host_wakeup(lab: &Lab) {
    let o = lab
        .sh(&format!("{IBPROBE} host --cpus 0,1 --count 200 --json"))
        .success();
    let v: serde_json::Value =
        serde_json::from_str(&o.stdout).unwrap_or_else(|e| panic!("{e}: {o}"));
    let cpus = v["cpus"]
        .as_array()
        .unwrap_or_else(|| panic!("no cpus: {o}"));
    assert_eq!(cpus.len(), 2, "{o}");
    for c in cpus {
        assert_eq!(c["count"], 200, "{o}");
        assert!(
            c["p50_ns"].as_u64().unwrap() <= c["max_ns"].as_u64().unwrap(),
            "{o}"
        );
    }
}

fn devices(lab: &Lab) {
    let o = lab.sh(&format!("{IBPROBE} devices --json")).success();
    let v: serde_json::Value =
        serde_json::from_str(&o.stdout).unwrap_or_else(|e| panic!("{e}: {o}"));
    let rxe = v
        .as_array()
        .and_then(|a| a.iter().find(|d| d["name"] == "rxe0"))
        .unwrap_or_else(|| panic!("{o}"));
    let port = &rxe["ports"][0];
    assert_eq!(port["link_layer"], "Ethernet", "{o}");
    assert!(
        port["gids"]
            .as_array()
            .unwrap()
            .iter()
            .any(|g| g["ipv4_mapped"] == true),
        "{o}"
    );
}

fn loopback_guest() -> Group {
    Group::with_lab("rxe_loopback", LabConfig::loopback())
        .test("devices_lists_rxe0", devices)
        .test("bad_input_is_one_line_exit_2", bad_input)
        .test("port_down_is_refused_in_one_line", port_down)
        .test("sweep_rc_grid_with_heatmap", sweep)
        .test("host_wakeup_latency_per_cpu", host_wakeup)
        .test("every_verbs_combination_runs_or_is_refused", matrix)
        .test("peer_dev_one_way_across_two_devices", peer_dev)
        .test("hw_timestamps_refused_on_rxe", hw_timestamps_refused_on_rxe)
        .test("receive_slots_come_back_in_time", receive_slots_back)
        // `ibprobe host --trace` and the clock on the standard kernel.
        .test(
            "auto_clock_uses_the_tsc_where_clock_gettime_is_a_syscall",
            auto_clock_tsc,
        )
        .test(
            "trace_is_refused_without_the_tracer",
            trace_refused_without_tracer,
        )
}

/// The streams get a guest of their own: the stamping thread's test
/// depends on a guest with nothing else behind it (a run in the guest of
/// the tests above, on a loaded host, was starved twice).
fn stream_guest() -> Group {
    Group::with_lab("rxe_stream", LabConfig::loopback())
        .test("stream_every_mode_on_rc_uc_ud", stream_modes)
        .test("stamp_thread_splits_t_send_at_the_hca_read", stamp_thread)
        .test("loggp_on_rc_uc_ud", loggp_verbs)
}

/// A stream's stamping thread needs a vCPU beside the sender's and the
/// receiver's: with the 2 of the other guests it shares one with a
/// spinning loop, and a CI run split 9 and then 5 of 3000 messages (under
/// the test's 1% floor); with 3, 13-16% were split. A guest of its own,
/// so the loggp test (which failed twice with a third vCPU in its guest)
/// keeps its 2.
fn stream_stamp_guest() -> Group {
    Group::with_lab(
        "rxe_stream_stamp",
        LabConfig {
            cpus: 3,
            ..LabConfig::loopback()
        },
    )
    .test(
        "stream_stamp_thread_splits_latency_at_the_hca_read",
        stream_stamp_thread,
    )
}

const TRACEFS: &str =
    "mountpoint -q /sys/kernel/tracing || mount -t tracefs nodev /sys/kernel/tracing";

/// The guest's CPU flags hide constant_tsc and its clocksource (hpet) has
/// no vDSO read: `auto` must measure that and pick the TSC, as perftest
/// always does, and say why.
fn auto_clock_tsc(lab: &Lab) {
    let o = lab
        .sh(&format!("{IBPROBE} loopback -t shm -n 200 --json"))
        .success();
    let j: serde_json::Value = serde_json::from_str(&o.stdout).expect("JSON");
    let c = &j["clock"];
    eprintln!("guest clock: {}", c["description"]);
    assert_eq!(c["read_cost"]["monotonic_is_syscall"], true, "{c}");
    assert_eq!(c["kind"], "tsc", "{c}");
    assert!(
        c["auto_reason"]
            .as_str()
            .is_some_and(|r| r.contains("system call")),
        "{c}"
    );
    let (tsc, mono) = (
        c["read_cost"]["tsc_ns"].as_f64().expect("tsc_ns"),
        c["read_cost"]["monotonic_ns"]
            .as_f64()
            .expect("monotonic_ns"),
    );
    assert!(mono > tsc, "a system call cheaper than rdtsc? {c}");
}

/// `ibprobe host --trace` on the standard kernel (no timerlat tracer):
/// refused with one line (the PREEMPT_RT half is `tests/lab_host.rs`).
fn trace_refused_without_tracer(lab: &Lab) {
    let o = lab.sh(&format!(
        "{TRACEFS}; cat /sys/kernel/tracing/available_tracers; {IBPROBE} host --trace -n 10"
    ));
    let mut out = o.stdout.lines();
    let tracers = out.next().unwrap_or_default();
    // The fact the docs state: Debian's standard 6.1 kernel has no timerlat.
    assert!(!tracers.split_whitespace().any(|t| t == "timerlat"), "{o}");
    assert_eq!(o.status, 2, "{o}");
    assert_eq!(out.next(), None, "nothing on stdout: {o}");
    let err: Vec<&str> = o.stderr.lines().collect();
    assert_eq!(err.len(), 1, "one line: {o}");
    assert!(
        err[0].contains("has no timerlat tracer")
            && err[0].contains("linux-image-rt-amd64")
            && err[0].contains("without --trace"),
        "{o}"
    );
}

/// A device's hardware counter (`/sys/.../DEV/ports/1/hw_counters/NAME`).
fn hw_counter(lab: &Lab, dev: &str, name: &str) -> u64 {
    let o = lab
        .sh(&format!(
            "cat /sys/class/infiniband/{dev}/ports/1/hw_counters/{name}"
        ))
        .success();
    o.stdout
        .trim()
        .parse()
        .unwrap_or_else(|e| panic!("{name}: {e}: {o}"))
}

/// The verbs channel gives an arrival's receive slot back after the next
/// send is posted, not before the arrival is returned; the other posted
/// receives must cover the next message meanwhile, and with
/// `--rq-prepost 1` (no other) the slot goes back at once. Round trips
/// (client and server) and one-way loopback runs with 1 and 2 receives
/// posted, on rc and ud: nothing is lost (ud drops a message that finds
/// no receive) and rc never met a receiver not ready (rxe's RNR
/// counters; with the slot kept back at `--rq-prepost 1` a round trip
/// met 84 in 2000).
fn receive_slots_back(lab: &Lab) {
    const N: u64 = 2000;
    // The eight runs go to the guest as one script (each `lab.sh` costs a
    // round of process starts under TCG): per run its JSON, its status
    // and rxe0's RNR counters (received + sent NAKs) before and after it.
    let mut cases = Vec::new();
    let mut script = String::from(
        "mkdir -p $LAB_RESULTS/rq; cd $LAB_RESULTS/rq\n\
         rnr() { read -r a < /sys/class/infiniband/rxe0/ports/1/hw_counters/rcvd_rnr_err; \
         read -r b < /sys/class/infiniband/rxe0/ports/1/hw_counters/send_rnr_err; echo $((a + b)); }\n",
    );
    for qp in ["rc", "ud"] {
        for prepost in [1, 2] {
            for round_trip in [true, false] {
                let name = format!("{qp}.{prepost}.{round_trip}");
                let args = format!(
                    "--transport {qp} --rq-prepost {prepost} --count {N} --warmup 20 --timeout 1s --json"
                );
                // Round trips: a server in the same guest (its echo's
                // receives are the client's shape, from the handshake).
                let cmd = if round_trip {
                    format!(
                        "{IBPROBE} server --transport {qp} --bind 127.0.0.1:18521 > /tmp/srv.log 2>&1 & s=$!; \
                         for i in $(seq 100); do ss -ltn | grep -q ':18521 ' && break; sleep 0.1; done; \
                         timeout 120 {IBPROBE} client 127.0.0.1:18521 {args}; rc=$?; kill $s; wait $s; exit $rc"
                    )
                } else {
                    format!("timeout 120 {IBPROBE} loopback {args}")
                };
                script.push_str(&format!(
                    "rnr > {name}.rnr; ( {cmd} ) > {name}.json 2> {name}.err; echo $? > {name}.rc; rnr >> {name}.rnr\n"
                ));
                cases.push((name, qp, prepost, round_trip));
            }
        }
    }
    lab.exec(Node::A, &script, Duration::from_secs(900))
        .unwrap_or_else(|e| std::panic::panic_any(e))
        .success();
    let dir = lab.results(Node::A).join("rq");
    let read = |f: String| std::fs::read_to_string(dir.join(f)).unwrap_or_default();
    for (name, qp, prepost, round_trip) in cases {
        let what = format!("{qp} --rq-prepost {prepost} round trip {round_trip}");
        let (out, err) = (read(format!("{name}.json")), read(format!("{name}.err")));
        assert_eq!(read(format!("{name}.rc")).trim(), "0", "{what}: {err}");
        let v: serde_json::Value =
            serde_json::from_str(&out).unwrap_or_else(|e| panic!("{what}: {e}: {out}{err}"));
        assert_eq!(
            (v["run"]["sent"].as_u64(), v["run"]["lost"].as_u64()),
            (Some(N), Some(0)),
            "{what}: {out}"
        );
        let d = if round_trip { "rtt" } else { "one_way" };
        let d = distribution(&v, d).unwrap_or_else(|| panic!("{what}: no {d}: {out}"));
        assert_eq!(d["count"], N, "{what}");
        let rnr = read(format!("{name}.rnr"));
        let counts: Vec<u64> = rnr.lines().filter_map(|l| l.trim().parse().ok()).collect();
        let [before, after] = counts[..] else {
            panic!("{what}: RNR counters before and after unreadable: {rnr:?}")
        };
        let rnr_seen = after - before;
        assert_eq!(rnr_seen, 0, "{what}: {rnr_seen} receiver-not-ready NAKs");
    }
}

/// `ibprobe stream` over rxe0 in one guest: every mode (plain, batch,
/// window with a slow consumer, pipeline, rc's counter write) on rc, uc and
/// ud with send, and write-imm where it applies. rc delivers every message
/// intact; uc and ud deliver intact what they deliver and count the rest
/// lost. A ud slot above the path MTU is refused with one line, exit 2.
fn stream_modes(lab: &Lab) {
    let modes = [
        ("plain", ""),
        ("noinline", "--inline off --signal auto"),
        ("batch16", "--batch 16"),
        ("window4", "--window 4 --consume-delay 5us"),
        ("pipeline2", "--pipeline 2"),
        ("counter", "--credit-return write"),
    ];
    let mut runs = Vec::new();
    for qp in ["rc", "uc", "ud"] {
        for op in ["send", "send-imm", "write-imm"] {
            for (mode, flags) in modes {
                if (qp == "ud" && op == "write-imm") || (qp != "rc" && mode == "counter") {
                    continue;
                }
                runs.push((qp, op, mode, flags));
            }
        }
    }
    // 1000 messages: every slot of the 64-slot pools is used 15 times
    // over, and what is checked (nothing corrupt, rc loses nothing, the
    // window and counter modes hold) is per message, not a statistic.
    let mut script = String::from("mkdir -p $LAB_RESULTS/s; cd $LAB_RESULTS/s\n");
    for (qp, op, mode, flags) in &runs {
        let name = format!("{qp}.{op}.{mode}");
        // A ud slot is one packet: rxe0 over a 1500 B netdev has a 1024 B MTU.
        let slot = if *qp == "ud" { "--slot-size 1024" } else { "" };
        script.push_str(&format!(
            "timeout 120 {IBPROBE} stream --transport {qp} --op {op} {slot} {flags} --size 32 --count 1000 --warmup 100 --timeout 2s --json > {name}.json 2> {name}.err; echo $? > {name}.rc\n"
        ));
    }
    script.push_str(&format!(
        "{IBPROBE} stream --transport ud --slot-size 4096 --count 10 > ud-mtu.out 2> ud-mtu.err; echo $? > ud-mtu.rc\n"
    ));
    lab.exec(Node::A, &script, Duration::from_secs(1800))
        .unwrap_or_else(|e| std::panic::panic_any(e))
        .success();
    let dir = lab.results(Node::A).join("s");
    let read = |f: &str| std::fs::read_to_string(dir.join(f)).unwrap_or_default();
    for (qp, op, mode, _) in &runs {
        let name = format!("{qp}.{op}.{mode}");
        let rc = read(&format!("{name}.rc"));
        let err = read(&format!("{name}.err"));
        assert_eq!(rc.trim(), "0", "{name}: {err}");
        let v: serde_json::Value = serde_json::from_str(&read(&format!("{name}.json")))
            .unwrap_or_else(|e| panic!("{name}: not JSON ({e}): {err}"));
        let n = |k: &str| {
            v[k].as_u64()
                .unwrap_or_else(|| panic!("{name}: no {k} in {v}"))
        };
        assert_eq!(n("corrupt"), 0, "{name}: {v}");
        assert!(n("delivered") > 0, "{name}: {v}");
        if *qp == "rc" {
            assert_eq!(
                (n("delivered"), n("lost")),
                (n("messages"), 0),
                "{name}: {v}"
            );
        }
        if *mode == "counter" {
            assert!(n("counter_writes") > 0, "{name}: {v}");
        }
        // Default flags: rc returns credits by RDMA write (no credit
        // message), the others by message; both at the default batch.
        if *mode == "plain" {
            let (ret, batch) = match *qp {
                "rc" => ("write", 32),
                _ => ("piggyback", 16),
            };
            assert_eq!(
                (v["credit_return"].as_str(), n("credit_batch")),
                (Some(ret), batch),
                "{name}: {v}"
            );
            if *qp == "rc" {
                assert!(
                    n("counter_writes") > 0 && n("credit_msgs") == 0,
                    "{name}: {v}"
                );
            }
        }
        if *mode == "window4" {
            assert!(n("max_unconsumed") <= 4, "{name}: {v}");
        }
    }
    let err = read("ud-mtu.err");
    assert_eq!(read("ud-mtu.rc").trim(), "2", "ud above the MTU: {err}");
    assert_eq!(err.lines().count(), 1, "{err}");
    assert!(err.contains("a UD slot is one packet"), "{err}");
}

/// `--stamp-thread` on rxe0: the one-way latency splits at the HCA's
/// (here: rxe's) read of the send buffer into two distributions whose
/// medians add up to about the one-way median; inline is refused.
fn stamp_thread(lab: &Lab) {
    let c = |x: &serde_json::Value| x["count"].as_u64().unwrap();
    let p50 = |x: &serde_json::Value| x["p50_ns"].as_u64().unwrap() as f64;
    for qp in ["rc", "uc", "ud"] {
        // Messages carry a stamp from inside their flight when the
        // stamping thread ran then: under TCG it shares 2 vCPUs with the
        // loop and rxe's kernel threads, so 95% on a quiet host and 30%
        // beside a busy one were seen; a stale stamp is left out, and a
        // tenth is the floor of "the split was measured". Once a run was
        // starved (28 of 2000 stamped, 2,003 involuntary context switches
        // of the loop): such a run is said and run again, once; the floor
        // holds for the second.
        let run = || {
            json_of(
                lab,
                qp,
                &format!(
                    "{IBPROBE} loopback --transport {qp} --inline off --size 64 --stamp-thread --count 2000 --warmup 100 --json"
                ),
            )
        };
        let (mut o, mut v) = run();
        let stamped = |v: &serde_json::Value| distribution(v, "before_hca_read").map_or(0, c);
        if stamped(&v) < 200 {
            println!(
                "stamp thread {qp}: starved run ({} of 2000 stamped, {} involuntary context switches); once more",
                stamped(&v),
                v["counters"]["involuntary_context_switches"]
            );
            (o, v) = run();
        }
        let d = |n: &str| distribution(&v, n).unwrap_or_else(|| panic!("{qp}: no {n}: {o}"));
        let (ow, before, after) = (d("one_way"), d("before_hca_read"), d("after_hca_read"));
        assert_eq!(c(ow), 2000, "{qp}: {o}");
        assert!(c(before) >= 200 && c(before) == c(after), "{qp}: {o}");
        assert!(p50(before) > 0.0 && p50(after) > 0.0, "{qp}: {o}");
        let sum = p50(before) + p50(after);
        assert!(
            (0.5..=1.5).contains(&(sum / p50(ow))),
            "{qp}: before {} + after {} vs one-way {}: {o}",
            p50(before),
            p50(after),
            p50(ow)
        );
        println!(
            "stamp thread {qp}: one-way p50 {:.1} us = before HCA read {:.1} us + after {:.1} us ({} of 2000 stamped)",
            p50(ow) / 1e3,
            p50(before) / 1e3,
            p50(after) / 1e3,
            c(before)
        );
    }
    let o = lab.sh(&format!(
        "{IBPROBE} loopback --transport rc --stamp-thread; echo rc=$?"
    ));
    assert!(
        o.stdout.contains("rc=2") && o.stderr.contains("--inline off"),
        "{o}"
    );
}

/// `ibprobe stream --stamp-thread` on rxe0: a message's latency splits
/// at its slot's HCA (here: rxe's) read into two distributions, both
/// present and above 0, whose medians add up to about the median latency
/// of the messages split; payloads stay intact; a guest with fewer than 3
/// CPUs is told that the stamping thread has none of its own.
fn stream_stamp_thread(lab: &Lab) {
    let cpus: usize = lab.sh("nproc").success().stdout.trim().parse().unwrap();
    for qp in ["rc", "uc", "ud"] {
        // A ud slot is one packet (rxe0's MTU is 1024 B): the same slots
        // for all three; 8 of them, so that a pass of the stamping thread
        // (one store per send buffer) stays short under TCG. Credits come
        // back by message on all three, as the floor below was set with:
        // rc's default credit write lets the sender post sooner, and in a
        // loaded guest 20, 59 and 90 of 3000 messages were split with it
        // against 128-161 with credit messages (3 runs each).
        let run = || {
            json_of(
                lab,
                qp,
                &format!(
                    "{IBPROBE} stream --transport {qp} --inline off --size 64 --slot-size 1024 --slots 8 --window 8 --credit-return piggyback --stamp-thread --count 3000 --warmup 200 --timeout 2s --json"
                ),
            )
        };
        let n = |x: &serde_json::Value, k: &str| x[k].as_u64().unwrap_or(0);
        let split = |v: &serde_json::Value| n(&v["t_send_split"]["before_hca_read"], "count");
        // The guest's 3 vCPUs give the stamping thread one of its own
        // beside the two spinning loops (with 2 it shares one with a loop,
        // and the run is told so: checked below); rxe's "HCA read" is a
        // kernel thread's copy that must take a vCPU from one of them (the
        // stamping thread: its stamps stop). A message whose time before
        // the read is shorter than a pass is split only when a pass fell
        // in between. 1-16% of the messages were split in the runs seen
        // with 3 vCPUs and 8 slots (32 of 3000 on rc in the slowest; 4-8%
        // with 2 vCPUs, down to 0.2% in a CI run; under 1.2% with 64
        // slots: a pass stores into every slot). A stale stamp is left
        // out; MIN_SPLIT messages is the floor of "the split was measured"
        // (a stamp word the HCA does not read splits none), and a starved
        // run is said and run once more.
        const MIN_SPLIT: u64 = 10;
        let (mut o, mut v) = run();
        if split(&v) < MIN_SPLIT {
            println!(
                "stream stamp thread {qp}: starved run ({} of {} split); once more",
                split(&v),
                n(&v, "delivered")
            );
            (o, v) = run();
        }
        let t = &v["t_send_split"];
        let (before, after, covered) = (&t["before_hca_read"], &t["after_hca_read"], &t["latency"]);
        assert_eq!(n(&v, "corrupt"), 0, "{qp}: the stamp broke a payload: {o}");
        assert!(n(&v, "delivered") > 0, "{qp}: {o}");
        assert!(
            n(before, "count") >= MIN_SPLIT
                && n(before, "count") == n(after, "count")
                && n(before, "count") == n(covered, "count"),
            "{qp}: {o}"
        );
        assert!(n(before, "p50") > 0 && n(after, "p50") > 0, "{qp}: {o}");
        // Per message the two parts add up to its latency exactly (the
        // same clock reads, the stamp between them); their medians add up
        // to the median latency of the same messages only about, as
        // medians do not add: within half of it either way. Against the
        // latency of all messages the split messages are a biased sample
        // here (those whose time before the read outlasted a pass, or
        // spanned the stamping vCPU's turn): that ratio is printed.
        let sum = (n(before, "p50") + n(after, "p50")) as f64;
        let ratio = sum / n(covered, "p50") as f64;
        assert!(
            (0.5..=1.5).contains(&ratio),
            "{qp}: before {} + after {} vs the split messages' latency {}: {o}",
            n(before, "p50"),
            n(after, "p50"),
            n(covered, "p50")
        );
        let warned = o.stderr.contains("no CPU is left for the stamping thread");
        assert_eq!(warned, cpus < 3, "{qp}: {cpus} CPUs: {}", o.stderr);
        println!(
            "stream stamp thread {qp}: {} of {} split; their latency p50 {:.1} us = {:.1} before + {:.1} after the HCA read (ratio {ratio:.2}); all messages' p50 {:.1} us (ratio {:.2}); a pass every {:.0} ns",
            n(before, "count"),
            n(&v, "delivered"),
            n(covered, "p50") as f64 / 1e3,
            n(before, "p50") as f64 / 1e3,
            n(after, "p50") as f64 / 1e3,
            n(&v["latency"], "p50") as f64 / 1e3,
            sum / n(&v["latency"], "p50") as f64,
            t["stamp_pass_ns"].as_f64().unwrap_or(0.0)
        );
    }
}

/// `ibprobe loggp` on rxe0 (issue 15): LogGP estimates with 95% intervals
/// on rc, uc and ud, and the stream predictions beside measured streams
/// (batch 1 and 16). The guest is emulated (TCG), so its figures are
/// noisy and slow; what must hold on every run is that every estimate is a
/// number not below 0, inside its interval, and that the predictions ran.
/// That o_s, o_r and g came out above 0 (resolved, not clamped) depends on
/// the emulation's noise: in one CI run on a slow host uc's g came out
/// -149 us with an interval of +-350 us, which the tool clamps to 0 and says
/// so; such a transport gets one more run, and both are printed if it
/// fails again. The JSON stays in the results folder (`loggp/*.json`).
fn loggp_verbs(lab: &Lab) {
    let dir = lab.results(Node::A).join("loggp");
    let read = |f: &str| std::fs::read_to_string(dir.join(f)).unwrap_or_default();
    let mut pending = vec!["rc", "uc", "ud"];
    let mut unresolved: Vec<String> = Vec::new();
    for attempt in 1..=2 {
        if pending.is_empty() {
            break;
        }
        let mut script = String::from("mkdir -p $LAB_RESULTS/loggp; cd $LAB_RESULTS/loggp\n");
        for qp in &pending {
            script.push_str(&format!(
                "timeout 600 {IBPROBE} loggp --transport {qp} --rounds 7 --reps 5 --timeout 1s --predict --batches 1,16 --predict-duration 1s --json --quiet > {qp}.json 2> {qp}.err; echo $? > {qp}.rc\n"
            ));
        }
        lab.exec(Node::A, &script, Duration::from_secs(1800))
            .unwrap_or_else(|e| std::panic::panic_any(e))
            .success();
        let mut again = Vec::new();
        for qp in pending {
            let err = read(&format!("{qp}.err"));
            assert_eq!(read(&format!("{qp}.rc")).trim(), "0", "{qp}: {err}");
            let v: serde_json::Value = serde_json::from_str(&read(&format!("{qp}.json")))
                .unwrap_or_else(|e| panic!("{qp}: not JSON ({e}): {err}"));
            let zero = loggp_checked(qp, &v);
            let est = |k: &str| format!("{k} {} {}", v[k], v[format!("{k}_ci")]);
            eprintln!(
                "loggp {qp} (run {attempt}): {}; {}; {}; {}; {}; segments {}; predictions {}",
                est("L_ns"),
                est("os_ns"),
                est("or_ns"),
                est("g_ns"),
                est("G_ns_per_byte"),
                v["segments"],
                v["predictions"]
            );
            if !zero.is_empty() {
                unresolved.push(format!("{qp} run {attempt}: {} is 0: {v}", zero.join(", ")));
                again.push(qp);
            }
        }
        pending = again;
    }
    let both: Vec<&String> = unresolved
        .iter()
        .filter(|u| pending.iter().any(|qp| u.starts_with(&format!("{qp} "))))
        .collect();
    assert!(
        pending.is_empty(),
        "{pending:?}: estimates at 0 in both runs:\n{}",
        both.iter()
            .map(|u| u.as_str())
            .collect::<Vec<_>>()
            .join("\n")
    );
}

/// The checks every `ibprobe loggp` run must pass (schema, each estimate
/// inside its interval and not below 0, both predictions made and
/// measured); returns those of o_s, o_r and g that came out 0 (the tool
/// clamps what it cannot resolve above 0).
fn loggp_checked(qp: &str, v: &serde_json::Value) -> Vec<String> {
    assert_eq!(v["schema"], "ibprobe.loggp/1", "{qp}");
    for k in ["L_ns", "os_ns", "or_ns", "g_ns", "G_ns_per_byte"] {
        let est = v[k]
            .as_f64()
            .unwrap_or_else(|| panic!("{qp}: no {k} in {v}"));
        let ci = &v[format!("{k}_ci")];
        let (lo, hi) = (ci[0].as_f64().unwrap(), ci[1].as_f64().unwrap());
        assert!(
            0.0 <= lo && lo <= est && est <= hi,
            "{qp}: {k} = {est} [{lo}, {hi}]"
        );
    }
    let p = v["predictions"]
        .as_array()
        .unwrap_or_else(|| panic!("{qp}: {v}"));
    assert_eq!(p.len(), 2, "{qp}: {v}");
    for row in p {
        assert!(
            row["measured_msgs_per_s"].as_f64().unwrap_or(0.0) > 0.0
                && row["predicted_msgs_per_s"].as_f64().unwrap_or(0.0) > 0.0,
            "{qp}: {row}"
        );
    }
    ["os_ns", "or_ns", "g_ns"]
        .into_iter()
        .filter(|k| v[*k].as_f64() == Some(0.0))
        .map(String::from)
        .collect()
}

/// Two rxe devices over the two ends of a veth pair, with policy routing
/// so traffic between their addresses crosses the veth instead of `lo`
/// (rxe drops what arrives on `lo`: no rxe device is bound to it).
const TWO_DEVICES: &str = r#"set -e
ip link add iblab-va type veth peer name iblab-vb
ip addr add 10.77.2.1/32 dev iblab-va; ip addr add 10.77.2.2/32 dev iblab-vb
ip link set iblab-va up; ip link set iblab-vb up
for i in all iblab-va iblab-vb; do sysctl -qw net.ipv4.conf.$i.accept_local=1 net.ipv4.conf.$i.rp_filter=0; done
ip neigh add 10.77.2.2 lladdr $(cat /sys/class/net/iblab-vb/address) dev iblab-va nud permanent
ip neigh add 10.77.2.1 lladdr $(cat /sys/class/net/iblab-va/address) dev iblab-vb nud permanent
ip rule add pref 100 to 10.77.2.2 iif lo lookup 100; ip route add 10.77.2.2 dev iblab-va src 10.77.2.1 table 100
ip rule add pref 101 to 10.77.2.1 iif lo lookup 101; ip route add 10.77.2.1 dev iblab-vb src 10.77.2.2 table 101
ip rule del pref 0 lookup local; ip rule add pref 1000 lookup local
rdma link add rxa type rxe netdev iblab-va; rdma link add rxb type rxe netdev iblab-vb
for i in $(seq 100); do grep -q ACTIVE /sys/class/infiniband/rxb/ports/1/state && grep -q ACTIVE /sys/class/infiniband/rxa/ports/1/state && exit 0; sleep 0.1; done
exit 1"#;

const UNDO_TWO_DEVICES: &str = "rdma link del rxa; rdma link del rxb; ip link del iblab-va; \
    ip rule del pref 100; ip rule del pref 101; ip rule add pref 0 lookup local; ip rule del pref 1000; true";

/// `--peer-dev`: QP A on rxa sends, QP B on rxb receives, one clock.
fn peer_dev(lab: &Lab) {
    lab.sh(TWO_DEVICES).success();
    let result = std::panic::catch_unwind(|| {
        for qp in ["rc", "uc", "ud"] {
            let before = hw_counter(lab, "rxb", "rcvd_pkts");
            let o = lab
                .sh(&format!(
                    "{IBPROBE} loopback --transport {qp} --dev rxa --peer-dev rxb --count {COUNT} --warmup 20 --timeout 5s --json"
                ))
                .success();
            let v: serde_json::Value =
                serde_json::from_str(&o.stdout).unwrap_or_else(|e| panic!("{e}: {o}"));
            let ow = distribution(&v, "one_way").unwrap_or_else(|| panic!("no one_way: {o}"));
            assert_eq!(ow["count"], COUNT, "{qp}: {o}");
            let facts = v["transport"]["facts"].to_string();
            assert!(
                facts.contains("rxb"),
                "{qp}: the report names the peer device: {facts}"
            );
            let got = hw_counter(lab, "rxb", "rcvd_pkts") - before;
            assert!(
                got >= COUNT + 20,
                "{qp}: rxb received {got} packets for {COUNT} + 20 messages: the traffic did not cross devices"
            );
        }
    });
    lab.sh(UNDO_TWO_DEVICES);
    if let Err(p) = result {
        std::panic::resume_unwind(p);
    }
}

fn client_server(lab: &Lab) {
    lab.sh_on(
        Node::B,
        &format!("({IBPROBE} server --transport rc --forever > $LAB_RESULTS/server.log 2>&1 &); for i in $(seq 100); do ss -ltn | grep -q ':18515 ' && exit 0; sleep 0.1; done; exit 1"),
    )
    .success();
    let o = lab
        .sh_on(
            Node::A,
            &format!("{IBPROBE} client $LAB_PEER_IP --transport rc --count 100 --warmup 10 --json"),
        )
        .success();
    let v: serde_json::Value =
        serde_json::from_str(&o.stdout).unwrap_or_else(|e| panic!("{e}: {o}"));
    let rtt = distribution(&v, "rtt").unwrap_or_else(|| panic!("no rtt: {o}"));
    assert_eq!(rtt["count"], 100, "{o}");
    assert_eq!(v["run"]["lost"], 0, "{o}");
}

/// The UDP reference across guests with both ends asleep in poll(2).
fn udp_event(lab: &Lab) {
    lab.sh_on(
        Node::B,
        &format!("({IBPROBE} server --transport udp --poll event --bind 0.0.0.0:18516 --forever > $LAB_RESULTS/udp-server.log 2>&1 &); for i in $(seq 100); do ss -ltn | grep -q ':18516 ' && exit 0; sleep 0.1; done; exit 1"),
    )
    .success();
    let o = lab
        .sh_on(
            Node::A,
            &format!("{IBPROBE} client $LAB_PEER_IP:18516 --transport udp --poll event --count 200 --warmup 10 --json"),
        )
        .success();
    let v: serde_json::Value =
        serde_json::from_str(&o.stdout).unwrap_or_else(|e| panic!("{e}: {o}"));
    let rtt = distribution(&v, "rtt").unwrap_or_else(|| panic!("no rtt: {o}"));
    assert_eq!(
        rtt["count"].as_u64().unwrap() + v["run"]["lost"].as_u64().unwrap(),
        200,
        "{o}"
    );
    assert_eq!(v["transport"]["facts"]["poll"], "event", "{o}");
}

/// `ibprobe stream HOST` against `ibprobe server` on the other guest:
/// every qp, send and write-imm where it applies, plain, batched,
/// pipelined and with a slow consumer; then a server killed mid-stream.
fn stream_across_guests(lab: &Lab) {
    let modes = [
        ("plain", ""),
        ("batch16", "--batch 16"),
        ("pipeline2", "--pipeline 2"),
        ("window4", "--window 4 --consume-delay 5us"),
        ("counter", "--credit-return write"),
    ];
    // 500 messages a run: the 64-slot pools go round almost 8 times; a
    // round trip between two emulated guests is milliseconds, so the
    // window and pipeline modes pay for every message.
    const MESSAGES: u64 = 500;
    // A server per qp on b, then every run on a as one script (each
    // `lab.sh` costs a round of process starts under TCG), its JSON,
    // stderr and status in files.
    let mut servers = String::new();
    let mut script = String::from("mkdir -p $LAB_RESULTS/x; cd $LAB_RESULTS/x\n");
    let mut runs = Vec::new();
    for (i, qp) in ["rc", "uc", "ud"].into_iter().enumerate() {
        let port = 18520 + i;
        servers.push_str(&format!(
            "({IBPROBE} server --transport {qp} --bind 0.0.0.0:{port} --forever > $LAB_RESULTS/stream-server-{qp}.log 2>&1 &); \
             for i in $(seq 100); do ss -ltn | grep -q ':{port} ' && break; sleep 0.1; done; ss -ltn | grep -q ':{port} ' || exit 1\n"
        ));
        for op in ["send", "write-imm"] {
            for (mode, flags) in modes {
                if (qp == "ud" && op == "write-imm") || (qp != "rc" && mode == "counter") {
                    continue;
                }
                let slot = if qp == "ud" { "--slot-size 1024" } else { "" };
                let name = format!("{qp}.{op}.{mode}");
                script.push_str(&format!(
                    "timeout 120 {IBPROBE} stream $LAB_PEER_IP:{port} --transport {qp} --op {op} {slot} {flags} --size 32 --count {MESSAGES} --warmup 50 --timeout 2s --json > {name}.json 2> {name}.err; echo $? > {name}.rc\n"
                ));
                runs.push((name, qp, mode));
            }
        }
    }
    lab.sh_on(Node::B, &servers).success();
    lab.exec(Node::A, &script, Duration::from_secs(900))
        .unwrap_or_else(|e| std::panic::panic_any(e))
        .success();
    let dir = lab.results(Node::A).join("x");
    let read = |f: String| std::fs::read_to_string(dir.join(f)).unwrap_or_default();
    for (name, qp, mode) in runs {
        let (out, err) = (read(format!("{name}.json")), read(format!("{name}.err")));
        let o = format!("{out}{err}");
        assert_eq!(read(format!("{name}.rc")).trim(), "0", "{name}: {err}");
        let v: serde_json::Value =
            serde_json::from_str(&out).unwrap_or_else(|e| panic!("{name}: {e}: {o}"));
        let n = |k: &str| {
            v[k].as_u64()
                .unwrap_or_else(|| panic!("{name}: no {k}: {o}"))
        };
        assert_eq!(v["mode"], "client", "{o}");
        assert_eq!(n("corrupt"), 0, "{name}: {o}");
        assert!(n("delivered") > 0, "{name}: {o}");
        assert_eq!(n("delivered") + n("lost"), MESSAGES, "{name}: {o}");
        if qp == "rc" {
            assert_eq!(n("lost"), 0, "{name}: {o}");
        }
        if mode == "window4" {
            assert!(n("max_unconsumed") <= 4, "{name}: {o}");
        }
        if mode == "counter" {
            assert!(n("counter_writes") > 0, "{o}");
        }
    }
    // The server dies mid-stream: the client ends with exit 3 within its
    // timeouts, never hangs.
    lab.sh_on(
        Node::B,
        &format!("({IBPROBE} server --transport rc --bind 0.0.0.0:18529 > $LAB_RESULTS/stream-dead.log 2>&1 & echo $! > /tmp/sd.pid); for i in $(seq 100); do ss -ltn | grep -q ':18529 ' && exit 0; sleep 0.1; done; exit 1"),
    )
    .success();
    lab.sh_on(
        Node::B,
        "(sleep 3; kill -9 $(cat /tmp/sd.pid)) > /dev/null 2>&1 &",
    )
    .success();
    let t0 = std::time::Instant::now();
    let o = lab.sh_on(
        Node::A,
        &format!("timeout 60 {IBPROBE} stream $LAB_PEER_IP:18529 --transport rc --rate 2000 --duration 40s --timeout 1s --json; echo rc=$?"),
    );
    assert!(o.stdout.contains("rc=3"), "a dead server is exit 3: {o}");
    assert!(
        t0.elapsed() < Duration::from_secs(30),
        "took {:?}: {o}",
        t0.elapsed()
    );
}

fn pair() -> Group {
    Group::with_lab("rxe_pair", LabConfig::pair())
        .test("stream_client_server_across_guests", stream_across_guests)
        .test("client_server_rc_across_guests", client_server)
        .test("client_server_udp_event_poll_across_guests", udp_event)
        .test("dead_peer_ends_the_client_with_an_error", dead_peer_test)
        .test("counters_on_an_rxe_client_run", counters_rxe)
}

fn dead_peer_test(lab: &Lab) {
    // Its own server (not the one an earlier test left running), up before
    // the client starts; node b kills it 4 s later, the client asked for 60 s.
    lab.sh_on(
        Node::B,
        &format!("({IBPROBE} server --transport rc --bind 0.0.0.0:18517 --forever > $LAB_RESULTS/dead-server.log 2>&1 &); for i in $(seq 100); do ss -ltn | grep -q ':18517 ' && exit 0; sleep 0.1; done; exit 1"),
    )
    .success();
    lab.sh_on(
        Node::B,
        "(sleep 4; pkill -KILL -f 'bind 0.0.0.0:18517') > /dev/null 2>&1 &",
    )
    .success();
    let t0 = Instant::now();
    let o = lab.sh_on(
        Node::A,
        &format!("{IBPROBE} client $LAB_PEER_IP:18517 --transport rc --duration 60s --timeout 1s"),
    );
    let took = t0.elapsed();
    assert_eq!(o.status, 3, "a lost peer is a run failure (exit 3): {o}");
    assert!(
        took < Duration::from_secs(40),
        "client took {took:?} to notice the dead peer"
    );
    assert!(
        o.stderr.to_lowercase().contains("peer"),
        "the error names the peer: {o}"
    );
}

/// `--hw-timestamps` on rxe0, whose completion_timestamp_mask is 0: the
/// loopback (ud) and the client (rc, against a server in the same guest)
/// are refused with the one line that says why, exit 2, before anything
/// is measured.
fn hw_timestamps_refused_on_rxe(lab: &Lab) {
    let want = "rxe0 reports completion_timestamp_mask 0: no hardware completion timestamps; run without --hw-timestamps";
    let o = lab.sh(&format!(
        "{IBPROBE} loopback --transport ud --hw-timestamps --count 10"
    ));
    assert_eq!(o.status, 2, "{o}");
    assert_eq!(o.stderr.trim_end(), format!("ibprobe: {want}"), "{o}");
    assert_eq!(o.stdout, "", "{o}");
    let o = lab.sh(&format!(
        "({IBPROBE} server --transport rc --bind 127.0.0.1:18519 > /dev/null 2>&1 &); for i in $(seq 100); do ss -ltn | grep -q ':18519 ' && break; sleep 0.1; done; {IBPROBE} client 127.0.0.1:18519 --transport rc --hw-timestamps --count 10"
    ));
    assert_eq!(o.status, 2, "{o}");
    assert_eq!(o.stderr.lines().count(), 1, "one line: {o}");
    assert!(o.stderr.contains(want), "{o}");
}

/// Issue 18 in the lab: an rc client run across guests carries the
/// measuring thread's counters, and the interrupts its CPUs took by source
/// include the virtio NIC that carries rxe's packets. With `--poll event`
/// the thread sleeps on the completion channel: a voluntary context switch
/// for nearly every message (not one for a completion already pending when
/// the thread asks: a run here counted 499 for 500 messages).
fn counters_rxe(lab: &Lab) {
    lab.sh_on(
        Node::B,
        &format!("({IBPROBE} server --transport rc --poll event --bind 0.0.0.0:18531 --forever > $LAB_RESULTS/counters-server.log 2>&1 &); for i in $(seq 100); do ss -ltn | grep -q ':18531 ' && exit 0; sleep 0.1; done; exit 1"),
    )
    .success();
    let o = lab
        .sh_on(
            Node::A,
            &format!("{IBPROBE} client $LAB_PEER_IP:18531 --transport rc --poll event --count 500 --warmup 10 --json"),
        )
        .success();
    let v: serde_json::Value =
        serde_json::from_str(&o.stdout).unwrap_or_else(|e| panic!("{e}: {o}"));
    let c = &v["counters"];
    assert_eq!(distribution(&v, "rtt").unwrap()["count"], 500, "{o}");
    let n = |k: &str| c[k].as_u64().unwrap_or_else(|| panic!("counters.{k}: {c}"));
    assert!(
        n("context_switches") >= 400,
        "event poll sleeps per message: {c}"
    );
    assert!(n("interrupts") > 0, "{c}");
    let sources: Vec<&str> = c["interrupts_by_source"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|s| s["source"].as_str())
        .collect();
    assert!(
        sources.iter().any(|s| s.contains("virtio")),
        "rxe's packets arrive through the virtio NIC: {sources:?}"
    );
    // What the guest cannot count is named, not failed on.
    assert!(c["missing"].is_array(), "{c}");
    std::fs::write(
        lab.results(Node::A).join("counters-rxe.json"),
        serde_json::to_string_pretty(c).unwrap(),
    )
    .unwrap();
}
