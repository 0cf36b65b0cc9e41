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
//! The protocol (`probe/session/oob/` frames it):
//! 1. the client sends a [`Hello`](oob::Hello): transport, size, `params` (the verbs
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
//! `handshake.rs` has one opener per side for any [`Shape`] (a
//! one-message channel or a stream); `serve.rs` also the
//! `--hw-timestamps` report.

pub mod auth;
mod client;
mod error;
mod handshake;
mod hello;
pub mod oob;
mod responder;
mod serve;

pub use client::ClientSession;
pub use error::{refuse, SessionError};
pub use handshake::{open_client, open_server, OneMessage, PreparedEnd, Shape};
pub use hello::{admit, receiver, requested, stream_hello, Admitted, MemoryCap, StreamHello};
pub use responder::{respond, Liveness, ResponderOptions, RESPONDER_MEMORY_KEY};
pub use serve::{hw_finish, serve, ServeEnd, Served};
