//! The echo loop: the server side of a round trip (and the in-process
//! echo thread), sending every arrival straight back.
//!
//! Why it exists: a round trip measures the client's loop plus this one,
//! so it obeys the same contract as every workload (no allocation, no
//! lock, no syscall beyond the transport's) while messages flow; only the
//! idle check, when nothing arrived for a while, may make syscalls.

use std::sync::atomic::{AtomicBool, Ordering};

use super::pace::consume;
use crate::clock::Clock;
use crate::probe::config::Plan;
use crate::transport::{Channel, TransportError};

/// Why [`echo`] returned.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum EchoEnd {
    /// The idle check said the session is over.
    Finished,
    /// The Ctrl-C flag was set.
    Interrupted,
}

/// Sends every arrival on `ch` straight back. When nothing arrived for
/// `idle_ticks`, calls `idle` (off the fast path: it may make syscalls,
/// e.g. look at the out-of-band connection); `false` from it ends the
/// loop. With `plan.event`, it sleeps in `Channel::wait_recv` (at most
/// `idle_ticks` at a time) instead of spinning; the echo reads only the
/// receive side of `plan`. Returns the number of messages echoed.
pub fn echo<C: Channel + ?Sized>(
    ch: &mut C,
    clock: &Clock,
    plan: &Plan,
    stop: &AtomicBool,
    idle_ticks: u64,
    mut idle: impl FnMut() -> bool,
) -> Result<(u64, EchoEnd), TransportError> {
    let mut echoed = 0u64;
    let mut last = clock.now();
    let idle_ns = clock.ticks_to_ns(idle_ticks);
    loop {
        let got = if plan.event {
            ch.wait_recv(clock, idle_ns)?
        } else {
            ch.poll_recv()?
        };
        if let Some(seq) = got {
            consume(clock, plan, stop);
            ch.post(seq)?;
            echoed += 1;
            last = clock.now();
            continue;
        }
        if stop.load(Ordering::Relaxed) {
            return Ok((echoed, EchoEnd::Interrupted));
        }
        let now = clock.now();
        if now.wrapping_sub(last) >= idle_ticks {
            if !idle() {
                return Ok((echoed, EchoEnd::Finished));
            }
            last = now;
        }
    }
}
