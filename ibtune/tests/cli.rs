//! The `ibtune` binary end to end, on copies of the fixture host trees.
//!
//! Every command gets `--root` (a fixture, or a temp copy of one when the
//! command may write) and, where it matters, `--state-dir` in a temp dir,
//! so nothing here touches the machine running the tests.

use assert_cmd::Command;
use ibtools_tests::wait_until;
use nix::sys::signal::{kill, Signal};
use nix::unistd::Pid;
use serde_json::Value;
use std::fs;
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::{Duration, Instant};
use tempfile::TempDir;

const THESIS: &str = "thesis-2s-mlx5";
const ROCE: &str = "roce-1s";
const AMD: &str = "amd-4node";
const THIS_HOST: &str = "this-host";

use ibtools_tests::{assert_same_tree, copy_tree, fixture, profile, snapshot};

fn ibtune() -> Command {
    Command::cargo_bin("ibtune").expect("the ibtune binary")
}

/// `ibtune --root ROOT ARGS...`, with its exit code, stdout and stderr.
fn run(root: &Path, args: &[&str]) -> (i32, String, String) {
    let out = ibtune()
        .arg("--root")
        .arg(root)
        .args(args)
        .output()
        .expect("running ibtune");
    (
        out.status.code().expect("ibtune exited by a signal"),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

/// A temp copy of a fixture; the tree is at `.path().join("root")`.
fn copy_fixture(name: &str) -> (TempDir, PathBuf) {
    let tmp = tempfile::tempdir().unwrap();
    let root = tmp.path().join("root");
    copy_tree(&fixture(name), &root).unwrap();
    (tmp, root)
}

fn json(stdout: &str) -> Value {
    serde_json::from_str(stdout).unwrap_or_else(|e| panic!("not JSON ({e}):\n{stdout}"))
}

// ---------------------------------------------------------------- help

#[test]
fn top_level_help_lists_commands_and_exit_codes() {
    let out = ibtune().arg("--help").output().unwrap();
    assert!(out.status.success());
    let s = String::from_utf8_lossy(&out.stdout);
    for word in [
        "show",
        "plan",
        "apply",
        "verify",
        "revert",
        "hold",
        "run",
        "--root",
        "--state-dir",
        "Exit codes",
    ] {
        assert!(s.contains(word), "--help lacks {word:?}:\n{s}");
    }
    // The toolkit's one exit code table, as ibprobe and ibexporter print it.
    assert!(
        s.contains(&ibhost::exit::help()),
        "--help lacks the exit code table:\n{s}"
    );
}

#[test]
fn each_subcommand_help_mentions_its_key_words() {
    let cases: &[(&str, &[&str])] = &[
        ("show", &["warnings", "RDMA", "--json", "--profile"]),
        ("plan", &["changes nothing", "PROFILE", "--json"]),
        ("apply", &["journal", "roll back", "Idempotent", "PROFILE"]),
        ("verify", &["exit 0", "1 on drift", "PROFILE"]),
        ("revert", &["journalled", "--json"]),
        ("hold", &["cpu_dma_latency", "SIGTERM", "--us", "--pidfile"]),
        (
            "run",
            &["cpuset", "--cpuset", "--fifo", "SCHED_FIFO", "CMD"],
        ),
    ];
    for (cmd, words) in cases {
        let out = ibtune().args([cmd, "--help"]).output().unwrap();
        assert!(out.status.success(), "{cmd} --help failed");
        let s = String::from_utf8_lossy(&out.stdout);
        for w in *words {
            assert!(s.contains(w), "`{cmd} --help` lacks {w:?}:\n{s}");
        }
    }
}

#[test]
fn unknown_subcommand_is_a_usage_error() {
    let out = ibtune().arg("frobnicate").output().unwrap();
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("frobnicate"));
}

// ---------------------------------------------------------------- show

fn show_json(fixture_name: &str) -> Value {
    let (code, out, err) = run(&fixture(fixture_name), &["show", "--json"]);
    assert_eq!(code, 0, "show --json on {fixture_name}: {err}");
    json(&out)
}

fn warning_codes(v: &Value) -> Vec<String> {
    v["warnings"]
        .as_array()
        .expect("warnings array")
        .iter()
        .map(|w| {
            assert!(
                w["message"].as_str().is_some_and(|m| !m.is_empty()),
                "warning without message: {w}"
            );
            w["code"].as_str().expect("warning code").to_string()
        })
        .collect()
}

fn device_names(v: &Value) -> Vec<String> {
    v["host"]["rdma_devices"]
        .as_array()
        .expect("host.rdma_devices array")
        .iter()
        .map(|d| d["name"].as_str().unwrap().to_string())
        .collect()
}

#[test]
fn show_json_thesis() {
    let v = show_json(THESIS);
    assert_eq!(device_names(&v), ["mlx5_0", "mlx5_1"]);
    let codes = warning_codes(&v);
    assert_eq!(
        codes,
        ["irqbalance_unbanned", "tuned_force_latency"],
        "{v:#}"
    );
    let tuned = v["warnings"]
        .as_array()
        .unwrap()
        .iter()
        .find(|w| w["code"] == "tuned_force_latency")
        .unwrap();
    assert!(tuned["message"]
        .as_str()
        .unwrap()
        .contains("latency-performance"));
}

#[test]
fn show_json_roce() {
    let v = show_json(ROCE);
    assert_eq!(device_names(&v), ["mlx5_0"]);
    let codes = warning_codes(&v);
    assert!(codes.contains(&"pcie_downtrained".to_string()), "{codes:?}");
    assert!(
        !codes.contains(&"tuned_force_latency".to_string()),
        "{codes:?}"
    );
    let pcie = v["warnings"]
        .as_array()
        .unwrap()
        .iter()
        .find(|w| w["code"] == "pcie_downtrained")
        .unwrap();
    let m = pcie["message"].as_str().unwrap();
    assert!(
        m.contains("mlx5_0") && m.contains("8.0 GT/s PCIe x8") && m.contains("16.0 GT/s PCIe x16"),
        "{m}"
    );
}

#[test]
fn show_json_amd() {
    let v = show_json(AMD);
    assert_eq!(device_names(&v), ["mlx5_0", "mlx5_1"]);
    // irqbalance not running, tuned without force_latency, full PCIe links.
    assert_eq!(warning_codes(&v), Vec::<String>::new(), "{v:#}");
    assert_eq!(v["host"]["numa_nodes"].as_array().unwrap().len(), 4);
}

#[test]
fn show_json_this_host() {
    let v = show_json(THIS_HOST);
    assert_eq!(device_names(&v), Vec::<String>::new());
    assert_eq!(warning_codes(&v), Vec::<String>::new());
}

#[test]
fn show_text_lists_the_warnings() {
    let (code, out, err) = run(&fixture(ROCE), &["show"]);
    assert_eq!(code, 0, "{err}");
    assert!(out.contains("mlx5_0"), "{out}");
    assert!(out.contains("down-trained"), "{out}");
}

#[test]
fn show_on_a_directory_that_is_not_a_host_fails_with_2() {
    let tmp = tempfile::tempdir().unwrap();
    let (code, _, err) = run(tmp.path(), &["show"]);
    assert_eq!(code, 2);
    assert!(err.contains("is not a host root"), "{err}");
}

// ---------------------------------------------------------------- plan / verify are read-only

#[test]
fn plan_and_verify_change_nothing() {
    for name in [THESIS, ROCE, AMD, THIS_HOST] {
        let (tmp, root) = copy_fixture(name);
        let state = tmp.path().join("state");
        let before = snapshot(&root);
        assert_same_tree(&snapshot(&fixture(name)), &before, "copy vs fixture");
        let prof = profile("thesis-2hca");
        let prof = prof.to_str().unwrap();
        let st = state.to_str().unwrap();
        for args in [
            vec!["--state-dir", st, "plan", prof],
            vec!["--state-dir", st, "plan", prof, "--json"],
            vec!["--state-dir", st, "verify", prof],
            vec!["--state-dir", st, "verify", prof, "--json"],
        ] {
            let (code, out, err) = run(&root, &args);
            if name == THESIS || name == AMD {
                // Both have mlx5_0 and mlx5_1: plan works, verify reports drift.
                let want = if args.contains(&"verify") { 1 } else { 0 };
                assert_eq!(code, want, "{name} {args:?}: {err}");
                if args.contains(&"--json") {
                    json(&out);
                }
            } else {
                // No mlx5_1 (roce) or no HCA at all (this-host): refused.
                assert_eq!(code, 2, "{name} {args:?}: {out}");
                assert!(err.contains("not found; devices:"), "{err}");
            }
            assert_same_tree(&before, &snapshot(&root), &format!("{name} {args:?}"));
        }
        assert!(!state.exists(), "plan/verify created the state dir");
    }
}

#[test]
fn plan_json_matches_the_thesis_numbers() {
    let (code, out, err) = run(
        &fixture(THESIS),
        &["plan", profile("thesis-2hca").to_str().unwrap(), "--json"],
    );
    assert_eq!(code, 0, "{err}");
    let v = json(&out);
    assert_eq!(v["profile"], "thesis-2hca");
    let item = |key: &str| {
        v["items"]
            .as_array()
            .unwrap()
            .iter()
            .find(|i| i["key"] == key)
            .unwrap_or_else(|| panic!("no item {key}"))
            .clone()
    };
    assert_eq!(item("cpuset/real-time-0/cpus")["wanted"], "16,18,20,22");
    assert_eq!(item("cpuset/real-time-1/cpus")["wanted"], "17,19,21,23");
    assert_eq!(item("irq/41/affinity")["status"], "change");
    assert!(v["summary"]["change"].as_u64().unwrap() > 0);
    assert_eq!(v["summary"]["blocked"], 0);
}

#[test]
fn profile_found_by_bare_name() {
    let (code, out, err) = run(&fixture(THESIS), &["plan", "thesis-2hca"]);
    assert_eq!(code, 0, "{err}");
    assert!(out.contains("thesis-2hca"), "{out}");
    let (code, _, err) = run(&fixture(THESIS), &["plan", "no-such-profile-anywhere"]);
    assert_eq!(code, 2);
    assert!(err.contains("no-such-profile-anywhere"), "{err}");
}

// ---------------------------------------------------------------- profile rejections

/// Writes `text` as a profile, runs `plan` on the thesis fixture, and checks
/// the refusal: exit 2, `FILE:LINE:COL:`, and every `needle`.
fn rejected(text: &str, line: usize, col: usize, needles: &[&str]) -> String {
    let tmp = tempfile::tempdir().unwrap();
    let path = tmp.path().join("bad.toml");
    fs::write(&path, text).unwrap();
    let (code, out, err) = run(&fixture(THESIS), &["plan", path.to_str().unwrap()]);
    assert_eq!(
        code, 2,
        "expected a refusal for:\n{text}\nstdout: {out}\nstderr: {err}"
    );
    let pos = format!("{}:{line}:{col}:", path.display());
    assert!(err.contains(&pos), "stderr lacks {pos:?}:\n{err}");
    for n in needles {
        assert!(err.contains(n), "stderr lacks {n:?}:\n{err}");
    }
    assert!(err.contains("fix: "), "no fix given:\n{err}");
    err
}

#[test]
fn reject_cpu_that_does_not_exist() {
    rejected(
        "[profile]\nname = \"x\"\n\n[[cpuset]]\nname = \"a\"\ncpus = [99]\n",
        6,
        8,
        &["CPUs 99 do not exist", "online: 0-23", "use CPUs from 0-23"],
    );
    // Also inside a CPU list string, and in [[irq]].
    rejected(
        "[profile]\nname = \"x\"\n\n[[cpuset]]\nname = \"a\"\ncpus = \"2,4,30-31\"\n",
        6,
        8,
        &["CPUs 30-31 do not exist", "0-23"],
    );
    rejected(
        "[profile]\nname = \"x\"\n\n[[irq]]\ndevice = \"mlx5_0\"\ncpus = [24]\n",
        6,
        8,
        &["CPUs 24 do not exist", "0-23"],
    );
}

#[test]
fn reject_cpu_and_node_at_the_top_of_u32() {
    // Found by tests/profile_fuzz.rs: formatting the set {u32::MAX} for the
    // message overflowed (`end + 1` in CpuSet::to_list) and the debug build
    // panicked with exit 101 instead of refusing the profile.
    rejected(
        "[profile]\nname = \"x\"\n\n[[cpuset]]\nname = \"a\"\ncpus = [4294967295]\n",
        6,
        8,
        &["CPUs 4294967295 do not exist", "online: 0-23"],
    );
    rejected(
        "[profile]\nname = \"x\"\n\n[[cpuset]]\nname = \"a\"\ncpus = [2]\nmems = [4294967295]\n",
        7,
        8,
        &["NUMA nodes 4294967295 do not exist", "nodes: 0-1"],
    );
}

#[test]
fn reject_numa_node_that_does_not_exist() {
    rejected(
        "[profile]\nname = \"x\"\n\n[[cpuset]]\nname = \"a\"\ncpus = [2]\nmems = [7]\n",
        7,
        8,
        &[
            "NUMA nodes 7 do not exist",
            "nodes: 0-1",
            "use nodes from 0-1",
        ],
    );
}

#[test]
fn reject_isolating_every_cpu() {
    // Two isolated cpusets that together cover 0-23: the second is blamed.
    rejected(
        "[profile]\nname = \"x\"\n\n[[cpuset]]\nname = \"a\"\ncpus = \"0-11\"\nisolated = true\n\n[[cpuset]]\nname = \"b\"\ncpus = \"12-23\"\nisolated = true\n",
        11,
        8,
        &["take every CPU of this host (0-23)", "leave at least one CPU"],
    );
    // One exclusive cpuset covering all.
    rejected(
        "[profile]\nname = \"x\"\n\n[[cpuset]]\nname = \"all\"\ncpus = \"0-23\"\nexclusive = true\n",
        6,
        8,
        &["take every CPU of this host (0-23)", "leave at least one CPU"],
    );
}

#[test]
fn non_exclusive_cpuset_may_cover_every_cpu() {
    // The "every CPU" rule is about exclusive/isolated cpusets only.
    let tmp = tempfile::tempdir().unwrap();
    let path = tmp.path().join("ok.toml");
    fs::write(
        &path,
        "[profile]\nname = \"x\"\n\n[[cpuset]]\nname = \"all\"\ncpus = \"0-23\"\n",
    )
    .unwrap();
    let (code, _, err) = run(&fixture(THESIS), &["plan", path.to_str().unwrap()]);
    assert_eq!(code, 0, "{err}");
}

#[test]
fn reject_absent_hca() {
    rejected(
        "[profile]\nname = \"x\"\n\n[[irq]]\ndevice = \"mlx5_9\"\ncpus = \"local\"\n",
        5,
        10,
        &[
            "mlx5_9 not found; devices: mlx5_0, mlx5_1",
            "use one of: mlx5_0, mlx5_1",
        ],
    );
    // Also through "N cores local to DEV".
    rejected(
        "[profile]\nname = \"x\"\n\n[[cpuset]]\nname = \"a\"\ncpus = \"2 cores local to mlx5_9\"\n",
        6,
        8,
        &["mlx5_9 not found; devices: mlx5_0, mlx5_1"],
    );
}

#[test]
fn reject_overlapping_exclusive_cpusets() {
    rejected(
        "[profile]\nname = \"x\"\n\n[[cpuset]]\nname = \"a\"\ncpus = \"2-5\"\nexclusive = true\n\n[[cpuset]]\nname = \"b\"\ncpus = \"4-7\"\nexclusive = true\n",
        11,
        8,
        &[
            "cpuset \"b\" (4-7) overlaps exclusive cpuset \"a\" (2-5) on CPUs 4-5",
            "choose disjoint CPU lists",
        ],
    );
}

#[test]
fn reject_unknown_key() {
    rejected(
        "[profile]\nname = \"x\"\n\n[numa]\npolicy = \"bind\"\nbogus = 1\n",
        6,
        1,
        &["unknown field `bogus`", "remove or rename the key"],
    );
    // At the top level too (the column of the name inside `[cpus]`).
    rejected(
        "[profile]\nname = \"x\"\n\n[cpus]\ngovernor = \"performance\"\n",
        4,
        2,
        &["unknown field `cpus`"],
    );
}

#[test]
fn reject_toml_syntax_error() {
    rejected(
        "[profile]\nname = \"x\"\n\n[cpu\nthp = \"never\"\n",
        4,
        5,
        &["fix the TOML syntax"],
    );
}

#[test]
fn reject_invalid_thp() {
    rejected(
        "[profile]\nname = \"x\"\n\n[cpu]\nthp = \"sometimes\"\n",
        5,
        7,
        &[
            "thp \"sometimes\" is not a THP mode",
            "always, madvise or never",
        ],
    );
}

#[test]
fn reject_negative_dma_latency() {
    rejected(
        "[profile]\nname = \"x\"\n\n[dma_latency]\nus = -5\n",
        5,
        6,
        &["dma_latency.us must be microseconds", "us = \"off\""],
    );
}

#[test]
fn rejected_profile_on_apply_changes_nothing() {
    let (tmp, root) = copy_fixture(THESIS);
    let state = tmp.path().join("state");
    let path = tmp.path().join("bad.toml");
    fs::write(
        &path,
        "[profile]\nname = \"x\"\n\n[[cpuset]]\nname = \"a\"\ncpus = [99]\n",
    )
    .unwrap();
    let before = snapshot(&root);
    let (code, _, err) = run(
        &root,
        &[
            "--state-dir",
            state.to_str().unwrap(),
            "apply",
            path.to_str().unwrap(),
        ],
    );
    assert_eq!(code, 2, "{err}");
    assert!(err.contains(":6:8:"), "{err}");
    assert_same_tree(&before, &snapshot(&root), "apply of a bad profile");
}

// ---------------------------------------------------------------- apply / verify / revert

#[test]
fn apply_verify_drift_reapply_revert_round_trip() {
    let (tmp, root) = copy_fixture(THESIS);
    let pristine = snapshot(&fixture(THESIS));
    let state = tmp.path().join("state");
    let st = state.to_str().unwrap();
    let prof = profile("thesis-2hca");
    let prof = prof.to_str().unwrap();

    // Apply.
    let (code, out, err) = run(&root, &["--state-dir", st, "apply", prof]);
    assert_eq!(code, 0, "apply: {out}\n{err}");
    assert!(out.contains("applied profile thesis-2hca"), "{out}");
    // Each change as `plan` names it, not by its journal key; boot
    // parameters are advice, never counted "as wanted".
    assert!(
        out.contains("changed IRQ 41 (mlx5_comp0@pci:0000:03:00.0) smp_affinity_list"),
        "{out}"
    );
    assert!(!out.contains("irq/41/affinity"), "{out}");
    assert!(
        out.contains("29 changed, 0 already as wanted; 3 boot advice not applied"),
        "{out}"
    );
    assert!(state.join("journal.jsonl").exists());
    assert_eq!(
        fs::read_to_string(root.join("proc/irq/41/smp_affinity_list")).unwrap(),
        "16\n"
    );
    assert!(root.join("sys/fs/cgroup/ibtune-real-time-0").is_dir());

    // Verify: matches.
    let (code, out, err) = run(&root, &["--state-dir", st, "verify", prof]);
    assert_eq!(code, 0, "verify after apply: {out}\n{err}");
    assert!(
        out.contains("ok: host matches profile thesis-2hca"),
        "{out}"
    );
    let (code, out, _) = run(&root, &["--state-dir", st, "verify", prof, "--json"]);
    assert_eq!(code, 0);
    let v = json(&out);
    assert_eq!(v["matches"], true);
    assert_eq!(v["drifted"].as_array().unwrap().len(), 0);

    // Drift one IRQ.
    fs::write(root.join("proc/irq/41/smp_affinity_list"), "0-23\n").unwrap();
    let (code, out, _) = run(&root, &["--state-dir", st, "verify", prof, "--json"]);
    assert_eq!(code, 1, "drift must exit 1: {out}");
    let v = json(&out);
    assert_eq!(v["matches"], false);
    let drifted: Vec<&str> = v["drifted"]
        .as_array()
        .unwrap()
        .iter()
        .map(|i| i["key"].as_str().unwrap())
        .collect();
    assert_eq!(drifted, ["irq/41/affinity"]);
    let (code, out, _) = run(&root, &["--state-dir", st, "verify", prof]);
    assert_eq!(code, 1);
    assert!(out.contains("drift: 1 setting(s) differ"), "{out}");

    // Second apply fixes only that one.
    let (code, out, err) = run(&root, &["--state-dir", st, "apply", prof, "--json"]);
    assert_eq!(code, 0, "second apply: {err}");
    let v = json(&out);
    assert_eq!(v["changed"], serde_json::json!(["irq/41/affinity"]));
    assert_eq!(
        fs::read_to_string(root.join("proc/irq/41/smp_affinity_list")).unwrap(),
        "16\n"
    );
    let (code, _, _) = run(&root, &["--state-dir", st, "verify", prof]);
    assert_eq!(code, 0);

    // A third apply has nothing to do.
    let (code, out, _) = run(&root, &["--state-dir", st, "apply", prof]);
    assert_eq!(code, 0);
    assert!(out.contains("nothing to change"), "{out}");

    // Revert restores the pristine tree exactly.
    let (code, out, err) = run(&root, &["--state-dir", st, "revert"]);
    assert_eq!(code, 0, "revert: {out}\n{err}");
    assert!(out.contains("reverted profile thesis-2hca"), "{out}");
    assert_same_tree(&pristine, &snapshot(&root), "after revert");
    assert!(!state.join("journal.jsonl").exists(), "journal archived");

    // Nothing left to revert.
    let (code, out, err) = run(&root, &["--state-dir", st, "revert"]);
    assert_eq!(code, 0, "{err}");
    assert!(out.contains("nothing to revert"), "{out}");
    assert_same_tree(&pristine, &snapshot(&root), "after second revert");
}

#[test]
fn apply_refuses_a_second_profile_until_revert() {
    let (tmp, root) = copy_fixture(THESIS);
    let st = tmp.path().join("state");
    let st = st.to_str().unwrap();
    let (code, _, err) = run(
        &root,
        &[
            "--state-dir",
            st,
            "apply",
            profile("thesis-2hca").to_str().unwrap(),
        ],
    );
    assert_eq!(code, 0, "{err}");
    let applied = snapshot(&root);
    let (code, _, err) = run(
        &root,
        &[
            "--state-dir",
            st,
            "apply",
            profile("event-poll").to_str().unwrap(),
        ],
    );
    assert_eq!(code, 2, "{err}");
    // The advice names this root and state folder: plain `ibtune revert`
    // would be the live host's.
    assert!(
        err.contains(&format!("--state-dir {st} revert` first")),
        "{err}"
    );
    assert_same_tree(&applied, &snapshot(&root), "refused second profile");
    let (code, _, _) = run(&root, &["--state-dir", st, "revert"]);
    assert_eq!(code, 0);
    assert_same_tree(&snapshot(&fixture(THESIS)), &snapshot(&root), "revert");
}

#[test]
fn apply_busy_poll_on_roce_without_tuned_is_refused() {
    let (tmp, root) = copy_fixture(ROCE);
    let state = tmp.path().join("state");
    let before = snapshot(&root);
    let (code, out, err) = run(
        &root,
        &[
            "--state-dir",
            state.to_str().unwrap(),
            "apply",
            profile("busy-poll-1hca").to_str().unwrap(),
        ],
    );
    assert_eq!(code, 2, "stdout: {out}\nstderr: {err}");
    assert!(err.contains("tuned is not installed"), "{err}");
    assert!(err.contains("nothing was changed"), "{err}");
    assert_same_tree(&before, &snapshot(&root), "refused apply");
    assert!(!state.join("journal.jsonl").exists(), "no journal written");
}

// ---------------------------------------------------------------- hold

#[test]
fn hold_sets_and_restores_cpu_dma_latency_on_a_snapshot() {
    let (tmp, root) = copy_fixture(THESIS);
    let pidfile = tmp.path().join("hold.pid");
    let before = snapshot(&root);
    let original = fs::read(root.join("dev/cpu_dma_latency")).unwrap();
    assert_eq!(original, b"2000000000\n");

    let mut child = std::process::Command::new(assert_cmd::cargo::cargo_bin("ibtune"))
        .arg("--root")
        .arg(&root)
        .args(["hold", "--us", "7", "--pidfile"])
        .arg(&pidfile)
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    wait_until("the pidfile", || {
        fs::read_to_string(&pidfile).is_ok_and(|s| s.ends_with('\n'))
    });
    assert_eq!(
        fs::read_to_string(&pidfile).unwrap().trim(),
        child.id().to_string()
    );
    assert_eq!(
        fs::read_to_string(root.join("dev/cpu_dma_latency"))
            .unwrap()
            .trim(),
        "7"
    );
    assert!(child.try_wait().unwrap().is_none(), "holder exited early");

    kill(Pid::from_raw(child.id() as i32), Signal::SIGTERM).unwrap();
    let deadline = Instant::now() + Duration::from_secs(10);
    let status = loop {
        if let Some(s) = child.try_wait().unwrap() {
            break s;
        }
        if Instant::now() > deadline {
            let _ = child.kill();
            panic!("holder did not exit after SIGTERM");
        }
        std::thread::sleep(Duration::from_millis(5));
    };
    let mut stderr = String::new();
    std::io::Read::read_to_string(child.stderr.as_mut().unwrap(), &mut stderr).unwrap();
    assert!(status.success(), "holder: {status}: {stderr}");
    assert_eq!(
        fs::read(root.join("dev/cpu_dma_latency")).unwrap(),
        original
    );
    assert_same_tree(&before, &snapshot(&root), "after hold");
    assert!(!pidfile.exists(), "pidfile removed on exit");
}

#[test]
fn hold_without_the_device_fails_with_2() {
    let (tmp, root) = copy_fixture(THESIS);
    fs::remove_file(root.join("dev/cpu_dma_latency")).unwrap();
    let pidfile = tmp.path().join("hold.pid");
    let (code, _, err) = run(
        &root,
        &["hold", "--us", "7", "--pidfile", pidfile.to_str().unwrap()],
    );
    assert_eq!(code, 2, "{err}");
    assert!(!pidfile.exists());
}

// ---------------------------------------------------------------- verify: activity on isolated CPUs

/// `verify --watch`: interrupts that reach an isolated CPU during the
/// window are drift evidence, named by CPU, count and source. The fixture
/// tree stands in for the host: its `/proc/interrupts` is rewritten
/// during the window, as the kernel's counts would move.
#[test]
fn verify_names_interrupts_on_an_isolated_cpu_during_the_window() {
    let (_tmp, root) = copy_fixture(THESIS);
    let prof = profile("thesis-2hca");
    let prof = prof.to_str().unwrap();
    // Which CPUs it watches (a 1 ms window on the untouched tree: nothing).
    let (code, out, err) = run(&root, &["verify", prof, "--watch", "1ms", "--json"]);
    assert_eq!(code, 1, "{err}");
    let v = json(&out);
    let cpus = v["activity"]["cpus"].as_array().expect("activity.cpus");
    assert!(!cpus.is_empty(), "{}", v["activity"]);
    assert!(cpus.iter().all(|c| c["interrupts"] == 0));
    let cpu = cpus[0]["cpu"].as_u64().unwrap() as usize;
    // Without --watch under --root: not watched.
    let (_, out, _) = run(&root, &["verify", prof, "--json"]);
    assert!(json(&out)["activity"].is_null());

    // During a 1.5 s window, IRQ 0 gains 1,204 interrupts on that CPU.
    let file = root.join("proc/interrupts");
    let text = std::fs::read_to_string(&file).unwrap();
    let moved: String = text
        .lines()
        .map(|l| {
            if !l.trim_start().starts_with("0:") {
                return l.to_string();
            }
            let (label, rest) = l.split_once(':').unwrap();
            let mut tokens: Vec<String> = rest.split_whitespace().map(String::from).collect();
            let n: u64 = tokens[cpu].parse().unwrap();
            tokens[cpu] = (n + 1204).to_string();
            format!("{label}: {}", tokens.join(" "))
        })
        .collect::<Vec<_>>()
        .join("\n")
        + "\n";
    let writer = std::thread::spawn(move || {
        std::thread::sleep(std::time::Duration::from_millis(500));
        std::fs::write(&file, moved).unwrap();
    });
    let (code, out, err) = run(&root, &["verify", prof, "--watch", "1500ms"]);
    writer.join().unwrap();
    assert_eq!(
        code, 1,
        "evidence leaves the exit code to the settings: {err}"
    );
    let line = out
        .lines()
        .find(|l| l.starts_with("evidence: "))
        .unwrap_or_else(|| panic!("no evidence line:\n{out}"));
    assert_eq!(
        line,
        format!(
            "evidence: CPU {cpu} is isolated but received 1,204 interrupts in 1s500ms (0:timer 1,204)"
        )
    );
    assert!(out.contains("note: /proc/schedstat is absent"), "{out}");
}
