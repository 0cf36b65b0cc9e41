//! The stream loops: a sender and a receiver over a [`SlotEnd`] each, at
//! the same time (two threads in loopback, two hosts across). Policies
//! answer one question each: [`Credits`] and [`Acks`] "may I post?",
//! [`Batcher`] "is the slot full, or its timer out?".
//!
//! The sender stamps each message's `t_handover` at its paced step,
//! appends it to the open slot and posts the slot when full, timed out
//! (`--flush`), or at a burst's or the run's end, after a credit (and an
//! ack with `--pipeline`); a message larger than a slot goes in fragments.
//! The receiver reads the clock once per slot, records `now - t_handover`
//! per message, and returns credits and acks as `--credit-return` says;
//! a slot beyond the window or the pipeline ends the run.
//!
//! Losses (udp, uc, ud): the receiver counts gaps in slot numbers; a
//! sender with no credit back within `--timeout` takes its slots in
//! flight as lost, `max_consecutive_lost` times in a row at most; on a
//! reliable transport (shm, rc) the first timeout ends the run.

use std::sync::atomic::{AtomicBool, Ordering};

use super::batch::Batcher;
use super::pace::{wait_until, Gate, Pacer};
use super::pipeline::Acks;
use super::record::Pending;
use super::seam::{Answer, Asked, Paired, Served, Signals};
use super::slot::{self, Cause, Header, COMPACT_HEADER, CTRL_LEN, RECORD_HEADER, SLOT_HEADER};
use super::window::Credits;
use crate::clock::Clock;
use crate::probe::config::{ticks, Plan, ProbeConfig};
use crate::spec::{CreditReturn, StreamSpec, StreamWorkload};
use crate::transport::stream::SlotEnd;
use crate::transport::TransportError;
use ibstats::latency::LatencyHistogram;

/// A stream as a [`Paired`] workload: the sender measures, the receiver
/// answers.
pub struct Stream {
    pub sp: StreamPlan,
    /// The warm-up and the measured part.
    pub plans: [Plan; 2],
    pub clock: Clock,
    /// Fill `SendHistos::returned` (the latency a client measures).
    pub track: bool,
}

impl Paired for Stream {
    type Peer = (StreamPlan, Clock);
    type Measured = (SendTally, SendHistos);
    type Answered = (RecvTally, LatencyHistogram, Option<StampSplit>);

    fn peer(&self) -> Self::Peer {
        (self.sp, self.clock)
    }

    fn measure(
        &mut self,
        end: &mut dyn SlotEnd,
        stop: &AtomicBool,
    ) -> Result<Self::Measured, TransportError> {
        send(end, &self.plans, &self.sp, &self.clock, stop, self.track)
    }

    fn answer(
        (sp, clock): &Self::Peer,
        end: &mut dyn SlotEnd,
        sig: Signals<'_>,
    ) -> Result<Self::Answered, TransportError> {
        // On the receiver's thread: no cache line shared with the sender.
        let mut latency = LatencyHistogram::new();
        let mut split = sp.stamp.then(StampSplit::default);
        let t = receive_stamped(
            end,
            clock,
            sp,
            (sig.stop, sig.done, sig.abort),
            &mut latency,
            split.as_mut(),
        )?;
        Ok((t, latency, split))
    }
}

impl Stream {
    pub fn planned(cfg: &ProbeConfig, spec: &StreamSpec, clock: &Clock, track: bool) -> Stream {
        let measured = Plan::measured(cfg, clock);
        Stream {
            sp: StreamPlan::new(spec, cfg.size, cfg.warmup, &measured, clock),
            plans: [Plan::warmup(cfg, clock), measured],
            clock: *clock,
            track,
        }
    }
}

/// The server's last word on a stream (after the client's FIN).
#[derive(Clone, Copy, Debug, serde::Serialize, serde::Deserialize)]
pub struct StreamTally {
    pub tally: RecvTally,
}

/// A server receives a client's stream until its FIN (or `--timeout`
/// without one) and sends back the receiver's counters (not latencies:
/// the client's clock is not ours).
impl Served for Stream {
    const WORD: StreamWorkload = StreamWorkload::Stream;
    type Reply = StreamTally;

    fn serve(end: &mut dyn SlotEnd, a: &Asked<'_>) -> Result<Answer<StreamTally>, TransportError> {
        let peer = Stream::planned(a.cfg, a.spec, a.clock, false).peer();
        // The client's FIN may be lost: end after the timeout then.
        let idle_ends = AtomicBool::new(true);
        let sig = Signals {
            stop: a.stop,
            done: &idle_ends,
            abort: a.stop,
        };
        let (tally, ..) = Stream::answer(&peer, end, sig)?;
        Ok(Answer {
            said: format!(
                "{} messages in {} slots, {} slots lost",
                tally.msgs, tally.slots, tally.lost_slots
            ),
            reply: Some(StreamTally { tally }),
            interrupted: tally.interrupted,
        })
    }
}

