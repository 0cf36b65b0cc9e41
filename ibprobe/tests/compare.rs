//! `ibprobe compare` end to end (issue 16): real rounds of the real binary.
//! A transport that is much slower is called slower at p50 and p99; an
//! option that cannot matter is not called anything; bad input is one
//! line and exit 2.

mod common;

fn compare(args: &[&str]) -> (i32, String, String) {
    let all: Vec<&str> = std::iter::once("compare")
        .chain(args.iter().copied())
        .collect();
    common::ibprobe(&all)
}

fn json(args: &[&str]) -> serde_json::Value {
    let (code, out, err) = compare(args);
    assert_eq!(code, 0, "{args:?}: {err}");
    serde_json::from_str(&out).unwrap_or_else(|e| panic!("{e}: {out}"))
}

#[test]
fn udp_is_slower_than_shm_at_p50_and_p99() {
    let j = json(&[
        "--rounds",
        "8",
        "--vary",
        "transport=shm,udp",
        "--json",
        "--",
        "loopback",
        "--count",
        "5000",
    ]);
    assert_eq!(j["schema"], "ibprobe.compare/1");
    assert_eq!(j["option"], "transport");
    assert_eq!(j["rounds"], 8);
    let (shm, udp) = (&j["variants"][0], &j["variants"][1]);
    assert_eq!(shm["value"], "shm");
    assert_eq!(shm["baseline"], true);
    assert_eq!(udp["value"], "udp");
    for q in ["p50", "p99"] {
        let e = &udp["effects"][q];
        assert_eq!(e["verdict"], "slower", "{q}: {e}");
        assert!(e["ratio"].as_f64().unwrap() > 1.0, "{q}: {e}");
        let ci = e["ci"].as_array().unwrap();
        assert!(
            ci[0].as_f64().unwrap() > 1.0 && ci[0].as_f64() <= ci[1].as_f64(),
            "{q}: {e}"
        );
        assert!(udp[q].as_f64().unwrap() > shm[q].as_f64().unwrap());
    }
    // Every block ran both, in a mirrored order.
    let order = j["order"].as_array().unwrap();
    assert_eq!(order.len(), 8);
    assert_eq!(order[0][0], order[1][1]);
}

/// The warm-up count (100 vs 101 messages, all excluded from the
/// statistics) cannot change what is measured. A false verdict happens
/// at 5% per metric by design, so one retry: this fails only if two
/// independent comparisons both give one (about 1 in 400 per metric).
#[test]
fn an_option_that_cannot_matter_is_no_significant_difference() {
    let verdicts = |j: &serde_json::Value| -> Vec<(String, String)> {
        j["variants"][1]["effects"]
            .as_object()
            .unwrap()
            .iter()
            .map(|(k, e)| (k.clone(), e["verdict"].as_str().unwrap().to_string()))
            .collect()
    };
    let args = [
        "--rounds",
        "8",
        "--vary",
        "warmup=100,101",
        "--json",
        "--",
        "loopback",
        "-t",
        "shm",
        "--count",
        "5000",
    ];
    let first = verdicts(&json(&args));
    assert!(first.iter().any(|(k, _)| k == "p99"), "{first:?}");
    if first.iter().all(|(_, v)| v == "no_significant_difference") {
        return;
    }
    let second = verdicts(&json(&args));
    for ((k, a), (_, b)) in first.iter().zip(&second) {
        assert!(
            a == "no_significant_difference" || b == "no_significant_difference",
            "{k}: {a} then {b}"
        );
    }
}

#[test]
fn the_table_names_the_baseline_and_the_method() {
    let (code, out, err) = compare(&[
        "--rounds",
        "3",
        "--vary",
        "size=32,256",
        "--",
        "loopback",
        "-t",
        "shm",
        "--count",
        "2000",
    ]);
    assert_eq!(code, 0, "{err}");
    assert!(out.contains("32 (baseline)"), "{out}");
    assert!(out.contains("method: rounds paired by block"), "{out}");
    // Three rounds cannot give a verdict, and the table says so.
    assert!(out.contains("fewer than 6 pairs"), "{out}");
    assert!(out.contains("n.s."), "{out}");
}

