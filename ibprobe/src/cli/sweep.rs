//! `ibprobe sweep`: one-way loopback over a grid of message sizes x
//! message rates, the thesis's rate x size figure as a command.
//!
//! Why it exists: latency depends on both the size (MTU, inline limit,
//! copies) and the rate (pacing, queueing, power states); measuring the
//! grid by hand means dozens of `ibprobe loopback` runs and a spreadsheet.
//! The sweep runs every cell with the same runner as `loopback`
//! ([`crate::probe::runner::run`], a fresh channel per cell so cells are
//! independent), shows an indicatif progress bar on stderr, and prints
//! one grid.
//!
//! Outputs (`--format`):
//! - `table` (and `markdown`): rows = sizes, columns = rates, each cell
//!   `p50 / p99` of the one-way latency in us, plus the share of missed
//!   paced steps in paced columns;
//! - `csv`: header [`CSV_HEADER`], one row per cell (rate_hz 0 = back to
//!   back), the one-way distribution;
//! - `json`: schema [`SCHEMA`] (`ibprobe.sweep/1`): `{ "schema",
//!   "transport", "sizes": [bytes], "rates_hz": [0 = back to back],
//!   "length": {"count": N} | {"duration_ns": N}, "warmup", "interrupted",
//!   "cells": [{ "size", "rate_hz", "report": <ibprobe.report/1 of that
//!   cell, as `loopback --format json` prints it> }] }`, cells in run
//!   order (sizes outer, rates inner);
//! - `--plot FILE.svg`: a heatmap of the p50s ([`crate::report::heatmap`]).
//!
//! Exit codes as the other subcommands: 2 for bad lists or sizes the
//! transport cannot carry (checked before anything runs), 3 when a cell
//! fails (the cells done so far are printed first), 130 on Ctrl-C (the
//! cells done so far, and the interrupted one, are printed).

use std::io::IsTerminal as _;
use std::net::{IpAddr, Ipv4Addr};
use std::path::PathBuf;
use std::time::Duration;

use clap::{Args, ValueEnum};
use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};
use serde_json::json;

use super::run::{
    self, default_cpu, poll_mode, report_context, stop_flag, transport_err, verbs_config, verbs_err,
};
use super::{parse_duration, CliError, TransportArgs, TransportKind, EXIT_INTERRUPTED};
use crate::clock::Clock;
use crate::probe::config::{Length, Mode, ProbeConfig, MAX_RATE_HZ};
use crate::probe::runner;
use crate::report::heatmap::{self, Grid};
use crate::report::{us, DistKind, Distribution, Report};
use crate::transport::shm::{self, ShmChannel};
use crate::transport::udp::{self, UdpChannel};
use crate::transport::Channel;
use crate::verbs;

/// The JSON schema identifier of a sweep, so scripts can tell a sweep
/// document from a single run's `ibprobe.report/1`; bumped when a field
/// changes meaning or goes away.
pub const SCHEMA: &str = "ibprobe.sweep/1";

/// The CSV header row: one row per cell follows, keyed by transport, bytes
/// and rate_hz so several sweeps concatenate under one header.
pub const CSV_HEADER: &str = "transport,bytes,rate_hz,count,min_ns,p50_ns,p90_ns,p99_ns,p999_ns,max_ns,mean_ns,stdev_ns,steps,missed_steps,sent,lost";

/// Measured messages per cell when neither --count nor --duration is given
/// (lower than loopback's 10 000: a sweep runs dozens of cells).
pub const DEFAULT_COUNT: u64 = 1000;

/// The output formats a grid has: its own enum because perftest's
/// one-line format (a `--format` of `loopback`) has no grid.
#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum SweepFormat {
    /// Rows = sizes, columns = rates, cells p50 / p99 [us].
    Table,
    /// One row per cell.
    Csv,
    /// The `ibprobe.sweep/1` document (one `ibprobe.report/1` per cell).
    Json,
    /// The table as Markdown.
    Markdown,
}

