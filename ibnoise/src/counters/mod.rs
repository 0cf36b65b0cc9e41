//! Counters: what the kernel and the hardware counted for the measuring
//! thread while it measured (context switches, migrations, page faults,
//! cycles, instructions, cache misses), the interrupts that landed on its
//! CPU (by source) and the SMIs of the machine: a tail has a cause, and
//! the kernel counts the usual ones for one thread at almost no cost. A
//! [`Meter`] is opened on the measuring thread and read before and after
//! the run (and at each interval's end), never per message.
//!
//! Sources, each optional (what is missing is said once, with why; where
//! each is missing: ibprobe/README.md, counters): `getrusage`,
//! `/proc/thread-self/sched` ([`sched`]), perf events ([`perf`]),
//! `/proc/interrupts` ([`interrupts`]) and `MSR_SMI_COUNT`.
//! [`attribution`] correlates per-interval counters with each interval's
//! tail.

pub mod attribution;
mod counts;
pub mod interrupts;
pub mod perf;
pub mod sched;

use std::fs::File;
use std::os::unix::fs::FileExt;

pub use self::counts::{Counter, Counts, Missing, SourceCount, N};
use self::interrupts::InterruptTable;
use self::perf::PerfSet;
use self::sched::SchedFile;

/// What a run's counters say: the deltas over the measured part, the
/// interrupt sources, what is missing, and the attribution (if the run
/// had intervals).
#[derive(Clone, Debug, Default)]
pub struct CounterReport {
    pub counts: Counts,
    /// The CPUs whose interrupts were counted.
    pub cpus: Vec<usize>,
    /// Interrupts on those CPUs by source, largest first (zero ones left out).
    pub interrupts_by_source: Vec<SourceCount>,
    pub missing: Vec<Missing>,
    pub attribution: Option<attribution::Attribution>,
}

impl CounterReport {
    /// The largest interrupt source, if any counted.
    pub fn top_source(&self) -> Option<&SourceCount> {
        self.interrupts_by_source.first()
    }
}

/// An open set of counters for the calling thread. Opening never fails:
/// what cannot be opened is recorded in `missing`.
pub struct Meter {
    perf: PerfSet,
    sched: Option<SchedFile>,
    irq: Option<InterruptTable>,
    smi: Option<File>,
    cpus: Vec<usize>,
    missing: Vec<Missing>,
}

/// Where `MSR_SMI_COUNT` lives (Intel).
const MSR_SMI_COUNT: u64 = 0x34;

/// The SMI count (32 bits of `MSR_SMI_COUNT`), if readable.
fn smi_count(msr: &File) -> Option<u64> {
    let mut b = [0u8; 8];
    (msr.read_at(&mut b, MSR_SMI_COUNT).ok()? == 8).then(|| u64::from_le_bytes(b) & 0xffff_ffff)
}

impl Meter {
    /// Opens the counters for the calling thread, which runs on `cpus`
    /// (the pinned CPU, or every CPU it may use), with perf events too
    /// where a CPU PMU exists (its counters have no other source) or when
    /// `perf` (`--perf-counters`). Call it on the measuring thread after
    /// pinning.
    pub fn open(cpus: &[usize], perf: bool) -> Meter {
        let mut missing = Vec::new();
        let perf = if perf || perf::pmu_present() {
            PerfSet::open(&mut missing)
        } else {
            PerfSet::not_asked(&mut missing)
        };
        let sched = match SchedFile::open() {
            Ok(f) => Ok(Some(f)),
            Err(_) if perf.counts(Counter::CpuMigrations) => Ok(None),
            Err(e) => {
                let no = format!("/proc/thread-self/sched is not readable ({e}: a kernel without CONFIG_SCHED_DEBUG?)");
                Err(match perf.refused() {
                    Some(r) => format!("{no}, and {r}"),
                    None => format!("{no}; --perf-counters counts them with perf_event_open"),
                })
            }
        };
        let irq = InterruptTable::open(cpus)
            .map_err(|e| format!("/proc/interrupts is not readable ({e}); mount /proc"));
        let path = format!("/dev/cpu/{}/msr", cpus.first().copied().unwrap_or(0));
        let smi = match File::open(&path) {
            Ok(f) if smi_count(&f).is_some() => Ok(f),
            Ok(_) => Err(format!("{path} has no readable MSR_SMI_COUNT (0x34): not an Intel CPU, or a VM that hides it")),
            Err(e) => Err(format!("{path}: {e}; SMIs need the msr module (`modprobe msr`) and root")),
        };
        // What could not be opened is said in this order: sched, interrupts, SMIs.
        let mut or_missing = |c: Counter, why: String| {
            missing.push(Missing {
                counters: vec![c.name()],
                why,
            })
        };
        let sched = sched.map_err(|why| or_missing(Counter::CpuMigrations, why));
        let sched = sched.ok().flatten();
        let irq = irq.map_err(|why| or_missing(Counter::Interrupts, why)).ok();
        let smi = smi.map_err(|why| or_missing(Counter::Smis, why)).ok();
        Meter {
            perf,
            sched,
            irq,
            smi,
            cpus: cpus.to_vec(),
            missing,
        }
    }