#[test]
fn bad_input_is_one_line_and_exit_2() {
    for (args, says) in [
        (
            &["--vary", "colour=1,2", "--", "loopback"][..],
            "no option --colour",
        ),
        (
            &["--vary", "transport=shm", "--", "loopback"][..],
            "at least two",
        ),
        (
            &[
                "--rounds",
                "1",
                "--vary",
                "transport=shm,udp",
                "--",
                "loopback",
            ][..],
            "--rounds 1",
        ),
        (
            &[
                "--vary",
                "transport=shm,xyz",
                "--",
                "loopback",
                "--count",
                "100",
            ][..],
            "xyz",
        ),
        (
            &["--vary", "size=32,64", "--", "devices"][..],
            "not \"devices\"",
        ),
        (
            &["--vary", "transport=shm,udp", "--", "loopback", "-t", "shm"][..],
            "already sets it",
        ),
        (
            &["--vary", "transport=shm,udp", "--", "loopback", "--json"][..],
            "reads the command's JSON",
        ),
        (
            &["--vary", "size=32,32", "--", "loopback"][..],
            "given twice",
        ),
    ] {
        let (code, out, err) = compare(args);
        common::one_line_exit_2(code, &out, &err, &[says]);
    }
}

/// A measured command that fails in every round of a value (a client
/// with no server): the rounds are compared as far as they go, then exit 6
/// (the measured command failed), one line naming the value and the first
/// failure.
#[test]
fn a_command_failing_in_every_round_exits_6() {
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let addr = format!("127.0.0.1:{port}");
    let (code, _, err) = compare(&[
        "--rounds",
        "2",
        "--quiet",
        "--vary",
        "size=32,64",
        "--",
        "client",
        &addr,
        "-t",
        "udp",
        "--connect-timeout",
        "200ms",
    ]);
    assert_eq!(code, ibhost::exit::Exit::CommandFailed.status(), "{err}");
    assert!(err.contains("every round of --size 32 failed"), "{err}");
}

/// Two saved reports: quantiles from the histograms they carry, the
/// ratio with a sampling-only interval, no verdict, and the warning that
/// one run each cannot separate an effect from run-to-run noise.
#[test]
fn two_saved_reports_are_compared_without_a_verdict() {
    let dir = tempfile::tempdir().unwrap();
    let save = |t: &str| {
        let (code, out, err) = common::ibprobe(&["loopback", "-t", t, "--count", "5000", "--json"]);
        assert_eq!(code, 0, "{err}");
        let p = dir.path().join(format!("{t}.json"));
        std::fs::write(&p, out).unwrap();
        p.display().to_string()
    };
    let (a, b) = (save("shm"), save("udp"));
    let j = json(&[&a, &b, "--json"]);
    let udp = &j["variants"][1];
    assert_eq!(udp["value"], b.as_str());
    let p50 = &udp["effects"]["p50"];
    assert_eq!(p50["verdict"], "one_run_each");
    assert!(p50["ratio"].as_f64().unwrap() > 1.0, "{p50}");
    let ci = p50["ci"].as_array().unwrap();
    assert!(
        ci[0].as_f64().unwrap() <= p50["ratio"].as_f64().unwrap() * 1.0001,
        "{p50}"
    );
    assert!(j["warnings"][0]
        .as_str()
        .unwrap()
        .contains("one run each cannot separate"));
    // A report without its histogram says how to get one.
    let old = dir.path().join("old.json");
    let mut doc: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&a).unwrap()).unwrap();
    doc["distributions"][0]
        .as_object_mut()
        .unwrap()
        .remove("hdr");
    std::fs::write(&old, doc.to_string()).unwrap();
    let (code, out, err) = compare(&[old.to_str().unwrap(), &b]);
    common::one_line_exit_2(code, &out, &err, &["carries no histogram"]);
    let (code, out, err) = compare(&[&a]);
    common::one_line_exit_2(code, &out, &err, &["two saved reports (got 1)"]);
}

