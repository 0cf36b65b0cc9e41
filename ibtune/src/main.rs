//! `ibtune`: see `ibtune --help` and the [`ibtune::cli`] module.

use clap::Parser;

fn main() {
    // `ibtune --generate-docs DIR`: man pages and completions (scripts/package).
    if let Some(dir) = ibdoc::requested() {
        let cmd = <ibtune::cli::Cli as clap::CommandFactory>::command();
        std::process::exit(i32::from(ibdoc::run(cmd, &dir)));
    }
    ibhost::renamed::warn(ibtune::cli::RENAMED);
    let cli = ibtune::cli::Cli::parse();
    std::process::exit(ibtune::cli::main_with(cli));
}
