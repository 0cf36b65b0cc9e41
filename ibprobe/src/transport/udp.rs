//! UDP reference transport: kernel sockets, non-blocking; busy-polled, or
//! with `--poll event` asleep in poll(2) until a datagram arrives.
//!
//! Why it exists: it is the Ethernet reference the verbs numbers are
//! compared with (the kernel network stack on the same path), and the
//! transport the netem ground-truth test runs on: it needs no HCA.
//!
//! The sequence number travels in the first 8 bytes of the payload (little
//! endian), so a late or foreign datagram is recognised and loss is
//! counted by the probe. Both sockets are `connect`ed: the kernel then
//! drops datagrams from anyone else, and an ICMP port unreachable (the
//! peer's socket is gone) surfaces as ECONNREFUSED, reported as a lost peer.

use std::io::ErrorKind;
use std::net::{IpAddr, Ipv4Addr, SocketAddr, UdpSocket};

use serde_json::{json, Value};

use super::channel::{check_size, io, Channel, TransportError, TransportInfo};
use super::open::{Ask, Carry, End, EndError, Opened, Opens, Pending, StreamEnds};
use super::stream::SlotEnd;
use crate::spec::{ChannelSpec, Poll, StreamSpec};

/// Smallest message: the 8-byte sequence number.
pub const MIN_SIZE: usize = crate::spec::UDP_MIN_SIZE;
/// Largest UDP payload over IPv4.
pub const MAX_SIZE: usize = crate::spec::UDP_MAX_SIZE;

/// A UDP channel: one connected socket (round trip), or two sockets in one
/// process connected to each other (one-way loopback).
pub struct UdpChannel {
    tx: UdpSocket,
    /// `None`: receive on `tx` (round trip).
    rx: Option<UdpSocket>,
    sbuf: Vec<u8>,
    rbuf: Vec<u8>,
    size: usize,
    peer: Option<SocketAddr>,
    /// Reported only: whether the probe sleeps in `wait_recv` (`--poll event`).
    event: bool,
}

fn open(addr: SocketAddr) -> Result<UdpSocket, TransportError> {
    let s = UdpSocket::bind(addr).map_err(io("bind udp socket"))?;
    s.set_nonblocking(true)
        .map_err(io("set udp socket non-blocking"))?;
    Ok(s)
}

impl UdpChannel {
    /// One-way loopback: two sockets on `ip` (e.g. 127.0.0.1) in this
    /// process; `post` sends on the first, `poll_recv` reads the second.
    pub fn loopback(ip: IpAddr, size: usize) -> Result<UdpChannel, TransportError> {
        let mut ch = UdpChannel::bind(SocketAddr::new(ip, 0), size)?;
        let rx = open(SocketAddr::new(ip, 0))?;
        let rx_addr = rx.local_addr().map_err(io("getsockname"))?;
        rx.connect(ch.local_addr()?)
            .map_err(io("connect udp socket"))?;
        ch.connect(rx_addr)?;
        ch.rx = Some(rx);
        Ok(ch)
    }

    /// Records that the probe sleeps in poll(2) (`--poll event`), for the
    /// report; `wait_recv` is what actually sleeps.
    pub fn set_event_poll(&mut self, on: bool) {
        self.event = on;
    }

    /// A socket bound to `addr` (port 0: any), not yet connected; call
    /// [`UdpChannel::connect`] once the peer's address is known.
    pub fn bind(addr: SocketAddr, size: usize) -> Result<UdpChannel, TransportError> {
        check_size(crate::spec::Transport::Udp, size)?;
        Ok(UdpChannel {
            tx: open(addr)?,
            rx: None,
            sbuf: vec![0xA5; size], // written, so the pages are faulted in now
            rbuf: vec![0xA5; size + 1], // one more: a longer datagram is not ours
            size,
            peer: None,
            event: false,
        })
    }

