//! The formats of `ibprobe sweep`'s grid: table, Markdown, CSV, the
//! `ibprobe.sweep/1` JSON document and the heatmap's grid.
//!
//! Why it exists: every format of every command lives in `crate::report`;
//! the sweep command (`cli/sweep.rs`) runs the cells and hands them here.
//!
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
//! - [`heat_grid`]: the p50s for [`super::heatmap`].

use serde_json::json;

use super::heatmap::Grid;
use super::{us, DistKind, Distribution, Report};
use crate::probe::config::Length;
use crate::spec::Transport;

/// The JSON schema identifier of a sweep, so scripts can tell a sweep
/// document from a single run's `ibprobe.report/1`; bumped when a field
/// changes meaning or goes away.
pub const SCHEMA: &str = "ibprobe.sweep/1";

/// The CSV header row: one row per cell follows, keyed by transport, bytes
/// and rate_hz so several sweeps concatenate under one header; the cell's
/// counters follow ([`csv_header`]).
pub const CSV_HEADER: &str = "transport,bytes,rate_hz,count,min_ns,p50_ns,p90_ns,p99_ns,p999_ns,max_ns,mean_ns,stdev_ns,steps,missed_steps,sent,lost";

/// [`CSV_HEADER`] and one column per counter (`report::counters`).
pub fn csv_header() -> String {
    format!("{CSV_HEADER},{}", super::counters::csv_header())
}

/// One cell of the grid: its size, its rate and its report.
pub struct Cell {
    /// Message size in bytes.
    pub size: usize,
    /// Messages per second, 0 = back to back.
    pub rate: f64,
    /// The cell's run, as `loopback` reports it.
    pub report: Report,
}

impl Cell {
    /// The one-way distribution of the cell.
    pub fn one_way(&self) -> Option<&Distribution> {
        let d = &self.report.distributions;
        d.iter().find(|d| d.kind == DistKind::OneWay).or(d.first())
    }
}

/// A cell's settings as `loopback` echoes them, marked as a sweep cell.
pub fn rate_label(r: f64) -> String {
    if r == 0.0 {
        "back to back".into()
    } else {
        format!("{r}/s")
    }
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

/// The grid's warnings, one line each behind `prefix`, after a blank
/// line; nothing when there are none.
fn warning_lines(cells: &[Cell], prefix: &str) -> String {
    let warnings = grid_warnings(cells);
    if warnings.is_empty() {
        return String::new();
    }
    let lines: String = warnings.iter().map(|w| format!("{prefix} {w}\n")).collect();
    format!("\n{lines}")
}

fn heading(t: Transport, length: Length, warmup: u64) -> String {
    format!(
        "ibprobe {}: sweep, one-way loopback over {}, {}, warm-up {warmup}",
        env!("CARGO_PKG_VERSION"),
        t.name(),
        length_text(length)
    )
}

pub fn table(
    t: Transport,
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
    out.push_str(&warning_lines(cells, "warning:"));
    out
}

pub fn markdown(
    t: Transport,
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
    out.push_str(&warning_lines(cells, "> **warning**:"));
    out
}

pub fn csv(t: Transport, cells: &[Cell]) -> String {
    let mut out = csv_header();
    out.push('\n');
    for c in cells {
        let Some(d) = c.one_way() else { continue };
        let s = &d.summary;
        let r = &c.report.run;
        out.push_str(&format!(
            "{},{},{},{},{},{},{},{},{},{},{:.1},{:.1},{},{},{},{},{}\n",
            t.name(),
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
            super::counters::csv_cells(c.report.counters.as_ref()),
        ));
    }
    out
}

pub fn json(
    t: Transport,
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
        "transport": t.name(),
        "sizes": sizes,
        "rates_hz": rates,
        "length": length,
        "warmup": warmup,
        "interrupted": interrupted,
        "cells": cells.iter().map(|c| json!({
            "size": c.size,
            "rate_hz": c.rate,
            "report": super::run::json_value(&c.report),
        })).collect::<Vec<_>>(),
    });
    let mut s = serde_json::to_string_pretty(&doc).expect("JSON values serialize");
    s.push('\n');
    s
}

pub fn heat_grid(t: Transport, sizes: &[usize], rates: &[f64], cells: &[Cell]) -> Grid {
    Grid {
        title: format!("ibprobe sweep: {} one-way loopback, p50 [us]", t.name()),
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
        ..Grid::default()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rate_labels() {
        assert_eq!(rate_label(0.0), "back to back");
        assert_eq!(rate_label(1000.0), "1000/s");
        assert_eq!(rate_label(2.5), "2.5/s");
    }
}
