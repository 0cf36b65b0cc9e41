//! `ibtune suggest` on every shipped fixture host, end to end through the
//! binary: the suggested profile parses, plans with no warning and nothing
//! blocked, applies on a copy of the fixture, verifies clean, and reverts
//! to a byte-identical tree. A host that cannot be tuned gets a reason and
//! exit 3, bad intent exit 2. The rules themselves (whole cores,
//! housekeeping on every node, local IRQs) are checked on synthetic
//! topologies by the unit and property tests of `profile/suggest.rs`.

mod common;

use common::ibtune;
use ibtools_tests::{assert_same_tree, fixture, fixture_copy, scratch_dir, snapshot, FIXTURES};
use ibtune::profile::Profile;
use std::path::Path;

fn text(b: &[u8]) -> String {
    String::from_utf8_lossy(b).into_owned()
}

/// The intent each fixture is asked with: a host without an HCA needs
/// `--hca none` (without it, see `a_host_that_cannot_be_tuned_gets_a_reason_and_exit_3`).
fn args_for(fx: &str) -> Vec<&'static str> {
    let host = ibtune::host::discover(&ibtune::host::HostRoot::new(fixture(fx)).unwrap()).unwrap();
    if host.rdma_devices.is_empty() {
        vec!["suggest", "--hca", "none"]
    } else {
        vec!["suggest"]
    }
}

#[test]
fn on_every_fixture_the_suggestion_plans_clean_applies_verifies_and_reverts() {
    for fx in FIXTURES {
        let fc = fixture_copy(fx);
        let pristine = snapshot(&fc.root);
        // Each step exits 0 and prints no warning (nor anything else on stderr).
        let step = |args: &[&str]| {
            let o = ibtune(&fc.root, &fc.state, args);
            assert!(
                o.status.code() == Some(0) && o.stderr.is_empty(),
                "{fx}: {args:?}: {}\n{}{}",
                o.status,
                text(&o.stdout),
                text(&o.stderr)
            );
            o.stdout
        };
        let toml = text(&step(&args_for(fx)));
        // Beside the copy, not in it: the tree must come back byte-identical.
        let dir = scratch_dir();
        let file = dir.path().join("suggested.toml");
        std::fs::write(&file, &toml).unwrap();
        Profile::parse(&file, &toml).unwrap_or_else(|e| panic!("{fx}: {e}\n{toml}"));
        let f = file.to_str().unwrap();

        let plan: serde_json::Value =
            serde_json::from_slice(&step(&["plan", f, "--json"])).unwrap();
        assert_eq!(plan["summary"]["blocked"], 0, "{fx}: {plan:#}");
        assert!(
            plan["summary"]["change"].as_u64().unwrap() > 0,
            "{fx}: nothing to change"
        );
        step(&["apply", f]);
        // verify's exit 0: the host matches the profile.
        step(&["verify", f]);
        step(&["revert"]);
        assert_same_tree(&pristine, &snapshot(&fc.root), fx);
    }
}

#[test]
fn json_carries_the_same_profile_and_a_reason_per_key() {
    let fx = fixture("thesis-2s-mlx5");
    let state = scratch_dir();
    let t = ibtune(&fx, state.path(), &["suggest"]);
    let j = ibtune(&fx, state.path(), &["suggest", "--json"]);
    let f = ibtune(&fx, state.path(), &["suggest", "-f", "json"]);
    assert_eq!(j.stdout, f.stdout, "--json is -f json");
    let parsed: toml::Table = toml::from_str(&text(&t.stdout)).unwrap();
    let j: serde_json::Value = serde_json::from_slice(&j.stdout).unwrap();
    assert_eq!(j["schema"], "ibtune.suggest/1");
    assert_eq!(j["profile"], serde_json::to_value(&parsed).unwrap());
    assert!(j["why"]["cpuset[0].cpus"]
        .as_str()
        .unwrap()
        .contains("local to mlx5_0"));
    assert_eq!(j["layout"]["groups"][1]["hca"], "mlx5_1");
}

/// The thesis host's suggestion as a user reads it (the fixture's path
/// replaced, so the snapshot holds on any checkout).
#[test]
fn the_thesis_suggestion_reads_as_reviewed() {
    let fx = fixture("thesis-2s-mlx5");
    let state = scratch_dir();
    let o = ibtune(&fx, state.path(), &["suggest"]);
    assert_eq!(o.status.code(), Some(0));
    let toml = text(&o.stdout)
        .replace(&fx.canonicalize().unwrap().display().to_string(), "FIXTURE")
        .replace(&fx.display().to_string(), "FIXTURE");
    insta::assert_snapshot!("thesis_suggestion", toml);
}

