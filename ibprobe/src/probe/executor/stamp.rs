//! The thesis's stamping thread (`--stamp-thread`): beside the measuring
//! loop, a thread keeps writing the clock into the send buffer (a
//! one-message run's one buffer, every buffer of a stream's send ring),
//! so what the HCA reads with the payload is the time it read it. The
//! receiver then splits one-way latency at that read.
//!
//! Why it exists: the one-message executor and the stream run it the
//! same way: on a CPU of its own when there is one, stopped on every way
//! out, and timed (how fast it goes round bounds a stamp's staleness).

use std::sync::atomic::{AtomicBool, Ordering};
use std::thread::{Scope, ScopedJoinHandle};

use super::place::pin;
use crate::clock::Clock;
use crate::sys::host;

/// Where the stamping thread runs: the first CPU this process may use
/// that none of `taken` is on, else any of them (the scheduler's choice,
/// beside the loops). Ask before the calling thread is pinned: a thread
/// inherits its creator's affinity, and the allowed CPUs are read from it.
pub fn stamp_cpus(taken: &[Option<usize>]) -> StampCpus {
    let allowed = host::allowed_cpus();
    match free_cpu_in(&allowed, taken) {
        Some(c) => StampCpus::On(c),
        None => StampCpus::Among(allowed),
    }
}

/// The first of `allowed` that none of `taken` is on.
pub fn free_cpu_in(allowed: &[usize], taken: &[Option<usize>]) -> Option<usize> {
    allowed.iter().copied().find(|c| !taken.contains(&Some(*c)))
}

/// The stamping thread's CPUs (see [`stamp_cpus`]): one of its own, or
/// (none was free) any of the process's, shared with a loop.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum StampCpus {
    On(usize),
    Among(Vec<usize>),
}

impl StampCpus {
    pub fn cpu(&self) -> Option<usize> {
        match self {
            StampCpus::On(c) => Some(*c),
            StampCpus::Among(_) => None,
        }
    }

    /// Places the calling thread (a failure leaves it where it is: the
    /// stamps are then staler, which the split's count shows).
    fn place(&self) {
        match self {
            StampCpus::On(c) => {
                let _ = pin(*c, "pin the stamping thread");
            }
            StampCpus::Among(all) => {
                let set = ibhost::CpuSet::from_iter_u32(all.iter().map(|&c| c as u32));
                let _ = host::set_affinity(&set);
            }
        }
    }
}

/// The stamping thread, running until [`Stamper::finish`] or its drop
/// (every way out of a run); the scope joins it.
pub struct Stamper<'scope, 'a> {
    on: &'a AtomicBool,
    handle: Option<ScopedJoinHandle<'scope, Passes>>,
}

/// How the stamping thread went round: its passes (one clock read and a
/// store into every stamp word each) and the ticks from the first to the
/// last.
#[derive(Clone, Copy, Debug, Default)]
pub struct Passes {
    pub passes: u64,
    pub ticks: u64,
}

impl<'scope, 'a: 'scope> Stamper<'scope, 'a> {
    /// Starts the thread in `s` on `cpus`: until `on` is cleared it reads
    /// `clock` and hands the value to `store`.
    pub fn start<'env>(
        s: &'scope Scope<'scope, 'env>,
        store: impl Fn(u64) + Send + 'scope,
        clock: &'a Clock,
        on: &'a AtomicBool,
        cpus: StampCpus,
    ) -> Stamper<'scope, 'a>
    where
        'a: 'env,
    {
        on.store(true, Ordering::Relaxed);
        let handle = std::thread::Builder::new()
            .name("ibprobe-stamp".into())
            .spawn_scoped(s, move || {
                cpus.place();
                let (first, mut last, mut passes) = (clock.now(), 0, 0u64);
                while on.load(Ordering::Relaxed) {
                    last = clock.now();
                    store(last);
                    passes += 1;
                }
                Passes {
                    passes,
                    ticks: last.saturating_sub(first),
                }
            })
            .expect("spawning a thread");
        Stamper {
            on,
            handle: Some(handle),
        }
    }

    /// Stops the thread and says how it went round.
    pub fn finish(mut self) -> Passes {
        self.on.store(false, Ordering::Relaxed);
        self.handle
            .take()
            .and_then(|h| h.join().ok())
            .unwrap_or_default()
    }
}

impl Drop for Stamper<'_, '_> {
    fn drop(&mut self) {
        self.on.store(false, Ordering::Relaxed);
    }
}
