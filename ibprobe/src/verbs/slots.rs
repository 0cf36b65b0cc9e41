//! The hot data path of a verbs stream: [`VerbsSlots`], the rc/uc/ud
//! [`SlotEnd`].
//!
//! Why it exists: the stream loops (`probe/workload/stream.rs`) send one
//! slot as one verbs operation and take the peer's slots as they arrive;
//! this is what they call per slot on verbs. It allocates nothing and
//! takes no lock; `stream_setup.rs` makes the QP, pool and receives.
//!
//! The pool (one registered region per end): a send ring and a receive
//! pool of `slots` buffers each, and a counter line (rc `--credit-return
//! write`). A send buffer is reused only after a signaled completion at or
//! after its WR was polled; a WR that takes the last free send buffer or
//! SQ entry is always signaled, so an end out of room always has a
//! completion on its way. A write-imm lands in the peer's receive slot of
//! the same index, named with the length in the immediate ([`ImmCodec`]).
//! The counter write is inline when the QP allows 8 B; otherwise the HCA
//! reads the word later, and since the counter only grows, a newer value
//! than the one posted is still right.

use std::sync::atomic::{fence, Ordering};

use super::types::{errno, ImmCodec, Wired};
use crate::sys::verbs::{wc_status_str, Completion, SendTemplate, StampWords, POLL_BATCH};
use crate::transport::stream::SlotEnd;
use crate::transport::{TransportError, TransportInfo};

/// Bits of a signaled wr_id holding how many SQ entries its completion
/// frees; the bits above hold how many data sends were posted up to it.
const COVER_BITS: u32 = 20;

/// Spins of `write_counter` waiting for SQ room before it calls the peer
/// lost (a full SQ always has a signaled WR in it, so room comes unless
/// the connection is gone).
const COUNTER_SPINS: u64 = 200_000_000;

/// Where this end's buffers are in its registered region, and where the
/// peer's are (write-imm): fixed at setup.
#[derive(Clone, Copy, Debug)]
pub(super) struct SlotLayout {
    /// Slots per direction (send ring and receive pool).
    pub(super) slots: u32,
    pub(super) slot_size: usize,
    /// Bytes between two send buffers (send ring at offset 0).
    pub(super) send_stride: usize,
    pub(super) recv_off: usize,
    pub(super) recv_stride: usize,
    /// Bytes in front of a receive's payload (ud: the 40 B GRH).
    pub(super) payload_off: usize,
    /// The counter word the peer writes, and the one this end's counter
    /// write is sent from.
    pub(super) counter_off: usize,
    pub(super) counter_src_off: usize,
    /// The peer's receive slot 0 and stride (write-imm), else None.
    pub(super) peer_recv: Option<(u64, u64)>,
    /// write-imm: the immediate's format.
    pub(super) imm: ImmCodec,
    pub(super) sq_depth: u32,
    /// Signal every `period`-th WR (and whenever room runs out).
    pub(super) period: u32,
    pub(super) lossy: bool,
}

/// One end of a verbs stream (rc, uc or ud). Field order is drop order
/// (see `Wired`). `Send`: each end of a loopback pair moves to its own
/// thread. Aligned to 128 B: the two ends of a pair must not share a cache
/// line (see `ShmSlots`).
#[repr(align(128))]
pub struct VerbsSlots {
    pub(super) tpl: SendTemplate,
    /// rc: the RDMA write into the peer's counter word.
    pub(super) counter_tpl: Option<SendTemplate>,
    pub(super) w: Wired,
    pub(super) l: SlotLayout,
    /// Receive completions polled in one batch and not yet handed out:
    /// `arrived[arrived_at..arrived_n]` (one ibv_poll_cq per burst, as
    /// perftest's receiver does, instead of one per slot).
    pub(super) arrived: [Completion; POLL_BATCH],
    pub(super) arrived_at: usize,
    pub(super) arrived_n: usize,
    /// Data sends posted (the next send buffer is `posted % slots`).
    pub(super) posted: u64,
    /// Data sends whose buffer is free again (a signaled completion at or
    /// after them was polled).
    pub(super) freed: u64,
    /// SQ entries posted and not yet freed by a polled completion.
    pub(super) sq_out: u32,
    /// WRs posted since the last signaled one.
    pub(super) unsignaled: u32,
    /// Bytes a send carries inline (0: the HCA reads every send buffer
    /// after the post).
    pub(super) inline_cap: u32,
    /// `--stamp-thread`: the word of every send buffer the stamping thread
    /// owns; `send` copies a slot around it.
    pub(super) stamp_at: Option<usize>,
    pub(super) info: TransportInfo,
}