#[test]
fn a_host_that_cannot_be_tuned_gets_a_reason_and_exit_3() {
    // No HCA (this-host): the reason names --hca none.
    let state = scratch_dir();
    let o = ibtune(&fixture("this-host"), state.path(), &["suggest"]);
    assert_eq!(o.status.code(), Some(3), "{o:?}");
    assert_eq!(text(&o.stdout), "", "a reason, not a profile");
    let e = text(&o.stderr);
    assert!(
        e.contains("no RDMA device found") && e.contains("--hca none"),
        "{e}"
    );

    // One CPU.
    let dir = scratch_dir();
    let cpu = dir.path().join("sys/devices/system/cpu");
    std::fs::create_dir_all(cpu.join("cpu0")).unwrap();
    std::fs::write(cpu.join("online"), "0\n").unwrap();
    let o = ibtune(dir.path(), state.path(), &["suggest", "--hca", "none"]);
    assert_eq!(o.status.code(), Some(3), "{o:?}");
    let e = text(&o.stderr);
    assert!(
        e.contains("1 online CPU (0)") && e.contains("at least two cores"),
        "{e}"
    );

    // More cores than a node can spare.
    let o = ibtune(
        &fixture("thesis-2s-mlx5"),
        state.path(),
        &["suggest", "--isolate", "12"],
    );
    assert_eq!(o.status.code(), Some(3), "{o:?}");
    let e = text(&o.stderr);
    assert!(
        e.contains("node 0") && e.contains("Ask for fewer: --isolate 11"),
        "{e}"
    );
}

#[test]
fn intent_the_host_or_profile_cannot_take_exits_2() {
    let fx = fixture("thesis-2s-mlx5");
    let state = scratch_dir();
    for (args, says) in [
        (
            &["suggest", "--hca", "mlx5_9"][..],
            "devices: mlx5_0, mlx5_1",
        ),
        (
            &["suggest", "--hca", "mlx5_0,mlx5_0"],
            "mlx5_0 is listed twice",
        ),
        (&["suggest", "--reserve", "99"], "not online"),
        (&["suggest", "--isolate", "0"], "--isolate auto"),
        (
            &["suggest", "--hugepage-pool", "4M:8"],
            "use 2M:COUNT or 1G:COUNT",
        ),
        (&["suggest", "--hugepage-pool", "8"], "SIZE:COUNT"),
        (&["suggest", "-f", "table"], "possible values: toml, json"),
    ] {
        let o = ibtune(&fx, state.path(), args);
        assert_eq!(o.status.code(), Some(2), "{args:?}: {o:?}");
        assert_eq!(text(&o.stdout), "", "{args:?}");
        assert!(
            text(&o.stderr).contains(says),
            "{args:?}: {}",
            text(&o.stderr)
        );
    }
}

/// On the machine the tests run on (a host no fixture describes): a
/// profile of isolated cores that plans with no warning of its own (the
/// host's own read problems, if any, are printed by both alike), or the
/// reason this host cannot be tuned.
#[test]
fn on_this_machine_a_profile_that_plans_clean_or_a_reason() {
    let state = scratch_dir();
    let live = Path::new("/");
    let o = ibtune(live, state.path(), &["suggest", "--hca", "none"]);
    match o.status.code() {
        Some(0) => {
            let file = state.path().join("suggested.toml");
            std::fs::write(&file, &o.stdout).unwrap();
            let plan = ibtune(live, state.path(), &["plan", file.to_str().unwrap()]);
            assert_eq!(plan.status.code(), Some(0), "{plan:?}");
            assert_eq!(text(&plan.stderr), text(&o.stderr), "plan warned");
        }
        Some(3) => {
            let e = text(&o.stderr);
            eprintln!("this machine cannot be tuned: {e}");
            assert!(e.contains("no profile for this host: "), "{e}");
        }
        _ => panic!("suggest on this machine: {o:?}"),
    }
}

/// `--hugepage-pool 2M:64` on the two-node thesis host: a `[[hugepages]]`
/// section on the isolated cores' nodes, which applies (64 pages on each
/// of them), verifies and reverts byte-identical.
#[test]
fn a_hugepage_pool_becomes_hugepages_on_the_isolated_nodes() {
    let fc = fixture_copy("thesis-2s-mlx5");
    let pristine = snapshot(&fc.root);
    let o = ibtune(
        &fc.root,
        &fc.state,
        &["suggest", "--hugepage-pool", "2M:64"],
    );
    assert_eq!(o.status.code(), Some(0), "{}", text(&o.stderr));
    let toml = text(&o.stdout);
    assert!(
        toml.contains("[[hugepages]]\n")
            && toml.contains("size = \"2M\"")
            && toml.contains("count = 64")
            && toml.contains("nodes = \"local\""),
        "{toml}"
    );
    let dir = scratch_dir();
    let file = dir.path().join("suggested.toml");
    std::fs::write(&file, &toml).unwrap();
    let f = file.to_str().unwrap();
    for args in [&["apply", f][..], &["verify", f], &["revert"]] {
        let o = ibtune(&fc.root, &fc.state, args);
        assert_eq!(
            o.status.code(),
            Some(0),
            "{args:?}: {}{}",
            text(&o.stdout),
            text(&o.stderr)
        );
        if args[0] == "apply" {
            for node in [0, 1] {
                let n = std::fs::read_to_string(fc.root.join(format!(
                    "sys/devices/system/node/node{node}/hugepages/hugepages-2048kB/nr_hugepages"
                )))
                .unwrap();
                assert_eq!(n, "64\n", "node {node}");
            }
        }
    }
    assert_same_tree(&pristine, &snapshot(&fc.root), "thesis-2s-mlx5");
}
