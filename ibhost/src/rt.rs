//! Real-time placement of the calling thread and the clocks a real-time
//! loop reads: CPU affinity, SCHED_FIFO / SCHED_OTHER, mlockall,
//! CLOCK_MONOTONIC, the thread's CPU time and absolute sleeps
//! (`clock_nanosleep(TIMER_ABSTIME)`).
//!
//! Why it exists: ibtune (`run`, before it execs the real-time program) and
//! ibprobe (its measuring threads) place threads the same way; nix 0.29, as
//! the workspace builds it, wraps affinity but not `sched_setscheduler`,
//! `mlockall` or `clock_nanosleep`. This is the crate's only module with
//! `unsafe`, and every block says why it is sound.
//!
//! Everything here applies to the *calling thread* except the memory locks,
//! which are process-wide. Where callers differ in what they tell the user,
//! there are two flavours: the plain call returns the kernel's error
//! untouched (`raw_os_error()` works; for callers that word their own
//! message), and the `_explained` call checks its argument first and says
//! what to change (root, a capability, an rlimit), for callers that hand
//! the error straight to the user.

use crate::cpulist::CpuSet;
use nix::sched::{sched_getaffinity, sched_setaffinity, CpuSet as NixCpuSet};
use nix::unistd::Pid;
use std::io;

// ---------------------------------------------------------------------------
// CPU affinity.
// ---------------------------------------------------------------------------

/// Pins the calling thread to one CPU, so the scheduler cannot migrate a
/// measurement loop (a migration is a latency outlier and a cold cache).
/// A CPU beyond what `sched_setaffinity` can name is `InvalidInput`.
pub fn pin_to_cpu(cpu: usize) -> io::Result<()> {
    let mut set = NixCpuSet::new();
    set.set(cpu)
        .map_err(|e| io::Error::new(io::ErrorKind::InvalidInput, format!("cpu {cpu}: {e}")))?;
    sched_setaffinity(Pid::from_raw(0), &set).map_err(io::Error::from)
}

/// Pins the calling thread to a CPU set (`sched_setaffinity(2)`); the mask
/// is inherited across `fork(2)` and `execve(2)`. The error names the set
/// and what to check.
pub fn set_affinity(cpus: &CpuSet) -> io::Result<()> {
    if cpus.is_empty() {
        return Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            "CPU affinity needs at least one CPU",
        ));
    }
    let mut set = NixCpuSet::new();
    for c in cpus.iter() {
        set.set(c as usize).map_err(|_| {
            io::Error::new(
                io::ErrorKind::InvalidInput,
                format!(
                    "CPU {c} is beyond the {} CPUs sched_setaffinity supports",
                    NixCpuSet::count()
                ),
            )
        })?;
    }
    sched_setaffinity(Pid::from_raw(0), &set).map_err(|e| {
        io::Error::new(
            io::Error::from(e).kind(),
            format!("sched_setaffinity({cpus}): {e} (are those CPUs online and in this cgroup's cpuset?)"),
        )
    })
}

/// The calling thread's CPU affinity (`sched_getaffinity(2)`).
pub fn get_affinity() -> io::Result<CpuSet> {
    let set = sched_getaffinity(Pid::from_raw(0)).map_err(io::Error::from)?;
    Ok((0..NixCpuSet::count())
        .filter(|&c| set.is_set(c).unwrap_or(false))
        .map(|c| c as u32)
        .collect())
}

/// The CPUs the calling thread may run on, ascending; empty when the
/// affinity cannot be read. Command lines check a `--cpu` against it, so a
/// typo is a clear error rather than an EINVAL deep in a run.
pub fn allowed_cpus() -> Vec<usize> {
    get_affinity()
        .map(|s| s.iter().map(|c| c as usize).collect())
        .unwrap_or_default()
}

// ---------------------------------------------------------------------------
// Scheduling policy.
// ---------------------------------------------------------------------------

/// `sched_setscheduler(0, policy, priority)`; the kernel's error as is.
fn set_scheduler(policy: libc::c_int, priority: i32) -> io::Result<()> {
    let param = libc::sched_param {
        sched_priority: priority,
    };
    // SAFETY: `param` is a valid, initialized sched_param that lives for the
    // call; the kernel only reads it. pid 0 means the calling thread.
    let rc = unsafe { libc::sched_setscheduler(0, policy, &param) };
    if rc == 0 {
        Ok(())
    } else {
        Err(io::Error::last_os_error())
    }
}

