//! The model transport: a LogGP network of given parameters
//! (`--transport model --model L=..,os=..,or=..,g=..,G=..`).
//!
//! Why it exists: it is the ground truth of `ibprobe loggp` (an estimator
//! that cannot recover known parameters cannot be trusted on a real
//! network) and the "what if my NIC had o = 65 ns" tool: every command
//! that opens a channel or a stream runs on it.
//!
//! The model ([`ModelLink`], one per direction): a send that begins at t
//! keeps the sender's CPU busy for `o_s`; the message enters the link at
//! `max(t + o_s, link free)`, occupies it for `g + G*b` (b = the bytes
//! sent), and arrives `G*b + L` after it entered. Receiving an arrived
//! message keeps the receiver's CPU busy for `o_r`. So one message takes
//! `o_s + G*b + L + o_r` end to end, and back-to-back messages leave one
//! per `max(o_s, g + G*b)` and are taken one per `o_r`.
//!
//! Two clocks run it:
//! - real time ([`ModelChannel`], [`ModelSlots`]): busy-waits for `o`,
//!   holds an arrival until its delivery time; the messages travel through
//!   the shared-memory ring (`shm.rs`) in one process ([`ModelSlots`]), or
//!   a UDP carrier between processes ([`ModelUdpChannel`], [`ModelUdpSlots`]).
//!   It is honest while the parameters are well above the cost of a clock
//!   read (tens of ns): from about 1 us up;
//! - a virtual clock ([`ModelLink`] driven by `probe/loggp.rs`'s
//!   simulation): no waiting, exact event times at any scale.

use std::collections::VecDeque;

use serde_json::Value;

use super::channel::{Channel, TransportError, TransportInfo};
use super::open::{Ask, End, EndError, Opened, Opens, Pending, StreamEnds};
use super::shm::ShmSlots;
use super::stream::SlotEnd;
use super::udp::{self, UdpChannel, UdpSlots};
use crate::clock::Clock;
use crate::spec::{ChannelSpec, ModelParams, StreamSpec};

/// One direction of a LogGP link: the event times of the model, on any
/// clock (ns as f64).
#[derive(Clone, Copy, Debug)]
pub struct ModelLink {
    l: f64,
    os: f64,
    or: f64,
    g: f64,
    big_g: f64,
    /// When the link can take the next message.
    free: f64,
}

impl ModelLink {
    pub fn new(p: &ModelParams) -> ModelLink {
        let [l, os, or, g, big_g] = p.ns();
        ModelLink {
            l,
            os,
            or,
            g,
            big_g,
            free: f64::NEG_INFINITY,
        }
    }

    /// A send of `bytes` that begins at `start`: returns (the time the
    /// send call returns, the time the message arrives at the peer).
    pub fn send(&mut self, start: f64, bytes: usize) -> (f64, f64) {
        let post_end = start + self.os;
        let enter = post_end.max(self.free);
        let wire = self.big_g * bytes as f64;
        self.free = enter + self.g + wire;
        (post_end, enter + wire + self.l)
    }

    /// The time a message of `bytes` takes from entering the link to
    /// arriving: G*b + L.
    pub fn flight(&self, bytes: usize) -> f64 {
        self.big_g * bytes as f64 + self.l
    }

    /// A receive of a message that arrived at `arrival` by a receiver free
    /// from `free`: the time the message is in the application's hands.
    pub fn recv(&self, arrival: f64, free: f64) -> f64 {
        arrival.max(free) + self.or
    }

    pub fn or_ns(&self) -> f64 {
        self.or
    }
}

/// The real-time side of the model: a clock with an origin both ends
/// share, and busy-waits on it.
#[derive(Clone, Copy, Debug)]
struct RealTime {
    clock: Clock,
    origin: u64,
}

impl RealTime {
    fn starting(clock: Clock) -> RealTime {
        RealTime {
            clock,
            origin: clock.now(),
        }
    }

    #[inline(always)]
    fn now(&self) -> f64 {
        self.clock
            .ticks_to_ns(self.clock.now().wrapping_sub(self.origin)) as f64
    }

    #[inline(always)]
    fn spin_until(&self, t: f64) -> f64 {
        loop {
            let n = self.now();
            if n >= t {
                return n;
            }
            core::hint::spin_loop();
        }
    }
}

fn describe(p: &ModelParams) -> TransportInfo {
    TransportInfo {
        name: "model".into(),
        detail: format!("LogGP model {p} (real time, busy-waits)"),
        facts: vec![("model".into(), p.to_string())],
    }
}

