//! The report of `ibprobe host`: one row of wake-up latency statistics
//! per CPU, with the kernel facts that explain them, as a table, CSV,
//! Markdown or the `ibprobe.host/1` JSON document.

use std::time::Duration;

use serde::Serialize;

use super::model::{us, Align, Block, Column, Csv, Document, JsonDoc, Quote, Table};
use ibnoise::wakeup::{self, CpuWakeup, WakeupConfig};
use ibstats::latency::Summary;

pub const SCHEMA: &str = "ibprobe.host/1";

#[derive(Clone, Debug, Serialize)]
pub struct CpuRow {
    pub cpu: usize,
    /// In /sys/devices/system/cpu/isolated (isolcpus=, e.g. set by ibtune).
    pub isolated: bool,
    /// In /sys/devices/system/cpu/nohz_full.
    pub nohz_full: bool,
    /// Wake-up latency statistics (definitions in `ibstats::latency`).
    #[serde(flatten)]
    pub summary: Summary,
    /// Deadlines skipped because a wake-up came after the next one.
    pub missed: u64,
    /// The measuring thread's counters (`report::counters::json`).
    pub counters: Option<serde_json::Value>,
    #[serde(skip)]
    pub counter_lines: Vec<String>,
}

/// The kernel the run measured.
#[derive(Clone, Debug, Serialize)]
pub struct KernelInfo {
    /// /proc/sys/kernel/osrelease.
    pub release: String,
    /// /sys/kernel/realtime is 1 (PREEMPT_RT).
    pub realtime: bool,
}

/// What every `ibprobe host` report is, in its JSON's order: the
/// schema, tool and kernel, the command's own settings (`S`, flattened),
/// the run, one row per CPU (`C`), notes and warnings.
#[derive(Clone, Debug, Serialize)]
pub struct HostRun<S, C> {
    /// The schema (`ibprobe.host/1`, `ibprobe.timerlat/1`).
    pub schema: &'static str,
    pub version: &'static str,
    pub kernel: KernelInfo,
    /// What the command was asked to do.
    #[serde(flatten)]
    pub settings: S,
    /// Wall time of the measurement, ns.
    pub elapsed_ns: u64,
    pub interrupted: bool,
    pub cpus: Vec<C>,
    /// Placement facts, how the run was set up.
    pub notes: Vec<String>,
    /// What a reader should know before trusting the numbers.
    pub warnings: Vec<String>,
}

#[derive(Clone, Debug, Serialize)]
pub struct WakeupSettings {
    pub fifo_priority: i32,
    /// Interval between deadlines, ns.
    pub interval_ns: u64,
    /// Always false: the probe leaves /dev/cpu_dma_latency alone.
    pub cpu_dma_latency_written: bool,
}

/// Everything the outputs of `ibprobe host` print, computed once.
pub type HostReport = HostRun<WakeupSettings, CpuRow>;

impl<S, C> HostRun<S, C> {
    /// A report of this host's kernel and this crate's version.
    pub(super) fn on_this_host(
        schema: &'static str,
        settings: S,
        (elapsed_ns, interrupted): (u64, bool),
        cpus: Vec<C>,
        notes: Vec<String>,
        warnings: Vec<String>,
    ) -> HostRun<S, C> {
        HostRun {
            schema,
            version: env!("CARGO_PKG_VERSION"),
            kernel: KernelInfo::this_host(),
            settings,
            elapsed_ns,
            interrupted,
            cpus,
            notes,
            warnings,
        }
    }
}

/// The first warning of every `ibprobe host` report: a run cut short by
/// Ctrl-C, which measured `what` ("wake-ups").
pub(super) fn interrupted(interrupted: bool, elapsed_ns: u64, what: &str) -> Vec<String> {
    let s = elapsed_ns as f64 / 1e9;
    Vec::from_iter(interrupted.then(|| {
        format!("interrupted (Ctrl-C) after {s:.3} s: the statistics cover the {what} so far")
    }))
}

