//! The thesis's stamping thread (`--stamp-thread`): beside the measuring
//! loop, a thread keeps writing the clock into the send buffer (a
//! one-message run's one buffer, every buffer of a stream's send ring),
//! so what the HCA reads with the payload is the time it read it. The
//! receiver then splits one-way latency at that read.
//!
//! Why it exists: the one-message executor and the stream's run it the
//! same way: on a CPU of its own when there is one, started before the
//! measured part, stopped on every way out, and (streams) how fast it
//! goes round, which bounds how stale a stamp can be.

use std::sync::atomic::{AtomicBool, Ordering};
use std::thread::{Scope, ScopedJoinHandle};

use super::place::pin;
use crate::clock::Clock;
use crate::sys::host;

/// The first allowed CPU that none of `taken` is on (None: every allowed
/// CPU is taken, and the stamping thread runs unpinned beside the others).
pub fn free_cpu(taken: &[Option<usize>]) -> Option<usize> {
    free_cpu_in(&host::allowed_cpus(), taken)
}

/// The first of `allowed` that none of `taken` is on.
pub fn free_cpu_in(allowed: &[usize], taken: &[Option<usize>]) -> Option<usize> {
    allowed.iter().copied().find(|c| !taken.contains(&Some(*c)))
}

/// The stamping thread, running until [`Stamper::finish`] or its drop
/// (every way out of a run); the scope joins it.
pub struct Stamper<'scope, 'a> {
    on: &'a AtomicBool,
    handle: Option<ScopedJoinHandle<'scope, Passes>>,
}

/// How the stamping thread went round: its passes (one clock read and a
/// store into every stamp word each) and the ticks they took.
#[derive(Clone, Copy, Debug, Default)]
pub struct Passes {
    /// Passes made.
    pub passes: u64,
    /// Ticks from the first pass to the last.
    pub ticks: u64,
}

impl<'scope, 'a: 'scope> Stamper<'scope, 'a> {
    /// Starts the thread in `s` on `cpu` (unpinned: None): until `on` is
    /// cleared it reads `clock` and hands the value to `store`.
    pub fn start<'env>(
        s: &'scope Scope<'scope, 'env>,
        store: impl Fn(u64) + Send + 'scope,
        clock: &'a Clock,
        on: &'a AtomicBool,
        cpu: Option<usize>,
    ) -> Stamper<'scope, 'a>
    where
        'a: 'env,
    {
        on.store(true, Ordering::Relaxed);
        let handle = std::thread::Builder::new()
            .name("ibprobe-stamp".into())
            .spawn_scoped(s, move || {
                if let Some(c) = cpu {
                    let _ = pin(c, "pin the stamping thread");
                }
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
