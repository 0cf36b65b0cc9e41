//! `ibprobe loggp`'s outputs: a table, the JSON document `ibprobe.loggp/1`
//! (`report/README.md`), Markdown, and an SVG of the measured gap per
//! message against the bytes of a message with the fitted segments.

use std::path::Path;

use plotters::prelude::*;
use serde_json::{json, Value};

use super::model::{Align, Block, Column, Document, JsonDoc, Quote, ReportError, Table};
use super::plot::{save, svg, Canvas, Drawn};
use crate::probe::loggp_fit::{Estimate, Fit};
use crate::spec::{ModelParams, Transport};
use crate::transport::TransportInfo;

pub const SCHEMA: &str = "ibprobe.loggp/1";

/// One prediction of a stream workload against its measurement.
#[derive(Clone, Debug, Default, serde::Serialize)]
pub struct PredictionRow {
    /// Batch K (messages per slot).
    pub batch: u32,
    /// Credit window N (slots).
    pub window: u32,
    /// Pipeline depth D (unacknowledged slots), when acks are asked.
    pub pipeline: Option<u32>,
    pub size: usize,
    pub predicted_msgs_per_s: f64,
    /// Measured messages per second (none with --simulate).
    pub measured_msgs_per_s: Option<f64>,
    /// Predicted latency, hand-over to delivery (ns), of a message in an
    /// unloaded stream.
    pub predicted_latency_ns: f64,
    /// Measured median latency (ns).
    pub measured_p50_ns: Option<f64>,
    /// What limits the predicted rate ("sender", "receiver", "link", "window", "pipeline").
    pub bound: String,
    /// The stream loops' own work per slot (ns), sender and receiver.
    pub loop_ns: [f64; 2],
}

fn or_dash(v: Option<f64>, digits: usize) -> String {
    v.map(|x| format!("{x:.digits$}"))
        .unwrap_or_else(|| "-".into())
}

impl PredictionRow {
    /// Measured / predicted messages per second.
    pub fn ratio(&self) -> Option<f64> {
        self.measured_msgs_per_s
            .map(|m| m / self.predicted_msgs_per_s)
    }
}

/// Everything one `ibprobe loggp` run says.
#[derive(Clone, Debug)]
pub struct LoggpReport {
    pub transport: Transport,
    pub info: TransportInfo,
    /// "loopback", "client" or "simulate".
    pub mode: String,
    /// The model's parameters (the truth), on `--transport model`.
    pub truth: Option<ModelParams>,
    pub n: u16,
    pub rounds: usize,
    /// Repetitions per PRTT per round.
    pub reps: usize,
    /// Bursts repeated because their answer never came.
    pub lost: u64,
    pub elapsed_s: f64,
    pub fit: Fit,
    /// Warnings of the run (clock resolution, placement).
    pub warnings: Vec<String>,
    pub notes: Vec<String>,
    /// `--predict`: the stream workloads predicted (and measured).
    pub predictions: Vec<PredictionRow>,
}