/// Makes the calling thread SCHED_FIFO at `priority` (1..=99), so a polling
/// loop is not preempted by ordinary tasks on its CPU. Errors are the
/// kernel's: EPERM without root, CAP_SYS_NICE or a large enough
/// RLIMIT_RTPRIO; EINVAL for a priority out of range.
pub fn set_fifo(priority: i32) -> io::Result<()> {
    set_scheduler(libc::SCHED_FIFO, priority)
}

/// [`set_fifo`] for errors a user reads: a priority outside the kernel's
/// range is refused up front (`InvalidInput`, "outside"), and EPERM says
/// which privilege would allow it (`PermissionDenied`).
pub fn set_fifo_explained(priority: i32) -> io::Result<()> {
    // SAFETY: sched_get_priority_{min,max} take an int and touch no memory.
    let (min, max) = unsafe {
        (
            libc::sched_get_priority_min(libc::SCHED_FIFO),
            libc::sched_get_priority_max(libc::SCHED_FIFO),
        )
    };
    if priority < min || priority > max {
        return Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            format!("SCHED_FIFO priority {priority} is outside {min}..={max}"),
        ));
    }
    set_fifo(priority).map_err(|e| {
        if e.raw_os_error() == Some(libc::EPERM) {
            io::Error::new(
                io::ErrorKind::PermissionDenied,
                format!(
                    "SCHED_FIFO priority {priority} needs root, or CAP_SYS_NICE, or an RLIMIT_RTPRIO \
                     of at least {priority} (ulimit -r / LimitRTPRIO=): {e}"
                ),
            )
        } else {
            io::Error::new(
                e.kind(),
                format!("sched_setscheduler(SCHED_FIFO, {priority}): {e}"),
            )
        }
    })
}

/// Puts the calling thread back to SCHED_OTHER (a privilege check must not
/// leave a real-time thread behind).
pub fn set_other() -> io::Result<()> {
    set_scheduler(libc::SCHED_OTHER, 0)
}

/// The calling thread's scheduling policy (`SCHED_*`) and priority, to
/// check what [`set_fifo`] did.
pub fn get_scheduler() -> io::Result<(i32, i32)> {
    // SAFETY: sched_getscheduler(0) reads the calling thread's policy and
    // touches no memory.
    let policy = unsafe { libc::sched_getscheduler(0) };
    if policy < 0 {
        return Err(io::Error::last_os_error());
    }
    let mut param = libc::sched_param { sched_priority: 0 };
    // SAFETY: `param` is a valid sched_param the kernel writes into; it is
    // exclusively borrowed for the call.
    let rc = unsafe { libc::sched_getparam(0, &mut param) };
    if rc != 0 {
        return Err(io::Error::last_os_error());
    }
    Ok((policy, param.sched_priority))
}

// ---------------------------------------------------------------------------
// Memory locking.
// ---------------------------------------------------------------------------

/// Locks every current and future page of the process in RAM
/// (`mlockall(MCL_CURRENT | MCL_FUTURE)`), so no page fault (microseconds
/// to milliseconds) lands in a real-time path. Process-wide, and *not* kept
/// across `execve(2)`. The kernel's error as is (EPERM, ENOMEM).
pub fn lock_memory() -> io::Result<()> {
    // SAFETY: mlockall takes flags only and touches no memory of ours.
    let rc = unsafe { libc::mlockall(libc::MCL_CURRENT | libc::MCL_FUTURE) };
    if rc == 0 {
        Ok(())
    } else {
        Err(io::Error::last_os_error())
    }
}

/// [`lock_memory`] for errors a user reads: EPERM and ENOMEM say which
/// privilege or rlimit would allow it.
pub fn lock_memory_explained() -> io::Result<()> {
    lock_memory().map_err(|e| match e.raw_os_error() {
        Some(libc::EPERM) | Some(libc::ENOMEM) => io::Error::new(
            e.kind(),
            format!(
                "mlockall: {e} (needs root, CAP_IPC_LOCK, or an RLIMIT_MEMLOCK large enough \
                 for the whole process: ulimit -l / LimitMEMLOCK=)"
            ),
        ),
        _ => io::Error::new(e.kind(), format!("mlockall: {e}")),
    })
}

