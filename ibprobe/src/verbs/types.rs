//! What the cold side (`setup.rs`, `stream_setup.rs`) fills and the hot
//! side (`channel.rs`, `slots.rs`) reads: the setup facts, the owned verbs
//! objects, one CQ poll, errno mapping and the write-imm immediate format.
//! Kept here so `setup.rs` uses `channel.rs` without a cycle back.

use std::sync::Arc;

use sideway::ibverbs::device_context::DeviceContext;
use sideway::ibverbs::protection_domain::ProtectionDomain;

use crate::clock::hca::HcaClock;
use crate::spec::{Op, Poll, QpType};
use crate::sys::verbs::{AddressHandle, Completion, OwnedCq, OwnedQp, RecvRing, RegisteredBuf};
use crate::transport::TransportError;

/// Facts fixed at setup, shared by the prepared and connected forms.
#[derive(Clone, Debug)]
pub(super) struct Setup {
    pub(super) qp_type: QpType,
    pub(super) op: Op,
    pub(super) size: u32,
    pub(super) mtu: u32,
    pub(super) inline_used: bool,
    pub(super) period: u32,
    pub(super) poll: Poll,
    pub(super) sq_depth: u32,
    pub(super) rq_depth: u32,
    pub(super) prepost: u32,
    pub(super) send_slots: u32,
    pub(super) send_stride: u32,
    pub(super) recv_off: u64,
    pub(super) recv_stride: u32,
    pub(super) target_off: u64,
    /// `--hw-timestamps`: the device's completion clock.
    pub(super) hca: Option<HcaClock>,
}

/// The verbs objects a connected end owns (a channel or a stream end),
/// filled by the cold side and used by the hot one. Field order is drop
/// order: the address handle (the owner declares its send templates,
/// which point at it, before this), the QP before its CQs, the memory
/// region before the memory, all before the PD and the context.
pub(super) struct Wired {
    pub(super) _ah: Option<AddressHandle>,
    pub(super) recv: RecvRing,
    pub(super) qp: OwnedQp,
    pub(super) send_cq: OwnedCq,
    pub(super) recv_cq: OwnedCq,
    pub(super) mem: RegisteredBuf,
    pub(super) _pd: Arc<ProtectionDomain>,
    pub(super) _ctx: Arc<DeviceContext>,
}

/// A verbs call's errno as a [`TransportError`] naming the call.
pub(super) fn errno(what: &'static str, e: i32) -> TransportError {
    TransportError::Io {
        what,
        source: std::io::Error::from_raw_os_error(e),
    }
}

/// Polls `cq` once (`what` names the call in an error): the completion,
/// if one came. Its status is the caller's to check.
#[inline(always)]
pub(super) fn poll_cq(
    cq: &OwnedCq,
    what: &'static str,
) -> Result<Option<Completion>, TransportError> {
    let mut c = Completion::default();
    match cq.poll_one(&mut c) {
        Ok(false) => Ok(None),
        Ok(true) => Ok(Some(c)),
        Err(e) => Err(errno(what, -e)),
    }
}

/// How a write-imm slot names itself in the 32-bit immediate: the index
/// of the peer's receive slot it was written into, in the high bits, and
/// its length, in the low `len_bits` (enough for the slot size). Losses on
/// uc cannot shift a receiver's idea of which slot arrived.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) struct ImmCodec {
    len_bits: u32,
}

impl ImmCodec {
    /// The codec for `slots` slots of up to `slot_size` bytes; Err(the
    /// most slots that fit beside such a length) when they do not.
    pub(super) fn new(slots: u32, slot_size: u32) -> Result<ImmCodec, u64> {
        let len_bits = 32 - slot_size.leading_zeros();
        let max_slots = 1u64 << (32 - len_bits);
        if u64::from(slots) > max_slots {
            return Err(max_slots);
        }
        Ok(ImmCodec { len_bits })
    }

    /// The immediate of slot `index` holding `len` bytes.
    #[inline(always)]
    pub(super) fn encode(self, index: u32, len: u32) -> u32 {
        ((u64::from(index) << self.len_bits) | u64::from(len)) as u32
    }

    /// (slot index, length) of an immediate made by [`ImmCodec::encode`].
    #[inline(always)]
    pub(super) fn decode(self, imm: u32) -> (u32, u32) {
        let mask = ((1u64 << self.len_bits) - 1) as u32;
        ((u64::from(imm) >> self.len_bits) as u32, imm & mask)
    }
}

#[cfg(test)]
mod tests {
    use super::ImmCodec;

    #[test]
    fn immediates_carry_index_and_length() {
        let c = ImmCodec::new(64, 4096).unwrap();
        for (i, len) in [(0, 0), (63, 4096), (17, 33), (1, 4095)] {
            assert_eq!(c.decode(c.encode(i, len)), (i, len));
        }
        // 4096 needs 13 bits: 2^19 slots fit beside it, one more does not.
        assert!(ImmCodec::new(1 << 19, 4096).is_ok());
        assert_eq!(ImmCodec::new((1 << 19) + 1, 4096), Err(1 << 19));
        // A slot size of 2^31 B or more leaves room for one slot only.
        let big = ImmCodec::new(1, u32::MAX).unwrap();
        assert_eq!(big.decode(big.encode(0, u32::MAX)), (0, u32::MAX));
        assert_eq!(ImmCodec::new(2, u32::MAX), Err(1));
    }
}
