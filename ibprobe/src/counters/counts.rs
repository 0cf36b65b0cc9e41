//! The words of the counters: which counters there are ([`Counter`]), a
//! value per counter ([`Counts`]), what could not be counted ([`Missing`]),
//! an interrupt source's count ([`SourceCount`]), and the one allocation-free
//! read of a `/proc` file the sources share. Its own file so that the
//! sources take these from here, not through `mod.rs`, which uses theirs.

use std::fs::File;
use std::os::unix::fs::FileExt;

use serde::Serialize;

/// One counter the report can carry.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Counter {
    /// All context switches of the measuring thread.
    ContextSwitches,
    /// Involuntary context switches (preemption): the thread wanted to run.
    InvoluntaryContextSwitches,
    /// The thread moved to another CPU.
    CpuMigrations,
    /// Minor page faults (no I/O: first touch, copy on write).
    PageFaultsMinor,
    /// Major page faults (the page came from disk).
    PageFaultsMajor,
    /// CPU cycles (PMU).
    Cycles,
    /// Instructions retired (PMU).
    Instructions,
    /// Last-level cache misses (PMU).
    CacheMisses,
    /// Interrupts on the measuring CPU(s), all sources.
    Interrupts,
    /// System management interrupts (MSR_SMI_COUNT).
    Smis,
}

/// How many [`Counter`]s there are.
pub const N: usize = 10;

impl Counter {
    /// Every counter, in report order.
    pub const ALL: [Counter; N] = [
        Counter::ContextSwitches,
        Counter::InvoluntaryContextSwitches,
        Counter::CpuMigrations,
        Counter::PageFaultsMinor,
        Counter::PageFaultsMajor,
        Counter::Cycles,
        Counter::Instructions,
        Counter::CacheMisses,
        Counter::Interrupts,
        Counter::Smis,
    ];

    /// The name in JSON, CSV and metrics (snake_case).
    pub fn name(self) -> &'static str {
        match self {
            Counter::ContextSwitches => "context_switches",
            Counter::InvoluntaryContextSwitches => "involuntary_context_switches",
            Counter::CpuMigrations => "cpu_migrations",
            Counter::PageFaultsMinor => "page_faults_minor",
            Counter::PageFaultsMajor => "page_faults_major",
            Counter::Cycles => "cycles",
            Counter::Instructions => "instructions",
            Counter::CacheMisses => "cache_misses",
            Counter::Interrupts => "interrupts",
            Counter::Smis => "smis",
        }
    }

    /// What it counts, one line (docs, metric help).
    pub fn help(self) -> &'static str {
        match self {
            Counter::ContextSwitches => "context switches of the measuring thread",
            Counter::InvoluntaryContextSwitches => {
                "involuntary context switches (preemptions) of the measuring thread"
            }
            Counter::CpuMigrations => "moves of the measuring thread to another CPU",
            Counter::PageFaultsMinor => "minor page faults of the measuring thread",
            Counter::PageFaultsMajor => "major page faults (disk) of the measuring thread",
            Counter::Cycles => "CPU cycles of the measuring thread (PMU)",
            Counter::Instructions => "instructions retired by the measuring thread (PMU)",
            Counter::CacheMisses => "last-level cache misses of the measuring thread (PMU)",
            Counter::Interrupts => "interrupts on the measuring CPU, all sources",
            Counter::Smis => "system management interrupts (MSR_SMI_COUNT)",
        }
    }

    fn idx(self) -> usize {
        self as usize
    }
}

/// A value per counter; `None`: not counted here.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Counts(pub [Option<u64>; N]);

impl Counts {
    /// The value of `c`, if counted.
    pub fn get(&self, c: Counter) -> Option<u64> {
        self.0[c.idx()]
    }

    /// Sets `c`.
    pub fn set(&mut self, c: Counter, v: Option<u64>) {
        self.0[c.idx()] = v;
    }

    /// `self - before`, per counter (a counter missing in either is missing).
    pub fn since(&self, before: &Counts) -> Counts {
        let mut d = Counts::default();
        for i in 0..N {
            d.0[i] = match (self.0[i], before.0[i]) {
                (Some(a), Some(b)) => Some(a.saturating_sub(b)),
                _ => None,
            };
        }
        d
    }

    /// Adds `other` into `self` (missing stays missing).
    pub fn add(&mut self, other: &Counts) {
        for i in 0..N {
            self.0[i] = match (self.0[i], other.0[i]) {
                (Some(a), Some(b)) => Some(a + b),
                (a, None) => a,
                (None, b) => b,
            };
        }
    }

    /// The counted ones, in report order.
    pub fn iter(&self) -> impl Iterator<Item = (Counter, u64)> + '_ {
        Counter::ALL
            .iter()
            .filter_map(move |&c| self.get(c).map(|v| (c, v)))
    }
}

/// Counters that could not be counted, and why (one line, with what to do).
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct Missing {
    /// The counters' names.
    pub counters: Vec<&'static str>,
    /// Why, and what would give them.
    pub why: String,
}

/// Interrupts of one source on the measuring CPU(s) during the run.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct SourceCount {
    /// `LOC`, `RES`, or `29:virtio0-input.0` (IRQ number and action).
    pub source: String,
    /// The kernel's description of a named line, or the chip of an IRQ.
    pub what: String,
    /// Count during the run.
    pub count: u64,
}

/// Reads a `/proc` file from its start into `buf` (sized at open: no
/// allocation), as much as fits; the bytes read, None on a read error.
/// The kernel prints the file anew for a read at offset 0.
pub(crate) fn read_proc(file: &File, buf: &mut [u8]) -> Option<usize> {
    let mut n = 0;
    while n < buf.len() {
        match file.read_at(&mut buf[n..], n as u64) {
            Ok(0) => break,
            Ok(k) => n += k,
            Err(_) => return None,
        }
    }
    Some(n)
}
