//! `ibprobe loggp` (issue 15): what the issue says must be true, each as an
//! assertion that can fail. The simulated model is checked through the
//! library (fast, many parameter sets); everything else through the CLI
//! and its JSON (`ibprobe.loggp/1`).
//!
//! The runs that spin two threads are in one test function on purpose:
//! in parallel on a 2-core CI machine they would measure each other.

use ibprobe::probe::loggp_fit::fit;
use ibprobe::probe::workload::loggp::{measure, LoggpPlan, SimSource};
use ibprobe::spec::ModelParams;
use serde_json::Value;
use std::sync::atomic::AtomicBool;

mod common;

use common::{ibprobe, one_line_exit_2, Server};

/// The tests of this file run one at a time: a measured run next to
/// another test's threads would measure them.
static ONE_AT_A_TIME: std::sync::Mutex<()> = std::sync::Mutex::new(());

fn serial() -> std::sync::MutexGuard<'static, ()> {
    ONE_AT_A_TIME.lock().unwrap_or_else(|e| e.into_inner())
}

fn loggp(args: &[&str]) -> Value {
    let mut a = vec!["loggp"];
    a.extend(args);
    a.extend(["--json", "--quiet"]);
    let (code, out, err) = ibprobe(&a);
    assert_eq!(code, 0, "ibprobe {a:?} failed: {err}");
    serde_json::from_str(&out).unwrap_or_else(|e| panic!("not JSON ({e}): {out}"))
}

fn f(v: &Value, k: &str) -> f64 {
    v[k].as_f64().unwrap_or_else(|| panic!("no {k} in {v}"))
}

/// The limit for a default run on shm and udp: 30 s (a release
/// build takes about 1 s). An unoptimised test build copies a 16 KiB shm
/// message word by word, about 100x slower, and other builds share the
/// machine: there the limit is 120 s.
const TIME_LIMIT_S: f64 = if cfg!(debug_assertions) { 120.0 } else { 30.0 };

const KEYS: [&str; 5] = ["L_ns", "os_ns", "or_ns", "g_ns", "G_ns_per_byte"];

/// Every parameter within `tol` (relative) of the model's truth, or the
/// first that is not.
fn within(doc: &Value, tol: f64) -> Result<(), String> {
    for k in KEYS {
        let (est, truth) = (f(doc, k), f(&doc["model"], k));
        if (est - truth).abs() > tol * truth {
            return Err(format!("{k}: estimate {est} vs model {truth} (> {tol})"));
        }
    }
    Ok(())
}

/// Sane intervals: estimates not negative, each inside its interval.
fn sane(doc: &Value) {
    for k in KEYS {
        let est = f(doc, k);
        let ci = &doc[format!("{k}_ci")];
        let (lo, hi) = (ci[0].as_f64().unwrap(), ci[1].as_f64().unwrap());
        assert!(est >= 0.0 && lo >= 0.0, "{k} = {est} [{lo}, {hi}]");
        assert!(lo <= est && est <= hi, "{k} = {est} outside [{lo}, {hi}]");
    }
    for k in ["os_ns", "or_ns", "g_ns"] {
        assert!(f(doc, k) > 0.0, "{k} = 0 on a real transport: {doc}");
    }
}

/// A small deterministic generator (splitmix64), for log-uniform draws.
struct Draw(u64);

impl Draw {
    fn next(&mut self) -> f64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        (z ^ (z >> 31)) as f64 / u64::MAX as f64
    }

    /// Log-uniform in [lo, hi].
    fn log(&mut self, lo: f64, hi: f64) -> f64 {
        (lo.ln() + (hi.ln() - lo.ln()) * self.next()).exp()
    }
}

