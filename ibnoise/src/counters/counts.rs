//! The words of the counters and the one allocation-free read of a
//! `/proc` file the sources share: apart from `mod.rs`, which uses the
//! sources, so that they take these from here.

use std::fs::File;
use std::os::unix::fs::FileExt;

use serde::Serialize;

ibhost::vocabulary! {
    no_from_str
    /// One counter the report can carry: its name in JSON, CSV and
    /// metrics, and what it counts (docs, metric help), in report order.
    Counter {
        ContextSwitches = "context_switches", "context switches of the measuring thread";
        InvoluntaryContextSwitches = "involuntary_context_switches", "involuntary context switches (preemptions) of the measuring thread";
        CpuMigrations = "cpu_migrations", "moves of the measuring thread to another CPU";
        PageFaultsMinor = "page_faults_minor", "minor page faults of the measuring thread";
        PageFaultsMajor = "page_faults_major", "major page faults (disk) of the measuring thread";
        Cycles = "cycles", "CPU cycles of the measuring thread (PMU)";
        Instructions = "instructions", "instructions retired by the measuring thread (PMU)";
        CacheMisses = "cache_misses", "last-level cache misses of the measuring thread (PMU)";
        Interrupts = "interrupts", "interrupts on the measuring CPU, all sources";
        Smis = "smis", "system management interrupts (MSR_SMI_COUNT)";
    }
}

/// How many [`Counter`]s there are.
pub const N: usize = Counter::ALL.len();

/// A value per counter; `None`: not counted here.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Counts(pub [Option<u64>; N]);

impl Counts {
    pub fn get(&self, c: Counter) -> Option<u64> {
        self.0[c as usize]
    }

    pub fn set(&mut self, c: Counter, v: Option<u64>) {
        self.0[c as usize] = v;
    }

    /// `self - before`, per counter (a counter missing in either is missing).
    pub fn since(&self, before: &Counts) -> Counts {
        Counts(std::array::from_fn(|i| {
            Some(self.0[i]?.saturating_sub(before.0[i]?))
        }))
    }

    /// Adds `other` into `self` (missing stays missing).
    pub fn add(&mut self, other: &Counts) {
        for (a, b) in self.0.iter_mut().zip(other.0) {
            *a = a.zip(b).map(|(a, b)| a + b).or(*a).or(b);
        }
    }

    /// The counted ones, in report order.
    pub fn iter(&self) -> impl Iterator<Item = (Counter, u64)> + '_ {
        Counter::ALL
            .iter()
            .filter_map(move |&c| Some((c, self.get(c)?)))
    }
}

/// Counters that could not be counted (their names), and why (one line,
/// with what would give them).
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct Missing {
    pub counters: Vec<&'static str>,
    pub why: String,
}

/// Interrupts of one source on the measuring CPU(s) during the run.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct SourceCount {
    /// `LOC`, `RES`, or `29:virtio0-input.0` (IRQ number and action).
    pub source: String,
    /// The kernel's description of a named line, or the chip of an IRQ.
    pub what: String,
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
