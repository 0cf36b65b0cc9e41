//! `ibprobe compare`: did this option's value help? One ibprobe command,
//! run with each value of one option in interleaved rounds, compared by
//! [`ibstats`] (see its Methods) and printed by
//! [`crate::report::compare`].
//!
//! Why child processes: each round is the command exactly as a user would
//! run it (fresh process, channel and clock calibration), a failed round
//! cannot take the comparison down, and any option can be varied without a
//! second path from flags to settings (it is checked against the command's
//! own clap definition). Each round runs in its own process group
//! ([`ibhost::child`]): a stop signal is forwarded to it, and compare
//! reports the rounds done. Exit codes: `COMPARE_AFTER_HELP` (`args.rs`).

use std::process::Command as Process;

use ibhost::child::{self, Ending};

use clap::CommandFactory as _;

use super::args::{Cli, CompareArgs};
use super::error::{CliError, EXIT_INPUT, EXIT_INTERRUPTED};
use crate::report::compare::{
    coarser, round_resolution, round_values, CompareReport, RoundValues, SamplingIntervals,
    METRICS, ROUND_SCHEMAS,
};
use crate::report::progress::progress_bar;
use crate::report::{effects_plot, hdrlog};

/// The commands whose JSON report compare reads.
const COMMANDS: [&str; 3] = ["loopback", "client", "stream"];
/// Options that choose how a run prints, not what it measures.
const NOT_VARIED: [&str; 6] = ["format", "json", "plot", "hdr-log", "log-interval", "help"];

/// The option varied: its spellings in the command and how a value is passed.
struct Varied {
    long: String,
    /// A flag without a value: varied as on/off.
    flag: bool,
    values: Vec<String>,
}

impl Varied {
    /// The arguments that set `value` (a flag: present when on).
    fn args(&self, value: &str) -> Vec<String> {
        let long = format!("--{}", self.long);
        match (self.flag, value) {
            (false, v) => vec![long, v.to_string()],
            (true, "on") => vec![long],
            (true, _) => vec![],
        }
    }
}

/// Checks `--vary` against the command's own options.
fn varied(a: &CompareArgs) -> Result<Varied, CliError> {
    let cmd_name = a.command.first().map(String::as_str).unwrap_or("");
    if a.vary.is_some() && a.command.is_empty() {
        return Err(CliError::input(
            "--vary needs the command to run after --, e.g. ibprobe compare --vary transport=shm,udp -- loopback --count 5000",
        ));
    }
    if !COMMANDS.contains(&cmd_name) && a.vary.is_some() {
        return Err(CliError::input(format!(
            "compare runs {}, not {cmd_name:?}: e.g. ibprobe compare --vary transport=shm,udp -- loopback --count 5000",
            COMMANDS.join(", ")
        )));
    }
    let vary = a.vary.as_deref().ok_or_else(|| {
        CliError::input(
            "compare needs --vary OPTION=A,B and a command after --, or two saved reports; e.g. ibprobe compare --vary transport=shm,udp -- loopback",
        )
    })?;
    let (name, list) = vary.split_once('=').ok_or_else(|| {
        CliError::input(format!(
            "--vary {vary:?}: write OPTION=V1,V2[,...], e.g. --vary transport=shm,udp"
        ))
    })?;
    let name = name.trim().trim_start_matches("--");
    let values: Vec<String> = list.split(',').map(|v| v.trim().to_string()).collect();
    if values.len() < 2 || values.iter().any(String::is_empty) {
        return Err(CliError::input(format!(
            "--vary {vary}: give at least two non-empty values, the first being the baseline, e.g. --vary {name}=A,B"
        )));
    }
    if let Some((_, v)) = values
        .iter()
        .enumerate()
        .find(|(i, v)| values[..*i].contains(v))
    {
        return Err(CliError::input(format!(
            "--vary {vary}: the value {v} is given twice; list each value once"
        )));
    }
    let top = Cli::command();
    let sub = top
        .find_subcommand(cmd_name)
        .ok_or_else(|| CliError::input(format!("no ibprobe command {cmd_name}")))?;
    let known: Vec<&str> = sub
        .get_arguments()
        .filter_map(|x| x.get_long())
        .filter(|l| !NOT_VARIED.contains(l))
        .collect();
    let arg = sub
        .get_arguments()
        .find(|x| x.get_long() == Some(name))
        .filter(|_| !NOT_VARIED.contains(&name))
        .ok_or_else(|| {
            CliError::input(format!(
                "--vary {name}: ibprobe {cmd_name} has no option --{name} that changes a measurement; options: {}",
                known.join(", ")
            ))
        })?;
    let flag = !arg.get_action().takes_values();
    if flag && values.iter().any(|v| v != "on" && v != "off") {
        return Err(CliError::input(format!(
            "--vary {vary}: --{name} is a flag without a value; vary it as {name}=off,on"
        )));
    }
    let short = arg.get_short();
    // The command must not set the option itself, nor the output format.
    for tok in &a.command[1..] {
        let sets = |long: &str, short: Option<char>| {
            tok == &format!("--{long}")
                || tok.starts_with(&format!("--{long}="))
                || short.is_some_and(|c| {
                    tok.len() >= 2
                        && tok.starts_with('-')
                        && !tok.starts_with("--")
                        && tok[1..].starts_with(c)
                })
        };
        if sets(name, short) {
            return Err(CliError::input(format!(
                "--vary {name}: the command already sets it ({tok}); remove it after --, compare sets it per round"
            )));
        }
        if sets("format", Some('f')) || sets("json", None) {
            return Err(CliError::input(format!(
                "the command sets its output ({tok}); remove it after --: compare reads the command's JSON itself (use compare's own --format)"
            )));
        }
    }
    Ok(Varied {
        long: name.to_string(),
        flag,
        values,
    })
}

