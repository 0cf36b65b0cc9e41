//! The workload seam, one shape per kind of end: [`Workload`], a loop on
//! one [`Channel`] (stop-and-wait), and [`Paired`], two loops at once on
//! the ends of a slot stream (the stream, loggp's PRTT); and [`Served`],
//! a paired workload's answering side as a server runs it for a client
//! on another host. Kept apart from `mod.rs` so that a workload's file
//! and the folder's re-exports never import each other.

use std::sync::atomic::AtomicBool;

use super::record::{Recorder, Tally};
use crate::clock::Clock;
use crate::probe::config::{Plan, ProbeConfig};
use crate::spec::{StreamSpec, StreamWorkload};
use crate::transport::stream::SlotEnd;
use crate::transport::{Channel, TransportError};

/// What a workload is given for one run, besides the channel and the
/// recorder: all read-only.
#[derive(Clone, Copy)]
pub struct Ctx<'a> {
    pub clock: &'a Clock,
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

/// The flags a [`Paired`] peer reads (the executor raises them).
#[derive(Clone, Copy)]
pub struct Signals<'a> {
    pub stop: &'a AtomicBool,
    /// The measuring side is done (its FIN may be lost: the peer then
    /// ends after its timeout).
    pub done: &'a AtomicBool,
    /// The measuring side failed: the peer ends at once.
    pub abort: &'a AtomicBool,
}

/// Two sides at once on the two ends of a slot stream: [`Paired::measure`]
/// on the measuring thread, [`Paired::answer`] on its peer (a pinned
/// thread in loopback, the server across hosts).
pub trait Paired {
    /// What the peer needs, moved to its thread.
    type Peer: Send;
    type Measured;
    type Answered: Send;

    fn peer(&self) -> Self::Peer;

    /// The measuring side on `end`, until its plan is done or `stop`.
    fn measure(
        &mut self,
        end: &mut dyn SlotEnd,
        stop: &AtomicBool,
    ) -> Result<Self::Measured, TransportError>;

    /// The peer's side on `end`, until the measuring side is done.
    fn answer(
        peer: &Self::Peer,
        end: &mut dyn SlotEnd,
        sig: Signals<'_>,
    ) -> Result<Self::Answered, TransportError>;
}

/// What a client on another host asked a server to answer (its stream
/// Hello, admitted), and the server's clock and Ctrl-C flag.
#[derive(Clone, Copy)]
pub struct Asked<'a> {
    pub spec: &'a StreamSpec,
    /// The client's size, warm-up, `--timeout` and `--consume-delay`.
    pub cfg: &'a ProbeConfig,
    /// The server's clock (not comparable with the client's timestamps).
    pub clock: &'a Clock,
    pub stop: &'a AtomicBool,
}

/// How a served workload ended: the server's line (after "client PEER
/// WORD done: "), the client's last message on the out-of-band connection
/// (None: it waits for nothing), whether Ctrl-C ended it.
pub struct Answer<R> {
    pub said: String,
    pub reply: Option<R>,
    pub interrupted: bool,
}

/// A paired workload a server answers for a client on another host: its
/// file implements this, and its word in [`StreamWorkload`] is what the
/// client's stream Hello names. The server finds it by that word alone
/// (`probe/executor/served.rs`, written by `build.rs` from this folder's
/// `impl Served for` lines).
pub trait Served {
    /// Its word in a stream Hello (on one line: `build.rs` reads it).
    const WORD: StreamWorkload;
    /// What the client is sent once the answering side is done.
    type Reply: serde::Serialize;

    /// The answering side on `end` (the server's thread, already placed),
    /// until the client is done, `asked.stop`, or the client goes quiet.
    fn serve(
        end: &mut dyn SlotEnd,
        asked: &Asked<'_>,
    ) -> Result<Answer<Self::Reply>, TransportError>;
}

/// Where a served workload's reply goes: the server's out-of-band
/// connection to its client.
pub trait ReplyTo {
    type Error;

    fn reply<T: serde::Serialize>(&mut self, msg: &T) -> Result<(), Self::Error>;
}
