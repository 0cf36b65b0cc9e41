//! Real-time scheduling and absolute sleeps for `ibprobe host`:
//! SCHED_FIFO for the calling thread, CLOCK_MONOTONIC reads and
//! `clock_nanosleep(TIMER_ABSTIME)`.
//!
//! Why it exists: the wake-up latency probe is cyclictest's measurement (a
//! SCHED_FIFO thread sleeps to an absolute deadline and records how late it
//! woke); nix 0.29, as this workspace builds it, has neither
//! `sched_setscheduler` nor `clock_nanosleep`, so the libc calls and their
//! `unsafe` live here.

use std::io;

/// Nanoseconds on CLOCK_MONOTONIC (the clock the deadlines are on).
#[inline]
pub fn monotonic_ns() -> u64 {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: ts is a valid, writable timespec; CLOCK_MONOTONIC always exists.
    unsafe { libc::clock_gettime(libc::CLOCK_MONOTONIC, &mut ts) };
    ts.tv_sec as u64 * 1_000_000_000 + ts.tv_nsec as u64
}

/// CPU time the calling thread has used, ns (CLOCK_THREAD_CPUTIME_ID).
///
/// Why it exists: ibexporter caps what its probe thread costs (an
/// overhead budget as a share of one core) and exports it, which needs
/// the thread's own CPU time at ns resolution (/proc has 10 ms ticks).
pub fn thread_cpu_ns() -> u64 {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: ts is a valid, writable timespec; the clock id is a constant
    // every Linux kernel since 2.6.12 supports.
    unsafe { libc::clock_gettime(libc::CLOCK_THREAD_CPUTIME_ID, &mut ts) };
    ts.tv_sec as u64 * 1_000_000_000 + ts.tv_nsec as u64
}

/// Sleeps until CLOCK_MONOTONIC reaches `deadline_ns` (TIMER_ABSTIME, so a
/// late wake-up never shifts later deadlines). `Err` with EINTR when a
/// signal handler ran (the caller checks its stop flag and sleeps again).
#[inline]
pub fn sleep_until_ns(deadline_ns: u64) -> io::Result<()> {
    let ts = libc::timespec {
        tv_sec: (deadline_ns / 1_000_000_000) as libc::time_t,
        tv_nsec: (deadline_ns % 1_000_000_000) as libc::c_long,
    };
    // SAFETY: ts is a valid timespec; the remainder pointer may be NULL
    // with TIMER_ABSTIME.
    let rc = unsafe {
        libc::clock_nanosleep(
            libc::CLOCK_MONOTONIC,
            libc::TIMER_ABSTIME,
            &ts,
            std::ptr::null_mut(),
        )
    };
    if rc == 0 {
        Ok(())
    } else {
        Err(io::Error::from_raw_os_error(rc))
    }
}

/// Makes the calling thread SCHED_FIFO at `priority` (1..=99). Fails with
/// EPERM without CAP_SYS_NICE (or an RLIMIT_RTPRIO that allows it), and
/// with EINVAL for a priority out of range.
pub fn set_fifo(priority: i32) -> io::Result<()> {
    let param = libc::sched_param {
        sched_priority: priority,
    };
    // SAFETY: pid 0 is the calling thread; param is a valid sched_param
    // that the kernel only reads.
    let rc = unsafe { libc::sched_setscheduler(0, libc::SCHED_FIFO, &param) };
    if rc == 0 {
        Ok(())
    } else {
        Err(io::Error::last_os_error())
    }
}

/// Puts the calling thread back to SCHED_OTHER (used by the privilege
/// check, which must not leave a real-time thread behind).
pub fn set_other() -> io::Result<()> {
    let param = libc::sched_param { sched_priority: 0 };
    // SAFETY: as in set_fifo.
    let rc = unsafe { libc::sched_setscheduler(0, libc::SCHED_OTHER, &param) };
    if rc == 0 {
        Ok(())
    } else {
        Err(io::Error::last_os_error())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sleeps_to_an_absolute_deadline() {
        let t0 = monotonic_ns();
        sleep_until_ns(t0 + 2_000_000).unwrap();
        let t1 = monotonic_ns();
        assert!(
            t1 >= t0 + 2_000_000,
            "woke {} ns early",
            t0 + 2_000_000 - t1
        );
        // A deadline in the past returns at once.
        sleep_until_ns(t0).unwrap();
    }

    #[test]
    fn out_of_range_priority_is_refused() {
        std::thread::spawn(|| {
            let e = set_fifo(1000).unwrap_err();
            assert_eq!(e.raw_os_error(), Some(libc::EINVAL));
        })
        .join()
        .unwrap();
    }
}
