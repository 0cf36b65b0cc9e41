//! `ibprobe host`: the wake-up latency probe's contract from the outside.
//! It measures the asked number of wake-ups per CPU with plausible values,
//! and refuses bad input (a bad CPU list, no SCHED_FIFO privilege) with
//! exit 2 and one line.

use std::path::Path;

use assert_cmd::cargo::cargo_bin;

mod common;

use common::{ibprobe, one_line_exit_2, run};

/// Whether this test process may use SCHED_FIFO (root or CAP_SYS_NICE):
/// asked of the kernel from a short-lived thread of our own.
fn fifo_allowed() -> bool {
    ibnoise::wakeup::check_fifo(1).is_ok()
}

#[test]
fn cpu_0_for_200_samples_in_json() {
    let (code, out, err) = ibprobe(&["host", "--cpus", "0", "--count", "200", "--format", "json"]);
    if !fifo_allowed() {
        // Without the privilege the contract is the one-line refusal.
        one_line_exit_2(code, &out, &err, &["SCHED_FIFO", "CAP_SYS_NICE"]);
        return;
    }
    assert_eq!(code, 0, "stderr: {err}");
    let j: serde_json::Value = serde_json::from_str(&out).expect("JSON on stdout");
    assert_eq!(j["schema"], "ibprobe.host/1");
    assert_eq!(j["fifo_priority"], 80);
    assert_eq!(j["interval_ns"], 1_000_000);
    assert_eq!(j["cpu_dma_latency_written"], false);
    let cpus = j["cpus"].as_array().expect("cpus array");
    assert_eq!(cpus.len(), 1);
    let c = &cpus[0];
    assert_eq!(c["cpu"], 0);
    assert_eq!(c["count"], 200);
    let n = |k: &str| {
        c[k].as_u64()
            .unwrap_or_else(|| panic!("{k} missing in {c}"))
    };
    let (min, p50, p99, p999, max) = (
        n("min_ns"),
        n("p50_ns"),
        n("p99_ns"),
        n("p999_ns"),
        n("max_ns"),
    );
    assert!(
        min <= p50 && p50 <= p99 && p99 <= p999 && p999 <= max,
        "{c}"
    );
    // Woken at most a whole second late on an idle test machine, and the
    // run took about 200 intervals (not far more, not less).
    assert!(max < 1_000_000_000, "{c}");
    assert!(n("over_10us_count") <= 200);
    let elapsed = j["elapsed_ns"].as_u64().unwrap();
    assert!(
        (190_000_000..5_000_000_000).contains(&elapsed),
        "200 x 1 ms took {elapsed} ns"
    );
}

#[test]
fn every_format_prints_a_row_per_cpu() {
    if !fifo_allowed()
        && ibtools_tests::skip(
            "every_format_prints_a_row_per_cpu",
            "no SCHED_FIFO here (needs root or CAP_SYS_NICE, or an RLIMIT_RTPRIO of 1+)",
        )
    {
        return;
    }
    let (code, out, err) = ibprobe(&[
        "host", "--cpus", "0", "-n", "20", "--period", "200us", "--format", "csv",
    ]);
    assert_eq!(code, 0, "{err}");
    let lines: Vec<&str> = out.lines().collect();
    assert_eq!(lines.len(), 2, "{out}");
    assert!(lines[0].starts_with("cpu,isolated,nohz_full,count,min_ns"));
    assert!(lines[1].starts_with("0,"), "{out}");
    let (code, out, _) = ibprobe(&["host", "--cpus", "0", "-n", "20", "--period", "200us"]);
    assert_eq!(code, 0);
    assert!(
        out.contains("SCHED_FIFO 80") && out.contains("/dev/cpu_dma_latency not written"),
        "{out}"
    );
}

