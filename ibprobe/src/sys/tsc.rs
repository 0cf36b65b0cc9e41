//! The two raw time sources [`crate::clock::Clock`] is built on: the CPU's
//! time-stamp counter and `clock_gettime(CLOCK_MONOTONIC_RAW)`.
//!
//! Why it exists: both reads are `unsafe` calls (an intrinsic and a libc
//! function); wrapping them here keeps the rest of the crate free of
//! `unsafe` and gives one place to audit.

/// Whether this build can read the time-stamp counter at all (x86_64 only).
/// [`crate::clock::Clock::calibrate`] also checks the CPU flags.
pub const TSC_AVAILABLE: bool = cfg!(target_arch = "x86_64");

/// Reads the time-stamp counter (`rdtsc`), not serialized: the cheapest
/// read the CPU offers, as perftest uses. On targets without a TSC it
/// returns [`monotonic_raw_ns`] so callers never see a zero clock.
#[inline(always)]
pub fn rdtsc() -> u64 {
    #[cfg(target_arch = "x86_64")]
    {
        // SAFETY: `rdtsc` is part of the x86_64 baseline instruction set
        // (no target feature needed), reads a register and touches no
        // memory. Some toolchains mark the intrinsic safe, hence the allow.
        #[allow(unused_unsafe)]
        unsafe {
            core::arch::x86_64::_rdtsc()
        }
    }
    #[cfg(not(target_arch = "x86_64"))]
    {
        monotonic_raw_ns()
    }
}

/// Reads `clock_gettime(CLOCK_MONOTONIC_RAW)` in nanoseconds: the
/// reference the TSC is calibrated against and the fallback clock (not
/// slewed by NTP, unlike CLOCK_MONOTONIC).
#[inline(always)]
pub fn monotonic_raw_ns() -> u64 {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: `ts` is a valid, writable timespec owned by this frame;
    // clock_gettime writes exactly one timespec to it. CLOCK_MONOTONIC_RAW
    // exists on every Linux since 2.6.28, so the call cannot fail with
    // EINVAL; on any failure `ts` stays zeroed (a visible, harmless value).
    unsafe { libc::clock_gettime(libc::CLOCK_MONOTONIC_RAW, &mut ts) };
    (ts.tv_sec as u64)
        .wrapping_mul(1_000_000_000)
        .wrapping_add(ts.tv_nsec as u64)
}
