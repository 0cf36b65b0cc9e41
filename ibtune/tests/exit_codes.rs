//! ibtune's exit codes that no other test reaches from the command line:
//! 3, an apply that failed part way and rolled back (host as found). The
//! others are checked where their cause is (`docs/exit-codes.md` lists the
//! test behind every code of every tool).

use std::process::Command;

use ibtools_tests::{assert_same_tree, copy_tree, fixture, profile, snapshot, Immutable};

/// A write that fails after 15 changes: the apply undoes them all, newest
/// first, exits 3 with one line naming the file, and the tree is
/// byte-identical to before with no journal left open.
#[test]
fn an_apply_that_fails_part_way_rolls_back_and_exits_3() {
    let tmp = tempfile::tempdir().unwrap();
    let root = tmp.path().join("root");
    copy_tree(&fixture("thesis-2s-mlx5"), &root).unwrap();
    let state = tmp.path().join("state");
    let irq = root.join("proc/irq/91/smp_affinity_list");
    let before = snapshot(&root);
    let Some(_guard) = Immutable::set(&irq) else {
        let why = "chattr +i is refused here (not root, or a filesystem without the attribute)";
        ibtools_tests::skip("an_apply_that_fails_part_way_rolls_back_and_exits_3", why);
        return;
    };
    let out = Command::new(env!("CARGO_BIN_EXE_ibtune"))
        .arg("--root")
        .arg(&root)
        .arg("--state-dir")
        .arg(&state)
        .arg("apply")
        .arg(profile("thesis-2hca"))
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(
        out.status.code(),
        Some(ibhost::exit::Exit::Failed.status()),
        "{err}"
    );
    assert!(err.contains("proc/irq/91/smp_affinity_list"), "{err}");
    assert!(err.contains("rolled back"), "{err}");
    drop(_guard);
    assert_same_tree(&before, &snapshot(&root), "after a rolled-back apply");
    // Nothing to revert: the journal was closed by the rollback.
    let out = Command::new(env!("CARGO_BIN_EXE_ibtune"))
        .arg("--root")
        .arg(&root)
        .arg("--state-dir")
        .arg(&state)
        .arg("revert")
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(0), "{out:?}");
    assert_same_tree(&before, &snapshot(&root), "after revert");
}
