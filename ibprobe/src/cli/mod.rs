//! The command line, a thin layer over the library: `args.rs` (every clap
//! type and its conversion into typed settings), `common.rs` (what the
//! probing commands share), `error.rs` (exit codes), and one file per
//! command, each reading settings -> channel -> run -> print.

pub mod args;
mod client;
mod common;
mod compare;
mod devices;
mod error;
mod host;
mod loggp;
mod loopback;
mod server;
mod stream;
mod sweep;

use std::process::ExitCode;

use clap::Parser;

pub use args::{parse_duration, Cli, Command};
pub use error::{CliError, EXIT_INPUT, EXIT_INTERRUPTED, EXIT_RUN, EXIT_THRESHOLD};

/// Turns clap's multi-line error into the one line this tool promises.
fn one_line(e: &clap::Error) -> String {
    use clap::error::{ContextKind, ContextValue};
    let get = |k| e.get(k).map(|v: &ContextValue| v.to_string());
    let arg =
        get(ContextKind::InvalidArg).map(|a| a.split_whitespace().next().unwrap_or("").to_string());
    let value = get(ContextKind::InvalidValue);
    let valid = get(ContextKind::ValidValue);
    let rendered = e.render().to_string();
    // The first paragraph (clap puts details such as the missing argument
    // on the following lines), joined into one line.
    let first = rendered
        .lines()
        .take_while(|l| !l.trim().is_empty())
        .map(str::trim)
        .collect::<Vec<_>>()
        .join(" ")
        .trim_start_matches("error: ")
        .to_string();
    match (arg, value, valid) {
        (Some(a), Some(v), Some(ok)) => {
            format!("invalid value {v:?} for {a}: use one of {ok} (see ibprobe --help)")
        }
        _ => format!("{first} (see ibprobe --help)"),
    }
}

/// Old spellings still accepted, with a warning (`ibhost::renamed`).
const RENAMED: &[ibhost::renamed::Renamed] = &[ibhost::renamed::Renamed {
    old: "--interval",
    new: "--period",
    command: "ibprobe host",
}];

pub fn main() -> ExitCode {
    // `ibprobe --generate-docs DIR`: man pages and completions (scripts/package).
    if let Some(dir) = ibdoc::requested() {
        return ExitCode::from(ibdoc::run(<Cli as clap::CommandFactory>::command(), &dir));
    }
    ibhost::renamed::warn(RENAMED);
    let cli = match Cli::try_parse() {
        Ok(c) => c,
        Err(e) => {
            use clap::error::ErrorKind::*;
            let help = matches!(e.kind(), DisplayHelp | DisplayVersion);
            if help || e.kind() == DisplayHelpOnMissingArgumentOrSubcommand {
                let _ = e.print();
                return ExitCode::from(if help { 0 } else { EXIT_INPUT });
            }
            eprintln!("ibprobe: {}", one_line(&e));
            return ExitCode::from(EXIT_INPUT);
        }
    };
    let result = match cli.command {
        Command::Devices { json } => devices::run(json),
        Command::Loopback(a) => loopback::run(&a),
        Command::Server(a) => server::run(&a),
        Command::Client(a) => client::run(&a),
        Command::Stream(a) => stream::run(&a),
        Command::Sweep(a) => sweep::run(&a),
        Command::Host(a) => host::run(&a),
        Command::Compare(a) => compare::run(&a),
        Command::Loggp(a) => loggp::run(&a),
    };
    match result {
        Ok(code) => ExitCode::from(code),
        Err(e) => {
            eprintln!("ibprobe: {}", e.message.replace('\n', " "));
            ExitCode::from(e.code)
        }
    }
}
