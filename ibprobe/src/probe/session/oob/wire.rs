//! What travels on the out-of-band connection: the frame's constants,
//! the messages (JSON bodies) and [`OobError`]; `oob/mod.rs` frames them.

use serde::{Deserialize, Serialize};

pub const MAGIC: [u8; 8] = *b"IBPROBE\0";
/// Version of this protocol; both ends must speak the same one.
pub const PROTOCOL_VERSION: u32 = 1;
/// Largest body accepted (a verbs endpoint is well under this).
pub const MAX_BODY: u32 = 1 << 20;
/// The default TCP port (perftest's, so firewall rules carry over).
pub const DEFAULT_PORT: u16 = 18515;

/// Why the out-of-band exchange failed, and what to do.
#[derive(Debug, thiserror::Error)]
pub enum OobError {
    #[error("cannot connect to ibprobe server at {addr}: {source}; is `ibprobe server` running there and the port open?")]
    Connect {
        addr: String,
        source: std::io::Error,
    },
    #[error("cannot resolve {addr}: {detail}; pass HOST or HOST:PORT")]
    Resolve { addr: String, detail: String },
    #[error("{peer} sent nothing for {secs} s while {what}; is it still running?")]
    Timeout {
        peer: String,
        what: &'static str,
        secs: u64,
    },
    #[error("{peer} closed the connection while {what}")]
    Closed { peer: String, what: &'static str },
    #[error("{peer} is not an ibprobe peer (bad magic); check the host and port")]
    BadMagic { peer: String },
    #[error("{peer} speaks ibprobe protocol v{theirs}, this ibprobe speaks v{ours}; run the same ibprobe version on both ends")]
    Version {
        peer: String,
        ours: u32,
        theirs: u32,
    },
    #[error("{peer} sent a malformed message while {what}: {detail}")]
    Malformed {
        peer: String,
        what: &'static str,
        detail: String,
    },
    #[error("{peer} did not finish the handshake within {secs} s (while {what}); a client has the server's --handshake-timeout in all")]
    Deadline {
        peer: String,
        what: &'static str,
        secs: f64,
    },
    #[error("interrupted while {what} from {peer}")]
    Interrupted { peer: String, what: &'static str },
    #[error("server refused: {0}")]
    Refused(String),
    #[error("mesh secret: {0}")]
    Auth(String),
    #[error("{what} with {peer}: {source}")]
    Io {
        peer: String,
        what: &'static str,
        source: std::io::Error,
    },
}

/// The client's opening: what it wants to run.
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq)]
pub struct Hello {
    /// "shm", "udp", "rc", "uc", "ud".
    pub transport: String,
    /// Bytes.
    pub size: usize,
    /// The probe parameters, for the server's log and checks.
    pub params: serde_json::Value,
    /// The client's transport endpoint (UDP port, verbs `Endpoint`, ...).
    pub endpoint: serde_json::Value,
}

/// The server's answer to a [`Hello`].
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum Reply {
    Welcome {
        endpoint: serde_json::Value,
    },
    /// The reason and what to change.
    Refuse {
        reason: String,
    },
    /// The server holds a mesh secret: its nonce and HMAC of both nonces
    /// (base64); the client answers [`Proof`].
    Challenge {
        nonce: String,
        proof: String,
    },
}

/// The client's answer to a [`Reply::Challenge`].
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq)]
pub struct Proof {
    /// HMAC of both nonces by the client (base64).
    pub proof: String,
}

/// The client's closing message: the run is over.
#[derive(Clone, Copy, Debug, Serialize, Deserialize, PartialEq)]
pub struct Done {
    /// Messages the client posted (warm-up included).
    pub sent: u64,
    /// Ctrl-C ended it.
    pub interrupted: bool,
}

pub use crate::probe::workload::stream::StreamTally;
