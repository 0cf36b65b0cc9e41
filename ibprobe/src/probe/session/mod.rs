//! The one handshake: how a client and a server (or ibexporter's
//! responder) agree on a channel over the out-of-band TCP connection, and
//! how the server side runs until the client is done. `ibprobe` and
//! ibexporter's mesh speak exactly this protocol, so each can probe the
//! other. Library calls: no printing, every failure a [`SessionError`].
//!
//! 1. the client sends a [`Hello`](oob::Hello): transport, size, `params`
//!    (`op`, `poll`, whatever the client adds) and its endpoint;
//! 2. the server checks it ([`requested`], [`admit`]), opens its end
//!    ([`open_server`]) and answers `Welcome` with its endpoint, or
//!    `Refuse` with one line saying why;
//! 3. the client connects its end ([`open_client`]), measures, and says
//!    `Done`; the server echoes until then ([`serve`]).
//!
//! [`ClientSession`] and [`respond`] are the daemon's ends (many rounds
//! on one connection).

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