#[test]
fn simulated_model_estimates_are_within_2_percent_for_random_parameters() {
    let _one = serial();
    // L, o_s, o_r, g log-uniform over 50 ns .. 50 us, G over 1 ps .. 10 ns
    // per byte. LogGP's g is the network's pace, at least the CPU's o
    // (otherwise the CPU sets the pace and g cannot be seen: a note says
    // so, tested below), so g is drawn above max(o_s, o_r).
    let mut d = Draw(15);
    let stop = AtomicBool::new(false);
    let plan = LoggpPlan {
        sizes: vec![8, 64, 512, 4096, 16384],
        n: 16,
        rounds: 5,
        reps: 3,
    };
    for set in 0..40 {
        let (l, os, or) = (d.log(50.0, 50e3), d.log(50.0, 50e3), d.log(50.0, 50e3));
        let g = d.log(os.max(or) * 1.05, 50e3_f64.max(os.max(or) * 1.1));
        let big_g = d.log(0.001, 10.0);
        let spec = format!("L={l}ns,os={os}ns,or={or}ns,g={g}ns,G={big_g}ns");
        let p: ModelParams = spec.parse().unwrap();
        let s = measure(&mut SimSource::new(p), &plan, &stop, &mut || {}).unwrap();
        let r = fit(&s);
        let truth = p.ns();
        let est = [r.l.value, r.os.value, r.or.value, r.g.value, r.big_g.value];
        for (i, name) in ["L", "o_s", "o_r", "g", "G"].iter().enumerate() {
            let err = (est[i] - truth[i]).abs() / truth[i];
            assert!(
                err <= 0.02,
                "set {set} ({spec}): {name} = {} vs {} ({:.2}% off)",
                est[i],
                truth[i],
                err * 100.0
            );
        }
        assert_eq!(r.segments.len(), 1, "set {set}: one line, one segment");
    }
}

#[test]
fn simulated_model_says_when_the_cpu_hides_g() {
    let _one = serial();
    let p: ModelParams = "L=1us,os=3us,or=1us,g=1us,G=0.001ns".parse().unwrap();
    let plan = LoggpPlan {
        sizes: vec![8, 64, 512],
        n: 8,
        rounds: 3,
        reps: 1,
    };
    let s = measure(
        &mut SimSource::new(p),
        &plan,
        &AtomicBool::new(false),
        &mut || {},
    )
    .unwrap();
    let r = fit(&s);
    assert!(
        r.notes
            .iter()
            .any(|n| n.contains("the CPU, not the network, sets the pace")),
        "{:?}",
        r.notes
    );
}

#[test]
fn simulate_through_the_cli_with_the_spin_preset() {
    let _one = serial();
    let doc = loggp(&["-t", "model", "--model", "spin", "--simulate"]);
    assert_eq!(doc["schema"], "ibprobe.loggp/1");
    assert_eq!(doc["mode"], "simulate");
    // The sPIN preset's G: 2.5 ps per bit = 0.02 ns per byte.
    assert_eq!(f(&doc["model"], "G_ns_per_byte"), 0.02);
    // Its small messages are CPU-paced (o = 65 ns > g + G*b): g and the
    // wire time in L come from the segment the network paces, exactly.
    within(&doc, 1e-6).unwrap();
    assert_eq!(doc["segments"].as_array().unwrap().len(), 2, "{doc}");
}

#[test]
fn bad_input_is_one_line_exit_2() {
    let _one = serial();
    let cases: [(&[&str], &[&str]); 7] = [
        (
            &["-t", "udp", "--sizes", "8,65500"],
            &["--sizes", "65500", "udp"],
        ),
        (&["-t", "ud", "--sizes", "8,5000"], &["--sizes", "5000"]),
        (&["-t", "shm", "--sizes", "64"], &["two or more sizes"]),
        (
            &["-t", "model", "--model", "L=5us,os=1us,or=1us,g=1us,X=1ns"],
            &["unknown parameter", "X"],
        ),
        (
            &["-t", "model", "--model", "L=5us,os=-1us,or=1us,g=1us,G=1ns"],
            &["negative"],
        ),
        (&["-t", "model"], &["--model"]),
        (&["-t", "shm", "--simulate"], &["--simulate", "model"]),
    ];
    for (args, parts) in cases {
        let mut a = vec!["loggp"];
        a.extend(args);
        let (code, out, err) = ibprobe(&a);
        one_line_exit_2(code, &out, &err, parts);
    }
}