impl VerbsSlots {
    /// Polls the send CQ until it is empty, freeing the send buffers and
    /// SQ entries the completions cover.
    #[inline]
    fn reap_sends(&mut self) -> Result<(), TransportError> {
        let mut done = [Completion::default(); POLL_BATCH];
        loop {
            let n = self
                .w
                .send_cq
                .poll_many(&mut done)
                .map_err(|e| errno("ibv_poll_cq (stream send)", -e))?;
            for c in &done[..n] {
                if c.status != 0 {
                    return Err(TransportError::Completion(format!(
                        "stream send: {}",
                        wc_status_str(c.status)
                    )));
                }
                self.sq_out = self
                    .sq_out
                    .saturating_sub((c.wr_id & ((1 << COVER_BITS) - 1)) as u32);
                self.freed = self.freed.max(c.wr_id >> COVER_BITS);
            }
            if n < POLL_BATCH {
                return Ok(());
            }
        }
    }

    /// Whether the next WR must be signaled (the period, or it takes the
    /// last SQ entry, or `last_buffer`: it takes the last free send buffer)
    /// and the wr_id it carries; counts it as posted.
    #[inline(always)]
    fn next_wr(&mut self, last_buffer: bool) -> (u64, bool) {
        self.unsignaled += 1;
        self.sq_out += 1;
        let signaled =
            last_buffer || self.unsignaled >= self.l.period || self.sq_out >= self.l.sq_depth;
        let mut wr_id = self.posted << COVER_BITS;
        if signaled {
            wr_id |= u64::from(self.unsignaled);
            self.unsignaled = 0;
        }
        (wr_id, signaled)
    }

    /// Undoes [`VerbsSlots::next_wr`]'s count for a WR the provider
    /// refused (`before`: `unsignaled` before it).
    fn unpost(&mut self, before: u32) {
        self.sq_out -= 1;
        self.unsignaled = before;
    }
}

impl SlotEnd for VerbsSlots {
    fn slot_size(&self) -> usize {
        self.l.slot_size
    }

    #[inline]
    fn send(&mut self, bytes: &[u8]) -> Result<bool, TransportError> {
        debug_assert!(bytes.len() <= self.l.slot_size);
        let slots = u64::from(self.l.slots);
        if self.posted - self.freed >= slots || self.sq_out >= self.l.sq_depth {
            self.reap_sends()?;
            if self.posted - self.freed >= slots || self.sq_out >= self.l.sq_depth {
                return Ok(false);
            }
        }
        let i = (self.posted % slots) as usize;
        let off = i * self.l.send_stride;
        match self.stamp_at {
            // Around the stamping thread's word: it is the only writer.
            Some(at) if bytes.len() > at => {
                self.w.mem.buf.write_bytes(off, &bytes[..at]);
                let rest = bytes.len().min(at + 8);
                self.w.mem.buf.write_bytes(off + rest, &bytes[rest..]);
            }
            _ => self.w.mem.buf.write_bytes(off, bytes),
        }
        let len = bytes.len() as u32;
        let imm = self.l.imm.encode(i as u32, len);
        if let Some((base, stride)) = self.l.peer_recv {
            self.tpl.set_remote_addr(base + i as u64 * stride);
        }
        let before = self.unsignaled;
        self.posted += 1;
        let last_buffer = self.posted - self.freed == slots;
        let (wr_id, signaled) = self.next_wr(last_buffer);
        let addr = self.w.mem.buf.addr() + off as u64;
        if let Err(e) = self.tpl.post(&self.w.qp, wr_id, addr, len, imm, signaled) {
            self.posted -= 1;
            self.unpost(before);
            return Err(errno("ibv_post_send (stream)", e));
        }
        Ok(true)
    }