fn over_carrier(p: &ModelParams, carrier: &TransportInfo) -> TransportInfo {
    TransportInfo {
        detail: format!("LogGP model {p} over {}", carrier.detail),
        ..describe(p)
    }
}

/// Messages a [`ModelChannel`] holds in flight.
const CHANNEL_DEPTH: usize = 1 << 16;

/// One-way loopback on the model (`ibprobe loopback -t model`, sweeps):
/// `post` pays `o_s` and puts the message on the link, `poll_recv` hands
/// it out once delivered, after paying `o_r`.
pub struct ModelChannel {
    params: ModelParams,
    link: ModelLink,
    rt: RealTime,
    size: usize,
    in_flight: VecDeque<(u64, f64)>,
    rx_free: f64,
}

impl ModelChannel {
    pub fn loopback(params: ModelParams, size: usize, clock: Clock) -> ModelChannel {
        ModelChannel {
            params,
            link: ModelLink::new(&params),
            rt: RealTime::starting(clock),
            size,
            in_flight: VecDeque::with_capacity(CHANNEL_DEPTH),
            rx_free: f64::NEG_INFINITY,
        }
    }
}

impl Channel for ModelChannel {
    fn post(&mut self, seq: u64) -> Result<(), TransportError> {
        if self.in_flight.len() == CHANNEL_DEPTH {
            return Err(TransportError::Unsupported(format!(
                "the model holds at most {CHANNEL_DEPTH} messages in flight; lower --rate or --outstanding"
            )));
        }
        let (ret, arrival) = self.link.send(self.rt.now(), self.size);
        self.in_flight.push_back((seq, arrival));
        self.rt.spin_until(ret);
        Ok(())
    }

    fn poll_recv(&mut self) -> Result<Option<u64>, TransportError> {
        let Some(&(seq, arrival)) = self.in_flight.front() else {
            return Ok(None);
        };
        let now = self.rt.now();
        if now < arrival {
            return Ok(None);
        }
        self.in_flight.pop_front();
        let done = self.link.recv(arrival, self.rx_free.max(now));
        self.rx_free = self.rt.spin_until(done);
        Ok(Some(seq))
    }

    fn info(&self) -> TransportInfo {
        describe(&self.params)
    }
}

/// Bytes the model adds in front of a slot in its ring: the length word
/// the ring needs, and the delivery time.
const WRAP: usize = 16;

/// One end of a model stream (and of `ibprobe loggp`'s round trips): a
/// [`SlotEnd`] whose slots cross a shared-memory ring carrying their
/// delivery time, held back until then.
#[repr(align(128))]
pub struct ModelSlots {
    params: ModelParams,
    inner: ShmSlots,
    link: ModelLink,
    rt: RealTime,
    /// The slot being sent and the arrived slot, wrapped.
    tx: Vec<u8>,
    rx: Vec<u8>,
    /// The arrived slot waiting for its delivery time: (time, length).
    held: Option<(f64, usize)>,
}

impl ModelSlots {
    /// Both ends in one process: (first, second), `slots` slots of
    /// `slot_size` bytes in each direction.
    pub fn pair(
        params: ModelParams,
        slots: u32,
        slot_size: usize,
        clock: Clock,
    ) -> Result<(ModelSlots, ModelSlots), TransportError> {
        let (a, b) = ShmSlots::pair(slots, slot_size + WRAP)?;
        let rt = RealTime::starting(clock);
        let end = |inner| ModelSlots {
            params,
            inner,
            link: ModelLink::new(&params),
            rt,
            tx: vec![0; slot_size + WRAP],
            rx: vec![0; slot_size + WRAP],
            held: None,
        };
        Ok((end(a), end(b)))
    }
}

impl SlotEnd for ModelSlots {
    fn slot_size(&self) -> usize {
        self.tx.len() - WRAP
    }

