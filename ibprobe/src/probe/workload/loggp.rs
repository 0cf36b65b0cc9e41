//! `ibprobe loggp`'s measurements: Netgauge's parameterised round trip
//! PRTT(n, d, b) (Hoefler et al.) through a stream's [`SlotEnd`], or on
//! the model's virtual clock ([`SimSource`]); `probe/loggp_fit.rs` fits.
//!
//! PRTT(n, d, b): the client sends n messages of b bytes, waiting d after
//! each send returns (none after the last); the responder answers the
//! last with one message of b bytes; PRTT ends at the answer. For o_r the
//! responder takes a burst's first message, busy-waits `wait` (the others
//! arrive meanwhile), times taking the n - 1 others and answers that time.
//!
//! Every message begins with a 16-byte header ([`HEADER`]):
//! `u32 len` (the slot's bytes, as every slot begins), `u8 kind`, `u8 0`,
//! `u16 index` (in the burst; in an answer: messages the responder got),
//! `u16 n`, `u16 burst id`, `u32 arg` (o_r burst: the wait in ns; its
//! answer: the measured time in ns).

use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use super::seam::{Answer, Asked, Paired, Served, Signals};
pub use super::slot::LOGGP_HEADER as HEADER;
use crate::clock::Clock;
use crate::probe::config::dur_ns;
use crate::probe::loggp_fit::median;
pub use crate::probe::loggp_fit::{Point, Samples};
use crate::spec::{peer, ModelParams, StreamWorkload};
use crate::transport::model::ModelLink;
use crate::transport::stream::SlotEnd;
use crate::transport::TransportError;

const BURST: u8 = 1;
const ORECV: u8 = 2;
const ANSWER: u8 = 3;
const STOP: u8 = 4;

#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
struct Header {
    len: u32,
    kind: u8,
    index: u16,
    n: u16,
    id: u16,
    arg: u32,
}

impl Header {
    fn write(&self, b: &mut [u8]) {
        b[0..4].copy_from_slice(&self.len.to_le_bytes());
        b[4] = self.kind;
        b[5] = 0;
        b[6..8].copy_from_slice(&self.index.to_le_bytes());
        b[8..10].copy_from_slice(&self.n.to_le_bytes());
        b[10..12].copy_from_slice(&self.id.to_le_bytes());
        b[12..16].copy_from_slice(&self.arg.to_le_bytes());
    }

    fn read(b: &[u8]) -> Header {
        let u16_at = |i: usize| u16::from_le_bytes([b[i], b[i + 1]]);
        Header {
            len: u32::from_le_bytes([b[0], b[1], b[2], b[3]]),
            kind: b[4],
            index: u16_at(6),
            n: u16_at(8),
            id: u16_at(10),
            arg: u32::from_le_bytes([b[12], b[13], b[14], b[15]]),
        }
    }
}

/// A PRTT measurement's carrier. `bytes` counts the whole message (header
/// and payload). `Ok(None)`: the answer was lost; the caller repeats.
pub trait PrttSource {
    /// PRTT(n, d, bytes) in ns.
    fn prtt(&mut self, n: u16, d_ns: f64, bytes: usize) -> Result<Option<f64>, TransportError>;
    /// The responder's time to take n - 1 arrived messages (ns).
    fn orecv(&mut self, n: u16, wait_ns: f64, bytes: usize) -> Result<Option<f64>, TransportError>;
    /// The mean time of one send call in the last burst (ns).
    fn send_call_ns(&self) -> f64;
    /// A receive call that found nothing after the last answer (ns; 0
    /// when it found something).
    fn empty_poll_ns(&self) -> f64 {
        0.0
    }
}

/// The model's exact event times (`ModelLink`), without waiting.
pub struct SimSource {
    params: ModelParams,
}

impl SimSource {
    pub fn new(params: ModelParams) -> SimSource {
        SimSource { params }
    }

    /// The burst's arrivals at the responder (fresh links, client at 0).
    fn burst(&self, n: u16, d_ns: f64, bytes: usize) -> Vec<f64> {
        let mut fwd = ModelLink::new(&self.params);
        let mut t = 0.0;
        (0..n)
            .map(|_| {
                let (ret, arrival) = fwd.send(t, bytes);
                t = ret + d_ns;
                arrival
            })
            .collect()
    }
}

impl PrttSource for SimSource {
    fn prtt(&mut self, n: u16, d_ns: f64, bytes: usize) -> Result<Option<f64>, TransportError> {
        let rx = ModelLink::new(&self.params);
        let free = self
            .burst(n, d_ns, bytes)
            .into_iter()
            .fold(f64::NEG_INFINITY, |free, a| rx.recv(a, free));
        let mut back = ModelLink::new(&self.params);
        let (_, arrival) = back.send(free, bytes);
        Ok(Some(back.recv(arrival, f64::NEG_INFINITY)))
    }