/// The sending side of a stream: warm-up, measured part, FIN and drain.
pub fn send(
    tx: &mut dyn SlotEnd,
    [warmup, measured]: &[Plan; 2],
    sp: &StreamPlan,
    clock: &Clock,
    stop: &AtomicBool,
    track: bool,
) -> Result<(SendTally, SendHistos), TransportError> {
    let mut s = Sender::new(tx, clock, sp, stop);
    if track {
        s.track_returns();
    }
    s.run(warmup, false)?;
    s.run(measured, true)?;
    let t = s.finish()?;
    Ok((t, std::mem::take(&mut s.histos)))
}

/// Empty polls between two clock reads while a sender waits for a credit.
const CLOCK_EVERY: u32 = 16;

/// A stream's knobs in the loops' terms (ticks), computed once before the
/// run.
#[derive(Clone, Copy, Debug)]
pub struct StreamPlan {
    /// Payload bytes.
    pub size: usize,
    pub slot_size: usize,
    pub window: u32,
    pub batch: u32,
    /// 0: no `--flush`.
    pub flush_ticks: u64,
    pub pipeline: Option<u32>,
    pub credit_return: CreditReturn,
    pub credit_batch: u32,
    /// Messages sent before the measured ones (not recorded).
    pub warmup: u64,
    pub consume_ticks: u64,
    pub timeout_ticks: u64,
    pub max_consecutive_lost: u32,
    /// `--stamp-thread`: the receiver splits the latency at each data
    /// slot's stamp (`slot::STAMP_AT`).
    pub stamp: bool,
}

impl StreamPlan {
    /// Timing from the measured `plan`.
    pub fn new(
        spec: &StreamSpec,
        size: usize,
        warmup: u64,
        plan: &Plan,
        clock: &Clock,
    ) -> StreamPlan {
        StreamPlan {
            size,
            slot_size: spec.slot_size,
            window: spec.window,
            batch: spec.batch,
            flush_ticks: spec.flush.map_or(0, |d| ticks(clock, d).max(1)),
            pipeline: spec.pipeline,
            credit_return: spec.credit_return,
            credit_batch: spec.credit_batch,
            warmup,
            consume_ticks: plan.consume_ticks,
            timeout_ticks: plan.timeout_ticks,
            max_consecutive_lost: plan.max_consecutive_lost,
            stamp: false,
        }
    }

    /// Slots one message takes: 1 when it fits a slot, else its fragments.
    pub fn slots_per_msg(&self) -> usize {
        let room = self.slot_size - SLOT_HEADER;
        (RECORD_HEADER + self.size).div_ceil(room)
    }

    /// Whether the sender posts compact slots (`slot.rs`): batch 1, one
    /// slot per message, no `--stamp-thread` (its stamp needs the full
    /// form).
    pub fn compact(&self) -> bool {
        self.batch == 1 && !self.stamp && self.slots_per_msg() == 1
    }
}

/// The sender's distributions (measured messages only), ns.
#[derive(Clone, Debug, Default)]
pub struct SendHistos {
    /// Per message: its slot's post minus its hand-over.
    pub in_batch: LatencyHistogram,
    /// Per data slot: its wait for a credit or an ack once ready.
    pub credit_wait: LatencyHistogram,
    /// Per message: hand-over to its slot's credit back, on the sender's
    /// clock (what a client measures); only with [`Sender::track_returns`].
    pub returned: LatencyHistogram,
}

/// The sender's counters of the measured part.
#[derive(Clone, Copy, Debug, Default)]
pub struct SendTally {
    pub msgs: u64,
    pub data_posts: u64,
    /// Posts by cause: fill, timer, explicit.
    pub flushes: [u64; 3],
    /// Posts that waited for a credit (an ack), and the ticks waited.
    pub credit_stalls: u64,
    pub credit_stall_ticks: u64,
    pub ack_waits: u64,
    pub ack_wait_ticks: u64,
    /// Sends the transport refused for lack of room (retried).
    pub transport_full: u64,
    /// Slots in flight taken as lost after a timeout (lossy transports).
    pub slots_given_up: u64,
    pub missed_steps: u64,
    /// Most slots in flight (unacknowledged) at a post.
    pub max_in_flight: u64,
    pub max_unacked: u64,
    /// Ticks of the first measured hand-over and of the sender's end.
    pub first_handover: u64,
    pub end: u64,
    pub interrupted: bool,
}

/// Where a slot's first record (or a compact slot's payload) begins.
#[inline(always)]
fn first_at(compact: bool) -> usize {
    if compact {
        COMPACT_HEADER
    } else {
        SLOT_HEADER
    }
}

/// A wait for a credit or an ack: when it began, and whether a credit
/// was missing (else only an ack).
#[derive(Clone, Copy, Debug)]
struct Waiting {
    ready: u64,
    credit_stall: bool,
}

