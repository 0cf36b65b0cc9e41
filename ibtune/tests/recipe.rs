//! The recipe `docs/recipes/tune-before-runs.md` run from its own text
//! (`ibtools_tests::recipe`) on a copy of the thesis host's fixture
//! (`tests/fixtures/thesis-2s-mlx5`, which has `mlx5_0`), with the
//! shipped `busy-poll-1hca` itself: show, plan, apply and verify, revert,
//! and the boot unit's start and stop. Asserted: plan changes nothing;
//! verify exits 0 after apply (the block fails otherwise); revert and the
//! unit's stop leave the tree byte-identical to the fixture.
//!
//! Step 4 (`ibtune run`) starts a process in this machine's cpusets, which
//! a fixture tree cannot give: it is not run here, and says so. The
//! `guest_v2` lab group (`tests/lab.rs`) runs the whole recipe, step 4
//! included, on a real cgroup v2 kernel with rxe0. Needs no root.

use ibtools_tests::recipe::{self, Mapping};
use std::path::Path;
use std::process::Command;

const IBTUNE: &str = env!("CARGO_BIN_EXE_ibtune");

#[test]
fn recipe_tune_before_runs_on_a_fixture_copy() {
    let name = "tune-before-runs";
    let blocks = recipe::blocks(&recipe::text(name));
    assert_eq!(
        blocks.len(),
        7,
        "{name}: show, plan, apply+verify, run, revert, enable+verify, disable; \
         its blocks changed: update this test"
    );
    let copy = ibtools_tests::fixture_copy("thesis-2s-mlx5");
    let pristine = ibtools_tests::snapshot(&copy.root);
    let repo = Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
    let map = Mapping::new()
        .unit(
            &Path::new(env!("CARGO_MANIFEST_DIR")).join("systemd/ibtune-profile@.service"),
            "ibtune",
            "busy-poll-1hca",
            "systemctl enable --now ibtune-profile@busy-poll-1hca",
            "systemctl disable --now ibtune-profile@busy-poll-1hca",
        )
        .note(
            "the host",
            "a copy of tests/fixtures/thesis-2s-mlx5 (2 sockets, mlx5_0 and mlx5_1): \
             every ibtune command gets `--root COPY --state-dir STATE` (a shell function)",
            "the CI host is not to be tuned; the lab tunes a real kernel",
        )
        .note(
            "ibtune installed, busy-poll-1hca in /usr/share/ibtune/profiles",
            "the built binary first on PATH, run from the checkout (a bare name is also \
             looked up in ./profiles)",
            "the binary and the profile under test",
        );
    eprintln!("{}", map.table(name));
    let texts: Vec<&str> = blocks.iter().map(|b| b.code.as_str()).collect();
    map.assert_each_row_used(name, &texts);

    let prelude = format!(
        "export PATH={}:$PATH\nibtune() {{ command ibtune --root {} --state-dir {} \"$@\"; }}\n",
        Path::new(IBTUNE).parent().expect("a bin dir").display(),
        copy.root.display(),
        copy.state.display()
    );
    let run = |i: usize| {
        let b = &blocks[i];
        let out = Command::new("bash")
            .arg("-c")
            .arg(format!("{prelude}{}", map.script(b)))
            .current_dir(&repo)
            .output()
            .expect("bash");
        let said = format!(
            "{}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
        eprintln!("-- line {}:\n{said}", b.line);
        assert!(
            out.status.success(),
            "the block on line {} failed ({}):\n{}\n--- it said:\n{said}",
            b.line,
            out.status,
            b.code
        );
        said
    };
    let tree = || ibtools_tests::snapshot(&copy.root);

    let show = run(0);
    assert!(show.contains("mlx5_0"), "{show}");
    let plan = run(1);
    assert!(plan.contains("cpuset.cpus.partition"), "{plan}");
    ibtools_tests::assert_same_tree(&pristine, &tree(), "after plan");
    let applied = run(2);
    assert!(
        applied.contains("ok: host matches profile busy-poll-1hca"),
        "{applied}"
    );
    assert_ne!(tree(), pristine, "apply changed nothing");
    eprintln!(
        "-- line {} not run here: `ibtune run` starts its command in this machine's \
         cpusets, which a fixture cannot give; the guest_v2 lab group runs it",
        blocks[3].line
    );
    run(4);
    ibtools_tests::assert_same_tree(&pristine, &tree(), "after revert");
    let started = run(5);
    assert!(
        started.contains("ok: host matches profile busy-poll-1hca"),
        "{started}"
    );
    assert_ne!(tree(), pristine, "the unit's start changed nothing");
    run(6);
    ibtools_tests::assert_same_tree(&pristine, &tree(), "after the unit's stop");
}
