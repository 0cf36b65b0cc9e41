//! The measuring thread's perf events (perf-event2): hardware events, and
//! software events for what the kernel's accounting also counts; opened
//! where a CPU PMU exists or when asked (`--perf-counters`), saying once
//! why any could not be. Without a PMU it is off by default: an event on a
//! thread makes the kernel do perf's work at each of its context switches,
//! for counts its own accounting keeps anyway (`getrusage`, `sched.rs`).
//! [`hold_static_keys`] spares a caller that opens counters per round
//! (ibexporter) the flip of the kernel's static keys each round
//! (`ibprobe/docs/methods.md`, "Perf events and the kernel's static keys").

use std::io;
use std::path::Path;
use std::sync::OnceLock;

use perf_event::events::{Event, Hardware, Software};
use perf_event::{Builder, Counter as PerfCounter};

use super::counts::{Counter, Counts, Missing};

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

/// Whether this machine has a CPU PMU (then perf events are opened by
/// default: cycles, instructions and cache misses have no other source).
pub fn pmu_present() -> bool {
    Path::new(CPU_PMU).exists()
}

/// Set in the environment: behave as if `perf_event_open` were refused
/// (EACCES), for tests of that path (root ignores `perf_event_paranoid`).
pub const REFUSE_ENV: &str = "IBPROBE_COUNTERS_REFUSE_PERF";

/// The opened perf counters of the calling thread.
#[derive(Default)]
pub struct PerfSet {
    open: Vec<(Counter, PerfCounter)>,
    /// Why the software events could not be opened.
    refused: Option<String>,
}

/// Why an open failed, in words a user can act on.
fn why(e: &io::Error) -> String {
    match e.raw_os_error() {
        Some(libc::EACCES) | Some(libc::EPERM) => {
            let level = ibhost::file::read_pseudo("/proc/sys/kernel/perf_event_paranoid", ibhost::file::MAX_PSEUDO_FILE)
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

/// The events [`hold_static_keys`] holds (empty where they could not be
/// opened: then neither can the counters).
static KEY_HOLDERS: OnceLock<Vec<PerfCounter>> = OnceLock::new();

/// Opens, once per process, one disabled event of each software kind on
/// the main thread (whose thread id is the process id, and which lives as
/// long as the process), and keeps them open, so the kernel's static keys
/// stay on (each flip patches kernel text with IPIs to every CPU). Returns
/// how many are held.
pub fn hold_static_keys() -> usize {
    KEY_HOLDERS
        .get_or_init(|| {
            if std::env::var_os(REFUSE_ENV).is_some() {
                return Vec::new();
            }
            let main = std::process::id() as libc::pid_t;
            SOFTWARE
                .iter()
                .filter_map(|(_, ev)| builder(*ev).observe_pid(main).enabled(false).build().ok())
                .collect()
        })
        .len()
}

/// `ev` on whichever CPU the observed thread runs, its kernel side counted.
fn builder<'a>(ev: impl Event) -> Builder<'a> {
    let mut b = Builder::new(ev);
    b.any_cpu().exclude_kernel(false).exclude_hv(true);
    b
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
    let (mut failed, mut first_err) = (Vec::new(), None);
    for (c, ev) in list {
        match open_one(builder(ev.clone()).observe_self()) {
            Ok(pc) => open.push((*c, pc)),
            Err(e) => {
                failed.push(c.name());
                first_err.get_or_insert(e);
            }
        }
    }
    (failed, first_err)
}

/// The hardware counters, and why they are missing where no PMU is.
fn no_pmu() -> Missing {
    Missing {
        counters: HARDWARE.iter().map(|(c, _)| c.name()).collect(),
        why: format!("no CPU PMU ({CPU_PMU} is absent: a VM without a virtual PMU, or a kernel without hardware events)"),
    }
}

impl PerfSet {
    /// Opens what it can for the calling thread (kernel side included);
    /// says in `missing` which hardware counters it could not open, and
    /// why. Why software events were refused is kept in `refused`, for the
    /// caller to say (the kernel's accounting counts the same).
    pub fn open(missing: &mut Vec<Missing>) -> PerfSet {
        hold_static_keys();
        let mut open = Vec::new();
        let refused = open_all(&SOFTWARE, &mut open).1.map(|e| why(&e));
        if !pmu_present() {
            missing.push(no_pmu());
        } else if let (failed, Some(e)) = open_all(&HARDWARE, &mut open) {
            missing.push(Missing {
                counters: failed,
                why: why(&e),
            });
        }
        PerfSet { open, refused }
    }

    /// No perf event (the default without a PMU): says in `missing` that
    /// there is no PMU for the hardware counters.
    pub fn not_asked(missing: &mut Vec<Missing>) -> PerfSet {
        missing.push(no_pmu());
        PerfSet::default()
    }

    /// Whether an open event counts `c`.
    pub fn counts(&self, c: Counter) -> bool {
        self.open.iter().any(|(k, _)| *k == c)
    }

    pub fn refused(&self) -> Option<&str> {
        self.refused.as_deref()
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

    pub fn len(&self) -> usize {
        self.open.len()
    }

    pub fn is_empty(&self) -> bool {
        self.open.is_empty()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Counters opened and closed on a thread that then exits leave the
    /// process holding one disabled event of each software kind on its
    /// main thread, so the kernel's static keys stay on between rounds.
    #[test]
    fn static_keys_stay_held_after_a_measuring_thread_is_gone() {
        let opened = std::thread::spawn(|| {
            let mut missing = Vec::new();
            let mut set = PerfSet::open(&mut missing);
            let mut c = Counts::default();
            set.read(&mut c);
            SOFTWARE.iter().filter(|(k, _)| c.get(*k).is_some()).count()
        })
        .join()
        .unwrap();
        if opened == 0 {
            eprintln!("perf_event_open refused here: no software event to hold");
            return;
        }
        let holders = KEY_HOLDERS.get().expect("the first open holds the keys");
        assert_eq!(
            holders.len(),
            SOFTWARE.len(),
            "one holder per software kind"
        );
        assert_eq!(hold_static_keys(), SOFTWARE.len(), "held once per process");
        for h in holders {
            use std::os::fd::AsRawFd;
            let link = std::fs::read_link(format!("/proc/self/fd/{}", h.as_raw_fd()))
                .expect("a held event's descriptor stays open");
            assert_eq!(link.to_string_lossy(), "anon_inode:[perf_event]");
        }
    }
}
