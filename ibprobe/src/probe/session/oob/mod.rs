//! The out-of-band TCP connection between client and server: a versioned
//! handshake before the run, a closing message after it. Unlike
//! perftest's, every read and connect has a timeout and a version
//! mismatch is one clear error.
//!
//! Frame: `b"IBPROBE\0"`, protocol version (u32, big endian), body length
//! (u32, big endian, at most [`MAX_BODY`]), body (JSON): [`Hello`], then
//! [`Reply`], then after the run [`Done`]. Transport endpoints travel as
//! opaque JSON, so a transport adds fields without changing this protocol.
//!
//! With a mesh secret (`probe/session/auth.rs`) the Hello carries the
//! client's nonce in `params.auth`, the server answers
//! [`Reply::Challenge`], the client [`Proof`], and only then does the
//! server act on the Hello.

use std::io::{ErrorKind, Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream, ToSocketAddrs};
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use serde::de::DeserializeOwned;
use serde::Serialize;

use super::auth::{Role, Secret};
mod wire;
pub use wire::*;

/// How often a read under a deadline looks at the stop flag.
const STOP_POLL: Duration = Duration::from_millis(50);

pub struct Oob {
    stream: TcpStream,
    peer: SocketAddr,
    timeout: Duration,
    secret: Option<Secret>,
    /// Reads end by then ([`Oob::start_deadline`]), with its allowance.
    deadline: Option<(Instant, Duration)>,
    /// Reads under a deadline end when this is set.
    stop: Option<&'static AtomicBool>,
}

/// What [`Oob::poll_closing`] saw.
#[derive(Debug)]
pub enum Closing {
    Open,
    Done(Done),
    Gone(OobError),
}

/// A socket error of `what` with `peer`.
fn io(peer: impl ToString, what: &'static str) -> impl FnOnce(std::io::Error) -> OobError {
    move |source| OobError::Io {
        peer: peer.to_string(),
        what,
        source,
    }
}

impl Oob {
    /// Connects to `addr` ("HOST" or "HOST:PORT"), trying each resolved
    /// address; `timeout` for the connect and every later read and write.
    pub fn connect(addr: &str, default_port: u16, timeout: Duration) -> Result<Oob, OobError> {
        let with_port = if addr.parse::<SocketAddr>().is_ok() {
            addr.to_string()
        } else if let Ok(ip) = addr.parse::<std::net::IpAddr>() {
            SocketAddr::new(ip, default_port).to_string()
        } else if addr.matches(':').count() == 1 {
            addr.to_string()
        } else {
            format!("{addr}:{default_port}")
        };
        let addrs = with_port.to_socket_addrs().map_err(|e| OobError::Resolve {
            addr: addr.into(),
            detail: e.to_string(),
        })?;
        let mut last = std::io::Error::new(ErrorKind::NotFound, "no address");
        for a in addrs {
            match TcpStream::connect_timeout(&a, timeout) {
                Ok(s) => return Oob::from_stream(s, timeout),
                Err(e) => last = e,
            }
        }
        let (addr, source) = (with_port, last);
        Err(OobError::Connect { addr, source })
    }

    pub fn accept(listener: &TcpListener, timeout: Duration) -> Result<Oob, OobError> {
        let (s, _) = listener.accept().map_err(io("listener", "accept"))?;
        Oob::from_stream(s, timeout)
    }

    /// No Nagle, `timeout` on every read and write.
    pub fn from_stream(stream: TcpStream, timeout: Duration) -> Result<Oob, OobError> {
        let peer = stream.peer_addr().map_err(io("?", "getpeername"))?;
        let set = |r: std::io::Result<()>| r.map_err(io(peer, "set socket options"));
        set(stream.set_nodelay(true))?;
        set(stream.set_read_timeout(Some(timeout)))?;
        set(stream.set_write_timeout(Some(timeout)))?;
        Ok(Oob {
            stream,
            peer,
            timeout,
            secret: None,
            deadline: None,
            stop: None,
        })
    }

    /// Requires the mesh secret on this connection (None: no secret).
    pub fn with_secret(mut self, secret: Option<Secret>) -> Oob {
        self.secret = secret;
        self
    }

    /// Reads under a deadline also end, within 50 ms, when `stop` is set.
    pub fn watch_stop(mut self, stop: &'static AtomicBool) -> Oob {
        self.stop = Some(stop);
        self
    }

    /// Until [`Oob::end_deadline`], reads end within `total` in all (a peer
    /// trickling bytes is cut off as a silent one is).
    pub fn start_deadline(&mut self, total: Duration) {
        self.deadline = Some((Instant::now() + total, total));
    }

