//! Wake-up latency of a SCHED_FIFO thread per CPU, cyclictest's
//! measurement: what ibtune's isolation bought, since the verbs probe's
//! tail is only as good as the cores it runs on. One pinned thread per CPU
//! sleeps with `clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME)` to the
//! next multiple of the interval and records how late it woke, into a
//! histogram allocated before the threads start. Unlike cyclictest it
//! does not write /dev/cpu_dma_latency: it measures the host's own
//! C-state policy.

use std::io;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use ibhost::rt;
use ibstats::latency::LatencyHistogram;

/// How long the probe runs on each CPU.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum WakeupLength {
    /// This many wake-ups per CPU.
    Count(u64),
    /// Until this much time has passed (deadlines after it are not slept to).
    Duration(Duration),
}

/// What to measure: which CPUs, at which priority, how often, how long.
#[derive(Clone, Debug)]
pub struct WakeupConfig {
    /// CPUs to measure, one thread each (already checked against the
    /// process's affinity by the caller).
    pub cpus: Vec<usize>,
    /// SCHED_FIFO priority, 1..=99.
    pub priority: i32,
    /// Time between deadlines.
    pub interval: Duration,
    pub length: WakeupLength,
    /// mlockall before the threads start (a failure is a note).
    pub lock_memory: bool,
}

/// One CPU's result: how late each wake-up was.
#[derive(Clone, Debug)]
pub struct CpuWakeup {
    pub cpu: usize,
    pub latency: LatencyHistogram,
    /// Deadlines skipped because the thread woke after the following one.
    pub missed: u64,
    /// The thread's counters over its measured part (its sleeps are
    /// context switches).
    pub counters: Option<crate::counters::CounterReport>,
}

/// The run's result.
#[derive(Clone, Debug, Default)]
pub struct WakeupOutcome {
    /// One entry per CPU, in the order of [`WakeupConfig::cpus`].
    pub cpus: Vec<CpuWakeup>,
    /// Placement facts (memory locked or not).
    pub notes: Vec<String>,
    /// The stop flag ended the run early.
    pub interrupted: bool,
    /// Wall time of the measured part, ns.
    pub elapsed_ns: u64,
}

/// Why the probe could not run.
#[derive(Debug, thiserror::Error)]
pub enum WakeupError {
    /// SCHED_FIFO refused (no privilege, or an RT throttling cgroup).
    #[error("cannot make a thread SCHED_FIFO at priority {priority} ({source}); run as root or with CAP_SYS_NICE (or an RLIMIT_RTPRIO of at least {priority}), e.g. `sudo ibprobe host`")]
    Fifo { priority: i32, source: io::Error },
    #[error("cannot pin the thread for cpu {cpu} (sched_setaffinity: {source}); pick CPUs this process may use (see `taskset -p $$`)")]
    Pin { cpu: usize, source: io::Error },
    #[error("clock_nanosleep on cpu {cpu} failed: {source}")]
    Sleep { cpu: usize, source: io::Error },
    #[error("cannot start a measuring thread: {0}")]
    Spawn(io::Error),
}

/// Checks that this process may make a thread SCHED_FIFO at `priority`,
/// in a short-lived thread (the caller's own scheduling is untouched).
pub fn check_fifo(priority: i32) -> Result<(), WakeupError> {
    std::thread::Builder::new()
        .name("ibprobe-rtcheck".into())
        .spawn(move || {
            rt::set_fifo(priority).map_err(|source| WakeupError::Fifo { priority, source })?;
            let _ = rt::set_other();
            Ok(())
        })
        .map_err(WakeupError::Spawn)?
        .join()
        .unwrap_or_else(|_| Err(WakeupError::Spawn(io::Error::other("the check panicked"))))
}