    /// Reads every counter now. No allocation: perf reads into stack
    /// buffers, `/proc/interrupts` into the table's buffer (sized at open).
    pub fn read(&mut self) -> Counts {
        let mut c = self.read_without_interrupts();
        if let Some(t) = self.irq.as_mut() {
            c.set(Counter::Interrupts, t.total());
        }
        c
    }

    /// Reads every counter but the interrupts: the thread's own (getrusage,
    /// its sched file for what perf did not count, perf events) and SMIs.
    /// The attribution's intervals (every 100 ms) read this: the kernel
    /// prints the whole `/proc/interrupts` table at each read, which went
    /// with a higher p99 (ibprobe/README.md, counters "Cost").
    pub fn read_without_interrupts(&mut self) -> Counts {
        let mut c = Counts::default();
        self.perf.read(&mut c);
        let uncounted = c.get(Counter::CpuMigrations).is_none();
        if let Some(f) = self.sched.as_mut().filter(|_| uncounted) {
            c.set(Counter::CpuMigrations, f.migrations());
        }
        if let Ok(u) = nix::sys::resource::getrusage(nix::sys::resource::UsageWho::RUSAGE_THREAD) {
            let (vol, invol) = (
                u.voluntary_context_switches(),
                u.involuntary_context_switches(),
            );
            c.set(Counter::InvoluntaryContextSwitches, Some(invol as u64));
            for (k, v) in [
                (Counter::ContextSwitches, vol + invol),
                (Counter::PageFaultsMinor, u.minor_page_faults()),
                (Counter::PageFaultsMajor, u.major_page_faults()),
            ] {
                // Where perf did not count it.
                c.0[k as usize].get_or_insert(v as u64);
            }
        }
        c.set(Counter::Smis, self.smi.as_ref().and_then(smi_count));
        c
    }
}

/// A run's counters from start to finish: [`Span::start`] before the
/// measured part, [`Span::finish`] after it.
pub struct Span {
    meter: Meter,
    before: Counts,
    src_before: Vec<SourceCount>,
}

impl Span {
    /// Opens a meter on `cpus` (with perf events when `perf`) and reads
    /// it: the measured part starts now.
    pub fn start(cpus: &[usize], perf: bool) -> Span {
        let mut meter = Meter::open(cpus, perf);
        let src_before = meter.irq.as_mut().map(|t| t.sources()).unwrap_or_default();
        let before = meter.read();
        Span {
            meter,
            before,
            src_before,
        }
    }

    /// The meter, for per-interval reads.
    pub fn meter(&mut self) -> &mut Meter {
        &mut self.meter
    }

    /// Reads again: the report of the span.
    pub fn finish(mut self) -> CounterReport {
        let after = self.meter.read();
        let src_after = self.meter.irq.as_mut().map(|t| t.sources());
        let src_after = src_after.unwrap_or_default();
        CounterReport {
            counts: after.since(&self.before),
            cpus: self.meter.cpus,
            interrupts_by_source: interrupts::delta(&self.src_before, &src_after),
            missing: self.meter.missing,
            attribution: None,
        }
    }
}

/// The CPUs a thread's interrupts are counted on: the pinned CPU, else
/// every CPU the calling thread may use.
pub fn measuring_cpus(pinned: Option<usize>) -> Vec<usize> {
    pinned.map_or_else(ibhost::rt::allowed_cpus, |c| vec![c])
}
