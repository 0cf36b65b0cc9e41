//! The progress bar of the long commands (sweep, compare, and `ibtune
//! experiment`), on stderr so it never mixes with a report on stdout.

/// A progress bar on stderr of `len` steps named `unit` ("cells",
/// "runs"), hidden with `quiet` or when stderr is not a terminal.
pub fn progress_bar(quiet: bool, len: u64, unit: &str) -> indicatif::ProgressBar {
    use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};
    use std::io::IsTerminal as _;
    if quiet || !std::io::stderr().is_terminal() {
        return ProgressBar::hidden();
    }
    let style = ProgressStyle::with_template(&format!(
        "{{spinner}} [{{elapsed_precise}}] {{bar:32}} {{pos}}/{{len}} {unit} (eta {{eta}}) {{msg}}"
    ))
    .unwrap_or_else(|_| ProgressStyle::default_bar());
    ProgressBar::with_draw_target(Some(len), ProgressDrawTarget::stderr()).with_style(style)
}
