//! How a command fails: its exit code and one line for stderr. Its own
//! file so that every command's file takes these from here, not through
//! `mod.rs`, which calls the commands.

/// Exit code: bad input.
pub const EXIT_INPUT: u8 = 2;
/// Exit code: the run failed.
pub const EXIT_RUN: u8 = 3;
/// Exit code: a `--fail-if` threshold holds (the report was printed).
pub const EXIT_THRESHOLD: u8 = 4;
/// Exit code: interrupted by Ctrl-C (after printing the statistics).
pub const EXIT_INTERRUPTED: u8 = 130;

/// A CLI failure: the exit code and one line for stderr.
#[derive(Debug)]
pub struct CliError {
    /// 2 (bad input) or 3 (run failed).
    pub code: u8,
    /// One line: what, with what input, what to do.
    pub message: String,
}

impl CliError {
    /// Bad input (exit 2).
    pub fn input(m: impl Into<String>) -> CliError {
        CliError {
            code: EXIT_INPUT,
            message: m.into(),
        }
    }
    /// The run failed (exit 3).
    pub fn run(m: impl Into<String>) -> CliError {
        CliError {
            code: EXIT_RUN,
            message: m.into(),
        }
    }
}