/// The most bytes of a round's stdout kept: its report with histograms is
/// a few tens of KiB. A round that prints more has no report.
const MAX_ROUND_REPORT: usize = 16 << 20;

/// Bytes of a round's stderr kept at its start and end, for the line quoted.
const ROUND_STDERR_KEEP: usize = 4096;

/// What one round of the command gave.
enum Round {
    /// Its figures, and its clock's resolution (ns) when it says.
    Values(RoundValues, Option<f64>),
    /// The command failed (exit 3 or a crash): the round is left out.
    Failed(String),
    Interrupted,
}

/// Runs the command once with `value`.
fn run_round(a: &CompareArgs, var: &Varied, value: &str) -> Result<Round, CliError> {
    let exe = std::env::current_exe().map_err(|e| {
        CliError::run(format!(
            "cannot find this ibprobe binary to run rounds: {e}"
        ))
    })?;
    let limits = child::Limits {
        stdout_max: MAX_ROUND_REPORT,
        stderr_keep: ROUND_STDERR_KEEP,
        timeout: None,
        grace: child::GRACE,
    };
    let out = child::run(
        Process::new(&exe)
            .args(&a.command)
            .args(var.args(value))
            .arg("--json"),
        &limits,
        &child::stop_signal,
    )
    .map_err(|e| CliError::run(format!("cannot run {}: {e}", exe.display())))?;
    if let Ending::Stopped(_) = out.ending {
        return Ok(Round::Interrupted);
    }
    let first_err = out.stderr.first_line();
    match out.status.code() {
        Some(c) if c == i32::from(EXIT_INPUT) => {
            return Err(CliError::input(format!(
                "--vary {}={value}: ibprobe {} refused it: {}",
                var.long,
                a.command[0],
                first_err.trim_start_matches("ibprobe: ")
            )))
        }
        Some(c) if c == i32::from(EXIT_INTERRUPTED) => return Ok(Round::Interrupted),
        Some(0) => {}
        other => {
            return Ok(Round::Failed(format!(
                "exit {}: {first_err}",
                other.map_or("by a signal".to_string(), |c| c.to_string())
            )))
        }
    }
    let doc: Option<serde_json::Value> = out
        .stdout
        .all()
        .and_then(|b| serde_json::from_slice(b).ok());
    match doc.as_ref().and_then(round_values) {
        Some(v) => Ok(Round::Values(v, doc.as_ref().and_then(round_resolution))),
        None => Err(CliError::input(format!(
            "ibprobe {} printed no {ROUND_SCHEMAS} JSON ({} bytes); its first line: {:?}",
            a.command[0],
            out.stdout.total(),
            out.stdout.first_line()
        ))),
    }
}

