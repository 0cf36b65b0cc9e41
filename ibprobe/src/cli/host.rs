//! `ibprobe host`: wake-up latency of a SCHED_FIFO thread per CPU
//! (cyclictest's measurement), one histogram per CPU, in the same output
//! formats as the probe.
//!
//! Why it exists: after `ibtune apply` a user wants to see what the tuning
//! did to the cores the probe will run on, with the same percentiles and
//! the same "> 10 us" tail metric as the network numbers, without
//! installing rt-tests. The measurement is [`crate::probe::wakeup`]; this
//! file parses the options, checks the CPU list and prints the report.

use std::fmt::Write as _;
use std::time::Duration;

use ibhost::cpulist::CpuSet;
use serde::Serialize;

use super::args::{HostArgs, HostFormat};
use super::common::stop_flag;
use super::{CliError, EXIT_INTERRUPTED};
use crate::probe::wakeup::{self, CpuWakeup, WakeupConfig, WakeupError, WakeupLength};
use crate::report::us;
use crate::stats::Summary;
use crate::sys::host;

/// The JSON schema identifier of `ibprobe host --format json`.
pub const SCHEMA: &str = "ibprobe.host/1";

/// Wake-ups per CPU when neither --count nor --duration is given.
pub const DEFAULT_COUNT: u64 = 10_000;

/// A CPU list in the kernel's notation ("0-3,8").
fn cpulist_string(cpus: &[usize]) -> String {
    CpuSet::from_iter_u32(cpus.iter().map(|&c| c as u32)).to_list()
}

/// Parses a kernel CPU list, bounded (`ibhost::cpulist`), in the order
/// written (duplicates kept, so they can be reported).
fn parse_cpulist(s: &str) -> Option<Vec<usize>> {
    ibhost::cpulist::parse_list_ordered(s).ok()
}

/// Parses and checks `--cpus` against the CPUs this process may use.
fn pick_cpus(list: Option<&str>, allowed: &[usize]) -> Result<Vec<usize>, CliError> {
    let Some(s) = list else {
        if allowed.is_empty() {
            return Err(CliError::run(
                "cannot read this process's CPU affinity (sched_getaffinity); pass --cpus",
            ));
        }
        return Ok(allowed.to_vec());
    };
    let cpus = parse_cpulist(s).filter(|v| !v.is_empty()).ok_or_else(|| {
        CliError::input(format!(
            "--cpus {s:?}: not a CPU list; write e.g. 0, 2-3 or 0,2,4-7"
        ))
    })?;
    let mut seen = Vec::new();
    for &c in &cpus {
        if seen.contains(&c) {
            return Err(CliError::input(format!(
                "--cpus {s}: CPU {c} is listed twice; list each CPU once"
            )));
        }
        if !allowed.contains(&c) {
            return Err(CliError::input(format!(
                "--cpus {s}: CPU {c} is not one this process may run on (allowed: {}); pick from those",
                cpulist_string(allowed)
            )));
        }
        seen.push(c);
    }
    Ok(cpus)
}

/// `ibprobe host`: checks the options, measures, prints; the exit code.
pub fn run(a: &HostArgs) -> Result<u8, CliError> {
    let cpus = pick_cpus(a.cpus.as_deref(), &host::allowed_cpus())?;
    if a.interval < Duration::from_micros(1) {
        return Err(CliError::input(format!(
            "--interval {:?}: too short for a timer; use at least 1us (cyclictest's default is 1ms)",
            a.interval
        )));
    }
    if a.count == Some(0) {
        return Err(CliError::input(
            "--count 0: measure at least 1 wake-up per CPU",
        ));
    }
    let length = match (a.duration, a.count) {
        (Some(d), _) => WakeupLength::Duration(d),
        (None, n) => WakeupLength::Count(n.unwrap_or(DEFAULT_COUNT)),
    };
    let cfg = WakeupConfig {
        cpus,
        priority: a.fifo,
        interval: a.interval,
        length,
        lock_memory: !a.no_mlock,
    };
    let stop = stop_flag()?;
    let outcome = wakeup::run(&cfg, stop).map_err(|e| match e {
        WakeupError::Fifo { .. } | WakeupError::Pin { .. } => CliError::input(e.to_string()),
        _ => CliError::run(e.to_string()),
    })?;
    let report = HostReport::new(&cfg, &outcome);
    let format = if a.json { HostFormat::Json } else { a.format };
    print!("{}", report.render(format));
    Ok(if outcome.interrupted {
        EXIT_INTERRUPTED
    } else {
        0
    })
}

/// One CPU's row of the report.
#[derive(Clone, Debug, Serialize)]
pub struct CpuRow {
    /// The CPU.
    pub cpu: usize,
    /// In /sys/devices/system/cpu/isolated (isolcpus=, e.g. set by ibtune).
    pub isolated: bool,
    /// In /sys/devices/system/cpu/nohz_full.
    pub nohz_full: bool,
    /// Wake-up latency statistics (definitions in `crate::stats`).
    #[serde(flatten)]
    pub summary: Summary,
    /// Deadlines skipped because a wake-up came after the next one.
    pub missed: u64,
}