    fn send(&mut self, bytes: &[u8]) -> Result<bool, TransportError> {
        let len = bytes.len();
        if len > self.slot_size() {
            return Err(TransportError::Unsupported(format!(
                "model slot of {len} B exceeds the {} B slot",
                self.slot_size()
            )));
        }
        // The ring write happens within o_s (the send returns at
        // start + o_s, or later only when the write itself takes longer).
        let mut link = self.link;
        let (ret, arrival) = link.send(self.rt.now(), len);
        self.tx[..4].copy_from_slice(&((len + WRAP) as u32).to_le_bytes());
        self.tx[4..8].fill(0);
        self.tx[8..16].copy_from_slice(&arrival.to_bits().to_le_bytes());
        self.tx[WRAP..WRAP + len].copy_from_slice(bytes);
        if !self.inner.send(&self.tx[..len + WRAP])? {
            // No room: nothing was sent, and the link is as it was.
            return Ok(false);
        }
        self.link = link;
        self.rt.spin_until(ret);
        Ok(true)
    }

    fn recv(&mut self, into: &mut [u8]) -> Result<Option<usize>, TransportError> {
        // The receive begins now; taking the slot from the ring and
        // copying it happen within o_r.
        let begin = self.rt.now();
        if self.held.is_none() {
            let Some(n) = self.inner.recv(&mut self.rx)? else {
                return Ok(None);
            };
            let t = u64::from_le_bytes(self.rx[8..16].try_into().unwrap_or_default());
            self.held = Some((f64::from_bits(t), n - WRAP));
        }
        let Some((arrival, len)) = self.held else {
            return Ok(None);
        };
        if begin < arrival {
            return Ok(None);
        }
        into[..len].copy_from_slice(&self.rx[WRAP..WRAP + len]);
        self.held = None;
        self.rt.spin_until(begin + self.link.or_ns());
        Ok(Some(len))
    }

    fn lossy(&self) -> bool {
        false
    }

    fn info(&self) -> TransportInfo {
        describe(&self.params)
    }
}

/// Between two processes (`ibprobe server` and its client) the model
/// rides on a UDP carrier: the sender pays o_s, waits until the link is
/// free (g + G*b after the previous message entered it) and hands the
/// message to the carrier; the receiver holds each arrival G*b + L after
/// the carrier delivered it, then pays o_r. Each side times on its own
/// clock, so no clocks need to agree; the carrier's own latency adds to
/// L, and a send waits for the link instead of queueing behind it.
pub struct ModelUdpChannel {
    params: ModelParams,
    link: ModelLink,
    rt: RealTime,
    carrier: UdpChannel,
    size: usize,
    held: VecDeque<(u64, f64)>,
}

impl ModelUdpChannel {
    pub fn new(params: ModelParams, carrier: UdpChannel, size: usize, clock: Clock) -> Self {
        ModelUdpChannel {
            params,
            link: ModelLink::new(&params),
            rt: RealTime::starting(clock),
            carrier,
            size,
            held: VecDeque::with_capacity(CHANNEL_DEPTH),
        }
    }
}

/// Sends on a carrier as the model says: o_s, then the link's turn.
fn paced_send<T>(
    link: &mut ModelLink,
    rt: &RealTime,
    bytes: usize,
    send: impl FnOnce() -> Result<T, TransportError>,
) -> Result<T, TransportError> {
    let (ret, arrival) = link.send(rt.now(), bytes);
    rt.spin_until(ret.max(arrival - link.flight(bytes)));
    send()
}

impl Channel for ModelUdpChannel {
    fn post(&mut self, seq: u64) -> Result<(), TransportError> {
        let c = &mut self.carrier;
        paced_send(&mut self.link, &self.rt, self.size, || c.post(seq))
    }

    fn poll_recv(&mut self) -> Result<Option<u64>, TransportError> {
        let begin = self.rt.now();
        while self.held.len() < CHANNEL_DEPTH {
            match self.carrier.poll_recv()? {
                Some(seq) => self
                    .held
                    .push_back((seq, self.rt.now() + self.link.flight(self.size))),
                None => break,
            }
        }
        match self.held.front() {
            Some(&(seq, at)) if at <= begin => {
                self.held.pop_front();
                self.rt.spin_until(begin + self.link.or_ns());
                Ok(Some(seq))
            }
            _ => Ok(None),
        }
    }

    fn info(&self) -> TransportInfo {
        over_carrier(&self.params, &self.carrier.info())
    }
}

/// Slots held at most by a [`ModelUdpSlots`] receiver.
const HELD_SLOTS: usize = 256;

/// A stream's end of the model between two processes, on a UDP carrier
/// (as [`ModelUdpChannel`]).
pub struct ModelUdpSlots {
    params: ModelParams,
    link: ModelLink,
    rt: RealTime,
    carrier: UdpSlots,
    bufs: Vec<Vec<u8>>,
    /// (length, delivery time) of each held slot.
    meta: Vec<(usize, f64)>,
    head: usize,
    count: usize,
}