    #[inline]
    fn recv(&mut self, into: &mut [u8]) -> Result<Option<usize>, TransportError> {
        if self.arrived_at == self.arrived_n {
            self.arrived_n = self
                .w
                .recv_cq
                .poll_many(&mut self.arrived)
                .map_err(|e| errno("ibv_poll_cq (stream receive)", -e))?;
            self.arrived_at = 0;
            if self.arrived_n == 0 {
                return Ok(None);
            }
        }
        let c = self.arrived[self.arrived_at];
        self.arrived_at += 1;
        if c.status != 0 {
            return Err(TransportError::Completion(format!(
                "stream receive: {}",
                wc_status_str(c.status)
            )));
        }
        let (slot, len) = match (self.l.peer_recv, c.imm) {
            (Some(_), Some(imm)) => {
                let (i, len) = self.l.imm.decode(imm);
                (i as usize, len as usize)
            }
            (Some(_), None) => {
                return Err(TransportError::Completion(
                    "stream receive: a write-imm stream got a completion without immediate".into(),
                ))
            }
            (None, _) => (
                c.wr_id as usize,
                (c.byte_len as usize).saturating_sub(self.l.payload_off),
            ),
        };
        if len > self.l.slot_size || len > into.len() || slot >= self.l.slots as usize {
            return Err(TransportError::Completion(format!(
                "stream receive of {len} B into slot {slot}: the pool has {} slots of {} B \
                 (and the caller's buffer {} B); are both ends the same ibprobe version?",
                self.l.slots,
                self.l.slot_size,
                into.len()
            )));
        }
        fence(Ordering::Acquire);
        let off = self.l.recv_off + slot * self.l.recv_stride + self.l.payload_off;
        self.w.mem.buf.read_bytes(off, &mut into[..len]);
        self.w
            .recv
            .post(&self.w.qp, c.wr_id as usize)
            .map_err(|e| errno("ibv_post_recv (stream)", e))?;
        Ok(Some(len))
    }

    fn lossy(&self) -> bool {
        self.l.lossy
    }

    #[inline]
    fn write_counter(&mut self, v: u64) -> Result<(), TransportError> {
        if self.counter_tpl.is_none() {
            return Err(TransportError::Unsupported(
                "this verbs stream has no remote counter (--credit-return write needs rc)".into(),
            ));
        }
        let mut spins = 0u64;
        while self.sq_out >= self.l.sq_depth {
            self.reap_sends()?;
            spins += 1;
            if spins > COUNTER_SPINS {
                return Err(TransportError::PeerLost(
                    "stream send queue full and no send completion came".into(),
                ));
            }
        }
        let src = self.l.counter_src_off;
        self.w.mem.buf.write_u64(src, v);
        let addr = self.w.mem.buf.addr() + src as u64;
        let before = self.unsignaled;
        let (wr_id, signaled) = self.next_wr(false);
        let tpl = self.counter_tpl.as_mut().ok_or_else(|| {
            TransportError::Unsupported("this verbs stream has no remote counter".into())
        })?;
        if let Err(e) = tpl.post(&self.w.qp, wr_id, addr, 8, 0, signaled) {
            self.unpost(before);
            return Err(errno("ibv_post_send (stream counter)", e));
        }
        Ok(())
    }

    #[inline]
    fn read_counter(&self) -> u64 {
        let v = self.w.mem.buf.read_u64(self.l.counter_off);
        fence(Ordering::Acquire);
        v
    }

    fn stamp_target(&mut self, at: usize) -> Result<StampWords, TransportError> {
        if self.inline_cap > 0 {
            return Err(TransportError::Unsupported(format!(
                "--stamp-thread with inline data (up to {} B): the CPU copies an inline slot into the work request at post time, so no HCA read happens later to split t_send at; pass --inline off",
                self.inline_cap
            )));
        }
        if at + 8 > self.l.slot_size {
            return Err(TransportError::Unsupported(format!(
                "--stamp-thread: the stamp (bytes {at}..{}) does not fit a slot of {} B",
                at + 8,
                self.l.slot_size
            )));
        }
        self.stamp_at = Some(at);
        let n = self.l.slots as usize;
        Ok(self.w.mem.buf.stamp_words(at, self.l.send_stride, n))
    }

    fn info(&self) -> TransportInfo {
        self.info.clone()
    }
}

// Each end of a loopback stream moves to its own thread: `VerbsSlots`
// must stay `Send` (checked at compile time).
const _: fn() = || {
    fn send_ok<T: Send>() {}
    send_ok::<VerbsSlots>();
};