/// `ibprobe sweep`: the loopback options that make sense once per grid
/// (transport, verbs knobs, length, warm-up) plus the two lists.
#[derive(Args, Debug, Clone)]
pub struct SweepArgs {
    /// Transport and placement.
    #[command(flatten)]
    pub transport: TransportArgs,
    /// Message sizes in bytes: a list (8,64,512) and/or doubling ranges between
    /// powers of two (2..4096 = 2,4,8,...,4096), e.g. 8,100,1024..8192.
    #[arg(long, default_value = "8..4096", allow_hyphen_values = true)]
    pub sizes: String,
    /// Message rates per second, 0 = back to back; k and M suffixes, e.g. 0,1k,10k,100k.
    #[arg(
        long,
        default_value = "0,1000,10000,100000",
        allow_hyphen_values = true
    )]
    pub rates: String,
    /// Measured messages per cell [default: 1000, unless --duration].
    #[arg(long, short = 'n', conflicts_with = "duration")]
    pub count: Option<u64>,
    /// Measure each cell for this long instead of a count, e.g. 1s, 200ms.
    #[arg(long, short = 'D', value_parser = parse_duration)]
    pub duration: Option<Duration>,
    /// Warm-up messages before each cell's measured part (excluded).
    #[arg(long, default_value_t = 100)]
    pub warmup: u64,
    /// A message without an answer after this long is lost; 3 in a row end the sweep.
    #[arg(long, value_parser = parse_duration, default_value = "1s")]
    pub timeout: Duration,
    /// Do not mlockall (by default all memory is locked when allowed).
    #[arg(long)]
    pub no_mlock: bool,
    /// Output format.
    #[arg(long, short = 'f', value_enum, default_value = "table")]
    pub format: SweepFormat,
    /// Same as --format json.
    #[arg(long)]
    pub json: bool,
    /// Draw the grid of p50s as an SVG heatmap (x = rate, y = size).
    #[arg(long, value_name = "FILE.svg")]
    pub plot: Option<PathBuf>,
    /// No progress bar (it is also hidden when stderr is not a terminal).
    #[arg(long, short = 'q')]
    pub quiet: bool,
}

/// The `--sizes` list: numbers and doubling ranges `A..B` (A and B powers
/// of two), comma-separated, in the order given, without repeats. Public
/// so its rules (and errors) are testable without running a sweep.
pub fn parse_sizes(s: &str) -> Result<Vec<usize>, String> {
    let hint = "pass sizes in bytes, e.g. --sizes 8,64,512 or --sizes 2..4096 (powers of two)";
    if s.trim().is_empty() {
        return Err(format!("--sizes {s:?}: the list is empty; {hint}"));
    }
    let mut out: Vec<usize> = Vec::new();
    for item in s.split(',').map(str::trim) {
        let num = |x: &str| {
            x.trim()
                .parse::<usize>()
                .map_err(|_| format!("--sizes {s:?}: {x:?} is not a size in bytes; {hint}"))
        };
        let new: Vec<usize> = if item.is_empty() {
            return Err(format!("--sizes {s:?}: an empty item; {hint}"));
        } else if let Some((a, b)) = item.split_once("..") {
            let (a, b) = (num(a)?, num(b)?);
            if !a.is_power_of_two() || !b.is_power_of_two() {
                return Err(format!(
                    "--sizes {s:?}: the range {item} doubles from a power of two to a power of two; use e.g. 2..4096, or list the sizes"
                ));
            }
            if a > b {
                return Err(format!(
                    "--sizes {s:?}: the range {item} runs backwards; write the smaller size first, e.g. {b}..{a}"
                ));
            }
            std::iter::successors(Some(a), |&x| x.checked_mul(2))
                .take_while(|&x| x <= b)
                .collect()
        } else {
            vec![num(item)?]
        };
        for n in new {
            if n == 0 {
                return Err(format!(
                    "--sizes {s:?}: size 0: a message needs at least 1 byte; {hint}"
                ));
            }
            if out.contains(&n) {
                return Err(format!(
                    "--sizes {s:?}: {n} B is listed twice; list each size once"
                ));
            }
            out.push(n);
        }
    }
    Ok(out)
}

