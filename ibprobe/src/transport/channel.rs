//! The [`Channel`] trait, its error and its report facts: what every
//! transport implements and the measurement loops drive.
//!
//! A [`Channel`] is one side's view of a connected pair of endpoints:
//! - in one-way loopback (one process, one clock) it owns both ends: `post`
//!   sends on one, `poll_recv` sees the arrival on the other;
//! - in a round trip it is the local end of a connection to a peer: the
//!   client posts and waits for the echo, the server echoes what arrives.

use serde::Serialize;

/// Why a transport call failed.
#[derive(Debug, thiserror::Error)]
pub enum TransportError {
    /// The OS or the verbs library refused; `what` names the call.
    #[error("{what}: {source}")]
    Io {
        what: &'static str,
        source: std::io::Error,
    },
    /// A completion came back with an error status.
    #[error("completion error: {0}")]
    Completion(String),
    /// The peer went away or stopped answering.
    #[error("peer lost: {0}")]
    PeerLost(String),
    /// The configuration asks for something this transport or device cannot do.
    #[error("{0}")]
    Unsupported(String),
}

/// A failed OS call `what`, as a [`TransportError`] (for `map_err`).
pub(crate) fn io(what: &'static str) -> impl FnOnce(std::io::Error) -> TransportError {
    move |source| TransportError::Io { what, source }
}

/// Refuses a message size transport `t` cannot carry.
pub(super) fn check_size(t: crate::spec::Transport, size: usize) -> Result<(), TransportError> {
    t.check_size(crate::spec::Op::Send, size)
        .map_err(|e| TransportError::Unsupported(e.0))
}

/// Facts about a transport instance, printed in the report.
#[derive(Clone, Debug, Default, Serialize)]
pub struct TransportInfo {
    /// "shm", "udp", "verbs".
    pub name: String,
    /// One line for humans, e.g. "rxe0 port 1 gid 1 (RoCE v2, ::ffff:10.77.0.1), RC send, inline 32".
    pub detail: String,
    /// Key/value facts for JSON (device, qp type, op, inline, signal period, mtu, ...).
    pub facts: Vec<(String, String)>,
}

/// One side of a latency measurement. Implementations must not allocate,
/// lock or make syscalls in `post`, `poll_recv` and `poll_send_done`
/// beyond the transport's own data path (the hot loop calls them).
pub trait Channel {
    /// Posts message number `seq` (the payload size was fixed at setup).
    fn post(&mut self, seq: u64) -> Result<(), TransportError>;

    /// Looks once for an arrived message; returns its sequence number.
    /// Re-arms the receive side (e.g. re-posts the receive buffer).
    fn poll_recv(&mut self) -> Result<Option<u64>, TransportError>;

    /// Looks once for a send completion; returns the sequence number of the
    /// completed (signaled) send. Transports without send completions
    /// return `Ok(None)` and answer false to [`Channel::has_send_completions`].
    fn poll_send_done(&mut self) -> Result<Option<u64>, TransportError> {
        Ok(None)
    }

    /// Whether `poll_send_done` ever yields (verbs: signaled sends).
    fn has_send_completions(&self) -> bool {
        false
    }

    /// Whether message `seq`'s send will be signaled (only those complete).
    fn is_signaled(&self, _seq: u64) -> bool {
        false
    }

    /// Blocks until a message arrives or `timeout_ns` passes (event
    /// polling). The default spins on `poll_recv`; the clock is only for
    /// the timeout.
    fn wait_recv(
        &mut self,
        clock: &crate::clock::Clock,
        timeout_ns: u64,
    ) -> Result<Option<u64>, TransportError> {
        wait_recv_with(self, clock, timeout_ns, |_, _| Ok(true))
    }

    /// The word of the send buffer a stamping thread keeps rewriting with
    /// the clock (`--stamp-thread`, the thesis's t_send split), after which
    /// every message is sent from that one buffer. Only where an HCA reads
    /// the buffer after the post: verbs without inline data. Others refuse
    /// with one line saying why.
    fn stamp_target(&mut self) -> Result<crate::sys::verbs::StampWord, TransportError> {
        Err(TransportError::Unsupported(STAMP_NEEDS_HCA.into()))
    }

    /// The stamp the last arrival carried: the value the stamping thread
    /// had written when the HCA read the buffer (call right after
    /// `poll_recv` returned the message).
    fn arrived_stamp(&self) -> u64 {
        0
    }

    /// `--hw-timestamps`: the HCA timestamp (raw ticks of [`Channel::hw_clock`])
    /// of the last arrival's receive completion (call right after
    /// `poll_recv` returned it); None where completions carry none.
    fn hw_recv_ts(&self) -> Option<u64> {
        None
    }

    /// The HCA timestamp of the send completion `poll_send_done` returned
    /// last; None where completions carry none.
    fn hw_send_ts(&self) -> Option<u64> {
        None
    }

    /// The clock those timestamps count (verbs with `--hw-timestamps`).
    fn hw_clock(&self) -> Option<crate::clock::hca::HcaClock> {
        None
    }

    /// That clock now, raw ticks (a system call: cold code only, for
    /// calibration pairs); None where it cannot be read.
    fn hw_clock_now(&self) -> Option<u64> {
        None
    }

    fn info(&self) -> TransportInfo;
}

/// The shape of every [`Channel::wait_recv`]: poll; when nothing arrived
/// and time is left, `block(ch, ns_left)` waits for the transport to have
/// something (poll(2) on a socket, a verbs completion channel; returning
/// at once spins). `block` answering `false` means nothing will come in
/// the time left: one last poll decides.
pub fn wait_recv_with<C: Channel + ?Sized>(
    ch: &mut C,
    clock: &crate::clock::Clock,
    timeout_ns: u64,
    mut block: impl FnMut(&mut C, u64) -> Result<bool, TransportError>,
) -> Result<Option<u64>, TransportError> {
    let t0 = clock.now();
    loop {
        if let Some(s) = ch.poll_recv()? {
            return Ok(Some(s));
        }
        let spent = clock.ticks_to_ns(clock.now().wrapping_sub(t0));
        if spent > timeout_ns {
            return Ok(None);
        }
        if !block(ch, timeout_ns - spent)? {
            return ch.poll_recv();
        }
    }
}

/// Why a transport without an HCA has no `--stamp-thread` (a
/// [`Channel`]'s and a stream end's refusal).
pub const STAMP_NEEDS_HCA: &str =
    "--stamp-thread needs an HCA that reads the send buffer after the post: use --transport rc|uc|ud with --inline off";
