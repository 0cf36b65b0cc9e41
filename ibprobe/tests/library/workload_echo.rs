//! `probe::workload::echo`.

use ibprobe::clock::Clock;
use ibprobe::probe::config::Plan;
use ibprobe::probe::config::Receiver;
use ibprobe::probe::workload::echo::*;
use ibprobe::transport::TransportInfo;
use ibprobe::transport::{Channel, TransportError};
use std::sync::atomic::AtomicBool;

/// A verbs-like channel with a send queue of `depth`: every send is
/// signaled and completes at once; it counts the posts that found
/// the queue full (a real one would poll a completion there) and the
/// completions polled between an arrival and its echo. Arrivals come
/// every third poll, `n` of them.
struct Sq {
    depth: u32,
    outstanding: u32,
    n: u64,
    polls: u64,
    arrived: u64,
    pending_echo: bool,
    posted_full: u64,
    reaped_before_echo: u64,
}

impl Channel for Sq {
    fn post(&mut self, _seq: u64) -> Result<(), TransportError> {
        if self.outstanding >= self.depth {
            self.posted_full += 1;
            self.outstanding -= 1;
        }
        self.outstanding += 1;
        self.pending_echo = false;
        Ok(())
    }
    fn poll_recv(&mut self) -> Result<Option<u64>, TransportError> {
        self.polls += 1;
        if self.arrived < self.n && self.polls.is_multiple_of(3) {
            self.arrived += 1;
            self.pending_echo = true;
            return Ok(Some(self.arrived - 1));
        }
        Ok(None)
    }
    fn poll_send_done(&mut self) -> Result<Option<u64>, TransportError> {
        if self.pending_echo {
            self.reaped_before_echo += 1;
        }
        if self.outstanding == 0 {
            return Ok(None);
        }
        self.outstanding -= 1;
        Ok(Some(0))
    }
    fn has_send_completions(&self) -> bool {
        true
    }
    fn is_signaled(&self, _seq: u64) -> bool {
        true
    }
    fn info(&self) -> TransportInfo {
        TransportInfo::default()
    }
}

#[test]
fn send_completions_are_polled_while_idle_so_the_queue_never_fills() {
    let mut ch = Sq {
        depth: 4,
        outstanding: 0,
        n: 1000,
        polls: 0,
        arrived: 0,
        pending_echo: false,
        posted_full: 0,
        reaped_before_echo: 0,
    };
    let clock = Clock::monotonic();
    let plan = Plan::echo(&Receiver::default(), &clock);
    let stop = AtomicBool::new(false);
    let mut idle_calls = 0;
    let (n, end) = echo(
        &mut ch,
        &clock,
        &plan,
        &stop,
        clock.ns_to_ticks(1_000_000),
        || {
            idle_calls += 1;
            false
        },
        None,
    )
    .unwrap();
    assert_eq!((n, end), (1000, EchoEnd::Finished));
    assert_eq!(ch.posted_full, 0, "a post found the send queue full");
    assert_eq!(ch.reaped_before_echo, 0);
    assert_eq!(ch.outstanding, 0, "every completion polled by the end");
    assert_eq!(idle_calls, 1);
}