/// Runs the probe: one pinned SCHED_FIFO thread per CPU, started together,
/// until the count or duration is reached or `stop` is set.
pub fn run(cfg: &WakeupConfig, stop: &AtomicBool) -> Result<WakeupOutcome, WakeupError> {
    check_fifo(cfg.priority)?;
    let mut out = WakeupOutcome::default();
    if cfg.lock_memory {
        out.notes.push(match rt::lock_memory() {
            Ok(()) => "memory locked (mlockall)".into(),
            Err(e) => format!("warning: mlockall failed ({e}); page faults may show in the maxima (run as root or raise RLIMIT_MEMLOCK)"),
        });
    }
    out.notes.push(format!(
        "SCHED_FIFO priority {}, clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME), interval {:?}; /dev/cpu_dma_latency not written",
        cfg.priority, cfg.interval
    ));
    let interval = (cfg.interval.as_nanos() as u64).max(1);
    let (priority, length) = (cfg.priority, cfg.length);
    // Every thread is pinned and real-time before any starts measuring.
    let (go, abort) = (&AtomicBool::new(false), &AtomicBool::new(false));
    let panicked = || WakeupError::Spawn(io::Error::other("a measuring thread panicked"));
    let results = std::thread::scope(|scope| {
        let mut handles = Vec::new();
        for &cpu in &cfg.cpus {
            // Allocated here, before the measuring thread starts.
            let hist = LatencyHistogram::new();
            let h = std::thread::Builder::new()
                .name(format!("ibprobe-host-{cpu}"))
                .spawn_scoped(scope, move || {
                    let setup = rt::pin_to_cpu(cpu)
                        .map_err(|source| WakeupError::Pin { cpu, source })
                        .and_then(|()| {
                            rt::set_fifo(priority)
                                .map_err(|source| WakeupError::Fifo { priority, source })
                        });
                    if setup.is_err() {
                        abort.store(true, Ordering::Relaxed);
                    }
                    rt::prefault_stack(128 * 1024);
                    while !go.load(Ordering::Acquire) {
                        std::thread::sleep(Duration::from_millis(1));
                    }
                    setup?;
                    let span = crate::counters::Span::start(&[cpu], false);
                    let r = measure(cpu, hist, interval, length, stop, abort);
                    let counters = Some(span.finish());
                    r.map(|c| CpuWakeup { counters, ..c })
                });
            match h {
                Ok(h) => handles.push(h),
                Err(e) => {
                    // Release the threads already waiting at the gate (the
                    // scope joins them).
                    abort.store(true, Ordering::Relaxed);
                    go.store(true, Ordering::Release);
                    return Err(WakeupError::Spawn(e));
                }
            }
        }
        let t0 = rt::monotonic_ns();
        go.store(true, Ordering::Release);
        let joined: Vec<_> = handles.into_iter().map(|h| h.join()).collect();
        out.elapsed_ns = rt::monotonic_ns().saturating_sub(t0);
        Ok(joined)
    })?;
    // The first error, in CPU order, is the run's.
    out.cpus = results
        .into_iter()
        .map(|r| r.unwrap_or_else(|_| Err(panicked())))
        .collect::<Result<_, _>>()?;
    out.interrupted = stop.load(Ordering::Relaxed);
    Ok(out)
}

/// The loop of one thread (already pinned and SCHED_FIFO): sleep to the
/// next deadline, record how late the wake-up was, repeat.
fn measure(
    cpu: usize,
    mut hist: LatencyHistogram,
    interval: u64,
    length: WakeupLength,
    stop: &AtomicBool,
    abort: &AtomicBool,
) -> Result<CpuWakeup, WakeupError> {
    let (count, end) = match length {
        WakeupLength::Count(n) => (n, u64::MAX),
        WakeupLength::Duration(d) => (
            u64::MAX,
            rt::monotonic_ns().saturating_add(d.as_nanos() as u64),
        ),
    };
    let mut missed = 0;
    let mut next = rt::monotonic_ns() + interval;
    while hist.len() < count && next <= end {
        if stop.load(Ordering::Relaxed) || abort.load(Ordering::Relaxed) {
            break;
        }
        match rt::sleep_until_ns(next) {
            Ok(()) => {}
            Err(e) if e.raw_os_error() == Some(libc::EINTR) => continue,
            Err(source) => {
                abort.store(true, Ordering::Relaxed);
                return Err(WakeupError::Sleep { cpu, source });
            }
        }
        let now = rt::monotonic_ns();
        hist.record(now.saturating_sub(next));
        next += interval;
        while next <= now {
            next += interval;
            missed += 1;
        }
    }
    Ok(CpuWakeup {
        cpu,
        latency: hist,
        missed,
        counters: None,
    })
}
