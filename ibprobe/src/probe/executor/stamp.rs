//! The thesis's stamping thread (`--stamp-thread`): beside the measuring
//! loop it keeps writing the clock into the send buffers, so the HCA
//! reads the time of its read with the payload, and the receiver splits
//! one-way latency there. It runs on a CPU of its own when there is one,
//! stops on every way out, and is timed (its pace bounds a stamp's age).

use std::sync::atomic::{AtomicBool, Ordering};
use std::thread::{Scope, ScopedJoinHandle};

use super::place::pin;
use crate::clock::Clock;
use crate::sys::host;

/// Where the stamping thread runs: the first allowed CPU none of `taken`
/// is on, else any. Ask before the calling thread is pinned (the allowed
/// CPUs are read from it).
pub fn stamp_cpus(taken: &[Option<usize>]) -> StampCpus {
    let allowed = host::allowed_cpus();
    match free_cpu_in(&allowed, taken) {
        Some(c) => StampCpus::On(c),
        None => StampCpus::Among(allowed),
    }
}

pub fn free_cpu_in(allowed: &[usize], taken: &[Option<usize>]) -> Option<usize> {
    allowed.iter().copied().find(|c| !taken.contains(&Some(*c)))
}

/// The stamping thread's CPUs: one of its own, or (none was free) any.
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

    /// Places the calling thread (a failure leaves it where it is: staler
    /// stamps, which the split's count shows).
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

/// The stamping thread, running until [`Stamper::finish`] or its drop;
/// the scope joins it.
pub struct Stamper<'scope, 'a> {
    on: &'a AtomicBool,
    handle: Option<ScopedJoinHandle<'scope, Passes>>,
}

/// The stamping thread's passes (a clock read and a store into every
/// stamp word each) and the ticks from the first to the last.
#[derive(Clone, Copy, Debug, Default)]
pub struct Passes {
    pub passes: u64,
    pub ticks: u64,
}

impl<'scope, 'a: 'scope> Stamper<'scope, 'a> {
    /// Until `on` is cleared the thread hands `clock`'s reading to `store`.
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