/// The last warning of every `ibprobe host` report: fewer than 1000
/// `what` on some CPU (`fewest`).
pub(super) fn few(fewest: Option<u64>, what: &str) -> Option<String> {
    let n = fewest.filter(|&n| n < 1000)?;
    Some(format!(
        "only {n} {what} on a CPU, so p99.9 is the max: run longer (--count or --duration) for a tail"
    ))
}

/// The head every `ibprobe host` report shares: `ibprobe VERSION: WHAT,
/// kernel RELEASE`, in the text table with the notes after it, in bold
/// in Markdown.
pub(super) fn head(
    version: &str,
    what: String,
    kernel: &KernelInfo,
    notes: &[String],
) -> [Block; 2] {
    let headline = format!(
        "ibprobe {version}: {what}, kernel {}{}",
        kernel.release,
        if kernel.realtime { " (PREEMPT_RT)" } else { "" }
    );
    let mut context = vec![headline.clone()];
    context.extend(notes.iter().map(|n| format!("note: {n}")));
    context.push(String::new());
    [
        Block::Context(context),
        Block::Title {
            bold: headline,
            rest: String::new(),
        },
    ]
}

/// The table of `ibprobe host` reports: the leading `columns`, then the
/// columns of [`us_cells`] (latencies titled plainly in the text table,
/// whose header ends with `[us]`, with the unit in Markdown), then `more`.
pub(super) fn us_table(columns: &[Column], more: &[Column], rows: Vec<Vec<String>>) -> Block {
    let c = |t: &str, w| Column::titled(t, &format!("{t} [us]"), w, Align::RIGHT);
    let mut columns = columns.to_vec();
    columns.push(Column::new("count", 9, Align::RIGHT));
    columns.extend(["min", "p50", "p99", "p99.9"].map(|t| c(t, 9)));
    columns.extend([c("max", 10), Column::new("n > 10 us", 9, Align::RIGHT)]);
    columns.extend_from_slice(more);
    Block::Table(Table {
        columns,
        unit: "[us]",
        sep: " ",
        rows,
    })
}

impl KernelInfo {
    pub fn this_host() -> KernelInfo {
        KernelInfo {
            release: read_trim("/proc/sys/kernel/osrelease").unwrap_or_else(|| "?".into()),
            realtime: read_trim("/sys/kernel/realtime").as_deref() == Some("1"),
        }
    }
}

fn read_trim(path: &str) -> Option<String> {
    ibhost::file::read_pseudo(path, ibhost::file::MAX_PSEUDO_FILE)
        .ok()
        .map(|s| s.trim().to_string())
}

fn in_list(file: &str, cpu: usize) -> bool {
    read_trim(&format!("/sys/devices/system/cpu/{file}"))
        .and_then(|s| ibhost::cpulist::CpuSet::parse_list(&s).ok())
        .is_some_and(|l| u32::try_from(cpu).is_ok_and(|c| l.contains(c)))
}

impl HostReport {
    pub fn new(cfg: &WakeupConfig, o: &wakeup::WakeupOutcome) -> HostReport {
        let cpus: Vec<CpuRow> = o.cpus.iter().map(row).collect();
        let mut warnings = interrupted(o.interrupted, o.elapsed_ns, "wake-ups");
        for r in cpus.iter().filter(|r| r.missed > 0) {
            warnings.push(format!(
                "cpu {}: {} deadlines missed (a wake-up came after the next deadline): the core is busy or the interval ({:?}) too short",
                r.cpu, r.missed, cfg.interval
            ));
        }
        warnings.extend(few(cpus.iter().map(|r| r.summary.count).min(), "wake-ups"));
        HostRun::on_this_host(
            SCHEMA,
            WakeupSettings {
                fifo_priority: cfg.priority,
                interval_ns: cfg.interval.as_nanos() as u64,
                cpu_dma_latency_written: false,
            },
            (o.elapsed_ns, o.interrupted),
            cpus,
            o.notes.clone(),
            warnings,
        )
    }
}