pub struct Sender<'a, E: SlotEnd + ?Sized> {
    end: &'a mut E,
    clock: &'a Clock,
    sp: &'a StreamPlan,
    stop: &'a AtomicBool,
    /// The open slot.
    buf: Vec<u8>,
    /// [`StreamPlan::compact`]: the open slot's one message is handed
    /// over at `open_t`.
    compact: bool,
    open_t: u64,
    ctrl: Vec<u8>,
    used: usize,
    credits: Credits,
    acks: Acks,
    batch: Batcher,
    next_seq: u64,
    slot_seq: u64,
    /// Last tick a credit or ack came back (or the wait began).
    progress: u64,
    progressed: bool,
    /// The wait the next post ends.
    waiting: Option<Waiting>,
    timeouts_in_a_row: u32,
    measuring: bool,
    /// Measured data slots that waited for nothing (zeros of
    /// `histos.credit_wait`, added by `finish`).
    unwaited: u64,
    /// Hand-over ticks of each slot in flight's messages, by slot number
    /// modulo `window + 1` (`batch` per slot), and how many each holds;
    /// empty unless [`Sender::track_returns`].
    handovers: Vec<u64>,
    held: Vec<u32>,
    pub tally: SendTally,
    pub histos: SendHistos,
}

impl<'a, E: SlotEnd + ?Sized> Sender<'a, E> {
    /// Allocates the slot buffers now.
    pub fn new(end: &'a mut E, clock: &'a Clock, sp: &'a StreamPlan, stop: &'a AtomicBool) -> Self {
        let n = end.slot_size().max(CTRL_LEN);
        let compact = sp.compact();
        Sender {
            end,
            clock,
            sp,
            stop,
            buf: vec![0u8; n],
            compact,
            open_t: 0,
            ctrl: vec![0u8; n],
            used: first_at(compact),
            credits: Credits::new(sp.window),
            acks: Acks::new(sp.pipeline),
            batch: Batcher::new(sp.batch, sp.flush_ticks),
            next_seq: 0,
            slot_seq: 0,
            progress: 0,
            progressed: false,
            waiting: None,
            timeouts_in_a_row: 0,
            measuring: false,
            unwaited: 0,
            handovers: Vec::new(),
            held: Vec::new(),
            tally: SendTally::default(),
            histos: SendHistos::default(),
        }
    }

    /// Fills `histos.returned`; allocates the ring of hand-overs now.
    pub fn track_returns(&mut self) {
        let slots = self.sp.window as usize + 1;
        self.handovers = vec![0; slots * self.sp.batch as usize];
        self.held = vec![0; slots];
    }

    /// Remembers the hand-overs of the slot just posted.
    #[inline(always)]
    fn remember(&mut self, n: usize, last_fragment: Option<u64>) {
        if self.held.is_empty() {
            return;
        }
        let slot = ((self.slot_seq - 1) % self.held.len() as u64) as usize;
        let k = self.sp.batch as usize;
        match last_fragment {
            Some(t_h) => {
                self.handovers[slot * k] = t_h;
                self.held[slot] = 1;
            }
            None => {
                for i in 0..n {
                    let (seq, t_h) = self.record(i);
                    // Warm-up messages are not recorded.
                    self.handovers[slot * k + i] = if seq >= self.sp.warmup { t_h } else { 0 };
                }
                self.held[slot] = n as u32;
            }
        }
    }

    /// Slots `from..to` were consumed at `now`: their messages' round trips.
    #[inline(always)]
    fn returned(&mut self, from: u64, to: u64, now: u64) {
        if self.held.is_empty() || !self.measuring {
            return;
        }
        let k = self.sp.batch as usize;
        for s in from..to {
            let slot = (s % self.held.len() as u64) as usize;
            for i in 0..std::mem::take(&mut self.held[slot]) as usize {
                let t_h = self.handovers[slot * k + i];
                if t_h != 0 {
                    self.histos
                        .returned
                        .record(self.clock.ticks_to_ns(now.wrapping_sub(t_h)));
                }
            }
        }
    }

    /// Sends `plan`, then flushes the open slot.
    pub fn run(&mut self, plan: &Plan, measured: bool) -> Result<(), TransportError> {
        if measured {
            self.measuring = true;
            self.batch.reset_counts();
            self.tally = SendTally::default();
            self.unwaited = 0;
        }
        let clock = self.clock;
        let mut pacer = Pacer::new(plan, clock.now());
        let frags = self.sp.slots_per_msg() > 1;
        // A counted run back to back asks the pacer nothing. A timed one
        // asks it before each post, and the gate's clock reading is the
        // message's hand-over time: one clock read per message either way
        // (more halved a timed shm stream's rate at batch 16). Only a rate
        // or bursts need the pacer after a message.
        let gated = plan.period_ticks > 0 || plan.duration_ticks != u64::MAX || plan.burst > 0;
        let stepped = plan.period_ticks > 0 || plan.burst > 0;
        let mut sent = 0u64;
        while sent < plan.count {
            if self.stop.load(Ordering::Relaxed) {
                self.tally.interrupted = true;
                break;
            }
            // A partial batch whose timer runs out before the next step.
            if let Some(d) = self.batch.deadline() {
                if (pacer.next_step().wrapping_sub(d) as i64) > 0 {
                    wait_until(clock, d, self.stop, plan.event);
                    self.flush(Cause::Timer)?;
                }
            }
            let now = if gated {
                match pacer.before_post(clock, self.stop) {
                    Gate::Go { now } => now,
                    Gate::Stopped => {
                        self.tally.interrupted = true;
                        break;
                    }
                    Gate::End { missed } => {
                        self.tally.missed_steps += missed;
                        break;
                    }
                }
            } else {
                clock.now()
            };
            if sent == 0 && measured {
                self.tally.first_handover = now;
            }
            if frags {
                self.send_fragmented(now)?;
            } else if self.append(now) {
                self.flush(Cause::Fill)?;
            }
            sent += 1;
            if measured {
                self.tally.msgs += 1;
            }
            if plan.burst > 0 && sent.is_multiple_of(plan.burst) {
                self.flush(Cause::Explicit)?;
            } else if let Some(d) = self.batch.deadline() {
                if (clock.now().wrapping_sub(d) as i64) >= 0 {
                    self.flush(Cause::Timer)?;
                }
            }
            if stepped {
                let missed = pacer.after_message(clock, clock.now(), sent, self.stop);
                self.tally.missed_steps += missed;
            }
        }
        self.flush(Cause::Explicit)
    }