    /// A socket bound to `ip` (any port) for messages of `spec.size`,
    /// polling as the spec says; connect it to its peer next.
    pub fn bound(ip: IpAddr, spec: &ChannelSpec) -> Result<UdpChannel, TransportError> {
        let mut u = UdpChannel::bind(SocketAddr::new(ip, 0), spec.size)?;
        u.set_event_poll(spec.poll == Poll::Event);
        Ok(u)
    }

    pub fn local_addr(&self) -> Result<SocketAddr, TransportError> {
        self.tx.local_addr().map_err(io("getsockname"))
    }

    /// Connects to the peer: only its datagrams are received from now on.
    pub fn connect(&mut self, peer: SocketAddr) -> Result<(), TransportError> {
        self.tx.connect(peer).map_err(io("connect udp socket"))?;
        self.peer = Some(peer);
        Ok(())
    }
}

/// This socket's address and its peer's, as the report prints them.
fn addresses(sock: &UdpSocket, peer: Option<SocketAddr>) -> (String, String) {
    let local = sock.local_addr().map(|a| a.to_string()).unwrap_or_default();
    (local, fmt_peer(peer))
}

#[derive(Clone, Copy)]
enum Way {
    Send,
    Recv,
}

/// A send or receive that failed for good (not "try again"): the peer
/// gone, or an I/O error.
#[cold]
fn failed(way: Way, e: std::io::Error, peer: Option<SocketAddr>) -> TransportError {
    let (what, towards, why) = match way {
        Way::Send => ("udp send", "send to", "nothing listens there any more"),
        Way::Recv => ("udp recv", "receive from", "the peer's socket is gone"),
    };
    if matches!(
        e.kind(),
        ErrorKind::ConnectionRefused | ErrorKind::ConnectionReset
    ) {
        TransportError::PeerLost(format!("udp {towards} {}: {e} ({why})", fmt_peer(peer)))
    } else {
        TransportError::Io { what, source: e }
    }
}

impl Channel for UdpChannel {
    #[inline]
    fn post(&mut self, seq: u64) -> Result<(), TransportError> {
        self.sbuf[..8].copy_from_slice(&seq.to_le_bytes());
        match self.tx.send(&self.sbuf) {
            Ok(_) => Ok(()),
            // The socket buffer is full: the datagram is dropped, as the
            // network would; the probe counts it lost.
            Err(e) if e.kind() == ErrorKind::WouldBlock => Ok(()),
            Err(e) => Err(failed(Way::Send, e, self.peer)),
        }
    }

    #[inline]
    fn poll_recv(&mut self) -> Result<Option<u64>, TransportError> {
        let sock = self.rx.as_ref().unwrap_or(&self.tx);
        loop {
            match sock.recv(&mut self.rbuf) {
                // A datagram of another size is not ours: skip it.
                Ok(n) if n != self.size => continue,
                Ok(_) => {
                    let mut b = [0u8; 8];
                    b.copy_from_slice(&self.rbuf[..8]);
                    return Ok(Some(u64::from_le_bytes(b)));
                }
                Err(e) if e.kind() == ErrorKind::WouldBlock => return Ok(None),
                Err(e) if e.kind() == ErrorKind::Interrupted => continue,
                Err(e) => return Err(failed(Way::Recv, e, self.peer)),
            }
        }
    }

    /// Event polling: sleeps in poll(2) until the socket is readable, then
    /// reads. The hot loop calls this only with `--poll event`.
    fn wait_recv(
        &mut self,
        clock: &crate::clock::Clock,
        timeout_ns: u64,
    ) -> Result<Option<u64>, TransportError> {
        super::channel::wait_recv_with(self, clock, timeout_ns, |me, left_ns| {
            let left_ms = left_ns.div_ceil(1_000_000).min(i32::MAX as u64) as i32;
            let sock = me.rx.as_ref().unwrap_or(&me.tx);
            crate::sys::host::wait_readable(sock, left_ms).map_err(io("poll udp socket"))?;
            Ok(true)
        })
    }

