//! A session's one error type, [`SessionError`], and the helpers that
//! make one.

use crate::probe::open::OpenError;
use crate::probe::session::oob::{Oob, OobError, Reply};

/// Why a session could not start or ended badly, as one line.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[error("{reason}: {detail}")]
pub struct SessionError {
    /// Short, stable reason for metrics: `connect`, `refused` (the peer
    /// said no), `config` (this end refuses the configuration), `setup`,
    /// `protocol`, `peer_lost`, `auth` (the mesh secret is missing or
    /// differs).
    pub reason: &'static str,
    pub detail: String,
}

impl SessionError {
    /// Whether the user's input is at fault (a CLI exits 2), not the run.
    pub fn is_input(&self) -> bool {
        matches!(self.reason, "refused" | "config" | "auth")
    }
}

pub(super) fn err(reason: &'static str, detail: impl std::fmt::Display) -> SessionError {
    SessionError {
        reason,
        detail: detail.to_string(),
    }
}

pub(super) fn protocol(detail: impl std::fmt::Display) -> SessionError {
    err("protocol", detail)
}

impl From<OpenError> for SessionError {
    fn from(e: OpenError) -> SessionError {
        err(e.reason(), e.message)
    }
}

pub(super) fn oob_err(e: OobError) -> SessionError {
    match e {
        OobError::Refused(_) => err("refused", e),
        OobError::Auth(_) => err("auth", e),
        e => protocol(e),
    }
}

/// Tells the client why it is refused; the server's error for the same.
pub fn refuse(oob: &mut Oob, reason: impl Into<String>) -> SessionError {
    let reason = reason.into();
    let peer = oob.peer_addr();
    let _ = oob.send(&Reply::Refuse {
        reason: reason.clone(),
    });
    err("refused", format!("client {peer}: {reason}"))
}
