//! One state folder, one root: a journal written under `--root A` is never
//! undone into another root, `run` never puts this machine's processes
//! into a tree, and every revert command an error gives works as written.
//!
//! Two fixture copies sharing one `--state-dir` stand for the live host and
//! a snapshot sharing `/var/lib/ibtune`: the check is the same.

mod common;

use assert_cmd::Command;
use common::ibtune;
use ibtools_tests::{assert_same_tree, fixture_copy, profile, snapshot, FixtureCopy};
use std::path::Path;
use std::time::Duration;

const THESIS: &str = "thesis-2s-mlx5";

fn apply(fx: &FixtureCopy, state: &Path) {
    let p = profile("thesis-2hca");
    let o = ibtune(&fx.root, state, &["apply", p.to_str().unwrap()]);
    assert_eq!(o.status.code(), Some(0), "{o:?}");
}

fn stderr(o: &std::process::Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

/// The last `ibtune ... revert` command quoted in `msg`, run as written
/// (with this build's binary).
fn run_advice(msg: &str) -> std::process::Output {
    let start = msg
        .rfind("`ibtune ")
        .unwrap_or_else(|| panic!("no ibtune command in {msg}"));
    let cmd = &msg[start + 1..];
    let cmd = &cmd[..cmd.find('`').unwrap()];
    assert!(cmd.ends_with(" revert"), "{cmd}");
    let words: Vec<&str> = cmd.split_whitespace().collect();
    Command::cargo_bin("ibtune")
        .unwrap()
        .args(&words[1..])
        .timeout(Duration::from_secs(60))
        .output()
        .unwrap()
}

/// The names in a state folder (journals, archived ones, lock).
fn listing(state: &Path) -> Vec<String> {
    let mut v: Vec<String> = std::fs::read_dir(state)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    v.sort();
    v
}

#[test]
fn a_journal_of_another_root_is_refused_and_its_advice_reverts_it() {
    let a = fixture_copy(THESIS);
    let b = fixture_copy(THESIS);
    let state = a.state.clone();
    let a_found = snapshot(&a.root);
    apply(&a, &state);
    let a_tuned = snapshot(&a.root);
    let b_found = snapshot(&b.root);
    let journal = std::fs::read(state.join("journal.jsonl")).unwrap();
    let files = listing(&state);

    let o = ibtune(&b.root, &state, &["revert"]);
    let err = stderr(&o);
    assert_eq!(o.status.code(), Some(2), "{err}");
    let (ra, rb) = (
        a.root.canonicalize().unwrap(),
        b.root.canonicalize().unwrap(),
    );
    assert!(
        err.contains(&ra.display().to_string()) && err.contains(&rb.display().to_string()),
        "both roots must be named: {err}"
    );
    assert_same_tree(&b_found, &snapshot(&b.root), "B after the refused revert");
    assert_same_tree(&a_tuned, &snapshot(&a.root), "A after the refused revert");
    assert_eq!(listing(&state), files, "the journal must not be archived");
    assert_eq!(std::fs::read(state.join("journal.jsonl")).unwrap(), journal);

    // The advice works: it reverts A, with A's own journal.
    let o = run_advice(&err);
    assert_eq!(o.status.code(), Some(0), "{o:?}");
    assert_same_tree(&a_found, &snapshot(&a.root), "A after the advised revert");
    assert!(!state.join("journal.jsonl").exists());
}

#[test]
fn apply_into_a_state_folder_of_another_root_is_refused() {
    let a = fixture_copy(THESIS);
    let b = fixture_copy(THESIS);
    apply(&a, &a.state);
    let b_found = snapshot(&b.root);
    let p = profile("thesis-2hca");
    let o = ibtune(&b.root, &a.state, &["apply", p.to_str().unwrap()]);
    let err = stderr(&o);
    assert_eq!(o.status.code(), Some(2), "{err}");
    assert!(
        err.contains("another") || err.contains("not for this run's root"),
        "{err}"
    );
    assert_same_tree(&b_found, &snapshot(&b.root), "B after the refused apply");
    // Nor may an experiment on B use A's folder.
    let o = ibtune(
        &b.root,
        &a.state,
        &[
            "experiment",
            p.to_str().unwrap(),
            "--rounds",
            "2",
            "--",
            "true",
        ],
    );
    assert_eq!(o.status.code(), Some(2), "{}", stderr(&o));
    assert!(
        stderr(&o).contains("not for this run's root"),
        "{}",
        stderr(&o)
    );
    assert_same_tree(
        &b_found,
        &snapshot(&b.root),
        "B after the refused experiment",
    );
}

#[test]
fn run_under_root_writes_no_pid_into_the_tree() {
    let a = fixture_copy(THESIS);
    apply(&a, &a.state);
    let tuned = snapshot(&a.root);
    let p = profile("thesis-2hca");
    let o = ibtune(
        &a.root,
        &a.state,
        &[
            "run",
            p.to_str().unwrap(),
            "--cpuset",
            "real-time-0",
            "--",
            "true",
        ],
    );
    let err = stderr(&o);
    // No pid of this machine in the tree's cgroup.procs, nothing else either.
    assert_same_tree(&tuned, &snapshot(&a.root), "after run under --root");
    assert_eq!(o.status.code(), Some(2), "{err}");
    assert!(err.contains("not this machine"), "{err}");
    // Its advice works: `ibtune --root A plan PROFILE` shows the cpuset.
    let plan = Command::cargo_bin("ibtune")
        .unwrap()
        .arg("--root")
        .arg(&a.root)
        .args(["plan", p.to_str().unwrap()])
        .timeout(Duration::from_secs(60))
        .output()
        .unwrap();
    assert!(err.contains("plan"), "{err}");
    assert_eq!(plan.status.code(), Some(0), "{plan:?}");
    assert!(String::from_utf8_lossy(&plan.stdout).contains("real-time-0"));
    // The tree reverts cleanly afterwards.
    let o = ibtune(&a.root, &a.state, &["revert"]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
}

#[test]
fn a_stuck_revert_names_the_cause_and_its_advice_works() {
    let a = fixture_copy(THESIS);
    let found = snapshot(&a.root);
    apply(&a, &a.state);
    // A file ibtune did not create, in the cgroup folder apply created.
    let stray = a.root.join("sys/fs/cgroup/ibtune-real-time-0/cgroup.procs");
    std::fs::write(&stray, "4242\n").unwrap();
    let o = ibtune(&a.root, &a.state, &["revert"]);
    let err = stderr(&o);
    assert_eq!(o.status.code(), Some(4), "{err}");
    let named = stray.canonicalize().unwrap();
    assert!(
        err.contains(&named.display().to_string()),
        "the message must name {}: {err}",
        named.display()
    );
    // Following the advice: remove what it names, run what it says.
    std::fs::remove_file(&stray).unwrap();
    let o = run_advice(&err);
    assert_eq!(o.status.code(), Some(0), "{o:?}");
    assert_same_tree(&found, &snapshot(&a.root), "after the advised revert");
}