    pub fn end_deadline(&mut self) {
        self.deadline = None;
        let _ = self.stream.set_read_timeout(Some(self.timeout));
    }

    /// The peer's address (its IP is where the transport connects).
    pub fn peer_addr(&self) -> SocketAddr {
        self.peer
    }

    /// Our address on this connection (the transport binds the same IP).
    pub fn local_addr(&self) -> Result<SocketAddr, OobError> {
        self.stream
            .local_addr()
            .map_err(io(self.peer, "getsockname"))
    }

    pub fn send<T: Serialize>(&mut self, msg: &T) -> Result<(), OobError> {
        let body = serde_json::to_vec(msg).expect("protocol messages serialize");
        let mut frame = Vec::with_capacity(16 + body.len());
        frame.extend_from_slice(&MAGIC);
        frame.extend_from_slice(&PROTOCOL_VERSION.to_be_bytes());
        frame.extend_from_slice(&(body.len() as u32).to_be_bytes());
        frame.extend_from_slice(&body);
        self.stream
            .write_all(&frame)
            .map_err(|e| self.io_err(e, "sending"))
    }

    /// `what` names the frame in errors.
    pub fn recv<T: DeserializeOwned>(&mut self, what: &'static str) -> Result<T, OobError> {
        let mut head = [0u8; 16];
        self.read_exact(&mut head, what)?;
        let peer = self.peer.to_string();
        if head[..8] != MAGIC {
            return Err(OobError::BadMagic { peer });
        }
        let theirs = u32::from_be_bytes(head[8..12].try_into().expect("4 bytes"));
        if theirs != PROTOCOL_VERSION {
            return Err(OobError::Version {
                peer,
                ours: PROTOCOL_VERSION,
                theirs,
            });
        }
        let len = u32::from_be_bytes(head[12..16].try_into().expect("4 bytes"));
        if len > MAX_BODY {
            return Err(OobError::Malformed {
                peer,
                what,
                detail: format!("body of {len} bytes (limit {MAX_BODY})"),
            });
        }
        let mut body = vec![0u8; len as usize];
        self.read_exact(&mut body, what)?;
        serde_json::from_slice(&body).map_err(|e| OobError::Malformed {
            peer,
            what,
            detail: e.to_string(),
        })
    }

    fn read_exact(&mut self, buf: &mut [u8], what: &'static str) -> Result<(), OobError> {
        let Some((deadline, total)) = self.deadline else {
            return self
                .stream
                .read_exact(buf)
                .map_err(|e| self.io_err(e, what));
        };
        let peer = || self.peer.to_string();
        let mut filled = 0;
        while filled < buf.len() {
            if self.stop.is_some_and(|s| s.load(Ordering::Relaxed)) {
                return Err(OobError::Interrupted { peer: peer(), what });
            }
            let left = deadline.saturating_duration_since(Instant::now());
            if left.is_zero() {
                return Err(OobError::Deadline {
                    peer: peer(),
                    what,
                    secs: total.as_secs_f64(),
                });
            }
            // A zero timeout means none to set_read_timeout: at least 1 ms.
            let slice = left.min(STOP_POLL).max(Duration::from_millis(1));
            self.stream
                .set_read_timeout(Some(slice))
                .map_err(|e| self.io_err(e, what))?;
            match self.stream.read(&mut buf[filled..]) {
                Ok(0) => return Err(OobError::Closed { peer: peer(), what }),
                Ok(n) => filled += n,
                Err(e)
                    if matches!(
                        e.kind(),
                        ErrorKind::WouldBlock | ErrorKind::TimedOut | ErrorKind::Interrupted
                    ) => {}
                Err(e) => return Err(self.io_err(e, what)),
            }
        }
        Ok(())
    }

    fn io_err(&self, e: std::io::Error, what: &'static str) -> OobError {
        let peer = self.peer.to_string();
        match e.kind() {
            ErrorKind::WouldBlock | ErrorKind::TimedOut => OobError::Timeout {
                peer,
                what,
                secs: self.timeout.as_secs().max(1),
            },
            ErrorKind::UnexpectedEof | ErrorKind::ConnectionReset | ErrorKind::BrokenPipe => {
                OobError::Closed { peer, what }
            }
            _ => io(peer, what)(e),
        }
    }

