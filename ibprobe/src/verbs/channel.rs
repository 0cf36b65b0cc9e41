//! The hot data path: the verbs [`Channel`]s and their post/poll calls.
//!
//! Why it exists: the probe's workloads talk to a [`Channel`]; this file is
//! what they call per message on verbs, and nothing else. These calls
//! allocate nothing and take no lock; `setup.rs` builds the channels.

use super::types::{errno, poll_cq, Setup, Wired};
use sideway::ibverbs::device_context::{DeviceContext, ValuesMask};

use crate::clock::hca::HcaClock;
use crate::clock::Clock;
use crate::spec::{Op, Poll};
use crate::sys::verbs::{wc_status_str, Completion, SendTemplate, StampWord};
use crate::transport::channel::io;
use crate::transport::{wait_recv_with, Channel, TransportError, TransportInfo};

/// Bits of wr_id holding how many send WRs a signaled completion frees.
const COVER_BITS: u32 = 20;

/// A connected QP: `post` sends to the peer, `poll_recv` returns what the
/// peer sent (round trip: client and server each hold one). Field order
/// is drop order (the send template before its address handle, see
/// `Wired`). Built by `Prepared::connect` (`setup.rs`).
pub struct VerbsChannel {
    pub(super) tpl: SendTemplate,
    pub(super) w: Wired,
    /// Send WRs posted and not yet freed by a polled signaled completion.
    pub(super) outstanding: u32,
    /// Unsignaled WRs posted since the last signaled one.
    pub(super) unsignaled: u32,
    /// Signaled completions polled inside `post` (SQ full), handed out by
    /// `poll_send_done` later: (sequence number, HCA timestamp).
    pub(super) stash: Box<[(u64, Option<u64>)]>,
    pub(super) stash_head: usize,
    pub(super) stash_len: usize,
    /// Next sequence number expected (unwraps truncated carriers).
    pub(super) expected: u64,
    /// Last marker byte seen in the write target (plain write).
    pub(super) last_marker: u8,
    pub(super) payload_off: usize,
    /// `--stamp-thread`: every send uses send slot 0, whose word 8..16 the
    /// stamping thread rewrites.
    pub(super) stamp: bool,
    /// Where the last arrival's payload lies in this end's memory.
    pub(super) last_recv_off: usize,
    /// `--hw-timestamps`: the HCA timestamp of the last arrival's receive
    /// completion and of the last send completion handed out.
    pub(super) last_recv_ts: Option<u64>,
    pub(super) last_send_ts: Option<u64>,
    /// The receive slot of the last arrival, re-posted after the next
    /// send is posted (or at the next poll), not before the caller sees
    /// the arrival: an echo then leaves without waiting for the re-post,
    /// and a round trip's arrival is timed without it. The other
    /// `prepost - 1` receives stay posted meanwhile; with `--rq-prepost 1`
    /// the slot goes back at once.
    pub(super) repost: Option<usize>,
    pub(super) info: TransportInfo,
    pub(super) s: Setup,
}

#[inline(always)]
fn unwrap_seq(low: u64, bits: u32, expected: u64) -> u64 {
    if bits >= 64 {
        return low;
    }
    let m = (1u64 << bits) - 1;
    expected.wrapping_add(low.wrapping_sub(expected) & m)
}

impl VerbsChannel {
    /// Whether a send completion for `seq` will come (every `period`-th).
    #[inline(always)]
    fn signaled(&self, seq: u64) -> bool {
        self.s.period <= 1 || seq % self.s.period as u64 == self.s.period as u64 - 1
    }

    /// Polls one send completion; frees the SQ slots it covers.
    #[inline(always)]
    fn poll_send_cq(&mut self) -> Result<Option<u64>, TransportError> {
        let Some(c) = poll_cq(&self.w.send_cq, "ibv_poll_cq (send)")? else {
            return Ok(None);
        };
        if c.status != 0 {
            return Err(TransportError::Completion(format!(
                "send: {} (vendor err)",
                wc_status_str(c.status)
            )));
        }
        let covered = (c.wr_id & ((1 << COVER_BITS) - 1)) as u32;
        self.outstanding = self.outstanding.saturating_sub(covered);
        self.last_send_ts = c.hw_ts;
        Ok(Some(c.wr_id >> COVER_BITS))
    }