/// The `--rates` list in messages per second, 0 = back to back, with
/// optional k (x1000) and M (x1 000 000) suffixes, in the order given.
/// Public for the same reason as [`parse_sizes`].
pub fn parse_rates(s: &str) -> Result<Vec<f64>, String> {
    let hint = "pass messages per second, 0 for back to back, e.g. --rates 0,1000,10k,100k";
    if s.trim().is_empty() {
        return Err(format!("--rates {s:?}: the list is empty; {hint}"));
    }
    let mut out: Vec<f64> = Vec::new();
    for item in s.split(',').map(str::trim) {
        if item.is_empty() {
            return Err(format!("--rates {s:?}: an empty item; {hint}"));
        }
        let (num, scale) = match item.strip_suffix(['k', 'K']) {
            Some(n) => (n, 1e3),
            None => match item.strip_suffix('M') {
                Some(n) => (n, 1e6),
                None => (item, 1.0),
            },
        };
        let r = num
            .trim()
            .parse::<f64>()
            .ok()
            .filter(|r| r.is_finite() && *r >= 0.0)
            .map(|r| r * scale)
            .ok_or_else(|| {
                format!("--rates {s:?}: {item:?} is not a rate (a number >= 0); {hint}")
            })?;
        if r > MAX_RATE_HZ {
            return Err(format!(
                "--rates {s:?}: {item} is above the highest supported rate {MAX_RATE_HZ} Hz (a 100 ns period); use 0 for back to back"
            ));
        }
        if out.contains(&r) {
            return Err(format!(
                "--rates {s:?}: {item} is listed twice; list each rate once"
            ));
        }
        out.push(r);
    }
    Ok(out)
}

/// A rate as a column label: "back to back" or "1000/s"; one function so
/// the table, Markdown and heatmap label columns alike.
pub fn rate_label(r: f64) -> String {
    if r == 0.0 {
        "back to back".into()
    } else {
        format!("{r}/s")
    }
}

/// The one-line reason `size` cannot travel over `kind`, if any (the
/// limits `loopback` would hit when opening the channel, checked for every
/// size before the sweep starts).
fn size_refusal(t: &TransportArgs, size: usize) -> Option<String> {
    match t.transport {
        TransportKind::Shm if size > shm::MAX_SIZE => Some(format!(
            "{size} B is above the shm ring's largest message, {} B",
            shm::MAX_SIZE
        )),
        TransportKind::Udp if !(udp::MIN_SIZE..=udp::MAX_SIZE).contains(&size) => Some(format!(
            "{size} B is outside what udp carries, {}..={} B (8 B hold the sequence number, 65507 B is one datagram)",
            udp::MIN_SIZE,
            udp::MAX_SIZE
        )),
        TransportKind::Shm | TransportKind::Udp => None,
        _ if u32::try_from(size).is_err() => Some(format!(
            "{size} B is above the verbs limit of {} B",
            u32::MAX
        )),
        _ => verbs_config(t, size).err().map(|e| e.message),
    }
}

/// The probe configuration of one cell, validated.
fn cell_config(a: &SweepArgs, size: usize, rate: f64) -> Result<ProbeConfig, CliError> {
    let t = &a.transport;
    let poll = poll_mode(t)?;
    let cfg = ProbeConfig {
        size,
        length: match a.duration {
            Some(d) => Length::Duration(d),
            None => Length::Count(a.count.unwrap_or(DEFAULT_COUNT)),
        },
        warmup: a.warmup,
        rate_hz: (rate > 0.0).then_some(rate),
        burst: None,
        pause: None,
        cpu: t.cpu,
        timeout: a.timeout,
        max_consecutive_lost: 3,
        mode: Mode::OneWay,
        poll,
        lock_memory: !a.no_mlock,
        interval: None,
    };
    cfg.validate().map_err(|e| CliError::input(e.0))?;
    Ok(cfg)
}

/// Opens the one-way loopback channel of one cell (as `loopback` does).
fn open(t: &TransportArgs, size: usize) -> Result<Box<dyn Channel>, CliError> {
    Ok(match t.transport {
        TransportKind::Shm => Box::new(ShmChannel::loopback(size).map_err(transport_err)?),
        TransportKind::Udp => Box::new(
            UdpChannel::loopback(IpAddr::V4(Ipv4Addr::LOCALHOST), size).map_err(transport_err)?,
        ),
        _ => Box::new(verbs::loopback(&verbs_config(t, size)?).map_err(verbs_err)?),
    })
}

/// One measured cell of the grid.
struct Cell {
    size: usize,
    rate: f64,
    report: Report,
}

impl Cell {
    fn one_way(&self) -> Option<&Distribution> {
        let d = &self.report.distributions;
        d.iter().find(|d| d.kind == DistKind::OneWay).or(d.first())
    }
}

/// A cell's settings as `loopback` echoes them, marked as a sweep cell.
fn config_echo(cfg: &ProbeConfig, t: &TransportArgs) -> Vec<(String, String)> {
    let mut v = run::config_echo(cfg, t);
    v.push(("sweep".into(), "true".into()));
    v
}

