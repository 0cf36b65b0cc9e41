//! Opening channels whose two ends this process owns (`ibprobe
//! loopback`, sweep cells, ibexporter's local probes): [`loopback`],
//! [`stream_pair`], [`echo_pair`]. The spec is checked first, so a
//! refusal comes before anything is created; channels to another process
//! are the handshake's (`probe/session/`).

use std::net::{IpAddr, Ipv4Addr};

use super::config::Receiver;
use super::executor::EchoThread;
use crate::clock::Clock;
use crate::spec::{ChannelSpec, SpecError, StreamSpec, Transport};
pub use crate::transport::open::StreamEnds;
use crate::transport::shm::ShmChannel;
use crate::transport::udp::UdpChannel;
use crate::transport::{self, Channel, TransportError};
use crate::verbs::{self, VerbsConfig, VerbsError, VerbsErrorKind};

/// What kind of failure an [`OpenError`] is: the configuration cannot
/// work, no RDMA device, or creating the channel failed at run time.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum OpenErrorKind {
    Refused,
    NoDevice,
    Failed,
}

/// Why a channel could not be opened.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{message}")]
pub struct OpenError {
    pub kind: OpenErrorKind,
    pub message: String,
}

impl OpenError {
    pub fn refused(message: impl Into<String>) -> OpenError {
        OpenError {
            kind: OpenErrorKind::Refused,
            message: message.into(),
        }
    }

    /// Whether the input was at fault (a CLI exits 2) rather than the run (3).
    pub fn is_input(&self) -> bool {
        self.kind != OpenErrorKind::Failed
    }

    /// A short, stable reason for metrics.
    pub fn reason(&self) -> &'static str {
        match self.kind {
            OpenErrorKind::Refused => "config",
            OpenErrorKind::NoDevice | OpenErrorKind::Failed => "setup",
        }
    }
}

impl From<SpecError> for OpenError {
    fn from(e: SpecError) -> OpenError {
        OpenError::refused(e.0)
    }
}

impl From<VerbsError> for OpenError {
    fn from(e: VerbsError) -> OpenError {
        let kind = match e.kind {
            VerbsErrorKind::Config => OpenErrorKind::Refused,
            VerbsErrorKind::NoDevice => OpenErrorKind::NoDevice,
            VerbsErrorKind::Verbs => OpenErrorKind::Failed,
        };
        OpenError {
            kind,
            message: e.message,
        }
    }
}

impl From<TransportError> for OpenError {
    fn from(e: TransportError) -> OpenError {
        match e {
            TransportError::Unsupported(m) => OpenError::refused(m),
            other => OpenError {
                kind: OpenErrorKind::Failed,
                message: other.to_string(),
            },
        }
    }
}

const LOCALHOST: IpAddr = IpAddr::V4(Ipv4Addr::LOCALHOST);

/// One-way loopback: `post` sends on one end, `poll_recv` sees the
/// arrival on the other, one clock.
pub fn loopback(spec: &ChannelSpec) -> Result<Box<dyn Channel>, OpenError> {
    spec.check()?;
    Ok(match transport::opener(spec.transport) {
        Some(t) => t.loopback(spec)?,
        None => Box::new(verbs::loopback(&VerbsConfig::new(spec)?)?),
    })
}

/// A stream in one process: the sending and the receiving end, each to
/// be driven by its own thread.
pub fn stream_pair(spec: &ChannelSpec, stream: &StreamSpec) -> Result<StreamEnds, OpenError> {
    spec.check()?;
    stream.check(spec)?;
    Ok(match transport::opener(spec.transport) {
        Some(t) => t.stream_pair(spec, stream)?,
        None => {
            let cfg = VerbsConfig::new(spec)?;
            let (a, b) = verbs::stream_pair(&cfg, stream.slots, stream.slot_size)?;
            (Box::new(a), Box::new(b))
        }
    })
}

/// A round trip in one process: the measuring end and an echo thread
/// (shm and udp only).
pub fn echo_pair(
    spec: &ChannelSpec,
    receiver: Receiver,
    clock: Clock,
    echo_cpu: Option<usize>,
) -> Result<(Box<dyn Channel>, EchoThread), OpenError> {
    spec.check()?;
    match spec.transport {
        Transport::Shm => {
            let (c, s) = ShmChannel::pair(spec.size)?;
            Ok((Box::new(c), EchoThread::spawn(s, clock, echo_cpu, receiver)))
        }
        Transport::Udp => {
            let mut c = UdpChannel::bound(LOCALHOST, spec)?;
            let mut s = UdpChannel::bound(LOCALHOST, spec)?;
            c.connect(s.local_addr()?)?;
            s.connect(c.local_addr()?)?;
            Ok((Box::new(c), EchoThread::spawn(s, clock, echo_cpu, receiver)))
        }
        t => Err(OpenError::refused(format!(
            "--round-trip with --transport {t}: an in-process echo exists for shm and udp only; for verbs run `ibprobe server` and `ibprobe client`"
        ))),
    }
}
