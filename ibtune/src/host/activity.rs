//! What happened on some CPUs over a short window: interrupts by source
//! (`/proc/interrupts`), the share of time the CPU was busy (`/proc/stat`)
//! and, where the kernel keeps scheduler statistics (`/proc/schedstat`),
//! how often it scheduled.
//!
//! Why it exists: a profile can match on paper (cpusets isolated, IRQs
//! pinned away) while an isolated CPU still takes 1,204 interrupts a second
//! from eth0, or runs someone's task. `ibtune verify` shows this as drift
//! evidence beside the settings. Every path is read through [`HostRoot`],
//! so a fixture tree under `--root` stands in for the host; the interrupt
//! table is parsed by ibprobe's `counters::interrupts` (one parser for the
//! probe's per-run counters and this).

use std::collections::BTreeMap;
use std::time::Duration;

use ibnoise::counters::interrupts::{columns, delta, parse_sources};
use ibnoise::counters::SourceCount;
use serde::Serialize;

use super::root::HostRoot;

/// One CPU over the window.
#[derive(Debug, Clone, Serialize)]
pub struct CpuActivity {
    /// The CPU.
    pub cpu: usize,
    /// Interrupts it received, all sources.
    pub interrupts: u64,
    /// By source, largest first (those with none left out).
    pub sources: Vec<SourceCount>,
    /// Share of the window it was not idle (None: no `/proc/stat` line).
    pub busy_fraction: Option<f64>,
    /// Times it scheduled (`/proc/schedstat` sched_count; None without
    /// CONFIG_SCHEDSTATS).
    pub schedules: Option<u64>,
}

/// The window and its CPUs.
#[derive(Debug, Clone, Serialize)]
pub struct Activity {
    /// How long was watched, ns.
    pub window_ns: u64,
    /// One entry per CPU asked for.
    pub cpus: Vec<CpuActivity>,
    /// What could not be read.
    pub notes: Vec<String>,
}

/// The `cpuN ...` lines of `text`: N and the numbers after it.
fn cpu_lines(text: &str) -> impl Iterator<Item = (usize, Vec<u64>)> + '_ {
    text.lines().filter_map(|l| {
        let mut w = l.split_whitespace();
        let cpu = w.next()?.strip_prefix("cpu")?.parse::<usize>().ok()?;
        Some((cpu, w.filter_map(|x| x.parse().ok()).collect()))
    })
}

/// Per-CPU (busy, total) jiffies from `/proc/stat` (user nice system idle
/// iowait irq softirq steal: idle and iowait are not busy).
fn read_stat(root: &HostRoot) -> Option<BTreeMap<usize, (u64, u64)>> {
    let text = root.read_opt("/proc/stat")?;
    Some(
        cpu_lines(&text)
            .map(|(cpu, v)| {
                let total: u64 = v.iter().take(8).sum();
                let idle = v.get(3).copied().unwrap_or(0) + v.get(4).copied().unwrap_or(0);
                (cpu, (total.saturating_sub(idle), total))
            })
            .collect(),
    )
}

/// Per-CPU sched_count from `/proc/schedstat` (the third number of a
/// `cpuN` line).
fn read_schedstat(root: &HostRoot) -> Option<BTreeMap<usize, u64>> {
    let text = root.read_opt("/proc/schedstat")?;
    Some(
        cpu_lines(&text)
            .filter_map(|(cpu, v)| v.get(2).map(|&n| (cpu, n)))
            .collect(),
    )
}

