//! A minimal front end for [`ibtune::tune::hold::hold`], with the same
//! command line as the real CLI: `ibtune_hold --root DIR hold --us N
//! [--pidfile FILE]`.
//!
//! Why it exists: signals are process-wide, so the holder can only be tested
//! as a separate process. This lets `tests/hold.rs` (and anyone trying the
//! holder by hand) run it, and pass it to `spawn_holder`, independently of
//! the main CLI. Its name contains "ibtune" and it takes a "hold" argument,
//! so `stop_holder` recognizes it.

use clap::{Parser, Subcommand};
use ibtune::host::HostRoot;
use std::path::PathBuf;

#[derive(Parser)]
struct Args {
    /// Host root: / for this machine, or a snapshot directory.
    #[arg(long, default_value = "/")]
    root: PathBuf,
    #[command(subcommand)]
    cmd: Cmd,
}

#[derive(Subcommand)]
enum Cmd {
    /// Hold /dev/cpu_dma_latency until SIGTERM or SIGINT.
    Hold {
        /// Latency in microseconds.
        #[arg(long)]
        us: i32,
        /// Written once the value is in place, removed on exit.
        #[arg(long)]
        pidfile: Option<PathBuf>,
    },
}

fn main() -> anyhow::Result<()> {
    let args = Args::parse();
    let root = HostRoot::new(&args.root)?;
    match args.cmd {
        Cmd::Hold { us, pidfile } => ibtune::tune::hold::hold(&root, us, pidfile.as_deref()),
    }
}
