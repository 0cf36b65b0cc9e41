//! `ibprobe sweep`: one-way loopback over a grid of message sizes x
//! message rates, the thesis's rate x size figure as a command.
//!
//! Latency depends on both the size (MTU, inline limit, copies) and the
//! rate (pacing, queueing, power states). Each cell runs as `loopback` does,
//! on a fresh channel; every cell is checked before the first runs, and a
//! failed or interrupted sweep prints the cells done.

use super::args::{parse_rates, parse_sizes, HeatValue, SweepArgs};
use super::common::{self, default_cpu, open_err, product, report_context, stop_flag};
use super::error::{CliError, EXIT_INTERRUPTED};
use crate::clock::Clock;
use crate::probe::config::{Length, Mode, ProbeConfig};
use crate::probe::executor::{self, stream_loopback};
use crate::probe::open::{self, OpenError};
use crate::report::heatmap::{self, Grid};
use crate::report::progress::progress_bar;
use crate::report::stream::StreamReport;
use crate::report::stream_sweep::{self, Axes, StreamSweepReport};
use crate::report::sweep::{self as formats, rate_label, Cell, SweepReport};
use crate::report::{Document, Report};
use crate::spec::StreamSpec;

/// Measured messages per cell when neither --count nor --duration is given
/// (lower than loopback's 10 000: a sweep runs dozens of cells).
pub const DEFAULT_COUNT: u64 = 1000;

/// The probe configuration of one cell, validated.
fn cell_config(
    a: &SweepArgs,
    size: usize,
    rate: f64,
    cpu: Option<usize>,
) -> Result<ProbeConfig, CliError> {
    let cfg = ProbeConfig {
        size,
        length: a.amount.length(DEFAULT_COUNT),
        warmup: a.amount.warmup,
        rate_hz: (rate > 0.0).then_some(rate),
        cpu,
        timeout: a.timeout,
        mode: Mode::OneWay,
        poll: a.transport.verbs.poll,
        lock_memory: !a.no_mlock,
        ..ProbeConfig::default()
    };
    cfg.validate()?;
    Ok(cfg)
}

/// `ibprobe sweep`: checks every cell's configuration, runs the cells in
/// order (sizes outer, rates inner), prints the grid, draws `--plot`;
/// the exit code.
pub fn run(a: &SweepArgs) -> Result<u8, CliError> {
    let t = &a.transport;
    super::common::warn_model_resolution(t);
    let sizes = parse_sizes(&a.sizes).map_err(CliError::input)?;
    let rates = parse_rates(&a.rates).map_err(CliError::input)?;
    if let Some(axes) = a.stream_axes(&sizes, &rates).map_err(CliError::input)? {
        return run_stream(a, axes);
    }
    // Everything that can be refused is refused before the first cell runs.
    for &size in &sizes {
        if let Err(why) = t.channel_spec(size).check() {
            return Err(CliError::input(format!(
                "--sizes {:?} with --transport {}: {why}; drop the sizes it cannot carry",
                a.sizes, t.transport
            )));
        }
    }
    let cpu = default_cpu(t);
    let plan = product(sizes.iter().copied(), &rates)
        .map(|(size, rate)| cell_config(a, size, rate, cpu))
        .collect::<Result<Vec<_>, _>>()?;
    let stop = stop_flag()?;
    let clock = Clock::choose(t.clock);
    let at = |cfg: &ProbeConfig| format!("{} B, {}", cfg.size, rate_label(rate_of(cfg)));
    let (cells, failure, interrupted) = run_cells(a, &plan, at, |cfg, at| {
        let mut ch = open::loopback(&t.channel_spec(cfg.size)).map_err(|e| open_err_at(e, at))?;
        let info = ch.info();
        let outcome = executor::run(cfg, ch.as_mut(), &clock, stop, None).map_err(|e| {
            CliError::run(format!("{} probe failed at {at}: {e}", t.transport.name()))
        })?;
        let mut ctx = report_context(cfg, t, crate::report::Mode::Loopback, info, clock);
        ctx.config.push(("sweep".into(), "true".into()));
        let cell = Cell {
            size: cfg.size,
            rate: rate_of(cfg),
            report: Report::new(&outcome, ctx),
        };
        Ok((cell, outcome.interrupted))
    });
    let length = plan.first().map(|c| c.length).unwrap_or(Length::Count(0));
    let report = SweepReport {
        transport: t.transport,
        sizes: &sizes,
        rates: &rates,
        cells: &cells,
        length,
        warmup: a.amount.warmup,
        interrupted,
    };
    let grid = || formats::heat_grid(t.transport, &sizes, &rates, &cells);
    finish(a, &report, grid, failure, interrupted)
}

fn rate_of(cfg: &ProbeConfig) -> f64 {
    cfg.rate_hz.unwrap_or(0.0)
}