    /// Re-posts the receive slot of the last arrival, if not yet done.
    #[inline(always)]
    fn repost_recv(&mut self) -> Result<(), TransportError> {
        if let Some(slot) = self.repost.take() {
            self.w
                .recv
                .post(&self.w.qp, slot)
                .map_err(|e| errno("ibv_post_recv", e))?;
        }
        Ok(())
    }

    /// Makes room in the SQ: polls send completions, keeping their
    /// sequence numbers for `poll_send_done`.
    fn reclaim(&mut self) -> Result<(), TransportError> {
        let mut spins: u64 = 0;
        while self.outstanding >= self.s.sq_depth {
            if let Some(seq) = self.poll_send_cq()? {
                let cap = self.stash.len();
                if self.stash_len == cap {
                    self.stash_head = (self.stash_head + 1) % cap;
                    self.stash_len -= 1;
                }
                let i = (self.stash_head + self.stash_len) % cap;
                self.stash[i] = (seq, self.last_send_ts);
                self.stash_len += 1;
            } else {
                spins += 1;
                if spins > 200_000_000 {
                    return Err(TransportError::PeerLost(
                        "send queue full and no send completion came".to_string(),
                    ));
                }
            }
        }
        Ok(())
    }

    /// The sequence number carried by the receive in `slot` / completion `c`.
    #[inline(always)]
    fn seq_of(&self, c: &Completion) -> u64 {
        if let Some(imm) = c.imm {
            return unwrap_seq(imm as u64, 32, self.expected);
        }
        let n = (self.s.size as usize).min(8);
        if n == 0 {
            return self.expected;
        }
        let off =
            (self.s.recv_off + c.wr_id * self.s.recv_stride as u64) as usize + self.payload_off;
        unwrap_seq(self.w.mem.buf.read_le(off, n), 8 * n as u32, self.expected)
    }

    /// Blocks on the receive CQ's completion channel (event polling).
    fn wait_event_recv(
        &mut self,
        clock: &Clock,
        timeout_ns: u64,
    ) -> Result<Option<u64>, TransportError> {
        wait_recv_with(self, clock, timeout_ns, |me, left_ns| {
            let got =
                me.w.recv_cq
                    .wait_event(left_ns)
                    .map_err(io("ibv_get_cq_event"))?;
            if got {
                me.w.recv_cq.req_notify().map_err(io("ibv_req_notify_cq"))?;
            }
            Ok(got)
        })
    }
}

impl Channel for VerbsChannel {
    #[inline]
    fn post(&mut self, seq: u64) -> Result<(), TransportError> {
        if self.outstanding >= self.s.sq_depth {
            self.reclaim()?;
        }
        let size = self.s.size as usize;
        let slot = if self.stamp {
            0
        } else {
            (seq % self.s.send_slots as u64) as usize
        };
        let off = slot * self.s.send_stride as usize;
        let buf = &self.w.mem.buf;
        if self.s.op == Op::Write {
            if size >= 9 {
                buf.write_le(off, seq, 8);
            }
            buf.write_u8(off + size - 1, (seq % 255) as u8 + 1);
        } else if size > 0 {
            buf.write_le(off, seq, size.min(8));
        }
        let signaled = self.signaled(seq);
        self.unsignaled += 1;
        let mut wr_id = seq << COVER_BITS;
        if signaled {
            wr_id |= self.unsignaled as u64;
            self.unsignaled = 0;
        }
        let addr = self.w.mem.buf.addr() + off as u64;
        self.tpl
            .post(&self.w.qp, wr_id, addr, self.s.size, seq as u32, signaled)
            .map_err(|e| errno("ibv_post_send", e))?;
        self.outstanding += 1;
        self.repost_recv()
    }