/// `ibprobe compare`: checks, runs the rounds (or reads two saved
/// reports), prints; the exit code.
pub fn run(a: &CompareArgs) -> Result<u8, CliError> {
    if !a.reports.is_empty() {
        return saved(a);
    }
    if a.rounds < 2 {
        return Err(CliError::input(format!(
            "--rounds {}: a comparison needs at least 2 rounds (6 or more for a verdict, 10 recommended)",
            a.rounds
        )));
    }
    let var = varied(a)?;
    // A stop signal is forwarded to the round running (an ibprobe prints
    // what it has on Ctrl-C); compare outlives it to compare the rounds done.
    child::stop_on_signals()
        .map_err(|e| CliError::run(format!("cannot install the Ctrl-C handler: {e}")))?;
    let seed = a.seed.unwrap_or_else(|| {
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(1, |d| d.as_nanos() as u64)
    });
    let n = var.values.len();
    let order = ibstats::schedule(n, a.rounds as usize, seed);
    let bar = progress_bar(a.output.quiet, (n * order.len()) as u64, "runs");
    let mut values: Vec<Vec<RoundValues>> = vec![Vec::new(); n];
    let mut resolution: Vec<Option<f64>> = vec![None; n];
    let mut failures: Vec<String> = Vec::new();
    let mut done_blocks = 0;
    let mut interrupted = false;
    'blocks: for block in &order {
        let mut this: Vec<Option<RoundValues>> = vec![None; n];
        for &v in block {
            bar.set_message(format!("--{} {}", var.long, var.values[v]));
            match run_round(a, &var, &var.values[v])? {
                Round::Values(x, r) => {
                    this[v] = Some(x);
                    resolution[v] = coarser(resolution[v], r);
                }
                Round::Failed(why) => {
                    failures.push(format!("{}={}: {why}", var.long, var.values[v]))
                }
                Round::Interrupted => {
                    interrupted = true;
                    break 'blocks;
                }
            }
            bar.inc(1);
            if child::stop_signal().is_some() {
                interrupted = true;
                break 'blocks;
            }
        }
        for (v, x) in this.into_iter().enumerate() {
            values[v].push(x.unwrap_or([None; METRICS.len()]));
        }
        done_blocks += 1;
    }
    bar.finish_and_clear();
    let mut report = CompareReport::new(
        a.command.clone(),
        var.long.clone(),
        seed,
        order[..done_blocks].to_vec(),
        &var.values,
        &values,
    );
    report.mark_clock_resolution(&resolution);
    for f in failures.iter().take(5) {
        report.warnings.push(format!("a round failed: {f}"));
    }
    if interrupted {
        report.warnings.push(format!(
            "interrupted by {} after {done_blocks} of {} rounds",
            child::stop_signal().map_or("Ctrl-C", |s| s.as_str()),
            order.len()
        ));
    }
    print_report(a, &report)?;
    if interrupted {
        return Ok(EXIT_INTERRUPTED);
    }
    if let Some(v) = report.variants.iter().find(|v| v.rounds_ok == 0) {
        return Err(CliError::command(format!(
            "every round of --{} {} failed (first: {}); nothing to compare",
            var.long,
            v.value,
            failures.first().map_or("", String::as_str)
        )));
    }
    Ok(0)
}

/// The most bytes read from a saved report (a few tens of KiB with its
/// histograms); it also bounds the JSON tree parsed from it.
const MAX_REPORT: u64 = 8 << 20;

/// One saved report's metrics and, per metric, its 95% sampling interval
/// inside the run (order statistics of the histogram it carries).
fn load_saved(
    path: &std::path::Path,
) -> Result<(RoundValues, SamplingIntervals, Option<f64>), CliError> {
    let name = path.display();
    let text = ibhost::file::read_small_text(path, MAX_REPORT)
        .map_err(|e| CliError::input(format!("{e} (a report saved with --json)")))?;
    let doc: serde_json::Value = serde_json::from_str(&text).map_err(|_| {
        CliError::input(format!(
            "{name} is not a JSON report; save one with e.g. ibprobe loopback -t shm --json > {name}"
        ))
    })?;
    let values = round_values(&doc).ok_or_else(|| {
        CliError::input(format!(
            "{name}: expected an {ROUND_SCHEMAS} report, found schema {}",
            doc.get("schema").map_or("none".into(), |s| s.to_string())
        ))
    })?;
    let hdr = doc["distributions"][0]["hdr"]
        .as_str()
        .or_else(|| doc["latency_hdr"].as_str())
        .ok_or_else(|| {
            CliError::input(format!(
                "{name} carries no histogram (saved by an older ibprobe?); save it again with this version"
            ))
        })?;
    let h = hdrlog::decode(hdr)
        .map_err(|e| CliError::input(format!("{name}: its histogram is {e}")))?;
    let n = h.len() as f64;
    let at = |q: f64| h.value_at_quantile(q.clamp(0.0, 1.0)) as f64;
    // The q-quantile's 95% interval: ranks n q -+ 1.96 sqrt(n q (1 - q)).
    let interval = |q: f64| -> Option<(f64, f64)> {
        if n < 1.0 {
            return None;
        }
        let half = 1.96 * (n * q * (1.0 - q)).sqrt();
        Some((at((n * q - half) / n), at((n * q + half + 1.0) / n)))
    };
    Ok((
        values,
        [interval(0.5), interval(0.99), interval(0.999), None, None],
        round_resolution(&doc),
    ))
}

/// `ibprobe compare A.json B.json`.
fn saved(a: &CompareArgs) -> Result<u8, CliError> {
    if a.reports.len() != 2 || !a.command.is_empty() {
        return Err(CliError::input(format!(
            "compare takes two saved reports (got {}{}); e.g. ibprobe compare before.json after.json",
            a.reports.len(),
            if a.command.is_empty() { "" } else { " and a command" }
        )));
    }
    let [(v0, s0, r0), (v1, s1, r1)] = [load_saved(&a.reports[0])?, load_saved(&a.reports[1])?];
    let label = |i: usize| a.reports[i].display().to_string();
    let mut report = CompareReport::saved(&[label(0), label(1)], &[v0, v1], &[s0, s1]);
    report.mark_clock_resolution(&[r0, r1]);
    print_report(a, &report)?;
    Ok(0)
}

/// Writes the plot if asked, and prints the report in its format.
fn print_report(a: &CompareArgs, report: &CompareReport) -> Result<(), CliError> {
    if let Some(path) = &a.output.plot {
        effects_plot::write_svg(path, report).map_err(|e| CliError::run(e.to_string()))?;
    }
    super::common::print_report(report, a.output.format())
}