/// The runs that spin: the examples, the real-time model, shm and
/// udp with intervals.
#[test]
fn measured_runs() {
    let _one = serial();
    // The three examples, as written (with --quiet only where JSON).
    let (code, out, err) = ibprobe(&["loggp", "-t", "shm", "--json"]);
    assert_eq!(code, 0, "{err}");
    let shm: Value = serde_json::from_str(&out).unwrap();
    sane(&shm);
    assert!(f(&shm["method"], "elapsed_s") <= TIME_LIMIT_S, "{shm}");
    let (code, out, err) = ibprobe(&[
        "loggp",
        "-t",
        "model",
        "--model",
        "L=5us,os=1us,or=1.5us,g=2us,G=1ns",
        "--json",
    ]);
    assert_eq!(code, 0, "{err}");
    let model: Value = serde_json::from_str(&out).unwrap();
    assert_eq!(model["mode"], "loopback");
    assert_eq!(f(&model["model"], "os_ns"), 1000.0);
    let slow = model["points"]
        .as_array()
        .unwrap()
        .iter()
        .any(|p| f(p, "os_ns") > 1100.0);
    let warned = model["warnings"].to_string().contains("not honest");
    assert_eq!(slow, warned, "a send slower than o_s is warned of: {model}");
    // Real time, parameters of 1 us and above: within 10%; one retry on a
    // loaded machine, and the retry must pass by itself. Small messages:
    // the emulation copies each message within o_s, and an unoptimised
    // test build copies about 6 ns per byte (the report warns when the
    // copy outgrows o_s, checked below).
    let rt = [
        "-t",
        "model",
        "--model",
        "L=5us,os=2us,or=3us,g=4us,G=20ns",
        "--sizes",
        "8,32,64",
    ];
    if let Err(first) = within(&loggp(&rt), 0.10) {
        eprintln!("real-time model, first try: {first}; retrying once");
        within(&loggp(&rt), 0.10).unwrap();
    }
    let (code, out, err) = ibprobe(&[
        "loggp",
        "-t",
        "udp",
        "--sizes",
        "8,64,512,4096",
        "--format",
        "table",
    ]);
    assert_eq!(code, 0, "{err}");
    for want in ["parameter", "95% interval", "L [ns]", "G [ns/B]", "4096"] {
        assert!(out.contains(want), "{want:?} not in the table:\n{out}");
    }
    let udp = loggp(&["-t", "udp", "--sizes", "8,64,512,4096"]);
    sane(&udp);
    assert!(f(&udp["method"], "elapsed_s") <= TIME_LIMIT_S, "{udp}");

    // Between processes: against `ibprobe server` on 127.0.0.1, which
    // learns from the handshake that it answers loggp bursts.
    let server = Server::start("udp", &[]);
    let remote = loggp(&[
        &server.addr,
        "-t",
        "udp",
        "--sizes",
        "8,512",
        "--rounds",
        "5",
    ]);
    assert_eq!(remote["mode"], "client");
    sane(&remote);
    let (code, said) = server.wait();
    assert_eq!(code, 0, "server: {said}");
    assert!(said.contains("loggp done"), "server: {said}");

    // The model between processes rides on a UDP carrier; the server
    // takes the client's --model from the handshake. The carrier's own
    // costs add to the model's (o, L), never take from them.
    let server = Server::start("model", &[]);
    let m = "L=20us,os=2us,or=3us,g=4us,G=10ns";
    let remote = loggp(&[
        &server.addr,
        "-t",
        "model",
        "--model",
        m,
        "--sizes",
        "8,64",
        "--rounds",
        "5",
    ]);
    assert_eq!(remote["mode"], "client");
    sane(&remote);
    for (k, truth) in [("L_ns", 20e3), ("os_ns", 2e3), ("or_ns", 3e3)] {
        assert!(f(&remote, k) >= 0.95 * truth, "{k}: {remote}");
    }
    let (code, said) = server.wait();
    assert_eq!(code, 0, "server: {said}");
}

