//! `-q/--quiet` on the commands that measure (loopback, client, stream,
//! host) and the run's clock resolution, through the binary: a terminal
//! (given by util-linux `script`) shows the progress bar unless `-q`;
//! stderr holds no bar when it is not a terminal, with or without `-q`;
//! `-q` keeps warnings; a run's median at the clock's resolution is
//! warned about exactly when the JSON's figures say it is.

mod common;

use common::ibprobe;

/// Exit 0, a report on stdout, and stderr exactly `err`.
fn runs_with_stderr(args: &[&str], err: &str) -> String {
    let (code, out, e) = ibprobe(args);
    assert_eq!(code, 0, "{args:?}: stderr {e}");
    assert!(!out.is_empty(), "{args:?}: no report");
    assert_eq!(e, err, "{args:?}: stderr");
    out
}

#[test]
fn no_bar_off_a_terminal_and_none_with_quiet() {
    // stderr is a pipe here: no bar, with or without -q, so nothing at all.
    for q in [&[][..], &["-q"][..], &["--quiet"][..]] {
        let mut a = vec!["loopback", "-t", "shm", "-n", "2000", "--cpu", "0"];
        a.extend(q);
        runs_with_stderr(&a, "");
        let mut a = vec!["stream", "-t", "shm", "-n", "2000", "--cpu", "0", "--json"];
        a.extend(q);
        runs_with_stderr(&a, "");
    }
}

#[test]
fn client_is_quiet_too() {
    let server = common::Server::start("udp", &["--forever"]);
    for q in [&[][..], &["-q"][..]] {
        let mut a = vec!["client", &server.addr, "-t", "udp", "-n", "500", "--json"];
        a.extend(q);
        runs_with_stderr(&a, "");
    }
}

#[test]
fn quiet_keeps_warnings() {
    // A model parameter below 1 us is warned about on stderr, -q or not.
    let (code, _, err) = ibprobe(&[
        "loopback",
        "-t",
        "model",
        "--model",
        "L=200ns,os=100ns,or=100ns,g=100ns,G=0ns",
        "-n",
        "200",
        "--cpu",
        "0",
        "-q",
    ]);
    assert_eq!(code, 0, "{err}");
    assert!(
        err.starts_with("warning: --model has a parameter of"),
        "{err}"
    );
    assert_eq!(err.lines().count(), 1, "{err}");
}

#[test]
fn host_is_quiet_and_keeps_the_renamed_flag_warning() {
    if ibnoise::wakeup::check_fifo(1).is_err() {
        assert!(
            std::env::var("CI").as_deref() != Ok("true"),
            "no SCHED_FIFO here, and CI=true"
        );
        eprintln!("skipped: no SCHED_FIFO (root or CAP_SYS_NICE) for `ibprobe host`");
        return;
    }
    let base = ["host", "--cpus", "0", "-n", "20", "--json", "-q"];
    runs_with_stderr(&[&base[..], &["--period", "1ms"]].concat(), "");
    let (code, _, err) = ibprobe(&[&base[..], &["--interval", "1ms"]].concat());
    assert_eq!(code, 0, "{err}");
    assert!(
        err.contains("--interval") && err.contains("--period"),
        "the renamed flag's warning stays with -q: {err:?}"
    );
}

#[test]
fn a_median_at_the_clock_resolution_is_warned_about_exactly_then() {
    // clock_gettime's step is coarse enough here for shm's one-way
    // latency to sit near it on some hosts and not on others: either
    // way the warning must agree with the figures the JSON carries.
    for clock in ["monotonic", "auto"] {
        let out = runs_with_stderr(
            &[
                "loopback", "-t", "shm", "-n", "5000", "--cpu", "0", "--clock", clock, "--json",
                "-q",
            ],
            "",
        );
        let j: serde_json::Value = serde_json::from_str(&out).unwrap();
        let res = j["clock"]["resolution_ns"]
            .as_f64()
            .expect("clock.resolution_ns");
        assert!(res > 0.0 && res < 1e6, "{clock}: resolution {res} ns");
        let d = &j["distributions"][0];
        let near = |k: &str| d[k].as_f64().unwrap() <= 10.0 * res;
        let warned = j["warnings"]
            .as_array()
            .unwrap()
            .iter()
            .find(|w| w["code"] == "clock_resolution");
        assert_eq!(
            warned.is_some(),
            near("min_ns") || near("p50_ns"),
            "{clock}: resolution {res} ns, min {} p50 {}: {:?}",
            d["min_ns"],
            d["p50_ns"],
            warned
        );
        if let Some(w) = warned {
            let m = w["message"].as_str().unwrap();
            assert!(
                m.contains(&format!("{:.3} us resolution", res / 1000.0)),
                "{m}"
            );
        }
        eprintln!(
            "{clock}: resolution {res:.3} ns, min {} ns, p50 {} ns, warned: {}",
            d["min_ns"],
            d["p50_ns"],
            warned.is_some()
        );
    }
}

/// What `ibprobe ARGS` writes to a terminal (util-linux `script` gives it
/// one; stdout goes to /dev/null), or `None` without `script`.
fn on_a_terminal(args: &str) -> Option<String> {
    let bin = assert_cmd::cargo::cargo_bin("ibprobe");
    let dir = tempfile::tempdir().unwrap();
    let typescript = dir.path().join("typescript");
    let st = std::process::Command::new("script")
        .arg("-qec")
        .arg(format!("{} {args} > /dev/null", bin.display()))
        .arg(&typescript)
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::null())
        .status()
        .ok()?;
    assert!(st.success(), "script -c 'ibprobe {args}': {st}");
    Some(String::from_utf8_lossy(&std::fs::read(&typescript).unwrap()).into_owned())
}

#[test]
fn a_terminal_sees_the_bar_unless_quiet() {
    let args = "loopback -t shm -n 2000 --cpu 0";
    let Some(shown) = on_a_terminal(args) else {
        assert!(
            std::env::var("CI").as_deref() != Ok("true"),
            "no `script` (util-linux) here, and CI=true"
        );
        eprintln!("skipped: no `script` to give ibprobe a terminal");
        return;
    };
    assert!(
        shown.contains("/2000 messages") && shown.contains("warm-up: 100 messages"),
        "{shown:?}"
    );
    let quiet = on_a_terminal(&format!("{args} -q")).unwrap();
    assert!(!quiet.contains("messages"), "{quiet:?}");
}