    fn info(&self) -> TransportInfo {
        let (local, peer) = addresses(&self.tx, self.peer);
        let (poll, how) = match self.event {
            true => ("event", "event poll (poll(2))"),
            false => ("busy", "busy poll"),
        };
        TransportInfo {
            name: "udp".into(),
            detail: format!(
                "kernel UDP, {how}, {local} -> {peer}, message {} B",
                self.size
            ),
            facts: vec![
                ("local".into(), local),
                ("peer".into(), peer),
                ("poll".into(), poll.into()),
            ],
        }
    }
}

/// One end of a UDP stream (a [`SlotEnd`]): a connected non-blocking
/// socket; a slot is one datagram. UDP may drop a datagram (a full socket
/// buffer on either side): the stream counts it lost. Aligned to 128 B
/// (two ends of a loopback pair must not share a cache line, see
/// [`super::shm::ShmSlots`]).
#[repr(align(128))]
pub struct UdpSlots {
    sock: UdpSocket,
    slot_size: usize,
    peer: Option<SocketAddr>,
}

/// Socket buffers of a stream end: room for a full window of slots.
const STREAM_SOCKBUF: usize = 4 << 20;

impl UdpSlots {
    /// A socket bound to `addr` (port 0: any) for slots of `slot_size`
    /// bytes; connect it to its peer next.
    pub fn bind(addr: SocketAddr, slot_size: usize) -> Result<UdpSlots, TransportError> {
        let sock = open(addr)?;
        // Best effort: the kernel caps these at net.core.{r,w}mem_max.
        let _ = crate::sys::host::set_socket_buffers(&sock, STREAM_SOCKBUF);
        Ok(UdpSlots {
            sock,
            slot_size,
            peer: None,
        })
    }

    /// Both ends on `ip` in this process, connected to each other.
    pub fn pair(ip: IpAddr, slot_size: usize) -> Result<(UdpSlots, UdpSlots), TransportError> {
        let mut a = UdpSlots::bind(SocketAddr::new(ip, 0), slot_size)?;
        let mut b = UdpSlots::bind(SocketAddr::new(ip, 0), slot_size)?;
        let (aa, ba) = (a.local_addr()?, b.local_addr()?);
        a.connect(ba)?;
        b.connect(aa)?;
        Ok((a, b))
    }

    pub fn local_addr(&self) -> Result<SocketAddr, TransportError> {
        self.sock.local_addr().map_err(io("getsockname"))
    }

    pub fn connect(&mut self, peer: SocketAddr) -> Result<(), TransportError> {
        self.sock.connect(peer).map_err(io("connect udp socket"))?;
        self.peer = Some(peer);
        Ok(())
    }
}

impl SlotEnd for UdpSlots {
    fn slot_size(&self) -> usize {
        self.slot_size
    }

    #[inline]
    fn send(&mut self, bytes: &[u8]) -> Result<bool, TransportError> {
        match self.sock.send(bytes) {
            Ok(_) => Ok(true),
            Err(e) if e.kind() == ErrorKind::WouldBlock => Ok(false),
            Err(e) if e.kind() == ErrorKind::Interrupted => Ok(false),
            Err(e) => Err(failed(Way::Send, e, self.peer)),
        }
    }

    #[inline]
    fn recv(&mut self, into: &mut [u8]) -> Result<Option<usize>, TransportError> {
        loop {
            match self.sock.recv(into) {
                Ok(n) => return Ok(Some(n)),
                Err(e) if e.kind() == ErrorKind::WouldBlock => return Ok(None),
                Err(e) if e.kind() == ErrorKind::Interrupted => continue,
                Err(e) => return Err(failed(Way::Recv, e, self.peer)),
            }
        }
    }

    fn lossy(&self) -> bool {
        true
    }

    fn info(&self) -> TransportInfo {
        let (local, peer) = addresses(&self.sock, self.peer);
        TransportInfo {
            name: "udp".into(),
            detail: format!(
                "kernel UDP stream, busy poll, {local} -> {peer}, one datagram per slot of up to {} B",
                self.slot_size
            ),
            facts: vec![("local".into(), local), ("peer".into(), peer)],
        }
    }
}

fn fmt_peer(p: Option<SocketAddr>) -> String {
    p.map(|a| a.to_string())
        .unwrap_or_else(|| "(not connected)".into())
}

