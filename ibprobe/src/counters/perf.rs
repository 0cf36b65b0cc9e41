//! The measuring thread's perf events (perf-event2): software events
//! always tried, hardware events where a CPU PMU exists.
//!
//! Why it exists: `perf_event_open` counts context switches, migrations
//! and page faults of one thread in the kernel, for the cost of one
//! `read(2)` per counter when asked; this file opens them and says, once,
//! why any could not be opened (paranoid level, seccomp, no PMU).

use std::io;
use std::path::Path;

use perf_event::events::{Event, Hardware, Software};
use perf_event::{Builder, Counter as PerfCounter};

use super::{Counter, Counts, Missing};

/// The software events, with the counter each fills.
const SOFTWARE: [(Counter, Software); 4] = [
    (Counter::ContextSwitches, Software::CONTEXT_SWITCHES),
    (Counter::CpuMigrations, Software::CPU_MIGRATIONS),
    (Counter::PageFaultsMinor, Software::PAGE_FAULTS_MIN),
    (Counter::PageFaultsMajor, Software::PAGE_FAULTS_MAJ),
];

/// The hardware events (PMU).
const HARDWARE: [(Counter, Hardware); 3] = [
    (Counter::Cycles, Hardware::CPU_CYCLES),
    (Counter::Instructions, Hardware::INSTRUCTIONS),
    (Counter::CacheMisses, Hardware::CACHE_MISSES),
];

/// Where the kernel lists a CPU PMU (absent in most VMs).
pub const CPU_PMU: &str = "/sys/bus/event_source/devices/cpu";

/// Set (to anything) in the environment: behave as if `perf_event_open`
/// were refused (EACCES), for tests of the refusal path on hosts where
/// the test cannot take the permission away (root ignores
/// `perf_event_paranoid`).
pub const REFUSE_ENV: &str = "IBPROBE_COUNTERS_REFUSE_PERF";

/// The opened perf counters of the calling thread.
pub struct PerfSet {
    open: Vec<(Counter, PerfCounter)>,
}

/// Why an open failed, in words a user can act on.
fn why(e: &io::Error) -> String {
    match e.raw_os_error() {
        Some(libc::EACCES) | Some(libc::EPERM) => {
            let level = std::fs::read_to_string("/proc/sys/kernel/perf_event_paranoid")
                .map(|s| s.trim().to_string())
                .unwrap_or_else(|_| "unknown".into());
            format!("perf_event_open refused ({e}; kernel.perf_event_paranoid = {level}): lower it to 1 (`sysctl kernel.perf_event_paranoid=1`), run with CAP_PERFMON, or allow perf_event_open in the seccomp profile")
        }
        Some(libc::ENOSYS) => {
            "perf_event_open is not available (ENOSYS: a kernel without perf events, or a seccomp filter)".into()
        }
        _ => format!("perf_event_open failed ({e})"),
    }
}

fn open_one(b: &mut Builder<'_>) -> io::Result<PerfCounter> {
    if std::env::var_os(REFUSE_ENV).is_some() {
        return Err(io::Error::from_raw_os_error(libc::EACCES));
    }
    let mut c = b.build()?;
    c.enable()?;
    Ok(c)
}

/// Opens each event of `list` for the calling thread into `open`; the
/// names that failed and the first error.
fn open_all<E: Event + Clone>(
    list: &[(Counter, E)],
    open: &mut Vec<(Counter, PerfCounter)>,
) -> (Vec<&'static str>, Option<io::Error>) {
    let mut failed = Vec::new();
    let mut first_err = None;
    for (c, ev) in list {
        let mut b = Builder::new(ev.clone());
        b.observe_self()
            .any_cpu()
            .exclude_kernel(false)
            .exclude_hv(true);
        match open_one(&mut b) {
            Ok(pc) => open.push((*c, pc)),
            Err(e) => {
                failed.push(c.name());
                first_err.get_or_insert(e);
            }
        }
    }
    (failed, first_err)
}

impl PerfSet {
    /// Opens what it can for the calling thread (kernel side included:
    /// a context switch happens in the kernel); says in `missing` what it
    /// could not, once per cause.
    pub fn open(missing: &mut Vec<Missing>) -> PerfSet {
        let mut open = Vec::new();
        if let (failed, Some(e)) = open_all(&SOFTWARE, &mut open) {
            // getrusage stands in for the others.
            let counters: Vec<&'static str> = failed
                .into_iter()
                .filter(|n| *n == Counter::CpuMigrations.name())
                .collect();
            if !counters.is_empty() {
                missing.push(Missing {
                    counters,
                    why: format!(
                        "{}; context switches and page faults come from getrusage instead",
                        why(&e)
                    ),
                });
            }
        }
        if !Path::new(CPU_PMU).exists() {
            missing.push(Missing {
                counters: HARDWARE.iter().map(|(c, _)| c.name()).collect(),
                why: format!("no CPU PMU ({CPU_PMU} is absent: a VM without a virtual PMU, or a kernel without hardware events)"),
            });
        } else if let (failed, Some(e)) = open_all(&HARDWARE, &mut open) {
            missing.push(Missing {
                counters: failed,
                why: why(&e),
            });
        }
        PerfSet { open }
    }

    /// Reads every open counter into `out` (a `read(2)` each, into a stack
    /// buffer).
    pub fn read(&mut self, out: &mut Counts) {
        for (c, pc) in &mut self.open {
            if let Ok(v) = pc.read() {
                out.set(*c, Some(v));
            }
        }
    }

    /// How many counters are open.
    pub fn len(&self) -> usize {
        self.open.len()
    }

    /// True when none is.
    pub fn is_empty(&self) -> bool {
        self.open.is_empty()
    }
}