fn progress(a: &SweepArgs, cells: u64) -> ProgressBar {
    if a.quiet || !std::io::stderr().is_terminal() {
        return ProgressBar::hidden();
    }
    let style = ProgressStyle::with_template(
        "{spinner} [{elapsed_precise}] {bar:32} {pos}/{len} cells (eta {eta}) {msg}",
    )
    .unwrap_or_else(|_| ProgressStyle::default_bar());
    ProgressBar::with_draw_target(Some(cells), ProgressDrawTarget::stderr()).with_style(style)
}

/// `ibprobe sweep`: checks every cell's configuration, runs the cells in
/// order (sizes outer, rates inner), prints the grid, draws `--plot`.
pub fn sweep(a: &SweepArgs) -> Result<u8, CliError> {
    let t = &a.transport;
    let sizes = parse_sizes(&a.sizes).map_err(CliError::input)?;
    let rates = parse_rates(&a.rates).map_err(CliError::input)?;
    // Everything that can be refused is refused before the first cell runs.
    for &size in &sizes {
        if let Some(why) = size_refusal(t, size) {
            return Err(CliError::input(format!(
                "--sizes {:?} with --transport {}: {why}; drop the sizes it cannot carry",
                a.sizes,
                t.transport.name()
            )));
        }
    }
    let mut plan = Vec::new();
    for &size in &sizes {
        for &rate in &rates {
            plan.push(cell_config(a, size, rate)?);
        }
    }
    let cpu = default_cpu(t);
    for cfg in &mut plan {
        cfg.cpu = cpu;
    }
    let stop = stop_flag()?;
    let clock = Clock::choose(t.clock);
    let bar = progress(a, plan.len() as u64);
    let mut cells: Vec<Cell> = Vec::new();
    let mut failure = None;
    let mut interrupted = false;
    for cfg in &plan {
        let rate = cfg.rate_hz.unwrap_or(0.0);
        let at = format!("{} B, {}", cfg.size, rate_label(rate));
        bar.set_message(at.clone());
        let mut ch = match open(t, cfg.size) {
            Ok(c) => c,
            Err(mut e) => {
                e.message = format!("{at}: {}", e.message);
                failure = Some(e);
                break;
            }
        };
        let info = ch.info();
        match runner::run(cfg, ch.as_mut(), &clock, stop, None) {
            Ok(outcome) => {
                let mut ctx = report_context(cfg, t, crate::report::Mode::Loopback, info, clock);
                ctx.config = config_echo(cfg, t);
                interrupted = outcome.interrupted;
                cells.push(Cell {
                    size: cfg.size,
                    rate,
                    report: Report::new(&outcome, ctx),
                });
            }
            Err(e) => {
                failure = Some(CliError::run(format!(
                    "{} probe failed at {at}: {e}",
                    t.transport.name()
                )));
                break;
            }
        }
        drop(ch);
        bar.inc(1);
        if interrupted {
            break;
        }
    }
    bar.finish_and_clear();
    let format = if a.json { SweepFormat::Json } else { a.format };
    let length = plan.first().map(|c| c.length).unwrap_or(Length::Count(0));
    let text = match format {
        SweepFormat::Table => table(t, &sizes, &rates, &cells, length, a.warmup),
        SweepFormat::Markdown => markdown(t, &sizes, &rates, &cells, length, a.warmup),
        SweepFormat::Csv => csv(t, &cells),
        SweepFormat::Json => json(t, &sizes, &rates, &cells, length, a.warmup, interrupted),
    };
    print!("{text}");
    if let Some(path) = &a.plot {
        let grid = heat_grid(t, &sizes, &rates, &cells);
        heatmap::write_svg(path, &grid).map_err(|e| CliError::run(format!("--plot: {e}")))?;
    }
    if let Some(e) = failure {
        return Err(e);
    }
    Ok(if interrupted { EXIT_INTERRUPTED } else { 0 })
}

fn find(cells: &[Cell], size: usize, rate: f64) -> Option<&Cell> {
    cells.iter().find(|c| c.size == size && c.rate == rate)
}

/// `p50 / p99` in us, plus the missed-step share in paced cells.
fn cell_text(c: Option<&Cell>) -> String {
    let Some(c) = c else {
        return "-".into();
    };
    let Some(d) = c.one_way() else {
        return "no samples".into();
    };
    let s = &d.summary;
    let mut out = if s.count == 0 {
        "no samples".to_string()
    } else {
        format!("{} / {}", us(s.p50_ns), us(s.p99_ns))
    };
    if c.rate > 0.0 {
        out.push_str(&format!(
            " ({:.2}% missed)",
            c.report.run.missed_fraction * 100.0
        ));
    }
    out
}

