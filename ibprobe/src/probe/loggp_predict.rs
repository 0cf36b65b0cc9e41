//! What LogGP parameters predict for `ibprobe stream`: messages per second
//! and latency of a stream of batch K, window N, pipeline D, messages of s
//! bytes. Pure computation (`ibprobe loggp --predict` sets it beside a
//! measured run).
//!
//! The stream (`probe/workload/stream.rs`) sends one slot of
//! b = 16 + K*(16 + s) bytes per K messages; the receiver returns a
//! credit (a 24-byte control slot) every C slots (C = the credit batch),
//! or a credit and an ack every slot with a pipeline. Per slot:
//! - sender: o_s(b) + its loop's own work + (control slots per slot)*o_r(24);
//! - receiver: o_r(b) + its loop's own work + (control slots per slot)*o_s(24)
//!   + one poll that finds nothing (its loop drains before it consumes);
//! - link: g + G*b of the segment b falls in;
//! - window: a slot's credit comes back one round trip
//!   R = o_s(b) + G*b + L + o_r(b) + o_s(24) + G*24 + L + o_r(24) after it
//!   left, and credits come C at a time, so N credits last N - C + 1 slots
//!   of R: R / (N - C + 1); a pipeline of D: R / D.
//!
//! The slowest of these paces the stream: K messages per that time. The
//! overheads are interpolated at b from the per-size o_s and o_r; the
//! loops' own work per slot, which LogGP does not see, is timed by
//! `stream_cost.rs` (0 on the model's virtual clock).
//!
//! Latency (hand-over to delivery): the wait for the batch to fill,
//! (K-1)/2 message times, plus one slot's way o_s(b) + G*b + L + o_r(b);
//! when the receiver or the link paces, the window is full and a message
//! also waits behind N - 1 slots.

use super::loggp_fit::Fit;
use super::workload::slot::LOGGP_HEADER as HEADER;
use crate::spec::data_slot_bytes;
use crate::spec::ModelParams;

/// Bytes of a control slot (credit, ack).
pub const CTRL_BYTES: f64 = 24.0;

/// The parameters a prediction uses: L, g (ns) and G (ns per byte).
#[derive(Clone, Debug, Default)]
pub struct Params {
    pub l: f64,
    pub g: f64,
    pub big_g: f64,
    /// The gap's segments: (first bytes, g, G), ascending; the link term
    /// at b uses the last segment starting at or below b (the first below
    /// all). Empty: `g` and `big_g`.
    pub segments: Vec<(f64, f64, f64)>,
    /// (bytes, o_s, o_r) per measured size, ascending bytes.
    pub overheads: Vec<(f64, f64, f64)>,
    pub empty_poll: f64,
}

impl Params {
    pub fn measured(f: &Fit) -> Params {
        Params {
            l: f.l.value,
            g: f.g.value,
            big_g: f.big_g.value,
            segments: f
                .segments
                .iter()
                .map(|s| {
                    let bytes = (s.from_size + HEADER) as f64;
                    (bytes, s.g_ns.value, s.big_g.value.max(0.0))
                })
                .collect(),
            overheads: f
                .points
                .iter()
                .map(|p| (p.bytes as f64, p.os_ns.max(0.0), p.or_ns.max(0.0)))
                .collect(),
            empty_poll: f.points.first().map_or(0.0, |p| p.empty_poll_ns.max(0.0)),
        }
    }

    /// o the same at every size.
    pub fn given(p: &ModelParams) -> Params {
        let [l, os, or, g, big_g] = p.ns();
        Params {
            l,
            g,
            big_g,
            overheads: vec![(0.0, os, or)],
            ..Params::default()
        }
    }

    /// g + G*b of `b`'s segment.
    pub fn link_at(&self, b: f64) -> f64 {
        match self
            .segments
            .iter()
            .rev()
            .find(|s| s.0 <= b)
            .or(self.segments.first())
        {
            Some(&(_, g, big_g)) => g.max(0.0) + big_g * b,
            None => self.g + self.big_g * b,
        }
    }

    /// (o_s, o_r) at `b` bytes: piecewise linear between the measured
    /// sizes, the end segments extended, never below 0.
    pub fn overheads_at(&self, b: f64) -> (f64, f64) {
        let o = &self.overheads;
        match o.len() {
            0 => (0.0, 0.0),
            1 => (o[0].1, o[0].2),
            n => {
                let i = o
                    .iter()
                    .position(|p| p.0 >= b)
                    .unwrap_or(n - 1)
                    .clamp(1, n - 1);
                let (a, c) = (o[i - 1], o[i]);
                let t = if c.0 > a.0 {
                    (b - a.0) / (c.0 - a.0)
                } else {
                    0.0
                };
                (
                    (a.1 + t * (c.1 - a.1)).max(0.0),
                    (a.2 + t * (c.2 - a.2)).max(0.0),
                )
            }
        }
    }
}

/// One stream workload: K, N, D, C and s of the module doc, and the
/// loops' own work per slot (ns): (sender, receiver).
#[derive(Clone, Copy, Debug)]
pub struct Workload {
    pub batch: u32,
    pub window: u32,
    pub pipeline: Option<u32>,
    pub credit_batch: u32,
    pub size: usize,
    pub loop_ns: (f64, f64),
}

/// What the parameters predict; `bound`: what paces the stream
/// ("sender", "receiver", "link", "window", "pipeline").
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Prediction {
    pub msgs_per_s: f64,
    pub latency_ns: f64,
    pub bound: &'static str,
}

pub fn predict(p: &Params, w: &Workload) -> Prediction {
    let k = f64::from(w.batch.max(1));
    let b = data_slot_bytes(w.batch, w.size) as f64;
    let (os_b, or_b) = p.overheads_at(b);
    let (os_c, or_c) = p.overheads_at(CTRL_BYTES);
    let ctrl = w
        .pipeline
        .map_or(1.0 / f64::from(w.credit_batch.max(1)), |_| 1.0);
    let one_way = os_b + p.big_g * b + p.l + or_b;
    let rtt = one_way + os_c + p.big_g * CTRL_BYTES + p.l + or_c;
    let n = f64::from(w.window.max(1));
    let c = f64::from(w.credit_batch.max(1)).min(n);
    let candidates = [
        ("sender", os_b + w.loop_ns.0 + ctrl * or_c),
        ("receiver", or_b + w.loop_ns.1 + ctrl * os_c + p.empty_poll),
        ("link", p.link_at(b)),
        ("window", rtt / (n - c + 1.0)),
        (
            "pipeline",
            w.pipeline.map_or(0.0, |d| rtt / f64::from(d.max(1))),
        ),
    ];
    let (bound, per_slot) =
        candidates
            .into_iter()
            .fold(("sender", 0.0), |a, x| if x.1 > a.1 { x } else { a });
    let per_msg = per_slot / k;
    let queued = if matches!(bound, "receiver" | "link") {
        (n - 1.0) * per_slot
    } else {
        0.0
    };
    Prediction {
        msgs_per_s: if per_slot > 0.0 { 1e9 / per_msg } else { 0.0 },
        latency_ns: (k - 1.0) / 2.0 * per_msg + one_way + queued,
        bound,
    }
}