    fn orecv(&mut self, n: u16, wait_ns: f64, bytes: usize) -> Result<Option<f64>, TransportError> {
        let rx = ModelLink::new(&self.params);
        let arrivals = self.burst(n, 0.0, bytes);
        let start = rx.recv(arrivals[0], f64::NEG_INFINITY) + wait_ns;
        let end = arrivals[1..]
            .iter()
            .fold(start, |free, &a| rx.recv(a, free));
        Ok(Some(end - start))
    }

    fn send_call_ns(&self) -> f64 {
        let (ret, _) = ModelLink::new(&self.params).send(0.0, 0);
        ret
    }
}

/// The client's side of PRTT on a [`SlotEnd`] whose peer runs [`respond`].
pub struct SlotSource<'a> {
    end: &'a mut dyn SlotEnd,
    clock: Clock,
    buf: Vec<u8>,
    id: u16,
    timeout_ns: u64,
    stop: &'a AtomicBool,
    send_call_ns: f64,
    empty_poll_ns: f64,
}

impl<'a> SlotSource<'a> {
    /// An answer later than `timeout_ns` counts as lost.
    pub fn new(
        end: &'a mut dyn SlotEnd,
        clock: Clock,
        timeout_ns: u64,
        stop: &'a AtomicBool,
    ) -> SlotSource<'a> {
        SlotSource {
            buf: vec![0; end.slot_size().max(HEADER)],
            end,
            clock,
            id: 0,
            timeout_ns,
            stop,
            send_call_ns: 0.0,
            empty_poll_ns: 0.0,
        }
    }

    /// Sends a burst: (ns from the first send to the answer, its header),
    /// or `None` after the timeout.
    fn exchange(
        &mut self,
        kind: u8,
        n: u16,
        d_ns: f64,
        arg: u32,
        bytes: usize,
    ) -> Result<Option<(f64, Header)>, TransportError> {
        self.id = self.id.wrapping_add(1);
        let clock = self.clock;
        let d = clock.ns_to_ticks(d_ns.max(0.0) as u64);
        let mut h = Header {
            len: bytes as u32,
            kind,
            n,
            id: self.id,
            arg,
            ..Header::default()
        };
        let t0 = clock.now();
        let mut in_send = 0;
        for k in 0..n {
            h.index = k;
            h.write(&mut self.buf);
            let call = clock.now();
            while !self.end.send(&self.buf[..bytes])? {
                core::hint::spin_loop();
            }
            let ret = clock.now();
            in_send += ret - call;
            if d > 0 && k + 1 < n {
                clock.spin_until(ret + d);
            }
        }
        self.send_call_ns = clock.ticks_to_ns(in_send) as f64 / f64::from(n);
        let deadline = t0 + clock.ns_to_ticks(self.timeout_ns);
        loop {
            if let Some(len) = self.end.recv(&mut self.buf)? {
                let t1 = clock.now();
                let a = Header::read(&self.buf[..len.max(HEADER)]);
                if a.kind == ANSWER && a.id == self.id {
                    // Nothing else is on its way: time a poll that finds
                    // nothing (the stream loops make one per slot).
                    let p0 = clock.now();
                    let found = self.end.recv(&mut self.buf)?.is_some();
                    self.empty_poll_ns = if found {
                        0.0
                    } else {
                        clock.ticks_to_ns(clock.now() - p0) as f64
                    };
                    return Ok(Some((clock.ticks_to_ns(t1 - t0) as f64, a)));
                }
                continue;
            }
            if clock.now() > deadline || self.stop.load(Ordering::Relaxed) {
                return Ok(None);
            }
        }
    }

    pub fn finish(&mut self) -> Result<(), TransportError> {
        Header {
            len: HEADER as u32,
            kind: STOP,
            ..Header::default()
        }
        .write(&mut self.buf);
        let t0 = self.clock.now();
        while !self.end.send(&self.buf[..HEADER])? {
            if self.clock.ticks_to_ns(self.clock.now() - t0) > self.timeout_ns {
                break;
            }
        }
        Ok(())
    }
}

impl PrttSource for SlotSource<'_> {
    fn prtt(&mut self, n: u16, d_ns: f64, bytes: usize) -> Result<Option<f64>, TransportError> {
        Ok(self.exchange(BURST, n, d_ns, 0, bytes)?.map(|(t, _)| t))
    }

    fn orecv(&mut self, n: u16, wait_ns: f64, bytes: usize) -> Result<Option<f64>, TransportError> {
        let wait = wait_ns.clamp(0.0, u32::MAX as f64) as u32;
        Ok(self
            .exchange(ORECV, n, 0.0, wait, bytes)?
            .filter(|(_, a)| a.index == n)
            .map(|(_, a)| a.arg as f64))
    }

    fn send_call_ns(&self) -> f64 {
        self.send_call_ns
    }

    fn empty_poll_ns(&self) -> f64 {
        self.empty_poll_ns
    }
}