    /// Looks, without blocking, whether the client closed the session (a
    /// syscall: for the server's idle checks, never the fast path).
    pub fn poll_closing(&mut self) -> Closing {
        let mut b = [0u8; 1];
        if let Err(e) = self.stream.set_nonblocking(true) {
            return Closing::Gone(self.io_err(e, "waiting for the end of the run"));
        }
        let peeked = self.stream.peek(&mut b);
        let _ = self.stream.set_nonblocking(false);
        match peeked {
            Ok(0) => Closing::Gone(OobError::Closed {
                peer: self.peer.to_string(),
                what: "the run was going on (no Done)",
            }),
            Ok(_) => match self.recv::<Done>("waiting for the end-of-run message") {
                Ok(d) => Closing::Done(d),
                Err(e) => Closing::Gone(e),
            },
            Err(e) if e.kind() == ErrorKind::WouldBlock => Closing::Open,
            Err(e) => Closing::Gone(self.io_err(e, "the run was going on")),
        }
    }

    /// Client side: sends `hello`, returns the server's endpoint. With a
    /// secret, the server must prove it holds it before its Welcome counts.
    pub fn handshake(&mut self, hello: &Hello) -> Result<serde_json::Value, OobError> {
        let client_nonce = self.secret.as_ref().map(|_| Secret::nonce()).transpose();
        let client_nonce = client_nonce.map_err(OobError::Auth)?;
        match &client_nonce {
            None => self.send(hello)?,
            Some(n) => {
                let mut h = hello.clone();
                if !h.params.is_object() {
                    h.params = serde_json::json!({});
                }
                h.params["auth"] = serde_json::json!({ "nonce": n });
                self.send(&h)?
            }
        }
        let mut proved = false;
        loop {
            match self.recv::<Reply>("waiting for the server's reply")? {
                Reply::Welcome { endpoint } if proved || self.secret.is_none() => {
                    return Ok(endpoint)
                }
                Reply::Welcome { .. } => {
                    return Err(OobError::Auth(format!(
                        "{} did not prove it holds the mesh secret (does it run without --secret-file?); refusing to probe it",
                        self.peer
                    )))
                }
                Reply::Refuse { reason } => return Err(OobError::Refused(reason)),
                Reply::Challenge { nonce, proof } => {
                    let (Some(secret), Some(cn)) = (&self.secret, &client_nonce) else {
                        return Err(OobError::Auth(format!(
                            "{} asks for the mesh secret; pass --secret-file with the mesh's key file",
                            self.peer
                        )));
                    };
                    if proved || !secret.verify(Role::Server, cn, &nonce, &proof) {
                        return Err(OobError::Auth(format!(
                            "{} holds a different mesh secret; give both ends the same key file",
                            self.peer
                        )));
                    }
                    let mine = secret.proof(Role::Client, cn, &nonce);
                    self.send(&Proof { proof: mine })?;
                    proved = true;
                }
            }
        }
    }

    /// Server side: reads the client's [`Hello`] (its nonce taken out of
    /// its params). A client of another version, or without the secret,
    /// is told why before the error is returned.
    pub fn read_hello(&mut self) -> Result<Hello, OobError> {
        let mut hello = match self.recv::<Hello>("waiting for the client's hello") {
            Err(OobError::Version { peer, ours, theirs }) => {
                let reason = format!("server speaks ibprobe protocol v{ours}, client v{theirs}; run the same ibprobe version on both ends");
                let _ = self.send(&Reply::Refuse { reason });
                return Err(OobError::Version { peer, ours, theirs });
            }
            other => other?,
        };
        let client_nonce = hello
            .params
            .as_object_mut()
            .and_then(|m| m.remove("auth"))
            .and_then(|a| a.get("nonce").and_then(|n| n.as_str()).map(str::to_string));
        let Some(secret) = self.secret.clone() else {
            return Ok(hello);
        };
        let refuse = |oob: &mut Oob, told: &str, why: &str| {
            let _ = oob.send(&Reply::Refuse {
                reason: told.to_string(),
            });
            Err(OobError::Auth(format!("client {}: {why}", oob.peer)))
        };
        let Some(cn) = client_nonce.filter(|n| !n.is_empty() && n.len() <= 64) else {
            return refuse(
                self,
                "this server requires the mesh secret; pass --secret-file with the mesh's key file",
                "sent no proof of the mesh secret",
            );
        };
        let sn = Secret::nonce().map_err(OobError::Auth)?;
        let proof = secret.proof(Role::Server, &cn, &sn);
        self.send(&Reply::Challenge {
            nonce: sn.clone(),
            proof,
        })?;
        // A client that gives up here found our proof wrong: a different
        // secret, counted as such.
        let theirs = self
            .recv::<Proof>("waiting for the client's proof of the mesh secret")
            .map_err(|e| OobError::Auth(format!("client {}: no proof ({e})", self.peer)))?;
        if !secret.verify(Role::Client, &cn, &sn, &theirs.proof) {
            return refuse(
                self,
                "wrong mesh secret; give both ends the same key file",
                "proved a different mesh secret",
            );
        }
        Ok(hello)
    }
}

#[cfg(test)]
mod tests;
