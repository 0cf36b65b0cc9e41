//! The exit codes of the three tools: one table, one meaning per code.
//!
//! Why it exists: scripts branch on exit codes, and a script that drives
//! ibtune, ibprobe and ibexporter must not learn three dialects (3 once
//! meant "run failed" in one tool, "rolled back" in another and "could not
//! start" in the third). Every tool takes its codes from [`Exit`], and
//! every top-level `--help` ends with [`help`], the same table; the manual
//! prints it too (`docs/exit-codes.md`, checked against [`TABLE`] by
//! `tests/tests/exit_codes.rs`).
//!
//! The rule behind the numbers: 0 done; 1 a check found what it checks
//! for; 2 nothing was done (bad input); 3 something failed and the host
//! is as it was found; 4 something failed and the host is NOT as found;
//! 5 the host was busy; 6 the measured command failed; 130 interrupted,
//! host restored.

/// Why a tool exits. `code()` is the process exit status.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Exit {
    /// Done. `ibtune verify`: the host matches the profile; ibexporter:
    /// stopped by SIGINT/SIGTERM, or `--check-config` passed.
    Ok,
    /// A check found what it checks for: `ibtune verify` saw drift, or a
    /// `--fail-if` threshold held (the report was printed).
    Check,
    /// Bad input (arguments, profile, config, file): nothing was run or
    /// changed.
    Input,
    /// The run or the change failed and the host is as it was found: a
    /// probe lost its peer or transport, an apply failed and was rolled
    /// back, the exporter could not start.
    Failed,
    /// A change or its undo failed part way and the host is NOT as found:
    /// the journal is kept; fix what the message names, then run the revert
    /// command it gives.
    NotRestored,
    /// Another ibtune held the host lock for all of `--lock-wait`; nothing
    /// was changed.
    Busy,
    /// The measured command (`ibtune experiment -- COMMAND`, `ibprobe
    /// compare -- CMD`) failed in every round of a variant, or printed no
    /// report; the host was restored.
    CommandFailed,
    /// Interrupted by SIGINT or SIGTERM: what was measured so far is
    /// printed and the host is restored.
    Interrupted,
}

/// Every code: the variant, its number, a short name and its meaning in
/// one line (what [`help`] and `docs/exit-codes.md` print).
pub const TABLE: &[(Exit, u8, &str)] = &[
    (
        Exit::Ok,
        0,
        "done (verify: the host matches; ibexporter: stopped by a signal)",
    ),
    (
        Exit::Check,
        1,
        "a check found what it looks for: drift (verify), a --fail-if threshold held",
    ),
    (
        Exit::Input,
        2,
        "bad input (arguments, profile, config, file): nothing run or changed",
    ),
    (
        Exit::Failed,
        3,
        "failed, host as found: peer lost, apply rolled back, exporter not started",
    ),
    (
        Exit::NotRestored,
        4,
        "failed, host NOT as found: fix what the message names, run the revert given",
    ),
    (
        Exit::Busy,
        5,
        "busy: another ibtune held the host lock all of --lock-wait; nothing changed",
    ),
    (
        Exit::CommandFailed,
        6,
        "the measured COMMAND failed in every round, or gave no report; host restored",
    ),
    (
        Exit::Interrupted,
        130,
        "interrupted (SIGINT/SIGTERM): results so far printed, host restored",
    ),
];

impl Exit {
    /// The process exit status.
    pub const fn code(self) -> u8 {
        match self {
            Exit::Ok => 0,
            Exit::Check => 1,
            Exit::Input => 2,
            Exit::Failed => 3,
            Exit::NotRestored => 4,
            Exit::Busy => 5,
            Exit::CommandFailed => 6,
            Exit::Interrupted => 130,
        }
    }

    /// The exit status as `i32`, for `std::process::exit` and child statuses.
    pub const fn status(self) -> i32 {
        self.code() as i32
    }
}

impl From<Exit> for std::process::ExitCode {
    fn from(e: Exit) -> Self {
        std::process::ExitCode::from(e.code())
    }
}

/// The table as every top-level `--help` ends: one line per code.
pub fn help() -> String {
    let mut s = String::from("Exit codes (the same in ibtune, ibprobe and ibexporter):\n");
    for (_, code, meaning) in TABLE {
        s.push_str(&format!("  {code:>3}  {meaning}\n"));
    }
    s.pop();
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The table and `code()` agree, every code once, in rising order.
    #[test]
    fn the_table_is_the_codes() {
        let mut last = None;
        for (e, code, meaning) in TABLE {
            assert_eq!(e.code(), *code, "{e:?}");
            assert!(last.is_none_or(|l| l < *code), "{e:?} out of order");
            assert!(!meaning.is_empty());
            last = Some(*code);
        }
        assert_eq!(TABLE.len(), 8);
    }

    #[test]
    fn help_lists_every_code() {
        let h = help();
        for (_, code, meaning) in TABLE {
            assert!(h.contains(&format!("{code:>3}  {meaning}")), "{h}");
        }
        assert_eq!(h.lines().count(), TABLE.len() + 1);
    }
}