    /// A FIN slot (it takes a credit), then the drain.
    pub fn finish(&mut self) -> Result<SendTally, TransportError> {
        if !self.tally.interrupted {
            if self.wait_for_credit()? {
                let n = slot::write_ctrl(&mut self.buf, slot::FIN, self.slot_seq, self.next_seq);
                self.send_now(n)?;
            }
            self.drain()?;
        }
        self.histos
            .credit_wait
            .record_zeros(std::mem::take(&mut self.unwaited));
        self.tally.flushes = self.batch.flushes;
        self.tally.max_in_flight = self.credits.max_in_flight;
        self.tally.max_unacked = self.acks.max_unacked;
        self.tally.end = self.clock.now();
        Ok(self.tally)
    }

    fn drain(&mut self) -> Result<(), TransportError> {
        self.progress = self.clock.now();
        while !self.credits.drained() {
            if self.stop.load(Ordering::Relaxed) {
                self.tally.interrupted = true;
                return Ok(());
            }
            self.poll_control(usize::MAX)?;
            if !self.credits.drained() && self.timed_out("the last slots")? {
                return Ok(());
            }
        }
        Ok(())
    }

    /// Message `i` of the open (or just posted) slot: (seq, hand-over).
    #[inline(always)]
    fn record(&self, i: usize) -> (u64, u64) {
        if self.compact {
            (self.next_seq - 1, self.open_t)
        } else {
            slot::read_record(&self.buf, SLOT_HEADER + i * (RECORD_HEADER + self.sp.size))
        }
    }

    /// Appends message `next_seq`; true when the batch is full.
    #[inline(always)]
    fn append(&mut self, now: u64) -> bool {
        let at = self.used;
        let seq = self.next_seq;
        let payload = if self.compact {
            self.open_t = now;
            at
        } else {
            slot::write_record(&mut self.buf, at, seq, now);
            at + RECORD_HEADER
        };
        self.buf[payload..payload + self.sp.size].fill(seq as u8);
        self.used = payload + self.sp.size;
        self.next_seq += 1;
        self.batch.add(now)
    }

    #[inline(always)]
    fn flush(&mut self, cause: Cause) -> Result<(), TransportError> {
        let msgs = self.batch.open();
        if msgs == 0 {
            return Ok(());
        }
        if self.compact {
            // One message per slot: its number is the slot's.
            debug_assert_eq!(self.slot_seq + 1, self.next_seq);
            slot::write_compact(
                &mut self.buf,
                self.slot_seq,
                self.open_t,
                self.sp.size,
                cause,
            );
        } else {
            Header {
                len: self.used as u32,
                msgs: msgs as u16,
                flags: slot::data_flags(cause, false),
                word: self.slot_seq,
            }
            .write(&mut self.buf);
        }
        if !self.wait_for_credit()? {
            return Ok(());
        }
        let (t_post, waited) = self.send_now(self.used)?;
        self.remember(msgs as usize, None);
        // Recorded after the post: off the path to the receiver.
        if self.measuring {
            self.credit_wait(waited);
            for i in 0..msgs as usize {
                let (seq, t_h) = self.record(i);
                if seq >= self.sp.warmup {
                    self.histos
                        .in_batch
                        .record(self.clock.ticks_to_ns(t_post.wrapping_sub(t_h)));
                }
            }
        }
        self.batch.posted(cause);
        self.tally.data_posts += 1;
        self.used = first_at(self.compact);
        Ok(())
    }

    /// Counts a data slot's credit wait; the many zeros are recorded once,
    /// by [`Sender::finish`], not in the hot loop.
    #[inline(always)]
    fn credit_wait(&mut self, waited: u64) {
        if waited == 0 {
            self.unwaited += 1;
        } else {
            self.histos
                .credit_wait
                .record(self.clock.ticks_to_ns(waited));
        }
    }

