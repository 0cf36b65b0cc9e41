//! The bytes of a stream slot: what the two stream loops write and read.
//!
//! Every slot starts with a 16-byte header ([`SLOT_HEADER`]):
//!
//! | bytes | field | data slot | control slot (receiver -> sender) | FIN |
//! |---|---|---|---|---|
//! | 0..4 | `u32 len` | bytes of the slot used | 24 | 24 |
//! | 4..6 | `u16 msgs` | message records ending in this slot | 0 | 0 |
//! | 6..8 | `u16 flags` | [`DATA`], [`FRAG`], flush cause | [`CREDIT`] and/or [`ACK`] | [`FIN`] |
//! | 8..16 | `u64 word` | the slot's sequence number | slots consumed (cumulative) | slots posted before it |
//! | 16..24 | | records | acks (cumulative) | messages sent |
//!
//! A data slot holds `msgs` records of [`RECORD_HEADER`] bytes (`u64
//! seq`, `u64 t_handover` in the sender's clock ticks) each followed by
//! the payload (`size` bytes, every byte the sequence number's low byte).
//! A message larger than a slot spans consecutive slots flagged [`FRAG`]:
//! the first carries the record header and the start of the payload, the
//! last one says `msgs = 1`.
//!
//! With `--stamp-thread`, the stamping thread writes the clock into bytes
//! [`STAMP_AT`]`..+8` of every send buffer, so a slot arrives with the
//! time the HCA read it.
//!
//! A **compact** data slot carries one whole message (batch 1, no
//! fragment, no `--stamp-thread`) behind [`COMPACT_HEADER`] bytes instead
//! of 32 (a 32 B message is 48 B on the wire, not 64).
//!
//! | bytes | field |
//! |---|---|
//! | 0..4 | `u32 len`: [`COMPACT_HEADER`] + the message size |
//! | 4..6 | `u16`: bits 32..48 of `t_handover` |
//! | 6..8 | `u16 flags`: [`DATA`] \| [`COMPACT`] and the flush cause, nothing else |
//! | 8..12 | `u32`: the low 32 bits of the slot's sequence number (= its message's) |
//! | 12..16 | `u32`: bits 0..32 of `t_handover` |
//!
//! The receiver widens both ([`widen_seq`], [`widen_ticks`]: latencies up
//! to 2^48 ticks); another length, other flags, or (reliable transport)
//! another sequence number than the next end the run with an error. The
//! handshake carries the layout's version, [`SLOT_FORMAT`]. Counters are
//! cumulative: a lost control slot only delays what the next says.

pub use crate::spec::{COMPACT_HEADER, RECORD_HEADER, SLOT_FORMAT, SLOT_HEADER};

/// A data slot (messages).
pub const DATA: u16 = 1 << 0;
/// A fragment of a message larger than a slot.
pub const FRAG: u16 = 1 << 1;
/// Control: the word is the receiver's count of consumed slots.
pub const CREDIT: u16 = 1 << 2;
/// Control: bytes 16..24 are the receiver's count of acknowledged slots.
pub const ACK: u16 = 1 << 3;
/// The sender's last slot: the word is the slots posted before it, bytes
/// 16..24 the messages sent.
pub const FIN: u16 = 1 << 4;
/// A compact data slot (one message, [`COMPACT_HEADER`] bytes before it).
pub const COMPACT: u16 = 1 << 5;
/// Bytes of a control or FIN slot.
pub const CTRL_LEN: usize = SLOT_HEADER + 8;

/// `--stamp-thread`: bytes 8..16 of the first message's payload (the
/// receiver checks only a payload's first and last byte; `spec::check_stamp`
/// asks for 24 bytes).
pub const STAMP_AT: usize = SLOT_HEADER + RECORD_HEADER + 8;
// The stamping thread stores the word atomically: it must be aligned in
// the (64-byte aligned) send buffer.
const _: () = assert!(STAMP_AT.is_multiple_of(8));

#[inline(always)]
pub fn read_stamp(b: &[u8]) -> u64 {
    u64_at(b, STAMP_AT)
}

/// Bytes of `ibprobe loggp`'s header in front of every message's payload.
pub const LOGGP_HEADER: usize = 16;

/// Why a data slot was posted (in its flags): the batch was full, the
/// `--flush` timer ran out, or the end of a burst or of the run.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Cause {
    Fill = 0,
    Timer = 1,
    Explicit = 2,
}

const CAUSE_SHIFT: u16 = 8;
const CAUSE_BITS: u16 = 3 << CAUSE_SHIFT;
/// The bits of `t_handover` a compact slot carries.
const TICKS_48: u64 = (1 << 48) - 1;

/// A slot's header (see the module doc's table).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Header {
    pub len: u32,
    pub msgs: u16,
    pub flags: u16,
    pub word: u64,
}

#[inline(always)]
fn u64_at(b: &[u8], at: usize) -> u64 {
    let mut w = [0u8; 8];
    w.copy_from_slice(&b[at..at + 8]);
    u64::from_le_bytes(w)
}

#[inline(always)]
fn put_u64(b: &mut [u8], at: usize, v: u64) {
    b[at..at + 8].copy_from_slice(&v.to_le_bytes());
}