/// `ibprobe compare A B` with its address space limited to 512 MiB (a
/// decoder that trusted a histogram header claiming 4 GiB would fail to
/// allocate and abort instead of answering): (exit code, stdout, stderr,
/// seconds).
fn compare_in_512_mib(a: &str, b: &str) -> (i32, String, String, f64) {
    let mut c = std::process::Command::new("sh");
    c.args([
        "-c",
        "ulimit -v 524288 && exec \"$0\" compare \"$1\" \"$2\"",
    ])
    .arg(assert_cmd::cargo::cargo_bin("ibprobe"))
    .args([a, b]);
    let t = std::time::Instant::now();
    let (code, out, err) = common::run(&mut c);
    (code, out, err, t.elapsed().as_secs_f64())
}

/// A V2 histogram (base64) whose header claims `claimed` payload bytes
/// over ibprobe's own range, followed by 2 KB of payload; `deflate`: in
/// its compressed form, the claim inside the compressed stream.
fn crafted_hdr(claimed: u32, deflate: bool) -> String {
    use base64::Engine as _;
    use std::io::Write as _;
    let mut v2 = Vec::new();
    v2.extend(0x1c84_9313u32.to_be_bytes());
    v2.extend(claimed.to_be_bytes());
    v2.extend(0u32.to_be_bytes());
    v2.extend(3u32.to_be_bytes());
    v2.extend(1u64.to_be_bytes());
    v2.extend(100_000_000_000u64.to_be_bytes());
    v2.extend(1.0f64.to_be_bytes());
    v2.extend([2u8; 2048]);
    let bytes = if deflate {
        let mut z = flate2::write::ZlibEncoder::new(Vec::new(), flate2::Compression::default());
        z.write_all(&v2).unwrap();
        let c = z.finish().unwrap();
        let mut b = 0x1c84_9314u32.to_be_bytes().to_vec();
        b.extend((c.len() as u32).to_be_bytes());
        b.extend(c);
        b
    } else {
        v2
    };
    base64::engine::general_purpose::STANDARD.encode(bytes)
}

/// A histogram header claiming 4 GiB is refused before anything that
/// large is allocated, plain or compressed; a FIFO given as a report is
/// refused at once instead of waiting for a writer.
#[test]
fn hostile_saved_reports_are_refused_quickly_and_small() {
    let dir = tempfile::tempdir().unwrap();
    let (code, out, err) = common::ibprobe(&["loopback", "-t", "udp", "--count", "200", "--json"]);
    assert_eq!(code, 0, "{err}");
    let good = dir.path().join("good.json");
    std::fs::write(&good, &out).unwrap();
    let good = good.to_str().unwrap();
    // The limit leaves room for a real comparison.
    let (code, _, err, _) = compare_in_512_mib(good, good);
    assert_eq!(code, 0, "{err}");
    let doc: serde_json::Value = serde_json::from_str(&out).unwrap();
    for deflate in [false, true] {
        let mut bad = doc.clone();
        bad["distributions"][0]["hdr"] = crafted_hdr(u32::MAX, deflate).into();
        let p = dir.path().join(format!("claims-4g-{deflate}.json"));
        std::fs::write(&p, bad.to_string()).unwrap();
        assert!(std::fs::metadata(&p).unwrap().len() < 64 << 10);
        let (code, out, err, secs) = compare_in_512_mib(p.to_str().unwrap(), good);
        common::one_line_exit_2(
            code,
            &out,
            &err,
            &[p.to_str().unwrap(), "claims 4294967295 payload bytes"],
        );
        assert!(secs < 10.0, "took {secs:.1} s");
    }
    let fifo = dir.path().join("fifo.json");
    let made = std::process::Command::new("mkfifo").arg(&fifo).status();
    assert!(made.unwrap().success());
    let (code, out, err, secs) = compare_in_512_mib(fifo.to_str().unwrap(), good);
    common::one_line_exit_2(code, &out, &err, &[fifo.to_str().unwrap(), "a FIFO"]);
    assert!(secs < 10.0, "took {secs:.1} s");
}