    fn send_fragmented(&mut self, now: u64) -> Result<(), TransportError> {
        let seq = self.next_seq;
        self.next_seq += 1;
        let room = self.sp.slot_size - SLOT_HEADER;
        let mut left = RECORD_HEADER + self.sp.size;
        let mut first = true;
        while left > 0 {
            let n = left.min(room);
            left -= n;
            let last = left == 0;
            Header {
                len: (SLOT_HEADER + n) as u32,
                msgs: u16::from(last),
                flags: slot::data_flags(Cause::Fill, true),
                word: self.slot_seq,
            }
            .write(&mut self.buf);
            let body = &mut self.buf[SLOT_HEADER..SLOT_HEADER + n];
            body.fill(seq as u8);
            if first {
                slot::write_record(&mut self.buf, SLOT_HEADER, seq, now);
                first = false;
            }
            if !self.wait_for_credit()? {
                return Ok(());
            }
            let (t_post, waited) = self.send_now(SLOT_HEADER + n)?;
            if self.measuring {
                self.credit_wait(waited);
            }
            let measured = self.measuring && seq >= self.sp.warmup;
            self.remember(0, Some(if last && measured { now } else { 0 }));
            if last && self.measuring && seq >= self.sp.warmup {
                self.histos
                    .in_batch
                    .record(self.clock.ticks_to_ns(t_post.wrapping_sub(now)));
            }
            self.batch.posted(Cause::Fill);
            self.tally.data_posts += 1;
        }
        Ok(())
    }

    /// Sends the open slot's first `len` bytes (the caller holds a
    /// credit): (the post's tick, ticks waited for a credit or ack).
    /// Without a wait the tick is read before the send (its cost is not
    /// time in the batch); after one, after the send, so that one clock
    /// read lies between the credit's arrival and the post.
    #[inline(always)]
    fn send_now(&mut self, len: usize) -> Result<(u64, u64), TransportError> {
        let waiting = self.waiting.take();
        let before = match waiting {
            None => self.clock.now(),
            Some(_) => 0,
        };
        let mut full_since = None;
        while !self.end.send(&self.buf[..len])? {
            self.tally.transport_full += 1;
            if self.stop.load(Ordering::Relaxed) {
                break;
            }
            // The peer's receive side is full: its control slots may be
            // what it waits to send, so read them meanwhile.
            self.poll_control(usize::MAX)?;
            let now = self.clock.now();
            if std::mem::take(&mut self.progressed) || full_since.is_none() {
                full_since = Some(now);
            }
            let late = now.wrapping_sub(full_since.unwrap_or(now)) > self.sp.timeout_ticks;
            if late {
                return Err(TransportError::PeerLost(format!(
                    "the transport had no room for a slot for {} ms: the receiver stopped reading",
                    self.clock.ticks_to_ns(self.sp.timeout_ticks) / 1_000_000
                )));
            }
        }
        let (t, waited) = match waiting {
            None => (before, 0),
            Some(w) => {
                let now = self.clock.now();
                let waited = now.wrapping_sub(w.ready).max(1);
                if self.measuring {
                    if w.credit_stall {
                        self.tally.credit_stalls += 1;
                        self.tally.credit_stall_ticks += waited;
                    } else {
                        self.tally.ack_waits += 1;
                        self.tally.ack_wait_ticks += waited;
                    }
                }
                (now, waited)
            }
        };
        self.progress = t;
        if !self.held.is_empty() {
            // A FIN holds no messages; a data slot's `remember` fills it.
            let n = self.held.len() as u64;
            self.held[(self.slot_seq % n) as usize] = 0;
        }
        self.slot_seq += 1;
        self.credits.on_post();
        self.acks.on_post(self.credits.posted());
        Ok((t, waited))
    }

    /// Waits until the window and the pipeline allow one more slot; false
    /// on Ctrl-C. A wait is left in `waiting` for [`Sender::send_now`].
    #[inline(always)]
    fn wait_for_credit(&mut self) -> Result<bool, TransportError> {
        // Read everything that came back when the window is half used
        // (so control slots never pile up); else only while blocked, one
        // at a time (no empty poll once the awaited one is in).
        if self.credits.in_flight() * 2 >= u64::from(self.sp.window) {
            self.poll_control(usize::MAX)?;
        }
        let may = |me: &Self| (me.credits.available(), me.acks.allows(me.credits.posted()));
        if may(self) == (true, true) {
            return Ok(true);
        }
        let ready = self.clock.now();
        let mut credit_stall = false;
        let mut spins = 0u32;
        self.progress = ready;
        loop {
            let (c, a) = may(self);
            if c && a {
                break;
            }
            credit_stall |= !c;
            if self.stop.load(Ordering::Relaxed) {
                self.tally.interrupted = true;
                return Ok(false);
            }
            if self.poll_control(1)? {
                continue; // something came back: ask again before the clock
            }
            // The clock (for the timeout) only every few empty polls: a
            // clock read per poll delays seeing the credit by one read.
            spins = spins.wrapping_add(1);
            if spins.is_multiple_of(CLOCK_EVERY) && self.timed_out("a credit")? {
                break;
            }
        }
        self.waiting = Some(Waiting {
            ready,
            credit_stall,
        });
        Ok(true)
    }

