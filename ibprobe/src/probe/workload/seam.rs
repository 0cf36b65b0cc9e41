//! The workload seam: [`Workload`] (a loop on one [`Channel`]), [`Paired`]
//! (two loops on the ends of a slot stream) and [`Served`] (a paired
//! workload's answering side in a server). Apart from `mod.rs` so that a
//! workload's file and the re-exports never import each other.

use std::sync::atomic::AtomicBool;

use super::record::{Recorder, Tally};
use crate::clock::Clock;
use crate::probe::config::{Plan, ProbeConfig};
use crate::spec::{StreamSpec, StreamWorkload};
use crate::transport::stream::SlotEnd;
use crate::transport::{Channel, TransportError};

/// What a workload is given for one run, besides the channel and the
/// recorder.
#[derive(Clone, Copy)]
pub struct Ctx<'a> {
    pub clock: &'a Clock,
    pub plan: &'a Plan,
    /// Ctrl-C: the run ends between messages.
    pub stop: &'a AtomicBool,
    /// The first sequence number to post (the warm-up's next).
    pub first_seq: u64,
}

/// A way of putting messages on a channel and recording what comes back.
pub trait Workload {
    /// Runs `cx.plan` on `ch` from [`Recorder::begin`] to
    /// [`Recorder::finish`].
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
    /// The measuring side is done (if its FIN is lost, the peer ends
    /// after its timeout).
    pub done: &'a AtomicBool,
    /// The measuring side failed: the peer ends at once.
    pub abort: &'a AtomicBool,
}

/// Two sides at once on the ends of a slot stream: [`Paired::measure`]
/// on the measuring thread, [`Paired::answer`] on its peer.
pub trait Paired {
    /// What the peer needs, moved to its thread.
    type Peer: Send;
    type Measured;
    type Answered: Send;

    fn peer(&self) -> Self::Peer;

    fn measure(
        &mut self,
        end: &mut dyn SlotEnd,
        stop: &AtomicBool,
    ) -> Result<Self::Measured, TransportError>;

    fn answer(
        peer: &Self::Peer,
        end: &mut dyn SlotEnd,
        sig: Signals<'_>,
    ) -> Result<Self::Answered, TransportError>;
}

/// What a client asked a server to answer (its admitted stream Hello).
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
/// WORD done: "), and the client's last message (None: it waits for none).
pub struct Answer<R> {
    pub said: String,
    pub reply: Option<R>,
    pub interrupted: bool,
}

/// A paired workload a server answers, found by its word alone
/// (`probe/executor/served.rs`, written by `build.rs` from this folder's
/// `impl Served for` lines).
pub trait Served {
    /// Its word in a stream Hello (on one line: `build.rs` reads it).
    const WORD: StreamWorkload;
    type Reply: serde::Serialize;

    /// The answering side, until the client is done or quiet, or `stop`.
    fn serve(
        end: &mut dyn SlotEnd,
        asked: &Asked<'_>,
    ) -> Result<Answer<Self::Reply>, TransportError>;
}

/// The server's out-of-band connection to its client.
pub trait ReplyTo {
    type Error;

    fn reply<T: serde::Serialize>(&mut self, msg: &T) -> Result<(), Self::Error>;
}
