//! The report of `ibprobe sweep`'s grid: in the table and Markdown rows =
//! sizes, columns = rates, each cell the one-way `p50 / p99` in us (and the
//! share of missed steps where paced); in CSV and JSON ([`SCHEMA`]) one
//! row or object per cell in run order (`report/README.md`); the p50s as
//! a heatmap grid ([`heat_grid`]).

use serde_json::json;

use super::heatmap::Grid;
use super::model::{
    us, Align, Block, Column, Csv, DistKind, Distribution, Document, JsonDoc, Quote, Report, Table,
};
use crate::probe::config::Length;
use crate::spec::Transport;

/// Bumped when a field changes meaning or goes away.
pub const SCHEMA: &str = "ibprobe.sweep/1";

/// The CSV header row: one row per cell follows, keyed by transport, bytes
/// and rate_hz so several sweeps concatenate under one header; the cell's
/// counters follow ([`csv_header`]).
pub const CSV_HEADER: &str = "transport,bytes,rate_hz,count,min_ns,p50_ns,p90_ns,p99_ns,p999_ns,max_ns,mean_ns,stdev_ns,steps,missed_steps,sent,lost";

/// [`CSV_HEADER`] and one column per counter (`report::counters`).
pub fn csv_header() -> String {
    format!("{CSV_HEADER},{}", super::counters::csv_header())
}

pub struct Cell {
    pub size: usize,
    /// Messages per second, 0 = back to back.
    pub rate: f64,
    /// The cell's run, as `loopback` reports it.
    pub report: Report,
}

impl Cell {
    pub fn one_way(&self) -> Option<&Distribution> {
        let d = &self.report.distributions;
        d.iter().find(|d| d.kind == DistKind::OneWay).or(d.first())
    }
}

/// A rate's column label.
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
    let Some(s) = c.one_way().map(|d| &d.summary) else {
        return "no samples".into();
    };
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

/// A sweep's grid and what it ran with: what `ibprobe sweep` prints.
pub struct SweepReport<'a> {
    pub transport: Transport,
    pub sizes: &'a [usize],
    pub rates: &'a [f64],
    /// The cells that ran, in run order.
    pub cells: &'a [Cell],
    pub length: Length,
    /// Warm-up messages per cell.
    pub warmup: u64,
    pub interrupted: bool,
}

impl Document for SweepReport<'_> {
    fn noun(&self) -> &'static str {
        "grid"
    }

    fn blocks(&self) -> Vec<Block> {
        let heading = format!(
            "ibprobe {}: sweep, one-way loopback over {}, {}, warm-up {}",
            env!("CARGO_PKG_VERSION"),
            self.transport.name(),
            length_text(self.length),
            self.warmup
        );
        let mut context = vec![heading.clone()];
        if let Some(c) = self.cells.first() {
            let detail = &c.report.context.transport.detail;
            if !detail.is_empty() {
                context.push(format!("transport ({} B cell): {detail}", c.size));
            }
            context.push(format!("clock: {}", c.report.context.clock.describe()));
            context.extend(c.report.notes.iter().map(|n| format!("note: {n}")));
        }
        context.push(
            "cells: one-way p50 / p99 [us]; paced columns add the share of missed steps".into(),
        );
        context.push(String::new());
        let mut columns = vec![Column::new("size [B]", 0, Align::RIGHT)];
        columns.extend(
            self.rates
                .iter()
                .map(|&r| Column::new(&rate_label(r), 0, Align::RIGHT)),
        );
        let rows = self.sizes.iter().map(|&s| {
            std::iter::once(s.to_string())
                .chain(
                    self.rates
                        .iter()
                        .map(|&r| cell_text(find(self.cells, s, r))),
                )
                .collect()
        });
        vec![
            Block::Context(context),
            Block::Title {
                bold: heading,
                rest: "; cells: one-way p50 / p99 [us]".into(),
            },
            Table::block(columns, "   ", rows.collect()),
            Block::plain_warnings(grid_warnings(self.cells), true, Quote::Together),
        ]
    }

    fn csv(&self) -> Option<Csv> {
        let rows = self.cells.iter().filter_map(|c| {
            let s = &c.one_way()?.summary;
            let r = &c.report.run;
            let mut row = vec![
                self.transport.name().to_string(),
                c.size.to_string(),
                c.rate.to_string(),
            ];
            row.extend(
                [
                    s.count, s.min_ns, s.p50_ns, s.p90_ns, s.p99_ns, s.p999_ns, s.max_ns,
                ]
                .map(|v| v.to_string()),
            );
            row.extend([format!("{:.1}", s.mean_ns), format!("{:.1}", s.stdev_ns)]);
            row.extend([r.steps, r.missed_steps, r.sent, r.lost].map(|v| v.to_string()));
            row.extend(super::counters::csv_cells(c.report.counters.as_ref()));
            Some(row)
        });
        Some(Csv {
            header: csv_header(),
            rows: rows.collect(),
        })
    }

    fn json(&self) -> Option<Box<dyn JsonDoc + '_>> {
        let length = match self.length {
            Length::Count(n) => json!({ "count": n }),
            Length::Duration(d) => json!({ "duration_ns": d.as_nanos() as u64 }),
        };
        Some(Box::new(json!({
            "schema": SCHEMA,
            "transport": self.transport.name(),
            "sizes": self.sizes,
            "rates_hz": self.rates,
            "length": length,
            "warmup": self.warmup,
            "interrupted": self.interrupted,
            "cells": self.cells.iter().map(|c| json!({
                "size": c.size,
                "rate_hz": c.rate,
                "report": super::run::json_value(&c.report),
            })).collect::<Vec<_>>(),
        })))
    }
}

pub fn heat_grid(t: Transport, sizes: &[usize], rates: &[f64], cells: &[Cell]) -> Grid {
    Grid {
        title: format!("ibprobe sweep: {} one-way loopback, p50 [us]", t.name()),
        columns: rates.iter().map(|&r| rate_label(r)).collect(),
        rows: sizes.iter().map(|s| s.to_string()).collect(),
        values: Grid::values(sizes, rates, |&s, &r| {
            let d = find(cells, s, r).and_then(Cell::one_way)?;
            (d.summary.count > 0).then_some(d.summary.p50_ns)
        }),
        ..Grid::default()
    }
}