    /// Nothing came back for `--timeout`: lossy, the slots in flight are
    /// lost (true: stop waiting) until too many in a row; else an error.
    fn timed_out(&mut self, what: &str) -> Result<bool, TransportError> {
        let now = self.clock.now();
        if std::mem::take(&mut self.progressed) {
            self.progress = now;
        }
        if now.wrapping_sub(self.progress) <= self.sp.timeout_ticks {
            return Ok(false);
        }
        let ms = self.clock.ticks_to_ns(self.sp.timeout_ticks) / 1_000_000;
        if !self.end.lossy() {
            return Err(TransportError::PeerLost(format!(
                "no credit or ack came back for {ms} ms while waiting for {what} ({} slots posted): the receiver stopped consuming; raise --timeout for a slower consumer",
                self.credits.posted()
            )));
        }
        self.timeouts_in_a_row += 1;
        if self.timeouts_in_a_row >= self.sp.max_consecutive_lost.max(1) {
            return Err(TransportError::PeerLost(format!(
                "{} timeouts of {ms} ms in a row with nothing back: the receiver is gone",
                self.timeouts_in_a_row
            )));
        }
        self.tally.slots_given_up += self.credits.forget_in_flight();
        self.acks.forget(self.credits.posted());
        self.progress = self.clock.now();
        Ok(true)
    }

    /// The receiver consumed `consumed` slots.
    #[inline(always)]
    fn credit_back(&mut self, consumed: u64) -> bool {
        let before = self.credits.consumed();
        if !self.credits.on_return(consumed) {
            return false;
        }
        if !self.held.is_empty() {
            let after = self.credits.consumed();
            self.returned(before, after, self.clock.now());
        }
        true
    }

    /// Reads up to `max` control slots (cumulative: the latest says all)
    /// and the rc counter; true when a credit or an ack came back.
    #[inline(always)]
    fn poll_control(&mut self, max: usize) -> Result<bool, TransportError> {
        let mut moved = false;
        let mut read = 0;
        while read < max {
            let Some(n) = self.end.recv(&mut self.ctrl)? else {
                break;
            };
            read += 1;
            if n < CTRL_LEN {
                continue;
            }
            let h = Header::read(&self.ctrl);
            if h.flags & slot::CREDIT != 0 {
                moved |= self.credit_back(h.word);
            }
            if h.flags & slot::ACK != 0 {
                moved |= self.acks.on_ack(slot::ctrl_second(&self.ctrl));
            }
        }
        if self.sp.credit_return == CreditReturn::Write {
            moved |= self.credit_back(self.end.read_counter());
        }
        if moved {
            self.progressed = true;
            self.timeouts_in_a_row = 0;
        }
        Ok(moved)
    }
}

/// The receiver's counters (a server sends them to its client).
#[derive(Clone, Copy, Debug, Default, serde::Serialize, serde::Deserialize)]
pub struct RecvTally {
    /// Measured messages delivered.
    pub msgs: u64,
    /// Data slots received (warm-up included).
    pub slots: u64,
    pub lost_slots: u64,
    /// Control slots carrying only credits, acks (with or without
    /// credits), RDMA writes of the counter.
    pub credit_msgs: u64,
    pub ack_msgs: u64,
    pub counter_writes: u64,
    /// Most slots unconsumed (unacknowledged) when one arrived.
    pub max_unconsumed: u64,
    pub max_unacked: u64,
    /// Messages whose payload was not what the sender wrote.
    pub corrupt: u64,
    /// Messages the sender said it sent (its FIN).
    pub sender_msgs: Option<u64>,
    /// Ticks of the first and the last measured delivery.
    pub first_arrival: u64,
    pub last_arrival: u64,
    pub interrupted: bool,
}

/// The receiving loop: each measured message's latency into `latency`
/// (ns, arrival minus `t_handover`). Ends at the sender's FIN, `stop`,
/// `abort` (the sender failed), or, once `sender_done` is set, after
/// `--timeout` with nothing arriving (a FIN lost on a lossy transport).
/// Slots are queued locally (`window` of them); one more breaks the
/// window: an error, or on a lossy transport dropped and counted lost.
pub fn receive<E: SlotEnd + ?Sized>(
    end: &mut E,
    clock: &Clock,
    sp: &StreamPlan,
    stop: &AtomicBool,
    sender_done: &AtomicBool,
    abort: &AtomicBool,
    latency: &mut LatencyHistogram,
) -> Result<RecvTally, TransportError> {
    receive_stamped(end, clock, sp, (stop, sender_done, abort), latency, None)
}

/// `--stamp-thread`: each measured message's latency split at its slot's
/// stamp t_read (the HCA's read): (hand-over -> t_read, t_read ->
/// delivery), ns; a stamp not between the two is left out.
#[derive(Clone, Debug, Default)]
pub struct StampSplit {
    pub before: LatencyHistogram,
    pub after: LatencyHistogram,
    /// The latency of the split messages (their `before + after`).
    pub latency: LatencyHistogram,
}

impl StampSplit {
    #[inline(always)]
    fn record(&mut self, clock: &Clock, warmup: u64, (seq, t_h): (u64, u64), stamp: u64, now: u64) {
        if seq >= warmup && t_h <= stamp && stamp <= now {
            self.before.record(clock.ticks_to_ns(stamp - t_h));
            self.after.record(clock.ticks_to_ns(now - stamp));
            self.latency.record(clock.ticks_to_ns(now - t_h));
        }
    }
}

