//! The report of a stream sweep (`ibprobe sweep` with `--windows`,
//! `--batches` or `--pipelines`), whose every cell is an `ibprobe stream`
//! run ([`StreamReport`]): throughput and the latency tail, one row per
//! cell in run order (sizes, then rates, windows, batches, pipelines), the
//! `ibprobe.stream-sweep/1` JSON (`report/README.md`) and a heatmap grid.

use serde_json::json;

use super::heatmap::{Grid, Unit};
use super::model::{us, Align, Block, Column, Csv, Document, JsonDoc, Quote, Spacing, Table};
use super::stream::{pipe, StreamReport, CSV_HEADER};
use crate::spec::Transport;

pub const SCHEMA: &str = "ibprobe.stream-sweep/1";

/// The axes a stream sweep ran over.
#[derive(Clone, Debug)]
pub struct Axes {
    pub sizes: Vec<usize>,
    pub rates: Vec<f64>,
    pub windows: Vec<u32>,
    pub batches: Vec<u32>,
    /// Pipeline depths (None: no acks).
    pub pipelines: Vec<Option<u32>>,
}

/// The label of a cell's column: the values of the axes that vary.
fn column(a: &Axes, c: &StreamReport) -> String {
    let mut parts = Vec::new();
    if a.rates.len() > 1 {
        parts.push(c.rate_hz.map_or("b2b".into(), |r| format!("{r}/s")));
    }
    if a.windows.len() > 1 {
        parts.push(format!("w{}", c.spec.window));
    }
    if a.batches.len() > 1 {
        parts.push(format!("b{}", c.spec.batch));
    }
    if a.pipelines.len() > 1 {
        parts.push(format!("p{}", pipe(c.spec.pipeline)));
    }
    if parts.is_empty() {
        parts.push(format!("w{} b{}", c.spec.window, c.spec.batch));
    }
    parts.join(" ")
}

const HEAD: [&str; 11] = [
    "size", "rate", "window", "batch", "pipeline", "msg/s", "ops/msg", "p50 us", "p99 us",
    "p99.9 us", "stalls",
];

fn row(c: &StreamReport) -> [String; 11] {
    let l = super::stream::Tail::of(&c.out.latency);
    [
        c.size.to_string(),
        c.rate_hz.map_or("b2b".into(), |r| format!("{r}")),
        c.spec.window.to_string(),
        c.spec.batch.to_string(),
        pipe(c.spec.pipeline),
        format!("{:.0}", c.out.msgs_per_sec()),
        format!("{:.4}", c.out.ops_per_msg()),
        us(l.p50),
        us(l.p99),
        us(l.p999),
        c.out.send.credit_stalls.to_string(),
    ]
}

/// A stream sweep's cells and its axes: the report `ibprobe sweep`
/// prints with a stream axis.
pub struct StreamSweepReport<'a> {
    pub transport: Transport,
    pub axes: &'a Axes,
    /// The cells that ran, in run order.
    pub cells: &'a [StreamReport],
    /// Ctrl-C ended the sweep.
    pub interrupted: bool,
}

impl Document for StreamSweepReport<'_> {
    fn noun(&self) -> &'static str {
        "grid"
    }

    /// One row per cell, aligned; each cell's warnings with the cell.
    fn blocks(&self) -> Vec<Block> {
        let heading = format!(
            "ibprobe {}: stream sweep over {}, {} cells",
            env!("CARGO_PKG_VERSION"),
            self.transport.name(),
            self.cells.len()
        );
        let warnings: Vec<String> = self
            .cells
            .iter()
            .flat_map(|c| {
                let (s, p) = (&c.spec, pipe(c.spec.pipeline));
                let cell = format!("window {} batch {} pipeline {p}", s.window, s.batch);
                c.warnings
                    .iter()
                    .map(move |w| format!("{} B, {cell}: {}", c.size, w.message))
            })
            .collect();
        vec![
            Block::Context(vec![heading.clone(), String::new()]),
            Block::Title {
                bold: heading,
                rest: String::new(),
            },
            Table::block(
                HEAD.iter()
                    .map(|h| Column::new(h, 0, Align::RIGHT))
                    .collect(),
                "  ",
                self.cells.iter().map(|c| row(c).to_vec()).collect(),
            ),
            Block::OnlyText(Box::new(Block::plain_warnings(
                &warnings,
                true,
                Quote::Together,
            ))),
            Block::List(warnings, Spacing::None),
        ]
    }

    /// One CSV row per cell under the header of a single stream run.
    fn csv(&self) -> Option<Csv> {
        Some(Csv {
            header: CSV_HEADER.into(),
            rows: self.cells.iter().map(StreamReport::csv_cells).collect(),
        })
    }

    /// The `ibprobe.stream-sweep/1` document.
    fn json(&self) -> Option<Box<dyn JsonDoc + '_>> {
        let axes = self.axes;
        Some(Box::new(json!({
            "schema": SCHEMA,
            "transport": self.transport.name(),
            "axes": {
                "sizes": axes.sizes,
                "rates_hz": axes.rates,
                "windows": axes.windows,
                "batches": axes.batches,
                "pipelines": axes.pipelines,
            },
            "interrupted": self.interrupted,
            "cells": self.cells.iter().map(StreamReport::json).collect::<Vec<_>>(),
        })))
    }
}

/// The heatmap: rows = sizes, columns = the other axes' combinations,
/// each cell its throughput (msg/s) or its p99 (ns).
pub fn heat_grid(t: Transport, axes: &Axes, cells: &[StreamReport], throughput: bool) -> Grid {
    let mut columns: Vec<String> = Vec::new();
    for c in cells {
        let k = column(axes, c);
        if !columns.contains(&k) {
            columns.push(k);
        }
    }
    let (what, desc, unit) = if throughput {
        ("messages/s", "msg/s", Unit::PerSecond)
    } else {
        ("per-message latency p99 [us]", "p99 [us]", Unit::Nanos)
    };
    let values = Grid::values(&axes.sizes, &columns, |&s, k| {
        let c = cells
            .iter()
            .find(|c| c.size == s && &column(axes, c) == k)
            .filter(|c| c.out.recv.msgs > 0)?;
        Some(if throughput {
            c.out.msgs_per_sec() as u64
        } else {
            c.out.latency.summary().p99_ns
        })
    });
    Grid {
        title: format!("ibprobe stream sweep: {} {what}", t.name()),
        columns,
        rows: axes.sizes.iter().map(|s| s.to_string()).collect(),
        values,
        x_desc: Some("stream knobs (w = window, b = batch, p = pipeline)".into()),
        value_desc: Some(desc.into()),
        unit,
    }
}
