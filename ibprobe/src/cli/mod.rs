//! The command line: `ibprobe devices | loopback | server | client | sweep | host`.

use std::process::ExitCode;

/// Entry point of the `ibprobe` binary.
pub fn main() -> ExitCode {
    eprintln!("ibprobe: under construction (issue 4)");
    ExitCode::from(2)
}
