//! The echo loop: the server side of a round trip, sending every arrival
//! straight back. A round trip measures it too, so it keeps every
//! workload's contract while messages flow; only the idle check may make
//! syscalls.

use std::sync::atomic::{AtomicBool, Ordering};

use super::pace::consume;
use crate::clock::hwts::{ResponderLog, ResponderStamp};
use crate::clock::Clock;
use crate::probe::config::Plan;
use crate::transport::{Channel, TransportError};

/// Why [`echo`] returned.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum EchoEnd {
    Finished,
    Interrupted,
}

/// Sends every arrival on `ch` straight back; returns how many. After
/// `idle_ticks` without one it asks `idle` (which may make syscalls);
/// `false` ends the loop. Send completions are polled only while nothing
/// arrives. With `log` (`--hw-timestamps`) it keeps each echo's T3 and
/// its T4, waited for after the post (at most [`SEND_TS_WAIT_NS`]).
pub fn echo<C: Channel + ?Sized>(
    ch: &mut C,
    clock: &Clock,
    plan: &Plan,
    stop: &AtomicBool,
    idle_ticks: u64,
    mut idle: impl FnMut() -> bool,
    mut log: Option<&mut ResponderLog>,
) -> Result<(u64, EchoEnd), TransportError> {
    let mut echoed = 0u64;
    let mut last = clock.now();
    let idle_ns = clock.ticks_to_ns(idle_ticks);
    let wait_ticks = clock.ns_to_ticks(SEND_TS_WAIT_NS);
    // Signaled echoes whose send completion is not yet polled: polled
    // while nothing arrives, so the send queue never fills (a full one
    // makes the next `post` poll a completion on the way back).
    let mut unreaped = 0u32;
    loop {
        let got = if plan.event {
            ch.wait_recv(clock, idle_ns)?
        } else {
            ch.poll_recv()?
        };
        if let Some(seq) = got {
            let t3 = ch.hw_recv_ts();
            consume(clock, plan, stop);
            ch.post(seq)?;
            if let Some(log) = log.as_deref_mut() {
                let t4 = send_ts(ch, clock, wait_ticks, seq)?;
                log.push(ResponderStamp { seq, t3, t4 });
            } else if ch.is_signaled(seq) {
                unreaped += 1;
            }
            echoed += 1;
            last = clock.now();
            continue;
        }
        if unreaped > 0 && ch.poll_send_done()?.is_some() {
            unreaped -= 1;
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

pub const SEND_TS_WAIT_NS: u64 = 1_000_000_000;

/// The HCA timestamp (T4) of echo `seq`'s send completion.
#[inline(always)]
fn send_ts<C: Channel + ?Sized>(
    ch: &mut C,
    clock: &Clock,
    wait_ticks: u64,
    seq: u64,
) -> Result<Option<u64>, TransportError> {
    if !ch.is_signaled(seq) {
        return Ok(None);
    }
    let t0 = clock.now();
    loop {
        if let Some(s) = ch.poll_send_done()? {
            if s == seq {
                return Ok(ch.hw_send_ts());
            }
        } else if clock.now().wrapping_sub(t0) > wait_ticks {
            return Ok(None);
        }
    }
}