/// How UDP opens: both ends on the loopback address in one process, or a
/// socket per host whose ports the handshake exchanges.
pub struct Opener;

const LOCALHOST: IpAddr = IpAddr::V4(Ipv4Addr::LOCALHOST);

impl Opens for Opener {
    fn loopback(&self, spec: &ChannelSpec) -> Opened<Box<dyn Channel>> {
        let mut u = UdpChannel::loopback(LOCALHOST, spec.size)?;
        u.set_event_poll(spec.poll == Poll::Event);
        Ok(Box::new(u))
    }

    fn stream_pair(&self, _: &ChannelSpec, st: &StreamSpec) -> Opened<StreamEnds> {
        let (a, b) = UdpSlots::pair(LOCALHOST, st.slot_size)?;
        Ok((Box::new(a), Box::new(b)))
    }

    fn client<'a>(&self, ask: Ask<'a>) -> Result<(Pending<'a>, Value), EndError> {
        client(ask, Socket::into_end)
    }

    fn server(&self, ask: Ask, theirs: &Value) -> Result<(End, Value), EndError> {
        server(ask, theirs, Socket::into_end)
    }
}

/// A session's UDP socket, for what it carries: the end the handshake
/// binds, tells the peer about and connects (the model transport rides
/// on it too).
pub enum Socket {
    Messages(UdpChannel),
    Slots(UdpSlots),
}

impl Socket {
    fn bind(ask: Ask) -> Result<Socket, TransportError> {
        let ip = ask.local;
        Ok(match ask.carry {
            Carry::Messages => Socket::Messages(UdpChannel::bound(ip, ask.spec)?),
            Carry::Slots(s) => Socket::Slots(UdpSlots::bind(SocketAddr::new(ip, 0), s.slot_size)?),
        })
    }

    /// The endpoint to send the peer: the port this socket receives on.
    fn endpoint(&self) -> Result<Value, TransportError> {
        let port = match self {
            Socket::Messages(u) => u.local_addr()?,
            Socket::Slots(u) => u.local_addr()?,
        }
        .port();
        Ok(json!({ "port": port }))
    }

    /// Connects to the peer's `ip` at the port its `endpoint` names.
    fn connect(&mut self, ip: IpAddr, port: u16) -> Result<(), TransportError> {
        let peer = SocketAddr::new(ip, port);
        match self {
            Socket::Messages(u) => u.connect(peer),
            Socket::Slots(u) => u.connect(peer),
        }
    }

    pub fn into_end(self) -> End {
        match self {
            Socket::Messages(u) => End::Messages(Box::new(u)),
            Socket::Slots(u) => End::Slots(Box::new(u)),
        }
    }
}

fn port_of(endpoint: &Value) -> Result<u16, EndError> {
    endpoint
        .get("port")
        .and_then(|p| p.as_u64())
        .and_then(|p| u16::try_from(p).ok())
        .ok_or(EndError::Malformed("udp"))
}

/// The client's UDP end: bound before the Hello (which carries its port),
/// connected to the server's port, made into the session's end by `end`.
pub fn client<'a>(
    ask: Ask,
    end: impl FnOnce(Socket) -> End + 'a,
) -> Result<(Pending<'a>, Value), EndError> {
    let mut socket = Socket::bind(ask)?;
    let ours = socket.endpoint()?;
    let finish = move |theirs: &Value| {
        socket.connect(ask.peer, port_of(theirs)?)?;
        Ok(end(socket))
    };
    Ok((Box::new(finish), ours))
}

/// The server's UDP end for the client's port: bound (or refused),
/// connected, made into the session's end by `end`, with its own port.
pub fn server(
    ask: Ask,
    theirs: &Value,
    end: impl FnOnce(Socket) -> End,
) -> Result<(End, Value), EndError> {
    let port = port_of(theirs)?;
    let mut socket = Socket::bind(ask).map_err(|e| EndError::Refused(e.to_string()))?;
    socket.connect(ask.peer, port)?;
    let ours = socket.endpoint()?;
    Ok((end(socket), ours))
}
