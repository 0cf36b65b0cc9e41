//! The report of `ibprobe host --trace`: per CPU, the IRQ latency and the
//! thread latency of the kernel's timerlat tracer as two distributions,
//! the CPU's top interference sources during the run, and what ran on the
//! CPU while its worst wake-up waited. Table, CSV, Markdown, or the
//! `ibprobe.timerlat/1` JSON document, from [`ibnoise::timerlat`]'s outcome.

use std::time::Duration;

use serde::Serialize;

use super::host::{self, HostRun};
use super::model::{us, Align, Block, Column, Csv, Document, JsonDoc, Quote, Spacing};
use ibnoise::timerlat::{TimerlatConfig, TimerlatOutcome};
use ibnoise::timerlat_trace::{CpuTimerlat, NoiseSource, WorstWakeup};
use ibstats::latency::Summary;

pub const SCHEMA: &str = "ibprobe.timerlat/1";

/// Interference sources listed per CPU.
pub const TOP_SOURCES: usize = 5;

#[derive(Clone, Debug, Serialize)]
pub struct TimerlatCpu {
    pub cpu: usize,
    /// Timer expiry -> its IRQ handler.
    pub irq: Summary,
    /// Timer expiry -> the timerlat thread running (includes the IRQ part).
    pub thread: Summary,
    /// The top interference sources of the run, most total time first.
    pub top_sources: Vec<NoiseSource>,
    /// The worst thread wake-up and what ran on the CPU during it.
    pub worst: Option<WorstWakeup>,
    /// Trace events of this CPU the kernel dropped.
    pub lost_events: u64,
}

#[derive(Clone, Debug, Serialize)]
pub struct TimerlatSettings {
    pub period_ns: u64,
}

/// Everything the outputs print, computed once.
pub type TimerlatReport = HostRun<TimerlatSettings, TimerlatCpu>;

fn cpu_of(c: &CpuTimerlat) -> TimerlatCpu {
    TimerlatCpu {
        cpu: c.cpu,
        irq: c.irq.summary(),
        thread: c.thread.summary(),
        top_sources: c.sources.iter().take(TOP_SOURCES).cloned().collect(),
        worst: c.worst.clone(),
        lost_events: c.lost_events,
    }
}

fn source_text(s: &NoiseSource) -> String {
    let ours = if s.ours {
        " (ibprobe's trace reader)"
    } else {
        ""
    };
    format!(
        "{} {}{ours}: {} x, {} us in all, longest {} us",
        s.kind.name(),
        s.source,
        s.count,
        us(s.total_ns),
        us(s.max_ns)
    )
}

impl TimerlatReport {
    pub fn new(cfg: &TimerlatConfig, o: &TimerlatOutcome) -> TimerlatReport {
        let cpus: Vec<TimerlatCpu> = o.cpus.iter().map(cpu_of).collect();
        let mut warnings = host::interrupted(o.interrupted, o.elapsed_ns, "samples");
        for c in cpus.iter().filter(|c| c.lost_events > 0) {
            warnings.push(format!(
                "cpu {}: the kernel dropped {} trace events (its buffer filled before ibprobe read it): counts are low and a dropped sample may be the worst; use a longer --period",
                c.cpu, c.lost_events
            ));
        }
        for c in &o.cpus {
            if let Some(s) = c.sources.iter().find(|s| s.ours) {
                warnings.push(format!(
                    "cpu {}: ibprobe's own trace reader ran there {} times ({} us in all) and is part of its interference: measure fewer CPUs (--cpus) and run ibprobe elsewhere, e.g. `taskset -c OTHER ibprobe host --trace --cpus LIST`",
                    c.cpu, s.count, us(s.total_ns)
                ));
            }
        }
        warnings.extend(host::few(
            cpus.iter().map(|c| c.thread.count).min(),
            "samples",
        ));
        if o.unparsed_lines > 0 {
            warnings.push(format!(
                "{} trace lines were not understood (a kernel with another timerlat format?); the figures cover the rest",
                o.unparsed_lines
            ));
        }
        HostRun::on_this_host(
            SCHEMA,
            TimerlatSettings {
                period_ns: cfg.period.as_nanos() as u64,
            },
            (o.elapsed_ns, o.interrupted),
            cpus,
            o.notes.clone(),
            warnings,
        )
    }

    fn rows(&self) -> impl Iterator<Item = (usize, &'static str, &Summary)> {
        self.cpus
            .iter()
            .flat_map(|c| [(c.cpu, "irq", &c.irq), (c.cpu, "thread", &c.thread)])
    }

    /// Per CPU, its top interference sources and its worst wake-up with
    /// what ran during it (the text table's lines after its table).
    fn causes(&self) -> Vec<String> {
        let mut out = Vec::new();
        for c in &self.cpus {
            if !c.top_sources.is_empty() {
                out.push(String::new());
                out.push(format!("cpu {}: top interference during the run:", c.cpu));
                out.extend(
                    c.top_sources
                        .iter()
                        .map(|s| format!("  {}", source_text(s))),
                );
            }
            if let Some(w) = &c.worst {
                let head = format!(
                    "cpu {}: worst thread wake-up {} us (irq {}) at {:.6} s",
                    c.cpu,
                    us(w.thread_ns),
                    w.irq_ns.map_or("?".into(), |v| format!("{} us", us(v))),
                    w.at_ns as f64 / 1e9
                );
                if w.blocking.is_empty() {
                    out.push(head + "; no interference traced inside it");
                } else {
                    out.push(head + "; during it:");
                    out.extend(w.blocking.iter().map(|s| {
                        format!("  {} {}: {} us", s.kind.name(), s.source, us(s.total_ns))
                    }));
                }
            }
        }
        out
    }
}

impl Document for TimerlatReport {
    fn noun(&self) -> &'static str {
        "timerlat report"
    }

    fn blocks(&self) -> Vec<Block> {
        let what = format!(
            "timerlat IRQ and thread latency, period {:?}",
            Duration::from_nanos(self.settings.period_ns)
        );
        let columns = [
            Column::new("cpu", 4, Align::LEFT_RIGHT),
            Column::new("context", 7, Align::LEFT_MARKED),
        ];
        let rows = self.rows().map(|(cpu, ctx, s)| {
            let mut row = vec![cpu.to_string(), ctx.to_string()];
            row.extend(host::us_cells(s));
            row
        });
        let sources = self.cpus.iter().flat_map(|c| {
            c.top_sources
                .iter()
                .map(move |s| format!("cpu {}: {}", c.cpu, source_text(s)))
        });
        let mut blocks = Vec::from(host::head(self.version, what, &self.kernel, &self.notes));
        blocks.extend([
            host::us_table(&columns, &[], rows.collect()),
            Block::Context(self.causes()),
            Block::List(sources.collect(), Spacing::Each),
            Block::plain_warnings(&self.warnings, true, Quote::Apart),
        ]);
        blocks
    }

    fn csv(&self) -> Option<Csv> {
        let rows = self.rows().map(|(cpu, ctx, s)| {
            let mut row = vec![cpu.to_string(), ctx.to_string()];
            row.extend(host::summary_csv(s));
            row
        });
        Some(Csv {
            header: "cpu,context,count,min_ns,p50_ns,p99_ns,p999_ns,max_ns,mean_ns,over_10us_count,over_10us".into(),
            rows: rows.collect(),
        })
    }

    fn json(&self) -> Option<Box<dyn JsonDoc + '_>> {
        Some(Box::new(self))
    }
}