impl Document for HostReport {
    fn noun(&self) -> &'static str {
        "host report"
    }

    fn blocks(&self) -> Vec<Block> {
        let what = format!(
            "host wake-up latency, SCHED_FIFO {}, interval {:?}",
            self.settings.fifo_priority,
            Duration::from_nanos(self.settings.interval_ns)
        );
        let columns = [
            Column::new("cpu", 4, Align::LEFT_RIGHT),
            Column::new("isolated", 8, Align::CENTRED),
            Column::new("nohz_full", 9, Align::CENTRED),
        ];
        // Context switches are the thread's own sleeps here; the
        // missing-counter lines are the same for every CPU: once.
        let counters = self.cpus.iter().flat_map(|r| {
            r.counter_lines
                .iter()
                .filter(|l| !l.starts_with("counters missing") || r.cpu == self.cpus[0].cpu)
                .map(move |l| format!("cpu {}: {l}", r.cpu))
        });
        let mut blocks = Vec::from(head(self.version, what, &self.kernel, &self.notes));
        blocks.extend([
            us_table(
                &columns,
                &[Column::new("missed", 7, Align::RIGHT)],
                self.cpus.iter().map(text_cells).collect(),
            ),
            Block::Context(counters.collect()),
            Block::plain_warnings(&self.warnings, true, Quote::Apart),
        ]);
        blocks
    }

    fn csv(&self) -> Option<Csv> {
        let rows = self.cpus.iter().map(|r| {
            let mut row = vec![
                r.cpu.to_string(),
                r.isolated.to_string(),
                r.nohz_full.to_string(),
            ];
            row.extend(summary_csv(&r.summary));
            row.push(r.missed.to_string());
            row
        });
        Some(Csv {
            header: "cpu,isolated,nohz_full,count,min_ns,p50_ns,p99_ns,p999_ns,max_ns,mean_ns,over_10us_count,over_10us,missed".into(),
            rows: rows.collect(),
        })
    }

    fn json(&self) -> Option<Box<dyn JsonDoc + '_>> {
        Some(Box::new(self))
    }
}

/// The CSV cells of a wake-up distribution: count, min, p50, p99, p99.9,
/// max (ns), mean (one decimal), the count and share over 10 us.
pub(super) fn summary_csv(s: &Summary) -> Vec<String> {
    let mut cells: Vec<String> = [s.count, s.min_ns, s.p50_ns, s.p99_ns, s.p999_ns, s.max_ns]
        .map(|v| v.to_string())
        .to_vec();
    cells.extend([
        format!("{:.1}", s.mean_ns),
        s.over_10us_count.to_string(),
        s.over_10us.to_string(),
    ]);
    cells
}

/// One CPU's row as the table and Markdown show it (latencies in us).
fn text_cells(r: &CpuRow) -> Vec<String> {
    let yes_no = |b| if b { "yes" } else { "no" }.to_string();
    let mut row = vec![r.cpu.to_string(), yes_no(r.isolated), yes_no(r.nohz_full)];
    row.extend(us_cells(&r.summary));
    row.push(r.missed.to_string());
    row
}

/// A distribution's cells as the table and Markdown show them: count,
/// min, p50, p99, p99.9, max (us) and the count over 10 us.
pub(super) fn us_cells(s: &Summary) -> [String; 7] {
    [
        s.count.to_string(),
        us(s.min_ns),
        us(s.p50_ns),
        us(s.p99_ns),
        us(s.p999_ns),
        us(s.max_ns),
        s.over_10us_count.to_string(),
    ]
}

fn row(c: &CpuWakeup) -> CpuRow {
    CpuRow {
        cpu: c.cpu,
        isolated: in_list("isolated", c.cpu),
        nohz_full: in_list("nohz_full", c.cpu),
        summary: c.latency.summary(),
        missed: c.missed,
        counters: c.counters.as_ref().map(super::counters::json),
        counter_lines: c
            .counters
            .iter()
            .flat_map(super::counters::table_lines)
            .collect(),
    }
}