#[test]
fn a_peer_that_cannot_answer_is_one_line_exit_2() {
    let _one = serial();
    // A server of another transport refuses in the handshake.
    let server = Server::start("udp", &[]);
    let (code, out, err) = ibprobe(&["loggp", &server.addr, "-t", "shm", "--sizes", "8,64"]);
    one_line_exit_2(code, &out, &err, &["refused", "--transport udp"]);
    // A model client against a udp server: refused the same way.
    let server = Server::start("udp", &[]);
    let (code, out, err) = ibprobe(&["loggp", &server.addr, "-t", "model", "--model", "spin"]);
    one_line_exit_2(code, &out, &err, &["refused", "--transport udp"]);
}

/// measured / predicted messages per second of each --predict row.
fn ratios(doc: &Value) -> Vec<(u64, f64)> {
    doc["predictions"]
        .as_array()
        .unwrap_or_else(|| panic!("no predictions in {doc}"))
        .iter()
        .map(|p| (p["batch"].as_u64().unwrap(), f(p, "ratio")))
        .collect()
}

/// Whether every (batch, ratio) is within 25% of 1.
fn all_within_25(r: &[(u64, f64)]) -> bool {
    r.iter().all(|(_, x)| (x - 1.0).abs() <= 0.25)
}

/// Each ratio within 25%, or the rows that are not.
fn within_25(doc: &Value) -> Result<(), String> {
    let r = ratios(doc);
    if all_within_25(&r) {
        Ok(())
    } else {
        Err(format!("measured/predicted msg/s by batch: {r:?}"))
    }
}

#[test]
fn predictions_match_measured_streams_on_the_model_and_udp() {
    let _one = serial();
    for t in [
        &[
            "-t",
            "model",
            "--model",
            "L=5us,os=1us,or=1.5us,g=2us,G=1ns",
            "--sizes",
            "8,64,512",
        ][..],
        &["-t", "udp", "--sizes", "8,64,512,4096"][..],
    ] {
        let mut a = t.to_vec();
        a.extend([
            "--predict",
            "--batches",
            "1,16",
            "--predict-duration",
            "300ms",
        ]);
        let first = loggp(&a);
        assert_eq!(
            ratios(&first).iter().map(|r| r.0).collect::<Vec<_>>(),
            [1, 16]
        );
        // The parameters are medians (a preempted repetition does not
        // count), a stream's rate is not: another build on this 2-core
        // machine, taking both cores for seconds, halves it. Let such a
        // burst pass and try again, twice at most; each try must pass by
        // itself.
        let mut last = within_25(&first);
        for _ in 0..2 {
            let Err(e) = &last else { break };
            eprintln!("{t:?}: {e}; trying again in 5 s");
            std::thread::sleep(std::time::Duration::from_secs(5));
            last = within_25(&loggp(&a));
        }
        last.unwrap_or_else(|e| panic!("{t:?}: {e}"));
    }
}

/// `loggp HOST --predict` runs each workload as `ibprobe stream HOST`
/// does, one session each, against a `--forever` server on 127.0.0.1.
/// Both batches within 25%, same retries as above: 0.93-0.96 here
/// (debug build, udp). Two things had kept batch 16 at 0.45-0.53: the
/// server calibrated its TSC (~100 ms) after opening the stream, a credit
/// stall inside the client's run, and the client's sender records each
/// message's credit-back time, which the loop costs now time too.
#[test]
fn predictions_against_a_server_are_measured_there() {
    let _one = serial();
    let server = Server::start("udp", &["--forever"]);
    let a = [
        server.addr.as_str(),
        "-t",
        "udp",
        "--sizes",
        "8,64,512,4096",
        "--predict",
        "--batches",
        "1,16",
        "--predict-duration",
        "300ms",
    ];
    let check = |doc: &Value| -> Result<(), String> {
        assert_eq!(doc["mode"], "client");
        let r = ratios(doc);
        assert_eq!(r.iter().map(|r| r.0).collect::<Vec<_>>(), [1, 16]);
        for p in doc["predictions"].as_array().unwrap() {
            assert!(f(p, "measured_msgs_per_s") > 0.0, "{p}");
        }
        within_25(doc)
    };
    let mut last = check(&loggp(&a));
    for _ in 0..2 {
        let Err(e) = &last else { break };
        eprintln!("{e}; trying again in 5 s");
        std::thread::sleep(std::time::Duration::from_secs(5));
        last = check(&loggp(&a));
    }
    last.unwrap();
}