/// The responder: answers bursts until the client says stop, `stop` is
/// set, or nothing comes for `idle_ns`. Returns the bursts answered.
pub fn respond(
    end: &mut dyn SlotEnd,
    clock: &Clock,
    stop: &AtomicBool,
    idle_ns: u64,
) -> Result<u64, TransportError> {
    let mut buf = vec![0u8; end.slot_size().max(HEADER)];
    let (mut cur, mut got, mut answered) = (None::<u16>, 0u16, 0u64);
    let mut last = clock.now();
    let idle = clock.ns_to_ticks(idle_ns);
    loop {
        let Some(len) = end.recv(&mut buf)? else {
            if stop.load(Ordering::Relaxed) {
                return Ok(answered);
            }
            if clock.now() - last > idle {
                return Err(TransportError::PeerLost(format!(
                    "no loggp message for {} ms",
                    idle_ns / 1_000_000
                )));
            }
            continue;
        };
        last = clock.now();
        let h = Header::read(&buf[..len.max(HEADER)]);
        match h.kind {
            STOP => return Ok(answered),
            BURST => {
                if cur != Some(h.id) {
                    (cur, got) = (Some(h.id), 0);
                }
                got += 1;
                if h.index + 1 == h.n {
                    answer(end, &mut buf, len, h.id, got, 0)?;
                    answered += 1;
                }
            }
            ORECV if h.index == 0 => {
                let wait = clock.ns_to_ticks(u64::from(h.arg));
                let start = clock.spin_until(clock.now() + wait);
                let deadline = start + clock.ns_to_ticks(idle_ns.min(1_000_000_000));
                let mut n = 1u16;
                let mut end_t = start;
                while n < h.n {
                    match end.recv(&mut buf)? {
                        Some(l) => {
                            end_t = clock.now();
                            let x = Header::read(&buf[..l.max(HEADER)]);
                            if x.id != h.id {
                                break;
                            }
                            n += 1;
                            if x.index + 1 == h.n {
                                break;
                            }
                        }
                        None if clock.now() > deadline => break,
                        None => {}
                    }
                }
                let took = clock.ticks_to_ns(end_t - start).min(u64::from(u32::MAX)) as u32;
                answer(end, &mut buf, len, h.id, n, took)?;
                answered += 1;
                last = clock.now();
            }
            _ => {}
        }
    }
}

fn answer(
    end: &mut dyn SlotEnd,
    buf: &mut [u8],
    len: usize,
    id: u16,
    got: u16,
    arg: u32,
) -> Result<(), TransportError> {
    Header {
        len: len as u32,
        kind: ANSWER,
        index: got,
        id,
        arg,
        ..Header::default()
    }
    .write(buf);
    while !end.send(&buf[..len])? {
        core::hint::spin_loop();
    }
    Ok(())
}

/// How much to measure: payload sizes (ascending), messages per burst,
/// rounds (one estimate of every parameter each), repetitions of each
/// PRTT within a round (their median counts).
#[derive(Clone, Debug)]
pub struct LoggpPlan {
    pub sizes: Vec<usize>,
    pub n: u16,
    pub rounds: usize,
    pub reps: usize,
}

type Measure<'a> = &'a dyn Fn(&mut dyn PrttSource) -> Result<Option<f64>, TransportError>;

const MAX_LOST_IN_A_ROW: u32 = 5;

