//! The streaming layer: one end of a duplex pool of slots.
//!
//! Why it exists: a [`super::channel::Channel`] carries one message at a
//! time; a stream (`docs/stream-design.md`) keeps many slots in flight and
//! needs a return path for credits. A [`SlotEnd`] is what the stream loops
//! need from a transport, and nothing more: send one slot's bytes as one
//! operation, take the next arrived slot's. What the bytes mean is the
//! workload's business (`probe/workload/slot.rs`). Each end has `slots`
//! receive slots, and the sender's credit window never exceeds that.
//!
//! Hot-path contract (as for `Channel`): `send`, `recv`, `write_counter`
//! and `read_counter` allocate nothing, take no lock and make no syscall
//! beyond the transport's own data path.

use super::channel::{TransportError, TransportInfo, STAMP_NEEDS_HCA};
use crate::sys::verbs::StampWords;

/// One end of a streaming connection: it sends slots to the peer and
/// receives the peer's slots. In loopback the two ends live on two threads
/// of one process; across hosts, one per process.
pub trait SlotEnd: Send {
    /// The most one `send` carries.
    fn slot_size(&self) -> usize;

    /// Sends `bytes` (at most [`SlotEnd::slot_size`]) as one slot, one
    /// operation. Every slot begins with its length as a little-endian
    /// u32 (the stream's slot header does, `probe/workload/slot.rs`):
    /// shm uses that word as the slot's full flag. `Ok(false)`: no room
    /// right now (a full send queue or socket buffer); nothing was sent.
    fn send(&mut self, bytes: &[u8]) -> Result<bool, TransportError>;

    /// Looks once for an arrived slot: copies it into `into` (at least
    /// `slot_size` bytes) and returns its length, and the transport's
    /// receive slot is free again (re-posted).
    fn recv(&mut self, into: &mut [u8]) -> Result<Option<usize>, TransportError>;

    /// Whether the transport may lose a slot (udp, uc, ud): the loops
    /// then count gaps as losses instead of waiting for them.
    fn lossy(&self) -> bool;

    /// Writes `v` into the peer's counter word (no receive completion on
    /// the peer: it reads the word with [`SlotEnd::read_counter`]).
    fn write_counter(&mut self, _v: u64) -> Result<(), TransportError> {
        Err(TransportError::Unsupported(
            "this transport has no remote counter (--credit-return write needs rc)".into(),
        ))
    }

    /// The last value the peer wrote into this end's counter word.
    fn read_counter(&self) -> u64 {
        0
    }

    /// `--stamp-thread`: the word at byte `at` of every send buffer, for a
    /// stamping thread to keep rewriting with the clock; from now on this
    /// end's `send` copies a slot around that word. Only where an HCA reads
    /// the send buffer after the post (verbs without inline data); others
    /// refuse with one line saying why.
    fn stamp_target(&mut self, _at: usize) -> Result<StampWords, TransportError> {
        Err(TransportError::Unsupported(STAMP_NEEDS_HCA.into()))
    }

    fn info(&self) -> TransportInfo;
}

impl<T: SlotEnd + ?Sized> SlotEnd for Box<T> {
    #[inline(always)]
    fn slot_size(&self) -> usize {
        (**self).slot_size()
    }
    #[inline(always)]
    fn send(&mut self, bytes: &[u8]) -> Result<bool, TransportError> {
        (**self).send(bytes)
    }
    #[inline(always)]
    fn recv(&mut self, into: &mut [u8]) -> Result<Option<usize>, TransportError> {
        (**self).recv(into)
    }
    fn lossy(&self) -> bool {
        (**self).lossy()
    }
    #[inline(always)]
    fn write_counter(&mut self, v: u64) -> Result<(), TransportError> {
        (**self).write_counter(v)
    }
    #[inline(always)]
    fn read_counter(&self) -> u64 {
        (**self).read_counter()
    }
    fn stamp_target(&mut self, at: usize) -> Result<StampWords, TransportError> {
        (**self).stamp_target(at)
    }
    fn info(&self) -> TransportInfo {
        (**self).info()
    }
}