impl Header {
    #[inline(always)]
    pub fn write(&self, b: &mut [u8]) {
        b[0..4].copy_from_slice(&self.len.to_le_bytes());
        b[4..6].copy_from_slice(&self.msgs.to_le_bytes());
        b[6..8].copy_from_slice(&self.flags.to_le_bytes());
        put_u64(b, 8, self.word);
    }

    #[inline(always)]
    pub fn read(b: &[u8]) -> Header {
        Header {
            len: u32::from_le_bytes([b[0], b[1], b[2], b[3]]),
            msgs: u16::from_le_bytes([b[4], b[5]]),
            flags: u16::from_le_bytes([b[6], b[7]]),
            word: u64_at(b, 8),
        }
    }

    /// The flush cause of a data slot.
    pub fn cause(&self) -> Cause {
        match (self.flags >> CAUSE_SHIFT) & 3 {
            1 => Cause::Timer,
            2 => Cause::Explicit,
            _ => Cause::Fill,
        }
    }
}

/// The flags of a data slot posted for `cause`.
#[inline(always)]
pub fn data_flags(cause: Cause, frag: bool) -> u16 {
    DATA | ((cause as u16) << CAUSE_SHIFT) | if frag { FRAG } else { 0 }
}

/// Writes a control (or FIN) slot into `b`; returns its length.
#[inline(always)]
pub fn write_ctrl(b: &mut [u8], flags: u16, word: u64, second: u64) -> usize {
    Header {
        len: CTRL_LEN as u32,
        msgs: 0,
        flags,
        word,
    }
    .write(b);
    put_u64(b, SLOT_HEADER, second);
    CTRL_LEN
}

#[inline(always)]
pub fn ctrl_second(b: &[u8]) -> u64 {
    u64_at(b, SLOT_HEADER)
}

#[inline(always)]
pub fn write_record(b: &mut [u8], at: usize, seq: u64, t_handover: u64) {
    put_u64(b, at, seq);
    put_u64(b, at + 8, t_handover);
}

/// (sequence number, hand-over tick).
#[inline(always)]
pub fn read_record(b: &[u8], at: usize) -> (u64, u64) {
    (u64_at(b, at), u64_at(b, at + 8))
}

/// Writes a compact slot's header; the payload of `size` bytes follows
/// at [`COMPACT_HEADER`]. Returns the slot's length.
#[inline(always)]
pub fn write_compact(b: &mut [u8], seq: u64, t_handover: u64, size: usize, cause: Cause) -> usize {
    let len = COMPACT_HEADER + size;
    b[0..4].copy_from_slice(&(len as u32).to_le_bytes());
    b[4..6].copy_from_slice(&((t_handover >> 32) as u16).to_le_bytes());
    let flags = DATA | COMPACT | ((cause as u16) << CAUSE_SHIFT);
    b[6..8].copy_from_slice(&flags.to_le_bytes());
    b[8..12].copy_from_slice(&(seq as u32).to_le_bytes());
    b[12..16].copy_from_slice(&(t_handover as u32).to_le_bytes());
    len
}

/// A compact slot as read: the low 32 bits of its sequence number and
/// the low 48 bits of its hand-over tick.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Compact {
    pub seq_lo: u32,
    pub ticks_lo: u64,
}

/// Why a compact slot is refused.
#[derive(Clone, Copy, Debug, PartialEq, Eq, thiserror::Error)]
pub enum BadCompact {
    /// Its length (`got` the transport's, `said` the header's) is not
    /// `want`, [`COMPACT_HEADER`] + the message size.
    #[error("a compact slot of {got} B saying {said} B, where one message makes {want} B")]
    Len { got: usize, said: u32, want: usize },
    /// Flags beside [`DATA`], [`COMPACT`] and a flush cause.
    #[error("a compact slot with flags {0:#06x}")]
    Flags(u16),
}

/// Reads the compact slot `b` of `len` bytes (the transport's) for
/// messages of `size` bytes.
#[inline(always)]
pub fn read_compact(b: &[u8], len: usize, size: usize) -> Result<Compact, BadCompact> {
    let h = Header::read(b);
    let want = COMPACT_HEADER + size;
    if len != want || h.len as usize != want {
        return Err(BadCompact::Len {
            got: len,
            said: h.len,
            want,
        });
    }
    let cause = (h.flags & CAUSE_BITS) >> CAUSE_SHIFT;
    if h.flags & !CAUSE_BITS != DATA | COMPACT || cause > Cause::Explicit as u16 {
        return Err(BadCompact::Flags(h.flags));
    }
    Ok(Compact {
        seq_lo: u32::from_le_bytes([b[8], b[9], b[10], b[11]]),
        ticks_lo: u64::from(h.msgs) << 32
            | u64::from(u32::from_le_bytes([b[12], b[13], b[14], b[15]])),
    })
}

/// The sequence number whose low 32 bits are `lo` nearest to `expected`
/// (the slot the receiver expects next); None when that would be below 0
/// (a slot from before the stream began: not one of this stream's).
#[inline(always)]
pub fn widen_seq(lo: u32, expected: u64) -> Option<u64> {
    let delta = lo.wrapping_sub(expected as u32) as i32;
    expected.checked_add_signed(i64::from(delta))
}

/// The hand-over tick whose low 48 bits are `lo`: the latest not after
/// `now` (the receiver's arrival tick, on the same clock).
#[inline(always)]
pub fn widen_ticks(lo: u64, now: u64) -> u64 {
    now.wrapping_sub(now.wrapping_sub(lo) & TICKS_48)
}