    #[inline]
    fn poll_recv(&mut self) -> Result<Option<u64>, TransportError> {
        if self.s.op == Op::Write {
            let size = self.s.size as usize;
            let off = self.s.target_off as usize;
            let m = self.w.mem.buf.read_u8(off + size - 1);
            if m == self.last_marker {
                return Ok(None);
            }
            std::sync::atomic::fence(std::sync::atomic::Ordering::Acquire);
            self.last_marker = m;
            self.last_recv_off = off;
            let seq = if size >= 9 {
                self.w.mem.buf.read_le(off, 8)
            } else {
                let r = (m.wrapping_sub(1)) as u64;
                self.expected + (r + 255 - self.expected % 255) % 255
            };
            self.expected = seq.wrapping_add(1);
            return Ok(Some(seq));
        }
        self.repost_recv()?;
        let Some(c) = poll_cq(&self.w.recv_cq, "ibv_poll_cq (recv)")? else {
            return Ok(None);
        };
        if c.status != 0 {
            return Err(TransportError::Completion(format!(
                "receive: {}",
                wc_status_str(c.status)
            )));
        }
        let seq = self.seq_of(&c);
        self.expected = seq.wrapping_add(1);
        self.last_recv_ts = c.hw_ts;
        self.last_recv_off = if self.s.op == Op::WriteImm {
            self.s.target_off as usize
        } else {
            (self.s.recv_off + c.wr_id * self.s.recv_stride as u64) as usize + self.payload_off
        };
        self.repost = Some(c.wr_id as usize);
        if self.s.prepost <= 1 {
            // `--rq-prepost 1`: no other receive is posted, and the next
            // message may come as soon as the next send is posted.
            self.repost_recv()?;
        }
        Ok(Some(seq))
    }

    #[inline]
    fn poll_send_done(&mut self) -> Result<Option<u64>, TransportError> {
        if self.stash_len > 0 {
            let (seq, ts) = self.stash[self.stash_head];
            self.last_send_ts = ts;
            self.stash_head = (self.stash_head + 1) % self.stash.len();
            self.stash_len -= 1;
            return Ok(Some(seq));
        }
        self.poll_send_cq()
    }

    fn has_send_completions(&self) -> bool {
        true
    }

    fn is_signaled(&self, seq: u64) -> bool {
        self.signaled(seq)
    }

    fn wait_recv(&mut self, clock: &Clock, timeout_ns: u64) -> Result<Option<u64>, TransportError> {
        if self.s.poll == Poll::Event {
            return self.wait_event_recv(clock, timeout_ns);
        }
        wait_recv_with(self, clock, timeout_ns, |_, _| Ok(true))
    }

    fn stamp_target(&mut self) -> Result<StampWord, TransportError> {
        if self.s.inline_used {
            return Err(TransportError::Unsupported(
                "--stamp-thread with inline data: the CPU copies an inline payload into the work request at post time, so no HCA read happens later to split t_send at; pass --inline off".into(),
            ));
        }
        if self.s.size < 24 {
            return Err(TransportError::Unsupported(format!(
                "--stamp-thread with --size {}: the stamp is bytes 8..16 of the payload, after the sequence number and before the last byte; use --size 24 or more",
                self.s.size
            )));
        }
        self.stamp = true;
        Ok(self.w.mem.buf.stamp_word(8))
    }

    #[inline(always)]
    fn arrived_stamp(&self) -> u64 {
        self.w.mem.buf.read_le(self.last_recv_off + 8, 8)
    }

    #[inline(always)]
    fn hw_recv_ts(&self) -> Option<u64> {
        self.last_recv_ts
    }

    #[inline(always)]
    fn hw_send_ts(&self) -> Option<u64> {
        self.last_send_ts
    }

    fn hw_clock(&self) -> Option<HcaClock> {
        self.s.hca
    }

