//! The one way a test of this workspace skips: it says so, and CI notices.
//!
//! A test that cannot run where it is (not root, no SCHED_FIFO, no huge
//! pages, an RDMA device present where it wants none ...) calls
//! [`skip`] and returns. The skip is never silent: `SKIPPED <test>: <why>`
//! goes to the process's stderr, past libtest's capture, so it shows in
//! every run, and `scripts/test-all` counts those lines in its closing
//! totals. Under `CI=true` a skip fails the test unless [`EXPECTED`]
//! lists it with the reason CI's machine cannot run it.
//!
//! Every test crate of the workspace dev-depends on this crate (it depends
//! on no workspace crate, so there is no cycle), unit tests in `src/`
//! included: there is one definition.

use std::io::Write;

/// The skips CI expects (CI runs as root on Debian 12, in a machine with
/// no RDMA device and whose huge pages and PMU are not ours to count on):
/// the test's name and why CI cannot run it. Any other skip under
/// `CI=true` is a failure.
pub const EXPECTED: &[(&str, &str)] = &[
    (
        "hugepages_when_reserved",
        "the kernel may find no two free contiguous huge pages, or CI's /proc/sys may be read-only",
    ),
    (
        "hugepages_without_a_reservation_name_nr_hugepages",
        "huge pages may be held or overcommitted by others on CI's machine, or /proc/sys read-only",
    ),
    (
        "without_the_privilege_exit_2_with_one_line",
        "nobody cannot execute a test binary under a checkout only root may enter (e.g. /root)",
    ),
    (
        "perf_counters_refused_as_nobody_at_paranoid_3",
        "nobody cannot execute a test binary under a checkout only root may enter (e.g. /root)",
    ),
];

/// Says `SKIPPED <test>: <why>` on stderr and returns true, so a test
/// reads `if !possible && skip("name", "why") { return; }`. Under `CI=true` it panics instead unless [`EXPECTED`]
/// lists `test`.
pub fn skip(test: &str, why: &str) -> bool {
    if std::env::var("CI").as_deref() == Ok("true") && !EXPECTED.iter().any(|(t, _)| *t == test) {
        panic!("unexpected skip under CI=true: {test}: {why} (ibtools_tests::skip::EXPECTED lists the expected ones)");
    }
    // Straight to the stream: libtest captures eprintln! of passing tests,
    // and a skip must show.
    let _ = writeln!(std::io::stderr(), "SKIPPED {test}: {why}");
    true
}

/// Whether this process runs as root (effective uid 0, from /proc: this
/// crate binds no libc).
pub fn is_root() -> bool {
    std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|s| {
            s.lines()
                .find_map(|l| l.strip_prefix("Uid:"))
                .and_then(|l| l.split_whitespace().nth(1).map(|u| u == "0"))
        })
        .unwrap_or(false)
}

/// Whether `chrt -f PRIORITY` may run a program here (SCHED_FIFO: root,
/// CAP_SYS_NICE or an RLIMIT_RTPRIO of at least `priority`).
pub fn chrt_fifo_allowed(priority: u32) -> bool {
    std::process::Command::new("chrt")
        .args(["-f", &priority.to_string(), "true"])
        .status()
        .is_ok_and(|s| s.success())
}

/// True when root; otherwise skips `test` saying it needs root for
/// `what`, and returns false.
pub fn root_or_skip(test: &str, what: &str) -> bool {
    if is_root() {
        return true;
    }
    skip(test, &format!("needs root ({what}); not root here"));
    false
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::process::Command;

    /// Set in the child runs of `a_skip_says_why_and_fails_under_ci_unless_expected`.
    const CHILD: &str = "IBTOOLS_SKIP_SELF_TEST";

    /// Skips as the test named in CHILD; does nothing in a normal run.
    #[test]
    fn skipping_child() {
        if let Ok(test) = std::env::var(CHILD) {
            skip(&test, "the self-test's reason");
        }
    }

    /// This test binary's `skipping_child`, skipping as `test`, with or
    /// without `CI=true`: (passed, stderr).
    fn child(test: &str, ci: bool) -> (bool, String) {
        let mut c = Command::new(std::env::current_exe().unwrap());
        c.args(["--exact", "skip::tests::skipping_child", "--test-threads=1"])
            .env(CHILD, test)
            .env_remove("CI");
        if ci {
            c.env("CI", "true");
        }
        let out = c.output().unwrap();
        let all = String::from_utf8_lossy(&out.stdout).to_string()
            + &String::from_utf8_lossy(&out.stderr);
        (out.status.success(), all)
    }

    #[test]
    fn a_skip_says_why_and_fails_under_ci_unless_expected() {
        // Shown past libtest's capture, the test passes.
        let (ok, err) = child("some_test", false);
        assert!(ok, "{err}");
        assert!(
            err.contains("SKIPPED some_test: the self-test's reason"),
            "{err}"
        );
        // Under CI an unlisted skip fails, naming it.
        let (ok, err) = child("some_test", true);
        assert!(!ok, "{err}");
        assert!(
            err.contains("unexpected skip under CI=true: some_test"),
            "{err}"
        );
        // A listed one is a skip there too.
        let (listed, _) = EXPECTED[0];
        let (ok, err) = child(listed, true);
        assert!(ok, "{err}");
        assert!(err.contains(&format!("SKIPPED {listed}: ")), "{err}");
    }

    #[test]
    fn every_expected_skip_has_a_reason_and_is_listed_once() {
        for (i, (t, why)) in EXPECTED.iter().enumerate() {
            assert!(!why.is_empty() && !t.is_empty());
            assert!(EXPECTED[i + 1..].iter().all(|(u, _)| u != t), "{t} twice");
        }
    }
}
