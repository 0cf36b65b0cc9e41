//! Every `--help` text of `ibprobe`, snapshotted (insta, in
//! `tests/snapshots/`), so a change of what users read is a reviewed
//! change: a reshaping of the code must leave these files as they are,
//! a new option updates them in the same commit (`cargo insta review`,
//! or `INSTA_UPDATE=always cargo test -p ibprobe --test help`).

use assert_cmd::Command;

fn help(args: &[&str]) -> String {
    let out = Command::cargo_bin("ibprobe")
        .unwrap()
        .args(args)
        .env("COLUMNS", "100")
        .output()
        .unwrap();
    assert!(out.status.success(), "ibprobe {args:?}: {out:?}");
    String::from_utf8(out.stdout).unwrap()
}

#[test]
fn help_texts_are_as_snapshotted() {
    insta::assert_snapshot!("ibprobe", help(&["--help"]));
    for sub in [
        "devices", "loopback", "server", "client", "stream", "sweep", "host", "compare", "loggp",
    ] {
        insta::assert_snapshot!(format!("ibprobe-{sub}"), help(&[sub, "--help"]));
        insta::assert_snapshot!(format!("ibprobe-{sub}-short"), help(&[sub, "-h"]));
    }
}