/// [`receive`], and with `split` the latency split at each slot's stamp.
pub fn receive_stamped<E: SlotEnd + ?Sized>(
    end: &mut E,
    clock: &Clock,
    sp: &StreamPlan,
    (stop, sender_done, abort): (&AtomicBool, &AtomicBool, &AtomicBool),
    latency: &mut LatencyHistogram,
    mut split: Option<&mut StampSplit>,
) -> Result<RecvTally, TransportError> {
    let mut t = RecvTally::default();
    let ss = end.slot_size().max(CTRL_LEN);
    let window = sp.window as usize;
    // The local queue: `window` slots, their lengths and arrival ticks.
    let mut queue = vec![0u8; window * ss];
    let mut lens = vec![(0usize, 0u64); window];
    let (mut head, mut held) = (0usize, 0usize);
    let mut spare = vec![0u8; ss];
    let mut out = vec![0u8; CTRL_LEN];
    let depth = sp.pipeline.map(u64::from);
    let rec = RECORD_HEADER + sp.size;
    let (mut next_slot, mut acked) = (0u64, 0u64);
    let mut credit_countdown = sp.credit_batch.max(1);
    // A fragmented message in progress: (seq, t_handover) of its first slot.
    let mut frag: Option<(u64, u64)> = None;
    let mut idle_since = clock.now();
    let mut drain = false;
    // Latencies in ticks, recorded every `PENDING` messages (record.rs).
    let mut lat = (Pending::default(), latency);
    loop {
        // Take arrived slots into the queue: all of them after a slot was
        // consumed (its credit and ack are out by then, so the drain's
        // last, empty poll is off the critical path), else one.
        loop {
            if held == window {
                // On a lossy transport a sender that heard nothing back
                // for --timeout gives its slots in flight up and sends on,
                // so a slow (not gone) receiver sees more than the window:
                // like a full socket buffer it drops the newcomer, which
                // the sequence gap counts lost. On a reliable transport
                // the credits never allow it: the protocol is broken.
                if end.recv(&mut spare)?.is_some() && !end.lossy() {
                    return Err(TransportError::Completion(format!(
                        "stream protocol broken: a slot arrived while {window} (the window) were unconsumed"
                    )));
                }
                break;
            }
            let i = if head + held >= window {
                head + held - window
            } else {
                head + held
            };
            match end.recv(&mut queue[i * ss..(i + 1) * ss])? {
                Some(len) => {
                    lens[i] = (len, clock.now());
                    held += 1;
                    if !drain {
                        break;
                    }
                }
                None => break,
            }
        }
        drain = false;
        t.max_unconsumed = t.max_unconsumed.max(held as u64);
        if abort.load(Ordering::Relaxed) {
            break;
        }
        if held == 0 {
            if stop.load(Ordering::Relaxed) {
                t.interrupted = true;
                break;
            }
            if sender_done.load(Ordering::Relaxed)
                && clock.now().wrapping_sub(idle_since) > sp.timeout_ticks
            {
                break;
            }
            continue;
        }
        let (len, now) = lens[head];
        let buf = &queue[head * ss..head * ss + len.max(SLOT_HEADER)];
        head = if head + 1 == window { 0 } else { head + 1 };
        held -= 1;
        drain = true;
        idle_since = now;
        if len < SLOT_HEADER {
            continue;
        }
        let h = Header::read(buf);
        if h.flags & slot::FIN != 0 {
            t.sender_msgs = Some(slot::ctrl_second(buf));
            if h.word > next_slot {
                t.lost_slots += h.word - next_slot;
            }
            let consumed = h.word + 1;
            send_ctrl(
                end,
                &mut out,
                slot::CREDIT | slot::ACK,
                consumed,
                consumed,
                clock,
                sp,
            )?;
            break;
        }
        if h.flags & slot::DATA == 0 {
            continue;
        }
        // A compact slot (one message) is checked whole before any of it
        // is believed: its length, its flags, its number.
        let compact = match h.flags & slot::COMPACT != 0 {
            true => Some(slot::read_compact(buf, len, sp.size).map_err(broken)?),
            false => None,
        };
        let s = match compact {
            None => h.word,
            Some(c) => match slot::widen_seq(c.seq_lo, next_slot) {
                Some(s) if s == next_slot || end.lossy() => s,
                None if end.lossy() => continue, // from before the stream: stale
                s => {
                    return Err(broken(format!(
                        "compact slot {} arrived where {next_slot} was next, on a transport that loses and reorders nothing",
                        s.map_or_else(|| format!("{} (below 0)", c.seq_lo), |s| s.to_string())
                    )))
                }
            },
        };
        if s < next_slot {
            continue; // late or duplicated: already counted lost
        }
        if s > next_slot {
            t.lost_slots += s - next_slot;
            frag = None;
        }
        next_slot = s + 1;
        t.slots += 1;
        if let Some(d) = depth {
            // This slot and those queued behind it are unacknowledged.
            let unacked = s + 1 + held as u64 - acked;
            t.max_unacked = t.max_unacked.max(unacked);
            if unacked > d {
                return Err(TransportError::Completion(format!(
                    "stream protocol broken: {unacked} slots unacknowledged at the receiver, above --pipeline {d}"
                )));
            }
        }
        // Consuming: the receiver's work on each message that ends here.
        if sp.consume_ticks > 0 {
            for _ in 0..if compact.is_some() { 1 } else { h.msgs } {
                wait_until(
                    clock,
                    clock.now().wrapping_add(sp.consume_ticks),
                    abort,
                    false,
                );
            }
        }
        let consumed = s + 1;
        // Credits and acks go back.
        let ack_due = depth.is_some();
        // Every `credit_batch`-th slot, by a countdown (a `%` here is a
        // division on the path back to the sender).
        credit_countdown -= 1;
        let credit_due = credit_countdown == 0;
        if credit_due {
            credit_countdown = sp.credit_batch.max(1);
        }
        if ack_due {
            acked = consumed;
        }
        match sp.credit_return {
            CreditReturn::Piggyback if ack_due => {
                send_ctrl(
                    end,
                    &mut out,
                    slot::CREDIT | slot::ACK,
                    consumed,
                    acked,
                    clock,
                    sp,
                )?;
                t.ack_msgs += 1;
            }
            CreditReturn::Write => {
                if ack_due {
                    send_ctrl(end, &mut out, slot::ACK, consumed, acked, clock, sp)?;
                    t.ack_msgs += 1;
                }
                if credit_due {
                    end.write_counter(consumed)?;
                    t.counter_writes += 1;
                }
            }
            CreditReturn::Piggyback | CreditReturn::Message => {
                if ack_due {
                    send_ctrl(end, &mut out, slot::ACK, consumed, acked, clock, sp)?;
                    t.ack_msgs += 1;
                }
                if credit_due {
                    send_ctrl(end, &mut out, slot::CREDIT, consumed, acked, clock, sp)?;
                    t.credit_msgs += 1;
                }
            }
        }
        // Recording, once the credits and acks are out (off the path back
        // to the sender): the messages that ended in this slot.
        if let Some(c) = compact {
            // `read_compact` held the length to the header and the size.
            let p = &buf[COMPACT_HEADER..len];
            let bad = [p.first(), p.last()]
                .into_iter()
                .any(|b| b.is_some_and(|&b| b != s as u8));
            let t_h = slot::widen_ticks(c.ticks_lo, now);
            deliver(&mut t, &mut lat, clock, sp, (s, t_h), now, bad);
        } else if h.flags & slot::FRAG != 0 {
            if frag.is_none() {
                frag = Some(slot::read_record(buf, SLOT_HEADER));
            }
            if h.msgs == 1 {
                if let Some((seq, t_h)) = frag.take() {
                    let bad = buf[len - 1] != seq as u8;
                    deliver(&mut t, &mut lat, clock, sp, (seq, t_h), now, bad);
                }
            }
        } else {
            // The slot's stamp (`--stamp-thread`): one HCA read per slot.
            let stamp =
                (split.is_some() && len >= slot::STAMP_AT + 8).then(|| slot::read_stamp(buf));
            for i in 0..h.msgs as usize {
                let at = SLOT_HEADER + i * rec;
                if at + rec > len {
                    t.corrupt += 1;
                    break;
                }
                let (seq, t_h) = slot::read_record(buf, at);
                let p = &buf[at + RECORD_HEADER..at + rec];
                let bad = p[0] != seq as u8 || p[sp.size - 1] != seq as u8;
                deliver(&mut t, &mut lat, clock, sp, (seq, t_h), now, bad);
                if let (Some(split), Some(stamp)) = (split.as_deref_mut(), stamp) {
                    split.record(clock, sp.warmup, (seq, t_h), stamp, now);
                }
            }
        }
    }
    let (mut pending, latency) = lat;
    pending.fold(latency, clock);
    Ok(t)
}

