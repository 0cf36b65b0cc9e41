//! Round-trip sessions as a library: a client that connects to a
//! responder and runs rounds on one connection, and a responder that
//! serves one client, any transport it asks for.
//!
//! Why it exists: ibexporter forms a mesh (every exporter probes its
//! peers and answers their probes) without running `ibprobe server`
//! processes, so both ends must be callable from a daemon: no printing,
//! no process exit codes, every failure a value. The wire protocol is the
//! CLI's (`probe/oob.rs`): `ibprobe client` can probe an exporter's
//! responder, and an exporter can probe `ibprobe server --transport udp`.
//!
//! The client's [`Hello`] carries, beside the probe parameters, the
//! verbs knobs the responder must mirror (`op`, `poll`) as strings, so a
//! responder needs no per-transport configuration: it answers udp, rc, uc
//! and ud on its first active HCA port (or the device it was given).

use std::net::SocketAddr;
use std::sync::atomic::AtomicBool;
use std::time::Duration;

use clap::Parser;
use serde_json::json;

use super::config::{Mode, ProbeConfig};
use super::oob::{Closing, Done, Hello, Oob, Reply};
use super::outcome::Outcome;
use super::runner::{self, RunError};
use super::workload::EchoEnd;
use crate::clock::Clock;
use crate::transport::udp::UdpChannel;
use crate::transport::Channel;
use crate::verbs::args::VerbsArgs;
use crate::verbs::{self, QpType, VerbsConfig};

/// Why a session could not start or ended badly, as one line.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[error("{reason}: {detail}")]
pub struct SessionError {
    /// Short, stable reason for metrics: `connect`, `refused`, `setup`,
    /// `protocol`, `peer_lost`.
    pub reason: &'static str,
    /// What happened, with which peer, and what to do.
    pub detail: String,
}

fn err(reason: &'static str, detail: impl std::fmt::Display) -> SessionError {
    SessionError {
        reason,
        detail: detail.to_string(),
    }
}

/// How a client session probes.
#[derive(Clone, Debug)]
pub struct ClientOptions {
    /// "udp", "rc", "uc" or "ud".
    pub transport: String,
    /// Verbs operation: "send", "send-imm", "write-imm", "write".
    pub op: String,
    /// Message size in bytes.
    pub size: usize,
    /// Local verbs device (None: the first with an active port).
    pub dev: Option<String>,
    /// Sleep for completions (both ends).
    pub event_poll: bool,
    /// Connect and handshake timeout.
    pub timeout: Duration,
}

/// The verbs knobs, parsed by the CLI's own option parser so both ends
/// accept exactly what `ibprobe` does.
#[derive(Parser)]
struct VerbsOnly {
    #[command(flatten)]
    verbs: VerbsArgs,
}

/// A verbs configuration from the string knobs a [`Hello`] carries.
pub fn verbs_config(
    transport: &str,
    op: &str,
    dev: Option<&str>,
    port: Option<u8>,
    size: usize,
    event_poll: bool,
) -> Result<VerbsConfig, SessionError> {
    let qp = QpType::parse(transport).ok_or_else(|| {
        err(
            "setup",
            format!("transport {transport:?} is not rc, uc or ud"),
        )
    })?;
    let mut argv = vec![
        "verbs",
        "--op",
        op,
        "--poll",
        if event_poll { "event" } else { "busy" },
    ];
    if let Some(d) = dev {
        argv.extend(["--dev", d]);
    }
    let port = port.map(|p| p.to_string());
    if let Some(p) = &port {
        argv.extend(["--port", p]);
    }
    let a = VerbsOnly::try_parse_from(argv)
        .map_err(|e| err("setup", e.to_string().trim().to_string()))?
        .verbs;
    let size = u32::try_from(size).map_err(|_| err("setup", format!("size {size} too large")))?;
    VerbsConfig::from_args(&a, qp, size).map_err(|e| err("setup", e.message))
}

