//! The facts a verbs channel keeps from its setup, shared by the cold
//! side (`setup.rs`, which fills them) and the hot side (`channel.rs`,
//! which reads them on every post and poll).
//!
//! Why it exists: both sides need the same record; keeping it here lets
//! `setup.rs` use `channel.rs` (to build the channels) without
//! `channel.rs` using `setup.rs` back.

use super::device::GidInfo;
use crate::spec::{Op, Poll, QpType};

/// Facts fixed at setup, shared by the prepared and connected forms.
#[derive(Clone, Debug)]
pub(super) struct Setup {
    pub(super) dev: String,
    pub(super) port: u8,
    pub(super) gid: Option<GidInfo>,
    pub(super) lid: u16,
    pub(super) qp_type: QpType,
    pub(super) op: Op,
    pub(super) size: u32,
    pub(super) mtu: u32,
    pub(super) max_inline: u32,
    pub(super) inline_used: bool,
    pub(super) inline_cap: u32,
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
    pub(super) psn: u32,
    /// How the buffers were placed (crate::sys::mem::Region::describe).
    pub(super) memory: String,
}