/// Runs the plan on `src`, `step` after each size of each round. Sizes
/// interleave within a round, so drift spreads over all sizes alike.
pub fn measure(
    src: &mut dyn PrttSource,
    plan: &LoggpPlan,
    stop: &AtomicBool,
    step: &mut dyn FnMut(),
) -> Result<Samples, TransportError> {
    let mut out = Samples {
        n: plan.n,
        ..Samples::default()
    };
    let n = plan.n;
    let mut v = vec![0.0; plan.reps.max(1)];
    let mut answered = false;
    let mut rep = |src: &mut dyn PrttSource, lost: &mut u64, f: Measure| {
        for slot in v.iter_mut() {
            let mut in_a_row = 0;
            *slot = loop {
                if stop.load(Ordering::Relaxed) {
                    return Err(TransportError::PeerLost("interrupted".into()));
                }
                if let Some(t) = f(src)? {
                    answered = true;
                    break t;
                }
                *lost += 1;
                in_a_row += 1;
                if in_a_row >= MAX_LOST_IN_A_ROW {
                    return Err(if answered {
                        TransportError::PeerLost(format!("{MAX_LOST_IN_A_ROW} loggp bursts in a row got no answer: the peer stopped answering"))
                    } else {
                        TransportError::Unsupported(format!("the peer answered none of {MAX_LOST_IN_A_ROW} loggp bursts: it cannot echo them (run `ibprobe server` of this version, with the same --transport, and check that it is reachable)"))
                    });
                }
            };
        }
        Ok(median(&v))
    };
    for _ in 0..plan.rounds {
        let mut round = Vec::with_capacity(plan.sizes.len());
        for &size in &plan.sizes {
            let b = size + HEADER;
            let lost = &mut out.lost;
            let p1 = rep(src, lost, &|s| s.prtt(1, 0.0, b))?;
            let pn = rep(src, lost, &|s| s.prtt(n, 0.0, b))?;
            let empty_poll = rep(src, lost, &|s| {
                Ok(s.prtt(1, 0.0, b)?.map(|_| s.empty_poll_ns()))
            })?;
            let gap = ((pn - p1) / f64::from(n - 1)).max(0.0);
            // Longer than any gap and any overhead: each message's send
            // then stands alone (Netgauge uses d = PRTT(1, 0, s)).
            let d = p1 + 2.0 * gap;
            let pd = rep(src, lost, &|s| s.prtt(n, d, b))?;
            let send_call = rep(src, lost, &|s| {
                Ok(s.prtt(n, d, b)?.map(|_| s.send_call_ns()))
            })?;
            let orecv = rep(src, lost, &|s| s.orecv(n, pn, b))? / f64::from(n - 1);
            round.push(Point {
                size,
                bytes: b,
                p1,
                pn,
                d,
                pd,
                send_call,
                orecv,
                empty_poll,
            });
            step();
        }
        out.rounds.push(round);
    }
    Ok(out)
}

/// `ibprobe loggp` as a [`Paired`] workload: the client [`measure`]s over
/// [`SlotSource`], the peer [`respond`]s.
pub struct Loggp<'a> {
    pub plan: &'a LoggpPlan,
    pub clock: Clock,
    pub timeout_ns: u64,
    pub idle_ns: u64,
    pub step: &'a mut dyn FnMut(),
}

impl Paired for Loggp<'_> {
    type Peer = (Clock, u64);
    type Measured = Samples;
    type Answered = u64;

    fn peer(&self) -> Self::Peer {
        (self.clock, self.idle_ns)
    }

    fn measure(
        &mut self,
        end: &mut dyn SlotEnd,
        stop: &AtomicBool,
    ) -> Result<Samples, TransportError> {
        let mut src = SlotSource::new(end, self.clock, self.timeout_ns, stop);
        let r = measure(&mut src, self.plan, stop, self.step);
        let _ = src.finish();
        r
    }

    fn answer(
        (clock, idle_ns): &Self::Peer,
        end: &mut dyn SlotEnd,
        sig: Signals<'_>,
    ) -> Result<u64, TransportError> {
        respond(end, clock, sig.done, *idle_ns)
    }
}

/// A server answers a client's bursts until it says stop or goes quiet
/// for ten of its timeouts (5 s to [`peer::MAX_LOGGP_IDLE`]).
impl Served for Loggp<'_> {
    const WORD: StreamWorkload = StreamWorkload::Loggp;
    type Reply = ();

    fn serve(end: &mut dyn SlotEnd, a: &Asked<'_>) -> Result<Answer<()>, TransportError> {
        let idle = a
            .cfg
            .timeout
            .saturating_mul(10)
            .clamp(Duration::from_secs(5), peer::MAX_LOGGP_IDLE);
        let n = respond(end, a.clock, a.stop, dur_ns(idle))?;
        Ok(Answer {
            said: format!("{n} bursts answered"),
            reply: None,
            interrupted: a.stop.load(Ordering::Relaxed),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_simulation_gives_the_closed_forms() {
        let p: ModelParams = "L=5us,os=1us,or=1.5us,g=2us,G=1ns".parse().unwrap();
        let mut s = SimSource::new(p);
        let b = 100;
        let one = 2.0 * (1000.0 + 100.0 + 5000.0 + 1500.0);
        assert_eq!(s.prtt(1, 0.0, b).unwrap(), Some(one));
        assert_eq!(s.prtt(10, 0.0, b).unwrap(), Some(one + 9.0 * 2100.0));
        assert_eq!(s.prtt(10, 20_000.0, b).unwrap(), Some(one + 9.0 * 21_000.0));
        assert_eq!(s.orecv(10, 1e6, b).unwrap(), Some(9.0 * 1500.0));
    }

    #[test]
    fn headers_round_trip() {
        let h = Header {
            len: 40,
            kind: ORECV,
            index: 3,
            n: 16,
            id: 65535,
            arg: 123_456,
        };
        let mut b = [0u8; 16];
        h.write(&mut b);
        assert_eq!(Header::read(&b), h);
    }
}