fn params(f: &Fit) -> [(&'static str, &'static str, Estimate, &'static str); 5] {
    [
        ("L", "L_ns", f.l, "ns"),
        ("o_s", "os_ns", f.os, "ns"),
        ("o_r", "or_ns", f.or, "ns"),
        ("g", "g_ns", f.g, "ns"),
        ("G", "G_ns_per_byte", f.big_g, "ns/B"),
    ]
}

fn num(v: f64) -> String {
    let a = v.abs();
    if a == 0.0 {
        "0".into()
    } else if a >= 100.0 {
        format!("{v:.1}")
    } else if a >= 1.0 {
        format!("{v:.3}")
    } else {
        format!("{v:.5}")
    }
}

impl LoggpReport {
    /// The `ibprobe.loggp/1` document.
    pub fn json(&self) -> Value {
        let mut o = json!({
            "schema": SCHEMA,
            "tool_version": env!("CARGO_PKG_VERSION"),
            "transport": self.transport.name(),
            "transport_detail": self.info.detail,
            "mode": self.mode,
            "segments": self.fit.segments,
            "points": self.fit.points,
            "method": { "n": self.n, "rounds": self.rounds, "reps": self.reps, "lost": self.lost, "elapsed_s": self.elapsed_s },
            "notes": self.all_notes(),
            "warnings": self.all_warnings(),
        });
        for (_, key, e, _) in params(&self.fit) {
            o[key] = json!(e.value);
            o[format!("{key}_ci")] = json!([e.low, e.high]);
        }
        if let Some([l, os, or, g, big_g]) = self.truth.map(|p| p.ns()) {
            o["model"] =
                json!({ "L_ns": l, "os_ns": os, "or_ns": or, "g_ns": g, "G_ns_per_byte": big_g });
        }
        if !self.predictions.is_empty() {
            let ratio = |p: &PredictionRow| {
                let mut v = json!(p);
                v["ratio"] = json!(p.ratio());
                v
            };
            o["predictions"] = self.predictions.iter().map(ratio).collect();
        }
        o
    }

    fn all_notes(&self) -> Vec<String> {
        self.notes.iter().chain(&self.fit.notes).cloned().collect()
    }

    fn all_warnings(&self) -> Vec<String> {
        self.warnings
            .iter()
            .chain(&self.fit.warnings)
            .cloned()
            .collect()
    }

    /// The first line of the text table: what ran, how long.
    fn headline(&self) -> String {
        format!(
            "loggp {} ({}), {}: n = {}, {} rounds x {} reps, {:.1} s{}",
            self.transport,
            self.info.detail,
            self.mode,
            self.n,
            self.rounds,
            self.reps,
            self.elapsed_s,
            if self.lost > 0 {
                format!(", {} bursts lost and repeated", self.lost)
            } else {
                String::new()
            }
        )
    }

    /// The parameter table's rows: name [unit], estimate, interval, model.
    fn rows(&self) -> Vec<Vec<String>> {
        let truth = self.truth.map(|p| p.ns());
        params(&self.fit)
            .iter()
            .enumerate()
            .map(|(i, (name, _, e, unit))| {
                vec![
                    format!("{name} [{unit}]"),
                    num(e.value),
                    format!("[{}, {}]", num(e.low), num(e.high)),
                    truth.map(|t| num(t[i])).unwrap_or_default(),
                ]
            })
            .collect()
    }

    /// The measured gap per message and the fitted segments, as an SVG file.
    pub fn write_svg(&self, path: &Path) -> Result<(), ReportError> {
        save(path, svg((1000, 560), |root| self.draw(root)))
    }

    fn draw(&self, root: &Canvas) -> Drawn {
        let pts = &self.fit.points;
        let x_hi = pts.iter().map(|p| p.bytes).max().unwrap_or(1).max(2) as f64 * 1.5;
        let x_lo = pts.iter().map(|p| p.bytes).min().unwrap_or(1).max(1) as f64 / 1.5;
        let y_hi = pts.iter().map(|p| p.gap_ns).fold(1.0, f64::max) * 1.3;
        let title = format!(
            "ibprobe loggp {}: gap per message, g + G*b per segment",
            self.transport
        );
        let mut chart = ChartBuilder::on(root)
            .caption(title, ("sans-serif", 22))
            .margin(12)
            .x_label_area_size(44)
            .y_label_area_size(72)
            .build_cartesian_2d((x_lo..x_hi).log_scale(), 0.0..y_hi)?;
        chart
            .configure_mesh()
            .x_desc("bytes per message")
            .y_desc("gap per message [ns]")
            .draw()?;
        chart
            .draw_series(
                pts.iter()
                    .map(|p| Circle::new((p.bytes as f64, p.gap_ns), 5, BLUE.filled())),
            )?
            .label("measured (median over rounds)")
            .legend(|(x, y)| Circle::new((x + 9, y), 5, BLUE.filled()));
        for (i, s) in self.fit.segments.iter().enumerate() {
            let b = |size: usize| (size + crate::probe::workload::slot::LOGGP_HEADER) as f64;
            let (a, c) = (s.g_ns.value, s.big_g.value);
            let (l, h) = (b(s.from_size).ln(), b(s.to_size).ln());
            let xs = (0..=40).map(|k| (l + (h - l) * k as f64 / 40.0).exp());
            let color = Palette99::pick(i + 1).to_rgba();
            chart
                .draw_series(LineSeries::new(
                    xs.map(|x| (x, a + c * x)),
                    color.stroke_width(2),
                ))?
                .label(format!(
                    "{}..{} B: g {} ns, G {} ns/B",
                    s.from_size,
                    s.to_size,
                    num(a),
                    num(c)
                ))
                .legend(move |(x, y)| PathElement::new(vec![(x, y), (x + 18, y)], color));
        }
        chart
            .configure_series_labels()
            .position(SeriesLabelPosition::UpperLeft)
            .background_style(WHITE.mix(0.85))
            .border_style(BLACK)
            .draw()?;
        Ok(())
    }
}

/// The parameters with their intervals (and the model's truth), the
/// gap's segments, the per-size points, the `--predict` rows; JSON
/// `ibprobe.loggp/1`.
impl Document for LoggpReport {
    fn noun(&self) -> &'static str {
        "LogGP report"
    }

    fn blocks(&self) -> Vec<Block> {
        let right = |t: &str, w| Column::new(t, w, Align::RIGHT);
        let mut columns = vec![
            Column::new("parameter", 12, Align::LEFT),
            right("estimate", 12),
            right("95% interval", 28),
        ];
        if self.truth.is_some() {
            columns.push(right("model", 12));
        }
        let width = columns.len();
        let mut parameters = self.rows();
        parameters.iter_mut().for_each(|r| r.truncate(width));
        let mut gaps = vec![
            String::new(),
            "gap per message = g + G*b (b = bytes of a message, 16 B header included):".into(),
        ];
        gaps.extend(self.fit.segments.iter().map(|g| {
            format!(
                "  {:>6}..{:<6} B  g {:>10} ns [{}, {}]  G {:>9} ns/B [{}, {}]  max residual {:.1}%",
                g.from_size,
                g.to_size,
                num(g.g_ns.value),
                num(g.g_ns.low),
                num(g.g_ns.high),
                num(g.big_g.value),
                num(g.big_g.low),
                num(g.big_g.high),
                g.max_residual * 100.0
            )
        }));
        let segments = self.fit.segments.iter().map(|g| {
            vec![
                format!("{}..{}", g.from_size, g.to_size),
                num(g.g_ns.value),
                num(g.big_g.value),
            ]
        });
        let points = self.fit.points.iter().map(|p| {
            let mut row = vec![p.size.to_string(), p.bytes.to_string()];
            row.extend([p.prtt1_ns, p.gap_ns, p.os_ns, p.os_prtt_ns, p.or_ns].map(num));
            row
        });
        let points_columns = [
            ("size [B]", 8),
            ("bytes", 8),
            ("PRTT(1) [ns]", 14),
            ("gap [ns]", 12),
            ("o_s [ns]", 12),
            ("o_s PRTT [ns]", 14),
            ("o_r [ns]", 12),
        ];
        let only_text = |b| Block::OnlyText(Box::new(b));
        let only_markdown = |b| Block::OnlyMarkdown(Box::new(b));
        let table = |columns, rows| Table::block(columns, " ", rows);
        let mut blocks = vec![
            Block::Context(vec![self.headline(), String::new()]),
            Block::Heading(format!(
                "LogGP of {} ({}, {})",
                self.transport, self.info.detail, self.mode
            )),
            table(columns, parameters),
            Block::Context(gaps),
            only_markdown(table(
                vec![
                    Column::new("sizes [B]", 0, Align::LEFT),
                    right("g [ns]", 0),
                    right("G [ns/B]", 0),
                ],
                segments.collect(),
            )),
            Block::Context(vec![String::new()]),
            only_text(table(
                points_columns.iter().map(|&(t, w)| right(t, w)).collect(),
                points.collect(),
            )),
        ];
        if !self.predictions.is_empty() {
            let rows = self.predictions.iter().map(|p| {
                vec![
                    p.batch.to_string(),
                    p.window.to_string(),
                    p.pipeline.map_or("-".into(), |d| d.to_string()),
                    p.size.to_string(),
                    format!("{:.0}", p.predicted_msgs_per_s),
                    or_dash(p.measured_msgs_per_s, 0),
                    or_dash(p.ratio(), 2),
                    format!("{:.0}", p.predicted_latency_ns),
                    or_dash(p.measured_p50_ns, 0),
                    p.bound.clone(),
                ]
            });
            let rows: Vec<Vec<String>> = rows.collect();
            // Markdown shows the first seven, its rates titled with their unit.
            let columns = [
                ("batch", 6, "batch"),
                ("window", 7, "window"),
                ("pipeline", 9, "pipeline"),
                ("size", 7, "size"),
                ("predicted", 13, "predicted msg/s"),
                ("measured", 13, "measured msg/s"),
                ("ratio", 7, "ratio"),
                ("pred lat ns", 13, ""),
                ("meas p50 ns", 13, ""),
                ("bound", 9, ""),
            ];
            let md = 7;
            blocks.extend([
                Block::Context(vec![
                    String::new(),
                    "stream predictions (msg/s; latency = hand-over to delivery):".into(),
                ]),
                only_text(table(
                    columns.iter().map(|&(t, w, _)| right(t, w)).collect(),
                    rows.clone(),
                )),
                only_markdown(table(
                    columns[..md].iter().map(|&(_, _, t)| right(t, 0)).collect(),
                    rows.into_iter().map(|r| r[..md].to_vec()).collect(),
                )),
            ]);
        }
        blocks.extend([
            Block::Notes(self.all_notes()),
            Block::plain_warnings(self.all_warnings(), false, Quote::Paragraphs),
        ]);
        blocks
    }

    fn json(&self) -> Option<Box<dyn JsonDoc + '_>> {
        Some(Box::new(LoggpReport::json(self)))
    }
}
