//! The progress bar of the long commands, on stderr so it never mixes
//! with a report on stdout. A measured run's bar ([`run_bar`]) is drawn at
//! its phase boundaries and interval ends, never per message, so the
//! measuring loop does not pay for it.

use crate::probe::config::Length;

/// A progress bar on stderr of `len` steps named `unit` ("cells",
/// "runs"), hidden with `quiet` or when stderr is not a terminal.
pub fn progress_bar(quiet: bool, len: u64, unit: &str) -> indicatif::ProgressBar {
    use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};
    use std::io::IsTerminal as _;
    if quiet || !std::io::stderr().is_terminal() {
        return ProgressBar::with_draw_target(Some(len), ProgressDrawTarget::hidden());
    }
    let style = ProgressStyle::with_template(&format!(
        "{{spinner}} [{{elapsed_precise}}] {{bar:32}} {{pos}}/{{len}} {unit} (eta {{eta}}) {{msg}}"
    ))
    .unwrap_or_else(|_| ProgressStyle::default_bar());
    ProgressBar::with_draw_target(Some(len), ProgressDrawTarget::stderr()).with_style(style)
}

/// The bar of one measured run: the measured part's length (messages, or
/// ms of a `--duration`), its first phase ("warm-up: N messages") as the
/// message; hidden as [`progress_bar`] is. Returns the bar and whether it
/// counts ms (else messages).
pub fn run_bar(quiet: bool, length: Length, warmup: u64) -> (indicatif::ProgressBar, bool) {
    let (len, unit, by_time) = match length {
        Length::Count(n) => (n, "messages", false),
        Length::Duration(d) => (d.as_millis() as u64, "ms", true),
    };
    let bar = progress_bar(quiet, len, unit);
    bar.set_message(phase_message(Some(warmup)));
    (bar, by_time)
}

/// The phase a run's bar shows: the warm-up (`Some(n)`) or the measured part.
pub fn phase_message(warmup: Option<u64>) -> String {
    match warmup {
        Some(n) if n > 0 => format!("warm-up: {n} messages"),
        _ => "measuring".to_string(),
    }
}