#[test]
fn bad_cpu_lists_exit_2_with_one_line() {
    let (code, out, err) = ibprobe(&["host", "--cpus", "0-x", "--count", "10"]);
    one_line_exit_2(
        code,
        &out,
        &err,
        &["--cpus \"0-x\"", "not a CPU list", "e.g. 0, 2-3"],
    );
    let (code, out, err) = ibprobe(&["host", "--cpus", "0,100000", "--count", "10"]);
    one_line_exit_2(
        code,
        &out,
        &err,
        &["CPU 100000", "allowed:", "pick from those"],
    );
    let (code, out, err) = ibprobe(&["host", "--cpus", "0,0", "--count", "10"]);
    one_line_exit_2(code, &out, &err, &["listed twice"]);
    // Issue 14: a huge range or many repeated ones are refused before they
    // expand (4 G CPU numbers would be 32 GB), with the reason.
    let (code, out, err) = ibprobe(&["host", "--cpus", "0-4000000000", "--count", "10"]);
    one_line_exit_2(
        code,
        &out,
        &err,
        &["0-4000000000", "beyond the supported maximum"],
    );
    let many = vec!["0-131072"; 2000].join(",");
    let (code, out, err) = ibprobe(&["host", "--cpus", &many, "--count", "10"]);
    one_line_exit_2(code, &out, &err, &["names more than 131073 CPUs"]);
    let (code, out, err) = ibprobe(&["host", "--fifo", "100"]);
    one_line_exit_2(code, &out, &err, &["--fifo"]);
    let (code, out, err) = ibprobe(&["host", "--format", "perftest"]);
    one_line_exit_2(code, &out, &err, &["table, json, csv, markdown"]);
}

#[test]
fn without_the_privilege_exit_2_with_one_line() {
    // As root, drop to nobody (no capabilities, RLIMIT_RTPRIO 0 by default).
    const TEST: &str = "without_the_privilege_exit_2_with_one_line";
    let setpriv = Path::new("/usr/bin/setpriv");
    if !ibtools_tests::is_root() {
        // Not root: cpu_0_for_200_samples_in_json checks this refusal.
        ibtools_tests::skip(
            TEST,
            "needs root to become nobody; cpu_0_for_200_samples_in_json checks the refusal here",
        );
        return;
    }
    if !setpriv.exists() {
        ibtools_tests::skip(TEST, "no /usr/bin/setpriv (util-linux)");
        return;
    }
    let bin = cargo_bin("ibprobe");
    let mut c = std::process::Command::new(setpriv);
    c.args([
        "--reuid=65534",
        "--regid=65534",
        "--clear-groups",
        "--inh-caps=-all",
    ])
    .arg(&bin)
    .args(["host", "--cpus", "0", "--count", "10"]);
    let (code, out, err) = run(&mut c);
    if code == 126 || code == 127 || err.contains("Permission denied") {
        let why = format!(
            "nobody cannot execute {} (a folder on its path is closed to it)",
            bin.display()
        );
        ibtools_tests::skip(TEST, &why);
        return;
    }
    one_line_exit_2(
        code,
        &out,
        &err,
        &["SCHED_FIFO at priority 80", "CAP_SYS_NICE"],
    );
}

/// `--trace` (the kernel's timerlat tracer): where this machine's kernel
/// has it mounted and built in it must run; where not (most test machines,
/// which have no tracefs or a kernel without CONFIG_TIMERLAT_TRACER) it
/// is one line, exit 2, saying what is missing. The lab runs it for real
/// (tests/lab_host.rs).
#[test]
fn trace_runs_or_says_what_is_missing() {
    let (code, out, err) = ibprobe(&["host", "--trace", "--cpus", "0", "-n", "20", "--json"]);
    let has_timerlat = ["/sys/kernel/tracing", "/sys/kernel/debug/tracing"]
        .iter()
        .any(|d| {
            std::fs::read_to_string(format!("{d}/available_tracers"))
                .is_ok_and(|t| t.split_whitespace().any(|w| w == "timerlat"))
        });
    if has_timerlat && code == 0 {
        let j: serde_json::Value = serde_json::from_str(&out).expect("JSON");
        assert_eq!(j["schema"], "ibprobe.timerlat/1");
        assert_eq!(j["cpus"][0]["thread"]["count"], 20);
        return;
    }
    one_line_exit_2(code, &out, &err, &[]);
    assert!(
        err.contains("tracefs is not mounted")
            || err.contains("has no timerlat tracer")
            || err.contains("needs root")
            || err.contains("already runs"),
        "{err}"
    );
}

#[test]
fn trace_options_are_checked_before_tracefs() {
    let (code, out, err) = ibprobe(&["host", "--trace", "--period", "50us"]);
    one_line_exit_2(code, &out, &err, &["--period", "100us to 1s"]);
    // --fifo and --no-mlock are for ibprobe's own threads.
    let (code, _, err) = ibprobe(&["host", "--trace", "--fifo", "50"]);
    assert_eq!(code, 2, "{err}");
    assert!(err.contains("cannot be used with"), "{err}");
    let (code, _, err) = ibprobe(&["host", "--tracefs", "/sys/kernel/tracing"]);
    assert_eq!(code, 2, "{err}");
    assert!(err.contains("--trace"), "{err}");
}