// ---------------------------------------------------------------------------
// Clocks and sleeps.
// ---------------------------------------------------------------------------

/// Reads a clock in nanoseconds.
#[inline(always)]
fn clock_ns(clock: libc::clockid_t) -> u64 {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: ts is a valid, writable timespec that lives for the call; the
    // callers pass only clock ids every Linux since 2.6.12 supports, so the
    // call cannot fail.
    unsafe { libc::clock_gettime(clock, &mut ts) };
    ts.tv_sec as u64 * 1_000_000_000 + ts.tv_nsec as u64
}

/// Nanoseconds on CLOCK_MONOTONIC (the clock [`sleep_until_ns`] deadlines
/// are on). A vDSO read, no syscall.
#[inline]
pub fn monotonic_ns() -> u64 {
    clock_ns(libc::CLOCK_MONOTONIC)
}

/// CPU time the calling thread has used, ns (CLOCK_THREAD_CPUTIME_ID).
///
/// Why it exists: a probe thread that caps its own cost (a share of one
/// core) needs its CPU time at ns resolution; /proc has 10 ms ticks.
#[inline]
pub fn thread_cpu_ns() -> u64 {
    clock_ns(libc::CLOCK_THREAD_CPUTIME_ID)
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
    // SAFETY: ts is a valid timespec that lives for the call; the remainder
    // pointer may be NULL with TIMER_ABSTIME.
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

/// Touches `bytes` of stack below the caller, so the loop's stack pages
/// are resident before the first timestamp.
#[inline(never)]
pub fn prefault_stack(bytes: usize) {
    const CHUNK: usize = 16 * 1024;
    let buf = [0u8; CHUNK];
    std::hint::black_box(&buf);
    if bytes > CHUNK {
        prefault_stack(bytes - CHUNK);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn set(s: &str) -> CpuSet {
        CpuSet::parse_list(s).unwrap()
    }

    /// Runs `f` on a scratch thread, so the test harness's own thread keeps
    /// its affinity and policy.
    fn on_thread(f: impl FnOnce() + Send + 'static) {
        std::thread::spawn(f).join().unwrap();
    }

    #[test]
    fn affinity_to_cpu0() {
        on_thread(|| {
            set_affinity(&set("0")).unwrap();
            let got = sched_getaffinity(Pid::from_raw(0)).unwrap();
            assert!(got.is_set(0).unwrap());
            assert!(!got.is_set(1).unwrap());
            assert_eq!(get_affinity().unwrap(), set("0"));
            assert_eq!(allowed_cpus(), [0]);
        });
    }

    #[test]
    fn pin_to_cpu0() {
        on_thread(|| {
            pin_to_cpu(0).unwrap();
            assert_eq!(allowed_cpus(), [0]);
            let e = pin_to_cpu(1 << 20).unwrap_err();
            assert_eq!(e.kind(), io::ErrorKind::InvalidInput);
        });
    }

    #[test]
    fn affinity_errors() {
        assert!(set_affinity(&CpuSet::new()).is_err());
        assert!(set_affinity(&set("65535")).is_err());
    }

    #[test]
    fn fifo_errors_raw_and_explained() {
        on_thread(|| {
            let e = set_fifo(1000).unwrap_err();
            assert_eq!(e.raw_os_error(), Some(libc::EINVAL));
        });
        for p in [0, 100] {
            let e = set_fifo_explained(p).unwrap_err();
            assert!(e.to_string().contains("outside"), "{e}");
        }
        on_thread(|| match set_fifo_explained(1) {
            Ok(()) => {
                assert_eq!(get_scheduler().unwrap(), (libc::SCHED_FIFO, 1));
                set_other().unwrap();
                assert_eq!(get_scheduler().unwrap(), (libc::SCHED_OTHER, 0));
            }
            Err(e) => {
                let msg = e.to_string();
                assert!(
                    msg.contains("CAP_SYS_NICE") && msg.contains("RLIMIT_RTPRIO"),
                    "{msg}"
                );
            }
        });
    }

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
    fn thread_cpu_time_grows_with_work() {
        let a = thread_cpu_ns();
        let mut x = 0u64;
        for i in 0..2_000_000u64 {
            x = std::hint::black_box(x.wrapping_mul(31).wrapping_add(i));
        }
        assert!(thread_cpu_ns() > a, "{x}");
    }
}
