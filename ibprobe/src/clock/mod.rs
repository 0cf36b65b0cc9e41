//! The probe's clock: every timestamp of a run comes from one [`Clock`].
//!
//! Why it exists: latency is a difference of two timestamps, so both must
//! come from the same clock, read cheaply (the read is inside the
//! measurement) and converted to nanoseconds with a calibrated factor,
//! never with /proc/cpuinfo's MHz (perftest's flaw).
//!
//! This first version reads CLOCK_MONOTONIC_RAW; the TSC path (calibrated
//! against it, checked for constant_tsc + nonstop_tsc) replaces it where
//! the CPU allows.

use serde::Serialize;

/// Which clock a run used, for the report.
#[derive(Clone, Copy, Debug, PartialEq, Serialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum ClockKind {
    /// rdtsc, calibrated against CLOCK_MONOTONIC_RAW.
    Tsc {
        /// Measured TSC frequency.
        hz: f64,
    },
    /// clock_gettime(CLOCK_MONOTONIC_RAW).
    MonotonicRaw,
}

/// A calibrated clock. `now()` returns ticks; `ticks_to_ns` converts a
/// difference of ticks.
#[derive(Clone, Copy, Debug)]
pub struct Clock {
    kind: ClockKind,
}

impl Clock {
    /// The best clock this machine offers.
    pub fn calibrate() -> Clock {
        Clock::monotonic()
    }

    /// clock_gettime(CLOCK_MONOTONIC_RAW), one tick per nanosecond.
    pub fn monotonic() -> Clock {
        Clock {
            kind: ClockKind::MonotonicRaw,
        }
    }

    /// Which clock this is.
    pub fn kind(&self) -> ClockKind {
        self.kind
    }

    /// Current time in ticks.
    #[inline(always)]
    pub fn now(&self) -> u64 {
        let mut ts = libc::timespec { tv_sec: 0, tv_nsec: 0 };
        // SAFETY: clock_gettime writes one timespec to a valid pointer.
        unsafe { libc::clock_gettime(libc::CLOCK_MONOTONIC_RAW, &mut ts) };
        ts.tv_sec as u64 * 1_000_000_000 + ts.tv_nsec as u64
    }

    /// Nanoseconds in a difference of ticks.
    #[inline(always)]
    pub fn ticks_to_ns(&self, ticks: u64) -> u64 {
        match self.kind {
            ClockKind::MonotonicRaw => ticks,
            ClockKind::Tsc { hz } => (ticks as f64 * 1e9 / hz) as u64,
        }
    }
}
