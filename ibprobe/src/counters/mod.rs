//! Counters: what the kernel and the hardware counted for the measuring
//! thread while it measured (context switches, migrations, page faults,
//! cycles, instructions, cache misses), the interrupts that landed on its
//! CPU (by source) and the SMIs of the machine.
//!
//! Why it exists: a tail (p99.99 48 us, max 184 us) has a cause, and the
//! kernel counts the usual ones for one thread at almost no cost. A
//! [`Meter`] is opened on the measuring thread before the run and read
//! before and after it (and at each interval's end), never per message.
//!
//! Sources, each optional (what is missing is said once, with why, and the
//! run goes on):
//! - `getrusage(RUSAGE_THREAD)`: voluntary and involuntary context
//!   switches and page faults (always there);
//! - `/proc/thread-self/sched` ([`sched`]): CPU migrations (kernels with
//!   `CONFIG_SCHED_DEBUG`);
//! - where a CPU PMU exists (`/sys/bus/event_source/devices/cpu`; most
//!   VMs have none), or when asked (`--perf-counters`, [`Meter::open`]'s
//!   `perf`): `perf_event_open` through perf-event2 ([`perf`]): hardware
//!   events (cycles, instructions, cache misses), and software events for
//!   the same counts as the two above. Without a PMU no perf event is
//!   opened by default: an event on the thread makes the kernel do perf's
//!   work at each of its context switches, for counts the first two
//!   sources (the kernel's own accounting) give anyway;
//! - `/proc/interrupts` ([`interrupts`]): per source, the counts of the
//!   measuring CPU (the pinned one, or all CPUs the thread may use);
//! - `/dev/cpu/N/msr` register 0x34 (`MSR_SMI_COUNT`, Intel): SMIs, where
//!   the msr module is loaded and readable (root).
//!
//! [`attribution`] correlates per-interval counters with each interval's
//! tail. What may use this module: `probe`, `report`, `cli`; it uses
//! `stats` only.

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
    /// Deltas over the measured part.
    pub counts: Counts,
    /// The CPUs whose interrupts were counted.
    pub cpus: Vec<usize>,
    /// Interrupts on those CPUs by source, largest first (zero ones left out).
    pub interrupts_by_source: Vec<SourceCount>,
    /// What could not be counted, and why.
    pub missing: Vec<Missing>,
    /// Per-interval correlation of counters with the tail.
    pub attribution: Option<attribution::Attribution>,
}

impl CounterReport {
    /// The largest interrupt source, if any counted.
    pub fn top_source(&self) -> Option<&SourceCount> {
        self.interrupts_by_source.first()
    }
}

/// An open set of counters for the calling thread. Opening never fails:
/// what cannot be opened is recorded in [`Meter::missing`].
pub struct Meter {
    perf: PerfSet,
    sched: Option<SchedFile>,
    irq: Option<InterruptTable>,
    smi: Option<File>,
    cpus: Vec<usize>,
    missing: Vec<Missing>,
}