/// The reports of the cells that ran, the error that ended the sweep early,
/// whether Ctrl-C did.
type Ran<C> = (Vec<C>, Option<CliError>, bool);

/// Runs the cells of `plan` in order under the progress bar (`at` names a
/// cell) until the first failure or interruption; the cells before it are kept.
fn run_cells<P, C>(
    a: &SweepArgs,
    plan: &[P],
    at: impl Fn(&P) -> String,
    mut cell: impl FnMut(&P, &str) -> Result<(C, bool), CliError>,
) -> Ran<C> {
    let bar = progress_bar(a.output.quiet, plan.len() as u64, "cells");
    let mut cells = Vec::new();
    for p in plan {
        let at = at(p);
        bar.set_message(at.clone());
        let (c, interrupted) = match cell(p, &at) {
            Ok(done) => done,
            Err(e) => {
                bar.finish_and_clear();
                return (cells, Some(e), false);
            }
        };
        cells.push(c);
        bar.inc(1);
        if interrupted {
            bar.finish_and_clear();
            return (cells, None, true);
        }
    }
    bar.finish_and_clear();
    (cells, None, false)
}

/// A cell's open error, prefixed with the cell.
fn open_err_at(e: OpenError, at: &str) -> CliError {
    let mut e = open_err(e);
    e.message = format!("{at}: {}", e.message);
    e
}

/// Prints a sweep's report (the cells done so far, when one failed), draws
/// `--plot`'s heatmap, then says the failure or the exit code.
fn finish(
    a: &SweepArgs,
    report: &dyn Document,
    grid: impl FnOnce() -> Grid,
    failure: Option<CliError>,
    interrupted: bool,
) -> Result<u8, CliError> {
    common::print_report(report, a.output.format())?;
    if let Some(path) = &a.output.plot {
        heatmap::write_svg(path, &grid()).map_err(|e| CliError::run(format!("--plot: {e}")))?;
    }
    if let Some(e) = failure {
        return Err(e);
    }
    Ok(if interrupted { EXIT_INTERRUPTED } else { 0 })
}

/// A stream sweep: every cell of sizes x rates x windows x batches x
/// pipelines is an `ibprobe stream` loopback run (a fresh pair of ends per
/// cell); every cell's configuration is checked before the first runs.
fn run_stream(a: &SweepArgs, axes: Axes) -> Result<u8, CliError> {
    let t = &a.transport;
    let (cpu, rx_cpu) = common::stream_placement(t, None, true);
    let mut plan = Vec::new();
    let sizes_rates = product(axes.sizes.iter().copied(), &axes.rates);
    let cells = product(
        product(product(sizes_rates, &axes.windows), &axes.batches),
        &axes.pipelines,
    );
    for ((((size, rate), window), batch), pipeline) in cells {
        let cfg = cell_config(a, size, rate, cpu)?;
        let spec = a.stream.spec(t.transport, size, window, batch, pipeline);
        let ch = t.channel_spec(size);
        if let Err(why) = ch.check().and_then(|()| spec.check(&ch)) {
            return Err(CliError::input(format!(
                "cell {size} B, window {window}, batch {batch}: {why}"
            )));
        }
        plan.push((cfg, spec));
    }
    let stop = stop_flag()?;
    let clock = Clock::choose(t.clock);
    let at = |(cfg, spec): &(ProbeConfig, StreamSpec)| {
        let rate = rate_label(rate_of(cfg));
        format!(
            "{} B, {rate}, window {}, batch {}",
            cfg.size, spec.window, spec.batch
        )
    };
    let (cells, failure, interrupted) = run_cells(a, &plan, at, |(cfg, spec), at| {
        let (mut tx, mut rx) =
            open::stream_pair(&t.channel_spec(cfg.size), spec).map_err(|e| open_err_at(e, at))?;
        let info = tx.info();
        let out = stream_loopback(cfg, spec, tx.as_mut(), rx.as_mut(), &clock, stop, rx_cpu)
            .map_err(|e| {
                CliError::run(format!("{} stream failed at {at}: {e}", t.transport.name()))
            })?;
        let interrupted = out.send.interrupted || out.recv.interrupted;
        let mut r = StreamReport::new(t.transport, info, "loopback", cfg.size, spec, &clock, out);
        r.rate_hz = cfg.rate_hz;
        Ok((r, interrupted))
    });
    let tr = t.transport;
    let report = StreamSweepReport {
        transport: tr,
        axes: &axes,
        cells: &cells,
        interrupted,
    };
    let throughput = a.heat == HeatValue::Throughput;
    let grid = || stream_sweep::heat_grid(tr, &axes, &cells, throughput);
    finish(a, &report, grid, failure, interrupted)
}
