//! The workload seam: what every measurement loop implements ([`Workload`])
//! and what it is given ([`Ctx`]). Kept apart from `mod.rs` so that a
//! workload's file and the folder's re-exports never import each other.

use std::sync::atomic::AtomicBool;

use super::record::{Recorder, Tally};
use crate::clock::Clock;
use crate::probe::config::Plan;
use crate::transport::{Channel, TransportError};

/// What a workload is given for one run, besides the channel and the
/// recorder: all read-only.
#[derive(Clone, Copy)]
pub struct Ctx<'a> {
    /// The clock every timestamp comes from.
    pub clock: &'a Clock,
    /// The run in clock ticks (count or duration, pacing, timeout, ...).
    pub plan: &'a Plan,
    /// The Ctrl-C flag: set, the run ends between messages.
    pub stop: &'a AtomicBool,
    /// The first sequence number to post (the warm-up's next).
    pub first_seq: u64,
}

/// A way of putting messages on a channel and recording what comes back.
pub trait Workload {
    /// Runs `cx.plan` on `ch`, recording into `rec`: calls
    /// [`Recorder::begin`] at the first timestamp and returns
    /// [`Recorder::finish`]'s tally. An error from the transport, or the
    /// workload's loss policy, ends the run with an error.
    fn run<C: Channel + ?Sized>(
        &mut self,
        ch: &mut C,
        cx: &Ctx<'_>,
        rec: &mut Recorder<'_>,
    ) -> Result<Tally, TransportError>;
}