impl ModelUdpSlots {
    pub fn new(params: ModelParams, carrier: UdpSlots, clock: Clock) -> Self {
        let size = carrier.slot_size();
        ModelUdpSlots {
            params,
            link: ModelLink::new(&params),
            rt: RealTime::starting(clock),
            carrier,
            bufs: (0..HELD_SLOTS).map(|_| vec![0; size]).collect(),
            meta: vec![(0, 0.0); HELD_SLOTS],
            head: 0,
            count: 0,
        }
    }
}

impl SlotEnd for ModelUdpSlots {
    fn slot_size(&self) -> usize {
        self.carrier.slot_size()
    }

    fn send(&mut self, bytes: &[u8]) -> Result<bool, TransportError> {
        let mut link = self.link;
        let c = &mut self.carrier;
        let sent = paced_send(&mut link, &self.rt, bytes.len(), || c.send(bytes))?;
        if sent {
            self.link = link;
        }
        Ok(sent)
    }

    fn recv(&mut self, into: &mut [u8]) -> Result<Option<usize>, TransportError> {
        let begin = self.rt.now();
        while self.count < HELD_SLOTS {
            let i = (self.head + self.count) % HELD_SLOTS;
            match self.carrier.recv(&mut self.bufs[i])? {
                Some(n) => {
                    self.meta[i] = (n, self.rt.now() + self.link.flight(n));
                    self.count += 1;
                }
                None => break,
            }
        }
        if self.count == 0 || self.meta[self.head].1 > begin {
            return Ok(None);
        }
        let (n, _) = self.meta[self.head];
        into[..n].copy_from_slice(&self.bufs[self.head][..n]);
        self.head = (self.head + 1) % HELD_SLOTS;
        self.count -= 1;
        self.rt.spin_until(begin + self.link.or_ns());
        Ok(Some(n))
    }

    fn lossy(&self) -> bool {
        self.carrier.lossy()
    }

    fn info(&self) -> TransportInfo {
        over_carrier(&self.params, &self.carrier.info())
    }
}

/// How the model opens: in one process over the shm ring, or between
/// processes riding a UDP socket, which the handshake exchanges as udp's.
pub struct Opener;

impl Opens for Opener {
    fn loopback(&self, spec: &ChannelSpec) -> Opened<Box<dyn Channel>> {
        let m = params(spec)?;
        Ok(Box::new(ModelChannel::loopback(
            m,
            spec.size,
            model_clock(),
        )))
    }

    fn stream_pair(&self, spec: &ChannelSpec, st: &StreamSpec) -> Opened<StreamEnds> {
        let m = params(spec)?;
        let (a, b) = ModelSlots::pair(m, st.slots, st.slot_size, model_clock())?;
        Ok((Box::new(a), Box::new(b)))
    }

    fn client<'a>(&self, ask: Ask<'a>) -> Result<(Pending<'a>, Value), EndError> {
        let m = params(ask.spec)?;
        udp::client(ask, move |u| over_udp(m, u, ask.spec.size))
    }

    fn server(&self, ask: Ask, theirs: &Value) -> Result<(End, Value), EndError> {
        let m = params(ask.spec)?;
        udp::server(ask, theirs, |u| over_udp(m, u, ask.spec.size))
    }
}

fn params(spec: &ChannelSpec) -> Result<ModelParams, TransportError> {
    spec.model.ok_or_else(|| {
        TransportError::Unsupported(
            "--transport model needs --model (e.g. L=5us,os=1us,or=1.5us,g=2us,G=1ns)".into(),
        )
    })
}

fn over_udp(m: ModelParams, socket: udp::Socket, size: usize) -> End {
    match socket {
        udp::Socket::Messages(u) => {
            End::Messages(Box::new(ModelUdpChannel::new(m, u, size, model_clock())))
        }
        udp::Socket::Slots(u) => End::Slots(Box::new(ModelUdpSlots::new(m, u, model_clock()))),
    }
}

/// The clock the real-time model busy-waits on: the calibrated TSC where
/// there is one (a read costs a few ns; clock_gettime costs tens), once
/// per process.
pub fn model_clock() -> Clock {
    static CLOCK: std::sync::OnceLock<Clock> = std::sync::OnceLock::new();
    *CLOCK.get_or_init(Clock::calibrate)
}