/// The kernel the run measured.
#[derive(Clone, Debug, Serialize)]
pub struct KernelInfo {
    /// /proc/sys/kernel/osrelease.
    pub release: String,
    /// /sys/kernel/realtime is 1 (PREEMPT_RT).
    pub realtime: bool,
}

/// Everything the outputs of `ibprobe host` print, computed once.
#[derive(Clone, Debug, Serialize)]
pub struct HostReport {
    /// [`SCHEMA`].
    pub schema: &'static str,
    /// This crate's version.
    pub version: &'static str,
    /// The kernel.
    pub kernel: KernelInfo,
    /// SCHED_FIFO priority.
    pub fifo_priority: i32,
    /// Interval between deadlines, ns.
    pub interval_ns: u64,
    /// Always false: the probe leaves /dev/cpu_dma_latency alone.
    pub cpu_dma_latency_written: bool,
    /// Wall time of the measurement, ns.
    pub elapsed_ns: u64,
    /// Ctrl-C ended the run early.
    pub interrupted: bool,
    /// One row per CPU.
    pub cpus: Vec<CpuRow>,
    /// Placement facts.
    pub notes: Vec<String>,
    /// What a reader should know before trusting the numbers.
    pub warnings: Vec<String>,
}

fn read_trim(path: &str) -> Option<String> {
    std::fs::read_to_string(path)
        .ok()
        .map(|s| s.trim().to_string())
}

fn in_list(file: &str, cpu: usize) -> bool {
    read_trim(&format!("/sys/devices/system/cpu/{file}"))
        .and_then(|s| parse_cpulist(&s))
        .is_some_and(|l| l.contains(&cpu))
}

impl HostReport {
    /// Builds the report of a run.
    pub fn new(cfg: &WakeupConfig, o: &wakeup::WakeupOutcome) -> HostReport {
        let cpus: Vec<CpuRow> = o.cpus.iter().map(row).collect();
        let mut warnings = Vec::new();
        if o.interrupted {
            warnings.push(format!(
                "interrupted (Ctrl-C) after {:.3} s: the statistics cover the wake-ups so far",
                o.elapsed_ns as f64 / 1e9
            ));
        }
        for r in &cpus {
            if r.missed > 0 {
                warnings.push(format!(
                    "cpu {}: {} deadlines missed (a wake-up came after the next deadline): the core is busy or the interval ({:?}) too short",
                    r.cpu, r.missed, cfg.interval
                ));
            }
        }
        if let Some(n) = cpus.iter().map(|r| r.summary.count).min() {
            if n < 1000 {
                warnings.push(format!(
                    "only {n} wake-ups on a CPU, so p99.9 is the max: run longer (--count or --duration) for a tail"
                ));
            }
        }
        HostReport {
            schema: SCHEMA,
            version: env!("CARGO_PKG_VERSION"),
            kernel: KernelInfo {
                release: read_trim("/proc/sys/kernel/osrelease").unwrap_or_else(|| "?".into()),
                realtime: read_trim("/sys/kernel/realtime").as_deref() == Some("1"),
            },
            fifo_priority: cfg.priority,
            interval_ns: cfg.interval.as_nanos() as u64,
            cpu_dma_latency_written: false,
            elapsed_ns: o.elapsed_ns,
            interrupted: o.interrupted,
            cpus,
            notes: o.notes.clone(),
            warnings,
        }
    }

    /// Renders one output format (each ends with a newline).
    pub fn render(&self, f: HostFormat) -> String {
        match f {
            HostFormat::Table => self.table(),
            HostFormat::Json => {
                let mut s = serde_json::to_string_pretty(self).unwrap_or_default();
                s.push('\n');
                s
            }
            HostFormat::Csv => self.csv(),
            HostFormat::Markdown => self.markdown(),
        }
    }

    fn headline(&self) -> String {
        format!(
            "ibprobe {}: host wake-up latency, SCHED_FIFO {}, interval {:?}, kernel {}{}",
            self.version,
            self.fifo_priority,
            Duration::from_nanos(self.interval_ns),
            self.kernel.release,
            if self.kernel.realtime {
                " (PREEMPT_RT)"
            } else {
                ""
            }
        )
    }

    fn table(&self) -> String {
        let mut out = self.headline();
        out.push('\n');
        for n in &self.notes {
            let _ = writeln!(out, "note: {n}");
        }
        out.push('\n');
        out.push_str(
            "cpu  isolated nohz_full     count       min       p50       p99     p99.9        max   > 10 us  missed   [us]\n",
        );
        for r in &self.cpus {
            let [cpu, iso, nohz, count, min, p50, p99, p999, max, over, missed] = text_cells(r);
            let _ = writeln!(
                out,
                "{cpu:<4} {iso:>8} {nohz:>9} {count:>9} {min:>9} {p50:>9} {p99:>9} {p999:>9} {max:>10} {over:>9} {missed:>7}"
            );
        }
        if !self.warnings.is_empty() {
            out.push('\n');
            for w in &self.warnings {
                let _ = writeln!(out, "warning: {w}");
            }
        }
        out
    }