    fn hw_clock_now(&self) -> Option<u64> {
        let hca = self.s.hca?;
        read_hca_clock(&self.w._ctx).map(|t| t & hca.mask)
    }

    fn info(&self) -> TransportInfo {
        self.info.clone()
    }
}

/// The HCA's free-running clock now (ibv_query_rt_values_ex, raw clock;
/// mlx5 puts the counter in the timespec's nanoseconds field and 0 in its
/// seconds). Cold: a system call, for calibration pairs only.
fn read_hca_clock(ctx: &DeviceContext) -> Option<u64> {
    let v = ctx.query_rt_values_ex(ValuesMask::RawClock).ok()?;
    Some(v.raw_clock()?.to_ticks() as u64)
}

/// One-way loopback: two connected QPs in one process (same device and
/// port, or `--peer-dev`). `post` sends on QP A, `poll_recv` and
/// `wait_recv` receive on QP B, `poll_send_done` reports A's signaled
/// sends. One clock times both ends.
pub struct LoopbackChannel {
    pub(super) a: VerbsChannel,
    pub(super) b: VerbsChannel,
    pub(super) info: TransportInfo,
}

impl Channel for LoopbackChannel {
    #[inline]
    fn post(&mut self, seq: u64) -> Result<(), TransportError> {
        self.a.post(seq)?;
        // B's last receive slot goes back before B polls again, as A's
        // would in `VerbsChannel::post`.
        self.b.repost_recv()
    }

    #[inline]
    fn poll_recv(&mut self) -> Result<Option<u64>, TransportError> {
        self.b.poll_recv()
    }

    #[inline]
    fn poll_send_done(&mut self) -> Result<Option<u64>, TransportError> {
        self.a.poll_send_done()
    }

    fn has_send_completions(&self) -> bool {
        true
    }

    fn is_signaled(&self, seq: u64) -> bool {
        self.a.is_signaled(seq)
    }

    fn wait_recv(&mut self, clock: &Clock, timeout_ns: u64) -> Result<Option<u64>, TransportError> {
        self.b.wait_recv(clock, timeout_ns)
    }

    fn stamp_target(&mut self) -> Result<StampWord, TransportError> {
        self.a.stamp_target()
    }

    #[inline(always)]
    fn arrived_stamp(&self) -> u64 {
        self.b.arrived_stamp()
    }

    #[inline(always)]
    fn hw_recv_ts(&self) -> Option<u64> {
        self.b.hw_recv_ts()
    }

    #[inline(always)]
    fn hw_send_ts(&self) -> Option<u64> {
        self.a.hw_send_ts()
    }

    fn hw_clock(&self) -> Option<HcaClock> {
        // One device (a --peer-dev loopback is refused with --hw-timestamps).
        self.a.hw_clock()
    }

    fn hw_clock_now(&self) -> Option<u64> {
        self.a.hw_clock_now()
    }

    fn info(&self) -> TransportInfo {
        self.info.clone()
    }
}

#[cfg(test)]
mod tests {
    use super::{unwrap_seq, LoopbackChannel, VerbsChannel};

    /// The runner may move a channel to a pinned measurement thread.
    #[test]
    fn channels_are_send() {
        fn assert_send<T: Send>() {}
        assert_send::<VerbsChannel>();
        assert_send::<LoopbackChannel>();
    }

    #[test]
    fn unwrap_truncated_sequence_numbers() {
        assert_eq!(unwrap_seq(5, 8, 0), 5);
        assert_eq!(unwrap_seq(0, 8, 255), 256);
        assert_eq!(unwrap_seq(3, 8, 254), 259);
        assert_eq!(unwrap_seq(7, 0, 42), 42);
        assert_eq!(unwrap_seq(0x1_0000_0001, 64, 0), 0x1_0000_0001);
        assert_eq!(unwrap_seq(1, 32, u32::MAX as u64), (1u64 << 32) + 1);
    }
}
