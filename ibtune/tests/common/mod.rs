//! Helpers shared by the integration tests that drive the `ibtune` binary
//! on a host tree.
//!
//! Each test file that says `mod common;` compiles its own copy.

use assert_cmd::Command;
use std::path::Path;
use std::time::Duration;

/// `ibtune --root ROOT --state-dir STATE ARGS`, bounded in time.
pub fn ibtune(root: &Path, state: &Path, args: &[&str]) -> std::process::Output {
    Command::cargo_bin("ibtune")
        .unwrap()
        .arg("--root")
        .arg(root)
        .arg("--state-dir")
        .arg(state)
        .args(args)
        .timeout(Duration::from_secs(60))
        .output()
        .unwrap()
}