fn length_text(l: Length) -> String {
    match l {
        Length::Count(n) => format!("{n} messages per cell"),
        Length::Duration(d) => format!("{d:?} per cell"),
    }
}

/// Warnings worth one line each in a grid: those of the whole sweep once
/// (pinning, clock), the per-cell ones (losses, outliers, interruption)
/// with their cell. Left out: `few_samples` (every short cell has it),
/// `missed_steps` (the grid shows it) and `warmup_max` (the warm-up did
/// its job; `--format json` keeps every cell's warnings).
fn grid_warnings(cells: &[Cell]) -> Vec<String> {
    let mut out: Vec<String> = Vec::new();
    for c in cells {
        for w in &c.report.warnings {
            let line = match w.code {
                "context" | "clock_fallback" => w.message.clone(),
                "few_samples" | "missed_steps" | "warmup_max" => continue,
                _ => format!("{} B, {}: {}", c.size, rate_label(c.rate), w.message),
            };
            if !out.contains(&line) {
                out.push(line);
            }
        }
    }
    out
}

fn heading(t: &TransportArgs, length: Length, warmup: u64) -> String {
    format!(
        "ibprobe {}: sweep, one-way loopback over {}, {}, warm-up {warmup}",
        env!("CARGO_PKG_VERSION"),
        t.transport.name(),
        length_text(length)
    )
}

fn table(
    t: &TransportArgs,
    sizes: &[usize],
    rates: &[f64],
    cells: &[Cell],
    length: Length,
    warmup: u64,
) -> String {
    let mut out = heading(t, length, warmup);
    out.push('\n');
    if let Some(c) = cells.first() {
        let detail = &c.report.context.transport.detail;
        if !detail.is_empty() {
            out.push_str(&format!("transport ({} B cell): {detail}\n", c.size));
        }
        out.push_str(&format!("clock: {}\n", c.report.context.clock.describe()));
        for n in &c.report.notes {
            out.push_str(&format!("note: {n}\n"));
        }
    }
    out.push_str("cells: one-way p50 / p99 [us]; paced columns add the share of missed steps\n\n");
    let mut grid: Vec<Vec<String>> = vec![std::iter::once("size [B]".to_string())
        .chain(rates.iter().map(|&r| rate_label(r)))
        .collect()];
    for &s in sizes {
        grid.push(
            std::iter::once(s.to_string())
                .chain(rates.iter().map(|&r| cell_text(find(cells, s, r))))
                .collect(),
        );
    }
    let widths: Vec<usize> = (0..=rates.len())
        .map(|i| grid.iter().map(|r| r[i].chars().count()).max().unwrap_or(0))
        .collect();
    for row in &grid {
        let line: Vec<String> = row
            .iter()
            .zip(&widths)
            .map(|(c, &w)| format!("{c:>w$}"))
            .collect();
        out.push_str(line.join("   ").trim_end());
        out.push('\n');
    }
    let warnings = grid_warnings(cells);
    if !warnings.is_empty() {
        out.push('\n');
        for w in warnings {
            out.push_str(&format!("warning: {w}\n"));
        }
    }
    out
}

fn markdown(
    t: &TransportArgs,
    sizes: &[usize],
    rates: &[f64],
    cells: &[Cell],
    length: Length,
    warmup: u64,
) -> String {
    let mut out = format!(
        "**{}**; cells: one-way p50 / p99 [us]\n\n",
        heading(t, length, warmup)
    );
    out.push_str("| size [B] |");
    for &r in rates {
        out.push_str(&format!(" {} |", rate_label(r)));
    }
    out.push_str("\n|---:|");
    out.push_str(&"---:|".repeat(rates.len()));
    out.push('\n');
    for &s in sizes {
        out.push_str(&format!("| {s} |"));
        for &r in rates {
            out.push_str(&format!(" {} |", cell_text(find(cells, s, r))));
        }
        out.push('\n');
    }
    let warnings = grid_warnings(cells);
    if !warnings.is_empty() {
        out.push('\n');
        for w in warnings {
            out.push_str(&format!("> **warning**: {w}\n"));
        }
    }
    out
}

