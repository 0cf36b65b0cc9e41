//! The toolkit's one grammar, as ibtune applies it: every duration flag
//! goes through the one parser (`ibhost::duration`), which refuses a bare
//! number with the question of its unit instead of guessing seconds.

use assert_cmd::Command;
use ibtools_tests::fixture;

fn ibtune(args: &[&str]) -> (i32, String, String) {
    let out = Command::cargo_bin("ibtune")
        .expect("the ibtune binary")
        .args(args)
        .timeout(std::time::Duration::from_secs(60))
        .output()
        .expect("running ibtune");
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

/// `--lock-wait 5`, `verify --watch 1` and `experiment --round-timeout 90` used
/// to mean seconds; each now asks which unit was meant, before anything
/// is read or changed.
#[test]
fn a_bare_number_is_not_a_duration() {
    let root = fixture("thesis-2s-mlx5");
    let root = root.to_str().unwrap();
    for (args, n) in [
        (&["--root", root, "--lock-wait", "5", "show"][..], "5"),
        (
            &["--root", root, "verify", "thesis-2hca", "--window", "1"],
            "1",
        ),
        (
            &[
                "--root",
                root,
                "experiment",
                "thesis-2hca",
                "--round-timeout",
                "90",
                "--",
                "true",
            ],
            "90",
        ),
    ] {
        let (code, out, err) = ibtune(args);
        assert_eq!(code, 2, "{args:?}: {err}");
        assert_eq!(out, "", "{args:?}");
        assert!(
            err.contains(&format!("{n} what? write {n}s, {n}ms or {n}us")),
            "{args:?}: {err}"
        );
    }
    // A unit is taken as always, and zero needs none.
    for args in [
        &["--root", root, "--lock-wait", "5s", "show"][..],
        &["--root", root, "--lock-wait", "0", "show"],
    ] {
        let (code, _, err) = ibtune(args);
        assert_eq!(code, 0, "{args:?}: {err}");
    }
}

/// Renamed options keep their old spelling, with one warning line naming
/// the new one; the new spelling warns nothing.
#[test]
fn old_spellings_still_work_and_say_their_new_name() {
    let root = fixture("thesis-2s-mlx5");
    let root = root.to_str().unwrap();
    let (code, _, err) = ibtune(&["--root", root, "verify", "thesis-2hca", "--window", "0"]);
    assert_eq!(code, 1, "the fixture drifts from the profile: {err}");
    assert!(
        err.contains("`ibtune verify --window` is now `ibtune verify --watch`"),
        "{err}"
    );
    let (code, _, err) = ibtune(&["--root", root, "verify", "thesis-2hca", "--watch", "0"]);
    assert_eq!(code, 1, "{err}");
    assert!(!err.contains("warning: `"), "{err}");
}

/// Every reporting command takes `-f/--format` as well as `--json`, and
/// both print the same JSON.
#[test]
fn format_json_is_json_everywhere() {
    let root = fixture("thesis-2s-mlx5");
    let root = root.to_str().unwrap();
    for cmd in [
        &["show"][..],
        &["plan", "thesis-2hca"],
        &["verify", "thesis-2hca"],
    ] {
        let with = |extra: &[&str]| {
            let mut a = vec!["--root", root];
            a.extend_from_slice(cmd);
            a.extend_from_slice(extra);
            ibtune(&a)
        };
        let (c1, json, e1) = with(&["--json"]);
        let (c2, format, e2) = with(&["-f", "json"]);
        assert_eq!((c1, c2), (c1, c1), "{cmd:?}: {e1} {e2}");
        serde_json::from_str::<serde_json::Value>(&json).unwrap_or_else(|e| panic!("{cmd:?}: {e}"));
        assert_eq!(json, format, "{cmd:?}");
    }
}

/// A profile whose two cpusets both sit on mlx5_0's NUMA node pins
/// mlx5_1's IRQs across the socket interconnect: `plan` says so (on
/// stderr, so `--json` stays clean), not only `show --profile`.
#[test]
fn plan_warns_when_an_hca_s_irqs_go_to_another_node() {
    let root = fixture("thesis-2s-mlx5");
    let dir = tempfile::tempdir().unwrap();
    let prof = dir.path().join("one-node.toml");
    let text = std::fs::read_to_string(ibtools_tests::profile("thesis-2hca"))
        .unwrap()
        .replace("name = \"thesis-2hca\"", "name = \"one-node\"")
        .replace(
            "cpus = \"4 cores local to mlx5_1\"",
            "cpus = \"2 cores local to mlx5_0\"",
        )
        .replace(
            "cpus = \"4 cores local to mlx5_0\"",
            "cpus = \"2 cores local to mlx5_0\"",
        );
    std::fs::write(&prof, text).unwrap();
    let (code, out, err) = ibtune(&[
        "--root",
        root.to_str().unwrap(),
        "plan",
        prof.to_str().unwrap(),
        "--json",
    ]);
    assert_eq!(code, 0, "{err}");
    serde_json::from_str::<serde_json::Value>(&out).unwrap();
    assert!(
        err.contains("mlx5_1 is on NUMA node 1, but the profile sends its IRQs to CPUs"),
        "{err}"
    );
    assert!(!err.contains("mlx5_0 is on NUMA node"), "{err}");
    // The shipped profile, each cpuset on its HCA's node: no such warning.
    let (_, _, err) = ibtune(&["--root", root.to_str().unwrap(), "plan", "thesis-2hca"]);
    assert!(!err.contains("sends its IRQs"), "{err}");
}
