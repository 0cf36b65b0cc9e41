//! `ibtune`: see `ibtune --help` and the [`ibtune::cli`] module.

use clap::Parser;

fn main() {
    let cli = ibtune::cli::Cli::parse();
    std::process::exit(ibtune::cli::main_with(cli));
}
