//! What a verbs call or a verbs configuration can fail with, and the exit
//! code it means.

use crate::transport::TransportError;

/// What kind of failure a [`VerbsError`] is, so the CLI can pick an exit
/// status.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum VerbsErrorKind {
    /// No libibverbs or no RDMA device on this host.
    NoDevice,
    /// The configuration asks for something verbs or the device forbids
    /// (one line naming the limit). The CLI exits 2.
    Config,
    /// A verbs call failed at run time.
    Verbs,
}

/// What ibprobe's commands add to a "no RDMA device" error: what runs
/// without one.
pub const NO_DEVICE_ELSE: &str = "or measure without one: --transport shm|udp|model";

/// Why a verbs operation failed: a kind and one line for humans.
#[derive(Debug, thiserror::Error)]
#[error("{message}")]
pub struct VerbsError {
    pub kind: VerbsErrorKind,
    pub message: String,
}

impl VerbsError {
    /// The "no RDMA device" error, with how to get one on any Linux host.
    /// What else the caller can do is the caller's to say (ibprobe: a
    /// reference transport, [`NO_DEVICE_ELSE`]; ibexporter: its other
    /// probes still run).
    pub fn no_device(detail: &str) -> VerbsError {
        VerbsError {
            kind: VerbsErrorKind::NoDevice,
            message: format!(
                "no RDMA device ({detail}); attach an HCA, or create a Soft-RoCE device on \
                 an Ethernet interface: `rdma link add rxe0 type rxe netdev IFACE` \
                 (iproute2, module rdma_rxe)"
            ),
        }
    }

    pub fn config(message: impl Into<String>) -> VerbsError {
        VerbsError {
            kind: VerbsErrorKind::Config,
            message: message.into(),
        }
    }

    pub fn verbs(what: &str, err: impl std::fmt::Display) -> VerbsError {
        VerbsError {
            kind: VerbsErrorKind::Verbs,
            message: format!("{what}: {err}"),
        }
    }

    /// Exit status the CLI should use: 2 for refusals, 1 otherwise.
    pub fn exit_code(&self) -> i32 {
        match self.kind {
            VerbsErrorKind::Config => 2,
            _ => 1,
        }
    }
}

/// A failed verbs call as a [`VerbsError`]: `what` names it, the error
/// and its sources say why.
pub(super) trait OrCall<T> {
    fn or_call(self, what: &str) -> Result<T, VerbsError>;
}

impl<T, E: std::error::Error> OrCall<T> for Result<T, E> {
    fn or_call(self, what: &str) -> Result<T, VerbsError> {
        self.map_err(|e| VerbsError::verbs(what, chain(&e)))
    }
}

/// An error and its source chain, on one line.
pub(super) fn chain(e: &dyn std::error::Error) -> String {
    match crate::sys::verbs::source_chain(e) {
        c if c.is_empty() => e.to_string(),
        c => format!("{e}: {c}"),
    }
}

impl From<VerbsError> for TransportError {
    fn from(e: VerbsError) -> TransportError {
        TransportError::Unsupported(e.message)
    }
}