    fn csv(&self) -> String {
        let mut out = String::from(
            "cpu,isolated,nohz_full,count,min_ns,p50_ns,p99_ns,p999_ns,max_ns,mean_ns,over_10us_count,over_10us,missed\n",
        );
        for r in &self.cpus {
            let s = &r.summary;
            let _ = writeln!(
                out,
                "{},{},{},{},{},{},{},{},{},{:.1},{},{},{}",
                r.cpu,
                r.isolated,
                r.nohz_full,
                s.count,
                s.min_ns,
                s.p50_ns,
                s.p99_ns,
                s.p999_ns,
                s.max_ns,
                s.mean_ns,
                s.over_10us_count,
                s.over_10us,
                r.missed
            );
        }
        out
    }

    fn markdown(&self) -> String {
        let mut out = format!("**{}**\n\n", self.headline());
        out.push_str("| cpu | isolated | nohz_full | count | min [us] | p50 [us] | p99 [us] | p99.9 [us] | max [us] | > 10 us | missed |\n");
        out.push_str("|---:|:---:|:---:|---:|---:|---:|---:|---:|---:|---:|---:|\n");
        for r in &self.cpus {
            let _ = writeln!(out, "| {} |", text_cells(r).join(" | "));
        }
        for w in &self.warnings {
            let _ = writeln!(out, "\n> warning: {w}");
        }
        out
    }
}

/// One CPU's row as the table and Markdown show it (latencies in us).
fn text_cells(r: &CpuRow) -> [String; 11] {
    let s = &r.summary;
    [
        r.cpu.to_string(),
        yes_no(r.isolated).to_string(),
        yes_no(r.nohz_full).to_string(),
        s.count.to_string(),
        us(s.min_ns),
        us(s.p50_ns),
        us(s.p99_ns),
        us(s.p999_ns),
        us(s.max_ns),
        s.over_10us_count.to_string(),
        r.missed.to_string(),
    ]
}

fn yes_no(b: bool) -> &'static str {
    if b {
        "yes"
    } else {
        "no"
    }
}

fn row(c: &CpuWakeup) -> CpuRow {
    CpuRow {
        cpu: c.cpu,
        isolated: in_list("isolated", c.cpu),
        nohz_full: in_list("nohz_full", c.cpu),
        summary: c.latency.summary(),
        missed: c.missed,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::stats::LatencyHistogram;

    #[test]
    fn cpu_lists_are_checked() {
        let allowed = [0, 1, 2, 3, 8];
        assert_eq!(pick_cpus(Some("0,2-3"), &allowed).unwrap(), vec![0, 2, 3]);
        assert_eq!(pick_cpus(None, &allowed).unwrap(), allowed.to_vec());
        let e = pick_cpus(Some("0,9"), &allowed).unwrap_err();
        assert_eq!(e.code, 2);
        assert!(
            e.message.contains("CPU 9") && e.message.contains("allowed: 0-3,8"),
            "{}",
            e.message
        );
        for bad in ["", "x", "1-", "0;1"] {
            let e = pick_cpus(Some(bad), &allowed).unwrap_err();
            assert!(
                e.message.contains("not a CPU list"),
                "{bad:?}: {}",
                e.message
            );
        }
        assert!(pick_cpus(Some("1,1"), &allowed)
            .unwrap_err()
            .message
            .contains("listed twice"));
    }

    #[test]
    fn every_format_has_a_row_per_cpu() {
        let mut h = LatencyHistogram::new();
        for v in [3_000, 4_000, 50_000] {
            h.record(v);
        }
        let cfg = WakeupConfig {
            cpus: vec![0, 1],
            priority: 80,
            interval: Duration::from_millis(1),
            length: WakeupLength::Count(3),
            lock_memory: false,
        };
        let o = wakeup::WakeupOutcome {
            cpus: vec![
                CpuWakeup {
                    cpu: 0,
                    latency: h.clone(),
                    missed: 0,
                },
                CpuWakeup {
                    cpu: 1,
                    latency: h,
                    missed: 2,
                },
            ],
            ..Default::default()
        };
        let r = HostReport::new(&cfg, &o);
        let j: serde_json::Value = serde_json::from_str(&r.render(HostFormat::Json)).unwrap();
        assert_eq!(j["schema"], SCHEMA);
        assert_eq!(j["cpus"][1]["count"], 3);
        assert_eq!(j["cpus"][1]["max_ns"], 50_000);
        assert_eq!(j["cpus"][1]["over_10us_count"], 1);
        assert_eq!(j["cpu_dma_latency_written"], false);
        assert_eq!(r.render(HostFormat::Csv).lines().count(), 3);
        assert!(r.render(HostFormat::Markdown).contains("| 1 |"));
        let t = r.render(HostFormat::Table);
        assert!(t.contains("50.000"), "{t}");
        assert!(t.contains("2 deadlines missed"), "{t}");
    }
}
