//! The daemon's server end ([`respond`]): ibexporter's responder serves
//! any client that asks for a transport it answers, each Hello through
//! [`admit`] first, with a bounded number of sessions busy polling at
//! once and a [`Liveness`] its owner watches and ends it by.

use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

use super::error::{oob_err, refuse, SessionError};
use super::handshake::{open_server, OneMessage};
use super::hello::{admit, requested, Admitted, MemoryCap};
use super::serve::serve;
use crate::clock::Clock;
use crate::probe::session::auth::Secret;
use crate::probe::session::oob::Oob;
use crate::spec::{ChannelSpec, Poll, Transport};
use crate::transport::{Channel, TransportError};

#[derive(Clone, Debug)]
pub struct ResponderOptions {
    /// Verbs device (None: the first with an active port).
    pub dev: Option<String>,
    /// Per read (the responder's owner bounds the whole handshake).
    pub handshake_timeout: Duration,
    /// None: everyone is served.
    pub secret: Option<Secret>,
    /// Sessions that may echo with busy polling at once (each spins a
    /// core); past it a client is echoed with event polling.
    pub max_busy: usize,
    /// Sessions busy polling now.
    pub busy: Arc<AtomicUsize>,
    pub memory: MemoryCap,
}

pub const RESPONDER_MEMORY_KEY: &str = "[responder] max_session_memory";

impl Default for ResponderOptions {
    fn default() -> Self {
        ResponderOptions {
            dev: None,
            handshake_timeout: Duration::default(),
            secret: None,
            max_busy: 0,
            busy: Arc::default(),
            memory: MemoryCap::default_with(RESPONDER_MEMORY_KEY),
        }
    }
}

/// A busy-polling slot, given back on drop.
struct BusySlot<'a>(&'a AtomicUsize);

impl Drop for BusySlot<'_> {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Ordering::Relaxed);
    }
}

fn busy_slot(busy: &AtomicUsize, max: usize) -> Option<BusySlot<'_>> {
    busy.fetch_update(Ordering::Relaxed, Ordering::Relaxed, |n| {
        (n < max).then_some(n + 1)
    })
    .ok()
    .map(|_| BusySlot(busy))
}

/// What the owner of a responder session sees of it and ends it by.
#[derive(Debug, Default)]
pub struct Liveness {
    /// Set by the owner to end the session.
    pub stop: AtomicBool,
    /// Set by [`respond`] once the client is welcomed.
    pub greeted: AtomicBool,
    /// Messages that arrived so far (idle when it stops moving).
    pub arrived: AtomicU64,
}

/// A channel that counts arrivals into a [`Liveness`].
struct Watched<'a> {
    ch: &'a mut dyn Channel,
    live: &'a Liveness,
}

impl Watched<'_> {
    fn seen(&self, got: Option<u64>) -> Option<u64> {
        if got.is_some() {
            self.live.arrived.fetch_add(1, Ordering::Relaxed);
        }
        got
    }
}

impl Channel for Watched<'_> {
    fn post(&mut self, seq: u64) -> Result<(), TransportError> {
        self.ch.post(seq)
    }
    fn poll_recv(&mut self) -> Result<Option<u64>, TransportError> {
        let got = self.ch.poll_recv()?;
        Ok(self.seen(got))
    }
    fn poll_send_done(&mut self) -> Result<Option<u64>, TransportError> {
        self.ch.poll_send_done()
    }
    fn has_send_completions(&self) -> bool {
        self.ch.has_send_completions()
    }
    fn is_signaled(&self, seq: u64) -> bool {
        self.ch.is_signaled(seq)
    }
    fn wait_recv(&mut self, clock: &Clock, timeout_ns: u64) -> Result<Option<u64>, TransportError> {
        let got = self.ch.wait_recv(clock, timeout_ns)?;
        Ok(self.seen(got))
    }
    fn stamp_target(&mut self) -> Result<crate::sys::verbs::StampWord, TransportError> {
        self.ch.stamp_target()
    }
    fn arrived_stamp(&self) -> u64 {
        self.ch.arrived_stamp()
    }
    fn info(&self) -> crate::transport::TransportInfo {
        self.ch.info()
    }
}

/// How long a responder waits for a closed client's Done.
const RESPONDER_GRACE: Duration = Duration::from_millis(20);

/// The transports a responder answers: shm needs both ends on one host,
/// and the model spins a core; a daemon offers neither.
const SERVED: [Transport; 4] = [Transport::Udp, Transport::Rc, Transport::Uc, Transport::Ud];

/// Serves one client on `oob` until it says Done, vanishes or
/// `live.stop` is set; returns the messages echoed. Refusals are sent to
/// the client too.
pub fn respond(mut oob: Oob, o: &ResponderOptions, live: &Liveness) -> Result<u64, SessionError> {
    oob = oob.with_secret(o.secret.clone());
    // read_hello never answers Refused: its errors map as the client's.
    let hello = oob.read_hello().map_err(oob_err)?;
    let served = |s: ChannelSpec| {
        match SERVED.contains(&s.transport) {
        true => admit(&hello, &s, o.memory),
        false => Err(format!(
            "transport {:?} is not served here; use udp, rc, uc or ud (ibprobe server serves shm and model)",
            s.transport.name()
        )),
    }
    };
    let admitted = requested(&hello, o.dev.as_deref()).and_then(served);
    let Admitted {
        mut spec,
        mut receiver,
        ..
    } = admitted.map_err(|e| refuse(&mut oob, e))?;
    let spins = receiver.poll == Poll::Busy || spec.poll == Poll::Busy;
    let _slot = match spins.then(|| busy_slot(&o.busy, o.max_busy)) {
        Some(None) => {
            receiver.poll = Poll::Event;
            spec.poll = Poll::Event;
            None
        }
        slot => slot.flatten(),
    };
    let mut ch = open_server(&mut oob, &hello, &spec, &OneMessage::default())?;
    live.greeted.store(true, Ordering::Relaxed);
    let clock = Clock::monotonic();
    let mut watched = Watched {
        ch: ch.as_mut(),
        live,
    };
    let end = serve(
        &mut oob,
        &mut watched,
        &clock,
        &live.stop,
        None,
        &receiver,
        RESPONDER_GRACE,
    )?;
    Ok(end.echoed)
}