fn broken(what: impl std::fmt::Display) -> TransportError {
    TransportError::Completion(format!("stream protocol broken: {what}"))
}

#[allow(clippy::too_many_arguments)]
#[inline(always)]
fn deliver(
    t: &mut RecvTally,
    (pending, latency): &mut (Pending, &mut LatencyHistogram),
    clock: &Clock,
    sp: &StreamPlan,
    (seq, t_handover): (u64, u64),
    now: u64,
    bad: bool,
) {
    if seq >= sp.warmup {
        if t.msgs == 0 {
            t.first_arrival = now;
        }
        t.msgs += 1;
        t.last_arrival = now;
        if pending.push(now.wrapping_sub(t_handover)) {
            pending.fold(latency, clock);
        }
    }
    t.corrupt += u64::from(bad);
}

/// Sends one control slot, retrying while the transport is full (the
/// sender reads control slots meanwhile).
#[inline(always)]
fn send_ctrl<E: SlotEnd + ?Sized>(
    end: &mut E,
    out: &mut [u8],
    flags: u16,
    consumed: u64,
    acked: u64,
    clock: &Clock,
    sp: &StreamPlan,
) -> Result<(), TransportError> {
    let n = slot::write_ctrl(out, flags, consumed, acked);
    // The clock only once the transport refused (none on the fast path).
    let mut t0 = None;
    while !end.send(&out[..n])? {
        let now = clock.now();
        if now.wrapping_sub(*t0.get_or_insert(now)) > sp.timeout_ticks {
            if end.lossy() {
                return Ok(()); // dropped, as the network would; the next one covers it
            }
            return Err(TransportError::PeerLost(
                "the sender stopped reading credits and acks".into(),
            ));
        }
    }
    Ok(())
}