/// The client end: one connection to a responder, any number of rounds.
pub struct ClientSession {
    oob: Oob,
    ch: Box<dyn Channel>,
    sent: u64,
}

impl ClientSession {
    /// Connects to `addr`, agrees on the transport and builds the channel.
    pub fn connect(addr: SocketAddr, o: &ClientOptions) -> Result<ClientSession, SessionError> {
        let mut oob = Oob::connect(&addr.to_string(), addr.port(), o.timeout)
            .map_err(|e| err("connect", e))?;
        let local_ip = oob.local_addr().map_err(|e| err("connect", e))?.ip();
        let params = json!({ "op": o.op, "poll": if o.event_poll { "event" } else { "busy" } });
        let hello = |endpoint| Hello {
            transport: o.transport.clone(),
            size: o.size,
            params: params.clone(),
            endpoint,
        };
        let handshake = |oob: &mut Oob, h: &Hello| {
            oob.handshake(h).map_err(|e| match e {
                super::oob::OobError::Refused(_) => err("refused", e),
                e => err("protocol", e),
            })
        };
        let ch: Box<dyn Channel> = if o.transport == "udp" {
            let mut u = UdpChannel::bind(SocketAddr::new(local_ip, 0), o.size)
                .map_err(|e| err("setup", e))?;
            u.set_event_poll(o.event_poll);
            let port = u.local_addr().map_err(|e| err("setup", e))?.port();
            let ep = handshake(&mut oob, &hello(json!({ "port": port })))?;
            let sport = ep
                .get("port")
                .and_then(|p| p.as_u64())
                .and_then(|p| u16::try_from(p).ok())
                .ok_or_else(|| err("protocol", format!("malformed udp endpoint {ep}")))?;
            u.connect(SocketAddr::new(addr.ip(), sport))
                .map_err(|e| err("setup", e))?;
            Box::new(u)
        } else {
            let vcfg = verbs_config(
                &o.transport,
                &o.op,
                o.dev.as_deref(),
                None,
                o.size,
                o.event_poll,
            )?;
            let (prepared, ep) = verbs::prepare(&vcfg).map_err(|e| err("setup", e.message))?;
            let theirs = handshake(
                &mut oob,
                &hello(serde_json::to_value(&ep).unwrap_or_default()),
            )?;
            let theirs: verbs::Endpoint = serde_json::from_value(theirs)
                .map_err(|e| err("protocol", format!("malformed verbs endpoint: {e}")))?;
            Box::new(
                prepared
                    .connect(&theirs)
                    .map_err(|e| err("setup", e.message))?,
            )
        };
        Ok(ClientSession { oob, ch, sent: 0 })
    }

    /// Runs one round (`cfg.mode` is forced to a round trip).
    pub fn round(
        &mut self,
        cfg: &ProbeConfig,
        clock: &Clock,
        stop: &AtomicBool,
    ) -> Result<Outcome, RunError> {
        let cfg = ProbeConfig {
            mode: Mode::RoundTrip,
            ..cfg.clone()
        };
        let r = runner::run(&cfg, self.ch.as_mut(), clock, stop, None);
        let o = match &r {
            Ok(o) => o,
            Err(e) => &e.outcome,
        };
        self.sent += o.sent + o.warmup_count;
        r
    }

    /// Tells the responder the session is over.
    pub fn finish(mut self) {
        let _ = self.oob.send(&Done {
            sent: self.sent,
            interrupted: false,
        });
    }
}

/// What a responder serves.
#[derive(Clone, Debug, Default)]
pub struct ResponderOptions {
    /// Verbs device to answer on (None: the first with an active port).
    pub dev: Option<String>,
    /// How long a client may take to say hello.
    pub handshake_timeout: Duration,
}

/// Tells the client why it is refused; the responder's error for the same.
fn refuse(oob: &mut Oob, reason: String) -> SessionError {
    let peer = oob.peer_addr();
    let _ = oob.send(&Reply::Refuse {
        reason: reason.clone(),
    });
    err("refused", format!("client {peer}: {reason}"))
}