/// On shm an operation costs tens of ns, so the stream loops' own work
/// (timed on free ends, `probe/stream_cost.rs`) is most of a slot's cost.
/// This check read 0.47 for batch 16 until the timed stream's extra clock
/// reads were found (two per message besides the stamp, in the pacer of a
/// `--duration` run): release build, 4 runs, batch 1 0.88-0.95, batch 16
/// 0.98-1.05 of predicted.
///
/// One run is not a measurement here: this VM's CPUs switch between a
/// fast and a slow phase (~1.8x, lasting seconds: the free-end loop timing
/// reads ~4 or ~7 us per batch-16 slot in the same process, and loggp's
/// send call moved from ~950 to ~1900 ns in the middle of one run), so
/// parameters and streams may be measured at different speeds: 20 single
/// debug runs (sizes 8,64,1024) read batch 1
/// 0.91-1.43 (4 above 1.25), batch 16 0.85-1.19. So each try is the
/// median of three runs per batch, with the sizes the two slots fall
/// between (3 s a run in a debug build instead of 25 s with the default
/// sizes, so parameters and streams are measured close together), up to
/// five tries. Tried and dropped: scaling the overheads by a fixed CPU
/// reference timed during the rounds and before each stream (the ratios
/// spread as widely: 0.59-1.45 in 10 runs).
#[test]
fn predictions_match_measured_streams_on_shm() {
    let _one = serial();
    let args = [
        "-t",
        "shm",
        "--sizes",
        "8,64,1024",
        "--predict",
        "--batches",
        "1,16",
        "--predict-duration",
        "300ms",
    ];
    let try_once = || -> Result<(), String> {
        let runs: Vec<Vec<(u64, f64)>> = (0..3).map(|_| ratios(&loggp(&args))).collect();
        let median: Vec<(u64, f64)> = (0..runs[0].len())
            .map(|i| {
                let mut r: Vec<f64> = runs.iter().map(|run| run[i].1).collect();
                r.sort_by(f64::total_cmp);
                (runs[0][i].0, r[1])
            })
            .collect();
        if all_within_25(&median) {
            Ok(())
        } else {
            Err(format!(
                "median of 3 runs, measured/predicted msg/s by batch: {median:?} (runs: {runs:?})"
            ))
        }
    };
    let mut last = try_once();
    for _ in 0..4 {
        let Err(e) = &last else { break };
        eprintln!("{e}; trying again in 2 s");
        std::thread::sleep(std::time::Duration::from_secs(2));
        last = try_once();
    }
    last.unwrap();
}

/// Under SCHED_FIFO (`chrt -f`), a thread starts on its parent's CPU; a
/// pinned FIFO parent that spins never lets it run there to move to its
/// own CPU, and the stream failed with "no credit came back". The loops
/// now wait, sleeping, until the other thread is placed. Needs the right
/// to use SCHED_FIFO (root or CAP_SYS_NICE): without it the check says so
/// and passes.
#[test]
fn stream_and_loggp_run_under_sched_fifo() {
    let _one = serial();
    if !ibtools_tests::chrt_fifo_allowed(10)
        && ibtools_tests::skip(
            "stream_and_loggp_run_under_sched_fifo",
            "chrt -f 10 is not allowed here (needs root or CAP_SYS_NICE)",
        )
    {
        return;
    }
    let bin = assert_cmd::cargo::cargo_bin("ibprobe");
    for args in [
        &["stream", "-t", "shm", "-n", "20000", "--no-mlock", "--json"][..],
        &[
            "loggp", "-t", "shm", "--sizes", "8,64", "--rounds", "3", "--json", "-q",
        ][..],
    ] {
        let out = std::process::Command::new("timeout")
            .arg("60")
            .args(["chrt", "-f", "10"])
            .arg(&bin)
            .args(args)
            .output()
            .unwrap();
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(out.status.success(), "chrt -f 10 ibprobe {args:?}: {err}");
        let _: Value = serde_json::from_slice(&out.stdout).unwrap();
    }
}
