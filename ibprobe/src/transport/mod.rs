//! Transports: what carries a probe's messages. One trait ([`Channel`],
//! in `channel.rs`), one file per transport (verbs lives in
//! `crate::verbs`), each registered in [`opener`] with how it opens
//! ([`open::Opens`]).
//!
//! Why it exists: the same measurement loops (`probe/workload/`) and the same
//! statistics must run over verbs, over shared memory (the zero-latency
//! reference) and over UDP (the kernel-network reference), so the
//! reference transports test every statistic and output path on machines
//! without an HCA.

pub mod channel;
pub mod model;
pub mod open;
pub mod shm;
pub mod stream;
pub mod udp;

use crate::spec::Transport;
pub use channel::{wait_recv_with, Channel, TransportError, TransportInfo};
use open::Opens;

/// How each transport of this module opens ([`open`]): the one place a
/// transport is registered, which `probe::open` and the session handshake
/// both ask. `None`: a verbs transport, opened by `crate::verbs`.
pub fn opener(t: Transport) -> Option<&'static dyn Opens> {
    match t {
        Transport::Shm => Some(&shm::Opener),
        Transport::Udp => Some(&udp::Opener),
        Transport::Model => Some(&model::Opener),
        Transport::Rc | Transport::Uc | Transport::Ud => None,
    }
}