/// Watches `cpus` for `window`: reads, sleeps, reads again.
pub fn observe(root: &HostRoot, cpus: &[usize], window: Duration) -> Activity {
    let mut notes = Vec::new();
    let irq0 = root.read_opt("/proc/interrupts");
    let (stat0, sched0) = (read_stat(root), read_schedstat(root));
    std::thread::sleep(window);
    let irq1 = root.read_opt("/proc/interrupts");
    let (stat1, sched1) = (read_stat(root), read_schedstat(root));
    if irq0.is_none() || irq1.is_none() {
        notes.push("/proc/interrupts is not readable: interrupts not counted".into());
    }
    if stat1.is_none() {
        notes.push("/proc/stat is not readable: busy time not measured".into());
    }
    if sched1.is_none() {
        notes.push("/proc/schedstat is absent (a kernel without CONFIG_SCHEDSTATS): context switches per CPU are not counted".into());
    }
    let out = cpus
        .iter()
        .map(|&cpu| {
            let (interrupts, sources) = match (&irq0, &irq1) {
                (Some(a), Some(b)) => {
                    let d = delta(
                        &parse_sources(a, &columns(a, &[cpu])),
                        &parse_sources(b, &columns(b, &[cpu])),
                    );
                    (d.iter().map(|s| s.count).sum(), d)
                }
                _ => (0, Vec::new()),
            };
            let busy_fraction = match (&stat0, &stat1) {
                (Some(a), Some(b)) => match (a.get(&cpu), b.get(&cpu)) {
                    (Some(x), Some(y)) if y.1 > x.1 => {
                        Some(y.0.saturating_sub(x.0) as f64 / (y.1 - x.1) as f64)
                    }
                    _ => None,
                },
                _ => None,
            };
            let schedules = match (&sched0, &sched1) {
                (Some(a), Some(b)) => match (a.get(&cpu), b.get(&cpu)) {
                    (Some(x), Some(y)) => Some(y.saturating_sub(*x)),
                    _ => None,
                },
                _ => None,
            };
            CpuActivity {
                cpu,
                interrupts,
                sources,
                busy_fraction,
                schedules,
            }
        })
        .collect();
    Activity {
        window_ns: window.as_nanos() as u64,
        cpus: out,
        notes,
    }
}

impl Activity {
    /// One line per CPU that saw something: "CPU 3 is isolated but
    /// received 1,204 interrupts in 1 s (eth0 1,100, LOC 104)", and its
    /// busy share and schedules when measured.
    pub fn lines(&self, what: &str) -> Vec<String> {
        let secs = ibhost::duration::format(Duration::from_nanos(self.window_ns));
        let th = ibprobe::report::counters::thousands;
        let mut out = Vec::new();
        for c in &self.cpus {
            let mut parts = Vec::new();
            if c.interrupts > 0 {
                let top: Vec<String> = c
                    .sources
                    .iter()
                    .take(3)
                    .map(|s| format!("{} {}", s.source, th(s.count)))
                    .collect();
                parts.push(format!(
                    "received {} interrupts in {secs} ({})",
                    th(c.interrupts),
                    top.join(", ")
                ));
            }
            if let Some(n) = c.schedules.filter(|&n| n > 0) {
                parts.push(format!("scheduled {} times", th(n)));
            }
            if let Some(f) = c.busy_fraction.filter(|&f| f >= 0.01) {
                parts.push(format!("was busy {:.0}% of the time", f * 100.0));
            }
            if !parts.is_empty() {
                out.push(format!("CPU {} is {what} but {}", c.cpu, parts.join("; ")));
            }
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_quiet_fixture_says_nothing_and_names_what_is_missing() {
        let tmp = tempfile::tempdir().unwrap();
        let p = tmp.path();
        std::fs::create_dir_all(p.join("proc")).unwrap();
        std::fs::create_dir_all(p.join("sys/devices/system/cpu")).unwrap();
        std::fs::write(p.join("sys/devices/system/cpu/online"), "0-1\n").unwrap();
        std::fs::write(
            p.join("proc/interrupts"),
            "           CPU0       CPU1\n 30:          0          5  PCI-MSIX  1-edge  eth0\n",
        )
        .unwrap();
        let root = HostRoot::new(p).unwrap();
        let a = observe(&root, &[1], Duration::from_millis(1));
        assert_eq!(a.cpus[0].interrupts, 0);
        assert!(a.lines("isolated").is_empty());
        assert!(
            a.notes.iter().any(|n| n.contains("schedstat")),
            "{:?}",
            a.notes
        );
    }

    #[test]
    fn lines_name_the_cpu_the_count_and_the_source() {
        let a = Activity {
            window_ns: 1_000_000_000,
            cpus: vec![CpuActivity {
                cpu: 3,
                interrupts: 1204,
                sources: vec![SourceCount {
                    source: "30:eth0".into(),
                    what: "PCI-MSIX".into(),
                    count: 1204,
                }],
                busy_fraction: Some(0.25),
                schedules: None,
            }],
            notes: vec![],
        };
        assert_eq!(
            a.lines("isolated"),
            ["CPU 3 is isolated but received 1,204 interrupts in 1s (30:eth0 1,204); was busy 25% of the time"]
        );
    }
}
