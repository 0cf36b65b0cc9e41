//! Exit codes, for scripts: the toolkit's one table (`ibhost::exit`), which
//! every top-level `--help` prints.

use ibhost::exit::Exit;

/// Success; for `verify`, the host matches the profile.
pub const OK: i32 = Exit::Ok.status();
/// `verify`: the host drifted from the profile; `apply`: done, but the
/// kernel granted fewer huge pages than asked.
pub const DRIFT: i32 = Exit::Check.status();
/// Error: bad arguments or profile, missing privileges, unreadable host.
/// Nothing was changed.
pub const ERROR: i32 = Exit::Input.status();
/// `apply` failed part way and rolled back everything it had changed.
pub const ROLLED_BACK: i32 = Exit::Failed.status();
/// `suggest`: the host cannot be tuned as asked (one CPU, no HCA, no
/// cpuset controller, a node without cores to spare); the reason is printed,
/// nothing was changed.
pub const CANNOT_TUNE: i32 = Exit::Failed.status();
/// `apply` or `revert` failed and could not restore everything; the
/// journal is kept: fix the cause the message names and run the revert
/// command it gives.
pub const INCOMPLETE: i32 = Exit::NotRestored.status();
/// `apply` or `revert`: another ibtune held the host lock (a lock on
/// the `--root` folder) for all of `--lock-wait`; nothing was changed.
pub const LOCKED: i32 = Exit::Busy.status();
/// `experiment`: COMMAND failed in every round of some variant, or printed
/// no report (the host was restored).
pub const COMMAND_FAILED: i32 = Exit::CommandFailed.status();
/// Stopped by SIGINT, SIGTERM or SIGHUP (host restored).
pub const INTERRUPTED: i32 = Exit::Interrupted.status();

/// The exit code of an apply that went through: [`DRIFT`] when reading the
/// huge page counts back found fewer than written (the kernel does that
/// silently), else [`OK`].
pub fn of_apply(rep: &crate::tune::engine::ApplyReport) -> i32 {
    if rep.short.is_empty() {
        OK
    } else {
        DRIFT
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_apply_the_kernel_granted_in_part_exits_1() {
        let mut rep = crate::tune::engine::ApplyReport {
            changed: vec!["hugepages/node0/2M".into()],
            unchanged: 0,
            advice: 0,
            short: Vec::new(),
            journal: "j".into(),
        };
        assert_eq!(of_apply(&rep), 0);
        rep.short
            .push("node 0: 2M hugepages: 300 of 512 allocated: ...".into());
        assert_eq!(of_apply(&rep), 1);
    }
}
