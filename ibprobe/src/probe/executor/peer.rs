//! The peer thread of a loopback run: a [`Paired`] workload's answering
//! side spawned pinned, waited for, told when the measuring side is done
//! or failed, joined, a panic an error; once for every paired workload.

use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use super::place::{pin, span};
use crate::probe::config::ProbeConfig;
use crate::probe::workload::seam::{Paired, Signals};
use crate::transport::stream::SlotEnd;
use crate::transport::TransportError;
use ibnoise::counters::{CounterReport, Span};

/// The peer thread's name, and the errors of a failed pin and a panic.
#[derive(Clone, Copy, Debug)]
pub struct PeerThread {
    pub name: &'static str,
    pub pin: &'static str,
    pub panicked: &'static str,
}

/// The flags the measuring side raises for its peer, on cache lines of
/// their own (the peer reads them on every poll).
#[derive(Default)]
#[repr(align(128))]
struct Flags {
    done: AtomicBool,
    abort: AtomicBool,
    /// The peer is on its CPU (see [`wait_for_peer`]).
    ready: AtomicBool,
}

/// What both sides of a [`run_pair`] returned, and the measuring
/// thread's counters.
pub struct PairRun<M, A> {
    pub measured: Result<M, TransportError>,
    pub answered: Result<A, TransportError>,
    pub counters: Option<CounterReport>,
}

/// Runs `work`'s peer on `peer_end` in a thread pinned to `peer_cpu`, its
/// measuring side on `end` here (pinned to `cpu` once the peer is placed).
pub fn run_pair<W: Paired>(
    work: &mut W,
    (end, peer_end): (&mut dyn SlotEnd, &mut dyn SlotEnd),
    (cpu, peer_cpu): (Option<usize>, Option<usize>),
    thread: PeerThread,
    stop: &AtomicBool,
    count: Option<&ProbeConfig>,
) -> PairRun<W::Measured, W::Answered> {
    let flags = Flags::default();
    // Moved to the peer's thread: what it reads per message must share
    // no cache line with what the measuring side writes.
    let peer = work.peer();
    std::thread::scope(|s| {
        let flags = &flags;
        let h = std::thread::Builder::new()
            .name(thread.name.into())
            .spawn_scoped(s, move || {
                if let Some(c) = peer_cpu {
                    pin(c, thread.pin)?;
                }
                flags.ready.store(true, Ordering::Release);
                let sig = Signals {
                    stop,
                    done: &flags.done,
                    abort: &flags.abort,
                };
                W::answer(&peer, peer_end, sig)
            })
            .expect("spawning a thread");
        wait_for_peer(&flags.ready, || h.is_finished());
        let mut counters = None;
        let measured = match cpu {
            Some(c) => pin(c, "pin the measuring thread to --cpu (sched_setaffinity)"),
            None => Ok(()),
        }
        .and_then(|()| {
            let sp = count.and_then(span);
            let m = work.measure(end, stop);
            counters = sp.map(Span::finish);
            m
        });
        if measured.is_err() || stop.load(Ordering::Relaxed) {
            flags.abort.store(true, Ordering::Relaxed);
        }
        flags.done.store(true, Ordering::Relaxed);
        let answered = h
            .join()
            .unwrap_or_else(|_| Err(TransportError::Completion(thread.panicked.into())));
        PairRun {
            measured,
            answered,
            counters,
        }
    })
}

/// Waits (sleeping) until the peer thread is placed, has ended, or 5 s
/// passed: a thread starts on its parent's CPUs, and under SCHED_FIFO a
/// spinning measuring thread would never let it run there to move away.
fn wait_for_peer(ready: &AtomicBool, ended: impl Fn() -> bool) {
    let t0 = Instant::now();
    while !ready.load(Ordering::Acquire) && !ended() && t0.elapsed() < Duration::from_secs(5) {
        std::thread::sleep(Duration::from_micros(50));
    }
}
