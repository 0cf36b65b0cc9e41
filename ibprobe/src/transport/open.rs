//! How a transport opens its ends: the one seam every transport of this
//! module implements ([`Opens`]), so `probe::open` (both ends in one
//! process) and the session handshake (one end here, one at the peer)
//! never name a transport (verbs, in `crate::verbs`, opens beside them).
//!
//! The handshake is one exchange: the client makes its end before the
//! Hello and sends that end's endpoint (JSON), the server makes its end
//! for it and answers with its own, then the client finishes its end from
//! the server's ([`Pending`]).

use std::net::IpAddr;

use serde_json::Value;

use super::channel::{Channel, TransportError};
use super::stream::SlotEnd;
use crate::spec::{ChannelSpec, StreamSpec};

/// What the handshake asks of a transport.
#[derive(Clone, Copy, Debug)]
pub struct Ask<'a> {
    /// The address this end's out-of-band connection runs on.
    pub local: IpAddr,
    pub peer: IpAddr,
    pub spec: &'a ChannelSpec,
    pub carry: Carry<'a>,
}

#[derive(Clone, Copy, Debug)]
pub enum Carry<'a> {
    /// A [`Channel`] of `spec.size` messages.
    Messages,
    /// A [`SlotEnd`] of the stream's slots.
    Slots(&'a StreamSpec),
}

pub enum End {
    Messages(Box<dyn Channel>),
    Slots(Box<dyn SlotEnd>),
}

pub type Opened<T> = Result<T, TransportError>;

/// The two ends of a stream in one process: (sender, receiver).
pub type StreamEnds = (Box<dyn SlotEnd>, Box<dyn SlotEnd>);

/// The client's end, made but not yet connected: finishes it from the
/// server's endpoint.
pub type Pending<'a> = Box<dyn FnOnce(&Value) -> Result<End, EndError> + 'a>;

/// Why a transport could not make its end of a session; the handshake
/// says it to the user (and, on the server, to the client).
#[derive(Debug)]
pub enum EndError {
    /// The peer's endpoint is not what this kind of endpoint (`udp`,
    /// `shm`) holds: another ibprobe version.
    Malformed(&'static str),
    /// The server cannot make its end as asked; the client is told this line.
    Refused(String),
    /// The client's end cannot be set up, with what to do.
    Setup(String),
    Failed(TransportError),
}

impl From<TransportError> for EndError {
    fn from(e: TransportError) -> EndError {
        EndError::Failed(e)
    }
}

/// One transport's ways of opening: what `probe::open` and the session
/// handshake ask of it. All cold code.
pub trait Opens: Sync {
    /// One-way loopback: both ends in this process (`post` on one,
    /// `poll_recv` on the other).
    fn loopback(&self, spec: &ChannelSpec) -> Opened<Box<dyn Channel>>;

    /// A stream in this process: the sending end and the receiving end.
    fn stream_pair(&self, spec: &ChannelSpec, st: &StreamSpec) -> Opened<StreamEnds>;

    /// The client's end before its Hello: the end to finish from the
    /// server's endpoint, and the endpoint the Hello carries.
    fn client<'a>(&self, ask: Ask<'a>) -> Result<(Pending<'a>, Value), EndError>;

    /// The server's end for the client's endpoint `theirs`, and the
    /// endpoint the Welcome carries.
    fn server(&self, ask: Ask, theirs: &Value) -> Result<(End, Value), EndError>;
}