/// Serves one client on `oob` until it says Done, vanishes or `stop` is
/// set; returns the messages echoed. Refusals are sent to the client too.
pub fn respond(mut oob: Oob, o: &ResponderOptions, stop: &AtomicBool) -> Result<u64, SessionError> {
    let peer = oob.peer_addr();
    let hello = oob.read_hello().map_err(|e| err("protocol", e))?;
    let event = hello.params.get("poll").and_then(|p| p.as_str()) == Some("event");
    let op = hello
        .params
        .get("op")
        .and_then(|p| p.as_str())
        .unwrap_or("send")
        .to_string();
    let local_ip = oob.local_addr().map_err(|e| err("protocol", e))?.ip();
    let (mut ch, endpoint): (Box<dyn Channel>, serde_json::Value) = match hello.transport.as_str() {
        "udp" => {
            let Some(cport) = hello
                .endpoint
                .get("port")
                .and_then(|p| p.as_u64())
                .and_then(|p| u16::try_from(p).ok())
            else {
                return Err(refuse(
                    &mut oob,
                    format!("malformed udp endpoint {}", hello.endpoint),
                ));
            };
            let mut u = match UdpChannel::bind(SocketAddr::new(local_ip, 0), hello.size) {
                Ok(u) => u,
                Err(e) => return Err(refuse(&mut oob, e.to_string())),
            };
            u.connect(SocketAddr::new(peer.ip(), cport))
                .map_err(|e| err("setup", e))?;
            u.set_event_poll(event);
            let port = u.local_addr().map_err(|e| err("setup", e))?.port();
            (Box::new(u), json!({ "port": port }))
        }
        "rc" | "uc" | "ud" => {
            let vcfg = match verbs_config(
                &hello.transport,
                &op,
                o.dev.as_deref(),
                None,
                hello.size,
                event,
            ) {
                Ok(v) => v,
                Err(e) => return Err(refuse(&mut oob, e.detail)),
            };
            let theirs: verbs::Endpoint = match serde_json::from_value(hello.endpoint.clone()) {
                Ok(e) => e,
                Err(e) => return Err(refuse(&mut oob, format!("malformed verbs endpoint ({e})"))),
            };
            let (prepared, ours) = match verbs::prepare(&vcfg) {
                Ok(p) => p,
                Err(e) => return Err(refuse(&mut oob, e.message)),
            };
            let ch = prepared
                .connect(&theirs)
                .map_err(|e| err("setup", e.message))?;
            (
                Box::new(ch),
                serde_json::to_value(&ours).unwrap_or_default(),
            )
        }
        t => {
            return Err(refuse(
                &mut oob,
                format!("transport {t:?} is not served here; use udp, rc, uc or ud"),
            ))
        }
    };
    oob.send(&Reply::Welcome { endpoint })
        .map_err(|e| err("protocol", e))?;
    let clock = Clock::monotonic();
    let mut closing = None;
    let r = runner::serve(ch.as_mut(), &clock, stop, None, event, || {
        match oob.poll_closing() {
            Closing::Open => true,
            other => {
                closing = Some(other);
                false
            }
        }
    });
    match r {
        Ok((n, EchoEnd::Interrupted)) => Ok(n),
        Ok((n, _)) => match closing {
            Some(Closing::Gone(e)) => Err(err(
                "peer_lost",
                format!("client {peer} vanished after {n} messages: {e}"),
            )),
            _ => Ok(n),
        },
        // A client that finished may close its transport before the
        // responder looks at the out-of-band connection.
        Err(e) => {
            std::thread::sleep(Duration::from_millis(20));
            match oob.poll_closing() {
                Closing::Done(_) => Ok(0),
                _ => Err(err("peer_lost", format!("client {peer}: {e}"))),
            }
        }
    }
}
