//! What the stream loops themselves cost per slot on this host, run
//! unchanged against ends that cost (almost) nothing. LogGP prices the
//! transport's operations; on shm the loops' own work (stamping, copying,
//! recording, window and batch state) is most of a message's cost, and a
//! prediction without it is off by 2-3x (`ibprobe loggp --predict`).
//! The sender's end takes every slot at once and credits (and acks) them
//! as a receiver would; the receiver's hands out ready-made data slots of
//! K records, then a FIN, and swallows the control slots.

use std::sync::atomic::AtomicBool;

use super::config::{Length, Plan, ProbeConfig};
use super::loggp_fit::median;
use super::workload::slot::{self, Header, CTRL_LEN, RECORD_HEADER, SLOT_HEADER};
use super::workload::stream::{receive, send, StreamPlan};
use crate::clock::Clock;
use crate::spec::StreamSpec;
use crate::transport::stream::SlotEnd;
use crate::transport::{TransportError, TransportInfo};
use ibstats::latency::LatencyHistogram;

fn info() -> TransportInfo {
    TransportInfo {
        name: "null".into(),
        detail: "a free end (stream loop cost)".into(),
        facts: vec![],
    }
}

/// The sender's free end: every slot consumed at once, credited every
/// `every` slots.
#[derive(Default)]
struct Sink {
    slot_size: usize,
    sent: u64,
    credited: u64,
    every: u64,
    fin: bool,
}

impl SlotEnd for Sink {
    fn slot_size(&self) -> usize {
        self.slot_size
    }
    fn send(&mut self, bytes: &[u8]) -> Result<bool, TransportError> {
        self.sent += 1;
        self.fin |= Header::read(bytes).flags & slot::FIN != 0;
        Ok(true)
    }
    fn recv(&mut self, into: &mut [u8]) -> Result<Option<usize>, TransportError> {
        if self.sent - self.credited < self.every && !(self.fin && self.sent > self.credited) {
            return Ok(None);
        }
        self.credited = self.sent;
        let s = self.sent;
        Ok(Some(slot::write_ctrl(into, slot::CREDIT | slot::ACK, s, s)))
    }
    fn lossy(&self) -> bool {
        false
    }
    fn info(&self) -> TransportInfo {
        info()
    }
}

/// The receiver's free end: `slots` data slots of the same records, then
/// a FIN, never more than `window` ahead of the credits it was sent.
#[derive(Default)]
struct Source {
    template: Vec<u8>,
    slots: u64,
    made: u64,
    consumed: u64,
    window: u64,
    /// `--pipeline`: never more than this many slots unacknowledged.
    pipeline: Option<u64>,
    acked: u64,
    batch: usize,
    rec: usize,
}

impl SlotEnd for Source {
    fn slot_size(&self) -> usize {
        self.template.len()
    }
    fn send(&mut self, bytes: &[u8]) -> Result<bool, TransportError> {
        let h = Header::read(bytes);
        if h.flags & slot::CREDIT != 0 {
            self.consumed = self.consumed.max(h.word);
        }
        if h.flags & slot::ACK != 0 {
            self.acked = self.acked.max(slot::ctrl_second(bytes));
        }
        Ok(true)
    }
    fn recv(&mut self, into: &mut [u8]) -> Result<Option<usize>, TransportError> {
        let unacked_full = self.pipeline.is_some_and(|d| self.made - self.acked >= d);
        if self.made > self.slots || self.made - self.consumed >= self.window || unacked_full {
            return Ok(None);
        }
        let s = self.made;
        self.made += 1;
        if s == self.slots {
            let n = slot::write_ctrl(into, slot::FIN, s, s * self.batch as u64);
            return Ok(Some(n));
        }
        let len = self.template.len();
        into[..len].copy_from_slice(&self.template);
        Header {
            len: len as u32,
            msgs: self.batch as u16,
            flags: slot::data_flags(slot::Cause::Fill, false),
            word: s,
        }
        .write(into);
        for i in 0..self.batch {
            let seq = s * self.batch as u64 + i as u64;
            let at = SLOT_HEADER + i * self.rec;
            slot::write_record(into, at, seq, 1);
            into[at + RECORD_HEADER] = seq as u8;
            into[at + self.rec - 1] = seq as u8;
        }
        Ok(Some(len))
    }
    fn lossy(&self) -> bool {
        false
    }
    fn info(&self) -> TransportInfo {
        info()
    }
}

/// Slots of the short and the long timing: the cost per slot is their
/// difference over the difference of slots (start and end cancel out).
const SLOTS: [u64; 2] = [2_000, 12_000];

/// The loops' own time per slot (ns): (sender, receiver), for messages of
/// `size` bytes (no fragments), medians of 5 timings. `track`: as
/// [`Stream::track`](super::workload::stream::Stream::track).
pub fn loop_cost_ns(
    spec: &StreamSpec,
    size: usize,
    clock: &Clock,
    track: bool,
) -> Result<(f64, f64), TransportError> {
    let batch = spec.batch.max(1) as usize;
    let rec = RECORD_HEADER + size.max(1);
    let len = SLOT_HEADER + batch * rec;
    let stop = AtomicBool::new(false);
    let done = AtomicBool::new(true);
    let time = |slots: u64| -> Result<(f64, f64), TransportError> {
        let cfg = ProbeConfig {
            size: size.max(1),
            length: Length::Count(slots * batch as u64),
            warmup: 0,
            lock_memory: false,
            ..ProbeConfig::default()
        };
        let sp = StreamPlan::new(spec, cfg.size, 0, &Plan::measured(&cfg, clock), clock);
        let mut sink = Sink {
            slot_size: spec.slot_size.max(len).max(CTRL_LEN),
            every: spec
                .pipeline
                .map_or(u64::from(spec.credit_batch.max(1)), |_| 1),
            ..Sink::default()
        };
        let t0 = clock.now();
        let plans = [Plan::warmup(&cfg, clock), Plan::measured(&cfg, clock)];
        send(&mut sink, &plans, &sp, clock, &stop, track)?;
        let send = clock.ticks_to_ns(clock.now() - t0) as f64;
        let mut src = Source {
            template: vec![0; len.max(CTRL_LEN)],
            slots,
            window: u64::from(spec.window.max(1)),
            pipeline: spec.pipeline.map(|d| u64::from(d.max(1))),
            batch,
            rec,
            ..Source::default()
        };
        let mut h = LatencyHistogram::new();
        let t0 = clock.now();
        receive(&mut src, clock, &sp, &stop, &done, &stop, &mut h)?;
        Ok((send, clock.ticks_to_ns(clock.now() - t0) as f64))
    };
    let (mut send, mut recv) = (Vec::new(), Vec::new());
    let extra = (SLOTS[1] - SLOTS[0]) as f64;
    for _ in 0..5 {
        let (s0, r0) = time(SLOTS[0])?;
        let (s1, r1) = time(SLOTS[1])?;
        send.push(((s1 - s0) / extra).max(0.0));
        recv.push(((r1 - r0) / extra).max(0.0));
    }
    Ok((median(&send), median(&recv)))
}
