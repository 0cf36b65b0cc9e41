//! How a command fails: its exit code and one line for stderr. Its own
//! file so that every command's file takes these from here, not through
//! `mod.rs`, which calls the commands.

use ibhost::exit::Exit;

/// Exit code: bad input, nothing run (the toolkit's table: `ibhost::exit`).
pub const EXIT_INPUT: u8 = Exit::Input.code();
/// Exit code: the run failed (peer lost, transport error).
pub const EXIT_RUN: u8 = Exit::Failed.code();
/// Exit code: a `--fail-if` threshold holds (the report was printed).
pub const EXIT_THRESHOLD: u8 = Exit::Check.code();
/// Exit code: `compare -- CMD` failed in every round of a value.
pub const EXIT_COMMAND: u8 = Exit::CommandFailed.code();
/// Exit code: interrupted by SIGINT/SIGTERM (after printing the statistics).
pub const EXIT_INTERRUPTED: u8 = Exit::Interrupted.code();

/// A CLI failure: the exit code and one line for stderr (what, with what
/// input, what to do).
#[derive(Debug)]
pub struct CliError {
    pub code: u8,
    pub message: String,
}

impl CliError {
    fn new(code: u8, m: impl Into<String>) -> CliError {
        CliError {
            code,
            message: m.into(),
        }
    }
    /// Bad input (exit 2).
    pub fn input(m: impl Into<String>) -> CliError {
        CliError::new(EXIT_INPUT, m)
    }
    /// The measured command failed in every round (exit 6).
    pub fn command(m: impl Into<String>) -> CliError {
        CliError::new(EXIT_COMMAND, m)
    }
    /// The run failed (exit 3).
    pub fn run(m: impl Into<String>) -> CliError {
        CliError::new(EXIT_RUN, m)
    }
    /// Bad input (exit 2) when `input`, else a failed run (3).
    pub fn input_if(input: bool, m: impl Into<String>) -> CliError {
        CliError::new(if input { EXIT_INPUT } else { EXIT_RUN }, m)
    }
    /// A run against a peer that failed part way names the peer: a
    /// completion error such as "remote operation error" is most often its
    /// side (it died, or its queue pair broke), which the line alone
    /// does not say.
    pub fn against_peer(mut self, peer: &str) -> CliError {
        if self.code == EXIT_RUN {
            self.message = format!("{} (peer {peer})", self.message);
        }
        self
    }
}

/// A refused configuration is bad input.
impl From<crate::spec::SpecError> for CliError {
    fn from(e: crate::spec::SpecError) -> CliError {
        CliError::input(e.0)
    }
}

impl From<crate::probe::config::ConfigError> for CliError {
    fn from(e: crate::probe::config::ConfigError) -> CliError {
        CliError::input(e.0)
    }
}