/// Where `MSR_SMI_COUNT` lives (Intel; 32 bits of SMI count).
const MSR_SMI_COUNT: u64 = 0x34;

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
            Ok(f) => Some(f),
            Err(e) => {
                if !perf.counts(Counter::CpuMigrations) {
                    let why = match perf.refused() {
                        Some(r) => format!("/proc/thread-self/sched is not readable ({e}: a kernel without CONFIG_SCHED_DEBUG?), and {r}"),
                        None => format!("/proc/thread-self/sched is not readable ({e}: a kernel without CONFIG_SCHED_DEBUG?); --perf-counters counts them with perf_event_open"),
                    };
                    missing.push(Missing {
                        counters: vec![Counter::CpuMigrations.name()],
                        why,
                    });
                }
                None
            }
        };
        let irq = match InterruptTable::open(cpus) {
            Ok(t) => Some(t),
            Err(e) => {
                missing.push(Missing {
                    counters: vec![Counter::Interrupts.name()],
                    why: format!("/proc/interrupts is not readable ({e}); mount /proc"),
                });
                None
            }
        };
        let cpu0 = cpus.first().copied().unwrap_or(0);
        let path = format!("/dev/cpu/{cpu0}/msr");
        let smi = match File::open(&path) {
            Ok(f) => {
                let mut b = [0u8; 8];
                match f.read_at(&mut b, MSR_SMI_COUNT) {
                    Ok(8) => Some(f),
                    Ok(_) | Err(_) => {
                        missing.push(Missing {
                            counters: vec![Counter::Smis.name()],
                            why: format!("{path} has no readable MSR_SMI_COUNT (0x34): not an Intel CPU, or a VM that hides it"),
                        });
                        None
                    }
                }
            }
            Err(e) => {
                missing.push(Missing {
                    counters: vec![Counter::Smis.name()],
                    why: format!("{path}: {e}; SMIs need the msr module (`modprobe msr`) and root"),
                });
                None
            }
        };
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

    /// Reads every counter but the interrupts: the thread's own
    /// (getrusage, its sched file, perf events if asked for) and SMIs, a
    /// few system calls that cost about the same on any machine.
    ///
    /// Why it exists: the attribution's intervals (every 100 ms) read
    /// this. `/proc/interrupts` is the costly read: the kernel prints the
    /// whole table, every source on every CPU, each time (~70 us on a
    /// 2-CPU VM, ~0.4 ms in the lab's emulated guest, more with hundreds of
    /// HCA vectors), and reading it every 100 ms went with a higher p99 in
    /// the lab (ibprobe/README.md, counters "Cost").
    pub fn read_without_interrupts(&mut self) -> Counts {
        let mut c = Counts::default();
        self.perf.read(&mut c);
        self.read_accounting_and_smis(&mut c);
        c
    }

    /// getrusage and the sched file (for what perf did not count) and
    /// SMIs.
    fn read_accounting_and_smis(&mut self, c: &mut Counts) {
        if c.get(Counter::CpuMigrations).is_none() {
            if let Some(f) = self.sched.as_mut() {
                c.set(Counter::CpuMigrations, f.migrations());
            }
        }
        if let Ok(u) = nix::sys::resource::getrusage(nix::sys::resource::UsageWho::RUSAGE_THREAD) {
            let (vol, invol) = (
                u.voluntary_context_switches(),
                u.involuntary_context_switches(),
            );
            c.set(Counter::InvoluntaryContextSwitches, Some(invol as u64));
            if c.get(Counter::ContextSwitches).is_none() {
                c.set(Counter::ContextSwitches, Some((vol + invol) as u64));
            }
            if c.get(Counter::PageFaultsMinor).is_none() {
                c.set(Counter::PageFaultsMinor, Some(u.minor_page_faults() as u64));
            }
            if c.get(Counter::PageFaultsMajor).is_none() {
                c.set(Counter::PageFaultsMajor, Some(u.major_page_faults() as u64));
            }
        }
        if let Some(f) = &self.smi {
            let mut b = [0u8; 8];
            if f.read_at(&mut b, MSR_SMI_COUNT).is_ok_and(|n| n == 8) {
                c.set(Counter::Smis, Some(u64::from_le_bytes(b) & 0xffff_ffff));
            }
        }
    }

    /// The interrupt counts by source now (allocates: before and after a
    /// run only).
    pub fn read_sources(&mut self) -> Vec<interrupts::SourceLine> {
        self.irq.as_mut().map(|t| t.sources()).unwrap_or_default()
    }

    /// The report of a run measured between `before` and `after` (with
    /// the sources read at the same moments).
    pub fn report(
        &self,
        before: &Counts,
        after: &Counts,
        src_before: &[interrupts::SourceLine],
        src_after: &[interrupts::SourceLine],
    ) -> CounterReport {
        CounterReport {
            counts: after.since(before),
            cpus: self.cpus.clone(),
            interrupts_by_source: interrupts::delta(src_before, src_after),
            missing: self.missing.clone(),
            attribution: None,
        }
    }
}

/// A run's counters from start to finish: [`Span::start`] before the
/// measured part, [`Span::finish`] after it.
pub struct Span {
    meter: Meter,
    before: Counts,
    src_before: Vec<interrupts::SourceLine>,
}

impl Span {
    /// Opens a meter on `cpus` (with perf events when `perf`) and reads
    /// it: the measured part starts now.
    pub fn start(cpus: &[usize], perf: bool) -> Span {
        let mut meter = Meter::open(cpus, perf);
        let src_before = meter.read_sources();
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
        let src_after = self.meter.read_sources();
        self.meter
            .report(&self.before, &after, &self.src_before, &src_after)
    }
}

/// The CPUs a thread's interrupts are counted on: the pinned CPU, else
/// every CPU the calling thread may use.
pub fn measuring_cpus(pinned: Option<usize>) -> Vec<usize> {
    match pinned {
        Some(c) => vec![c],
        None => ibhost::rt::allowed_cpus(),
    }
}