fn csv(t: &TransportArgs, cells: &[Cell]) -> String {
    let mut out = String::from(CSV_HEADER);
    out.push('\n');
    for c in cells {
        let Some(d) = c.one_way() else { continue };
        let s = &d.summary;
        let r = &c.report.run;
        out.push_str(&format!(
            "{},{},{},{},{},{},{},{},{},{},{:.1},{:.1},{},{},{},{}\n",
            t.transport.name(),
            c.size,
            c.rate,
            s.count,
            s.min_ns,
            s.p50_ns,
            s.p90_ns,
            s.p99_ns,
            s.p999_ns,
            s.max_ns,
            s.mean_ns,
            s.stdev_ns,
            r.steps,
            r.missed_steps,
            r.sent,
            r.lost,
        ));
    }
    out
}

fn json(
    t: &TransportArgs,
    sizes: &[usize],
    rates: &[f64],
    cells: &[Cell],
    length: Length,
    warmup: u64,
    interrupted: bool,
) -> String {
    let length = match length {
        Length::Count(n) => json!({ "count": n }),
        Length::Duration(d) => json!({ "duration_ns": d.as_nanos() as u64 }),
    };
    let doc = json!({
        "schema": SCHEMA,
        "transport": t.transport.name(),
        "sizes": sizes,
        "rates_hz": rates,
        "length": length,
        "warmup": warmup,
        "interrupted": interrupted,
        "cells": cells.iter().map(|c| json!({
            "size": c.size,
            "rate_hz": c.rate,
            "report": crate::report::format::json_value(&c.report),
        })).collect::<Vec<_>>(),
    });
    let mut s = serde_json::to_string_pretty(&doc).expect("JSON values serialize");
    s.push('\n');
    s
}

fn heat_grid(t: &TransportArgs, sizes: &[usize], rates: &[f64], cells: &[Cell]) -> Grid {
    Grid {
        title: format!(
            "ibprobe sweep: {} one-way loopback, p50 [us]",
            t.transport.name()
        ),
        columns: rates.iter().map(|&r| rate_label(r)).collect(),
        rows: sizes.iter().map(|s| s.to_string()).collect(),
        values: sizes
            .iter()
            .map(|&s| {
                rates
                    .iter()
                    .map(|&r| {
                        find(cells, s, r)
                            .and_then(Cell::one_way)
                            .filter(|d| d.summary.count > 0)
                            .map(|d| d.summary.p50_ns)
                    })
                    .collect()
            })
            .collect(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sizes_parse_as_lists_and_doubling_ranges() {
        assert_eq!(parse_sizes("8,64,512").unwrap(), vec![8, 64, 512]);
        assert_eq!(parse_sizes("2..16").unwrap(), vec![2, 4, 8, 16]);
        assert_eq!(
            parse_sizes(" 100, 1024..4096").unwrap(),
            vec![100, 1024, 2048, 4096]
        );
        assert_eq!(parse_sizes("64..64").unwrap(), vec![64]);
    }

    #[test]
    fn bad_size_lists_say_what_and_how() {
        for (s, part) in [
            ("", "empty"),
            ("8,,16", "empty item"),
            ("8,x", "not a size"),
            ("3..100", "power of two"),
            ("4096..8", "backwards"),
            ("0", "size 0"),
            ("8,8..16", "twice"),
            ("-8", "not a size"),
        ] {
            let e = parse_sizes(s).unwrap_err();
            assert!(e.starts_with("--sizes "), "{e}");
            assert!(e.contains(part), "{s:?}: {e}");
        }
    }

    #[test]
    fn rates_parse_with_suffixes_and_zero() {
        assert_eq!(
            parse_rates("0,1000,10k,1.5M").unwrap(),
            vec![0.0, 1000.0, 10_000.0, 1_500_000.0]
        );
        for (s, part) in [
            ("", "empty"),
            ("1,,2", "empty item"),
            ("-5", "not a rate"),
            ("fast", "not a rate"),
            ("inf", "not a rate"),
            ("20M", "highest"),
            ("1k,1000", "twice"),
        ] {
            let e = parse_rates(s).unwrap_err();
            assert!(e.starts_with("--rates "), "{e}");
            assert!(e.contains(part), "{s:?}: {e}");
        }
    }

    #[test]
    fn rate_labels() {
        assert_eq!(rate_label(0.0), "back to back");
        assert_eq!(rate_label(1000.0), "1000/s");
        assert_eq!(rate_label(2.5), "2.5/s");
    }
}
