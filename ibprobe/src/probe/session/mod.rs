//! The one handshake: how a client and a server (or ibexporter's
//! responder) agree on a channel over the out-of-band TCP connection, and
//! how the server side of a session runs until the client is done.
//!
//! Why it exists: `ibprobe client`/`server` and ibexporter's mesh (every
//! exporter probes its peers and answers their probes) must speak exactly
//! the same protocol, so `ibprobe client` can probe an exporter's
//! responder and an exporter can probe `ibprobe server`. Both ends are
//! library calls: no printing, no process exit codes, every failure a
//! [`SessionError`] with a short reason for metrics.
//!
//! The protocol (`probe/oob.rs` frames it):
//! 1. the client sends a [`Hello`](super::oob::Hello): transport, size, `params` (the verbs
//!    knobs the server must mirror, `op` and `poll`, beside whatever the
//!    client adds, e.g. its probe configuration for the server's log) and
//!    its endpoint (udp: its port; verbs: its QP; shm: nothing);
//! 2. the server checks what it was asked for ([`requested`], [`admit`]),
//!    opens its end ([`open_server`]) and answers `Welcome` with its endpoint (shm:
//!    the ring's path), or `Refuse` with one line saying why;
//! 3. the client connects its end ([`open_client`]), measures, and says
//!    `Done`; the server echoes until then ([`serve`]).
//!
//! [`ClientSession`] and [`respond`] are the daemon's shape of the two
//! ends (many rounds on one connection; any transport a client asks for).
//!
//! By concern: `hello.rs` (what a Hello asks and its one check,
//! [`admit`]), `handshake.rs` (one opener per side for any [`Shape`]: a
//! one-message channel or a stream; a transport is one arm in each),
//! `serve.rs` (the server's echo loop, the `--hw-timestamps` report),
//! `client.rs` ([`ClientSession`]), `responder.rs` ([`respond`]).

mod client;
mod handshake;
mod hello;
mod responder;
mod serve;

pub use client::ClientSession;
pub use handshake::{open_client, open_server, OneMessage, PreparedEnd, Shape, UdpEnd};
pub use hello::{
    admit, receiver, requested, stream_hello, Admitted, MemoryCap, StreamHello, LOGGP_WORKLOAD,
};
pub use responder::{
    respond, Liveness, ResponderOptions, MAX_RESPONDER_CONSUME_DELAY, RESPONDER_MEMORY_KEY,
};
pub use serve::{hw_finish, serve, ServeEnd, Served};

use super::oob::{Oob, OobError, Reply};
use super::open::OpenError;
/// Why a session could not start or ended badly, as one line.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[error("{reason}: {detail}")]
pub struct SessionError {
    /// Short, stable reason for metrics: `connect`, `refused` (the peer
    /// said no), `config` (this end refuses the configuration), `setup`,
    /// `protocol`, `peer_lost`, `auth` (the mesh secret is missing or
    /// differs).
    pub reason: &'static str,
    /// What happened, with which peer, and what to do.
    pub detail: String,
}

impl SessionError {
    /// Whether the user's input is at fault (a CLI exits 2), not the run.
    pub fn is_input(&self) -> bool {
        matches!(self.reason, "refused" | "config" | "auth")
    }
}

fn err(reason: &'static str, detail: impl std::fmt::Display) -> SessionError {
    SessionError {
        reason,
        detail: detail.to_string(),
    }
}

impl From<OpenError> for SessionError {
    fn from(e: OpenError) -> SessionError {
        err(e.reason(), e.message)
    }
}

fn oob_err(e: OobError) -> SessionError {
    match e {
        OobError::Refused(_) => err("refused", e),
        OobError::Auth(_) => err("auth", e),
        e => err("protocol", e),
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
