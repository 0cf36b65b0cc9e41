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
//! 1. the client sends a [`Hello`]: transport, size, `params` (the verbs
//!    knobs the server must mirror, `op` and `poll`, beside whatever the
//!    client adds, e.g. its probe configuration for the server's log) and
//!    its endpoint (udp: its port; verbs: its QP; shm: nothing);
//! 2. the server checks what it was asked for ([`requested`]), opens its
//!    end ([`open_server`]) and answers `Welcome` with its endpoint (shm:
//!    the ring's path), or `Refuse` with one line saying why;
//! 3. the client connects its end ([`open_client`]), measures, and says
//!    `Done`; the server echoes until then ([`serve`]).
//!
//! [`ClientSession`] and [`respond`] are the daemon's shape of the two
//! ends (many rounds on one connection; any transport a client asks for).

use std::net::{IpAddr, SocketAddr};
use std::path::Path;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use serde_json::{json, Value};

use super::auth::Secret;
use super::config::{Mode, ProbeConfig, Receiver};
use super::hwts::{ResponderLog, ResponderReport, REPORT_VERSION};
use super::oob::{Closing, Done, Hello, Oob, OobError, Reply};
use super::open::{model_clock, udp_bound, OpenError};
use super::outcome::Outcome;
use super::runner::{self, RunError};
use super::workload::EchoEnd;
use crate::clock::Clock;
use crate::spec::{
    check_peer_wait, peer, session_memory, show_bytes, ChannelSpec, ModelParams, Op, Poll,
    StreamSpec, Transport,
};
use crate::transport::model::{ModelUdpChannel, ModelUdpSlots};
use crate::transport::shm::{self, ShmChannel, ShmSlots, Side};
use crate::transport::stream::SlotEnd;
use crate::transport::udp::UdpSlots;
use crate::transport::{Channel, TransportError};
use crate::verbs::{self, VerbsConfig};

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

fn udp_port(ep: &Value) -> Option<u16> {
    ep.get("port")
        .and_then(|p| p.as_u64())
        .and_then(|p| u16::try_from(p).ok())
}

fn malformed(what: &str, ep: &Value) -> SessionError {
    err(
        "protocol",
        format!("malformed {what} endpoint {ep}; run the same ibprobe version on both ends"),
    )
}

/// The client end of the handshake on `oob`: sends the Hello for `spec`
/// (with `extra` merged into its params), and returns its end of the
/// channel connected to the server's.
pub fn open_client(
    oob: &mut Oob,
    spec: &ChannelSpec,
    extra: Value,
) -> Result<Box<dyn Channel>, SessionError> {
    spec.check().map_err(OpenError::from)?;
    let local_ip = oob.local_addr().map_err(|e| err("connect", e))?.ip();
    let server_ip = oob.peer_addr().ip();
    let mut params = match extra {
        Value::Object(m) => m,
        _ => serde_json::Map::new(),
    };
    params.insert("op".into(), json!(spec.verbs.op));
    params.insert("poll".into(), json!(spec.poll));
    if let Some(m) = model_of(spec) {
        params.insert("model".into(), json!(m.to_string()));
    }
    if spec.verbs.hw_timestamps {
        params.insert("hw_timestamps".into(), json!(true));
    }
    params.entry("receiver").or_insert_with(|| {
        json!(Receiver {
            poll: spec.poll,
            ..Receiver::default()
        })
    });
    let params = Value::Object(params);
    let mut handshake = |endpoint| send_hello(oob, spec, &params, endpoint);
    Ok(match spec.transport {
        Transport::Udp | Transport::Model => {
            let mut u = udp_bound(local_ip, spec)?;
            let port = u.local_addr().map_err(OpenError::from)?.port();
            let ep = handshake(json!({ "port": port }))?;
            let sport = udp_port(&ep).ok_or_else(|| malformed("udp", &ep))?;
            u.connect(SocketAddr::new(server_ip, sport))
                .map_err(OpenError::from)?;
            match model_of(spec) {
                Some(m) => Box::new(ModelUdpChannel::new(m, u, spec.size, model_clock())),
                None => Box::new(u),
            }
        }
        Transport::Shm => {
            let ep = handshake(Value::Null)?;
            let path = server_shm_path(&ep)?;
            Box::new(
                ShmChannel::open(path, spec.size, Side::Client)
                    .map_err(|e| shm_elsewhere(e, server_ip))?,
            )
        }
        Transport::Rc | Transport::Uc | Transport::Ud => {
            let vcfg = VerbsConfig::new(spec).map_err(OpenError::from)?;
            let (prepared, ep) = verbs::prepare(&vcfg).map_err(OpenError::from)?;
            let theirs = handshake(serde_json::to_value(&ep).unwrap_or_default())?;
            if spec.verbs.hw_timestamps && theirs.get("hw_report") != Some(&json!(REPORT_VERSION)) {
                return Err(err(
                    "refused",
                    format!("server {server_ip} does not report hardware completion timestamps (version {REPORT_VERSION}); run the same ibprobe version on both ends, or run without --hw-timestamps"),
                ));
            }
            let theirs = server_verbs_endpoint(&theirs)?;
            Box::new(prepared.connect(&theirs).map_err(OpenError::from)?)
        }
    })
}

/// The client's side of the handshake: Hello with `params` and this
/// end's `endpoint`; the server's endpoint back.
fn send_hello(
    oob: &mut Oob,
    spec: &ChannelSpec,
    params: &Value,
    endpoint: Value,
) -> Result<Value, SessionError> {
    oob.handshake(&Hello {
        transport: spec.transport.name().into(),
        size: spec.size,
        params: params.clone(),
        endpoint,
    })
    .map_err(oob_err)
}

/// The shm path in the server's endpoint.
fn server_shm_path(ep: &Value) -> Result<&Path, SessionError> {
    ep.get("path")
        .and_then(|p| p.as_str())
        .map(Path::new)
        .ok_or_else(|| malformed("shm", ep))
}

/// The server's shm file could not be opened here: most likely the
/// server runs on another host.
fn shm_elsewhere(e: impl std::fmt::Display, server_ip: IpAddr) -> SessionError {
    err(
        "setup",
        format!(
            "{e}; the shm transport needs client and server on the same host (server {server_ip}), use --transport udp or verbs across hosts"
        ),
    )
}

/// The verbs endpoint in the server's Welcome.
fn server_verbs_endpoint(ep: &Value) -> Result<verbs::Endpoint, SessionError> {
    serde_json::from_value(ep.clone()).map_err(|_| malformed("verbs", ep))
}

/// How the client asks the server to receive (its `params.receiver`;
/// a client that sends none gets the default with its `poll`).
pub fn receiver(hello: &Hello) -> Result<Receiver, String> {
    match hello.params.get("receiver") {
        Some(r) => serde_json::from_value(r.clone()).map_err(|e| {
            format!(
                "malformed receiver settings {r} ({e}); run the same ibprobe version on both ends"
            )
        }),
        None => Ok(Receiver {
            poll: requested(hello, None)?.poll,
            ..Receiver::default()
        }),
    }
}

/// What a client's Hello asks for: its transport, size, op and polling,
/// with this server's verbs device (`dev`) and otherwise default knobs.
pub fn requested(hello: &Hello, dev: Option<&str>) -> Result<ChannelSpec, String> {
    let transport: Transport = hello
        .transport
        .parse()
        .map_err(|e: crate::spec::SpecError| e.0)?;
    let word = |key: &str| hello.params.get(key).and_then(|p| p.as_str());
    let mut spec = ChannelSpec::new(transport, hello.size);
    if let Some(op) = word("op") {
        spec.verbs.op = op.parse::<Op>().map_err(|e| e.0)?;
    }
    if let Some(poll) = word("poll") {
        spec.poll = poll.parse::<Poll>().map_err(|e| e.0)?;
    }
    spec.verbs.dev = dev.map(str::to_string);
    spec.verbs.hw_timestamps = hello.params.get("hw_timestamps") == Some(&json!(true));
    Ok(spec)
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

/// The client's UDP port from its Hello, or a refusal saying the
/// endpoint is malformed (server side of both handshakes).
fn client_udp_port(oob: &mut Oob, hello: &Hello) -> Result<u16, SessionError> {
    udp_port(&hello.endpoint).ok_or_else(|| {
        refuse(
            oob,
            format!(
                "malformed udp endpoint {}; run the same ibprobe version on both ends",
                hello.endpoint
            ),
        )
    })
}

/// The client's verbs endpoint from its Hello, or a refusal saying it is
/// malformed (server side of both handshakes).
fn client_verbs_endpoint(oob: &mut Oob, hello: &Hello) -> Result<verbs::Endpoint, SessionError> {
    serde_json::from_value(hello.endpoint.clone()).map_err(|e| {
        refuse(
            oob,
            format!("malformed verbs endpoint ({e}); run the same ibprobe version on both ends"),
        )
    })
}

/// The server end of the handshake: opens this end of the channel
/// `spec` describes for the client's `hello`, and answers Welcome with
/// its endpoint. Any failure before the Welcome is sent to the client as
/// a refusal too.
pub fn open_server(
    oob: &mut Oob,
    hello: &Hello,
    spec: &ChannelSpec,
) -> Result<Box<dyn Channel>, SessionError> {
    let peer = oob.peer_addr();
    let local_ip = oob.local_addr().map_err(|e| err("protocol", e))?.ip();
    let with_model = match with_hello_model(spec, hello) {
        Ok(s) => s,
        Err(e) => return Err(refuse(oob, e)),
    };
    let spec = &with_model;
    if let Err(e) = spec.check() {
        return Err(refuse(oob, e.0));
    }
    let (ch, endpoint): (Box<dyn Channel>, Value) = match spec.transport {
        Transport::Udp | Transport::Model => {
            let cport = client_udp_port(oob, hello)?;
            let mut u = match udp_bound(local_ip, spec) {
                Ok(u) => u,
                Err(e) => return Err(refuse(oob, e.message)),
            };
            u.connect(SocketAddr::new(peer.ip(), cport))
                .map_err(OpenError::from)?;
            let port = u.local_addr().map_err(OpenError::from)?.port();
            let ch: Box<dyn Channel> = match model_of(spec) {
                Some(m) => Box::new(ModelUdpChannel::new(m, u, spec.size, model_clock())),
                None => Box::new(u),
            };
            (ch, json!({ "port": port }))
        }
        Transport::Shm => {
            let path = shm::default_path();
            match ShmChannel::create(&path, spec.size, Side::Server) {
                Ok(s) => (Box::new(s), json!({ "path": path.display().to_string() })),
                Err(e) => return Err(refuse(oob, e.to_string())),
            }
        }
        Transport::Rc | Transport::Uc | Transport::Ud => {
            let theirs = client_verbs_endpoint(oob, hello)?;
            let prepared = VerbsConfig::new(spec).and_then(|v| verbs::prepare(&v));
            let (prepared, ours) = match prepared {
                Ok(p) => p,
                Err(e) => return Err(refuse(oob, e.message)),
            };
            let ch = prepared.connect(&theirs).map_err(OpenError::from)?;
            let mut ours = serde_json::to_value(&ours).unwrap_or_default();
            if spec.verbs.hw_timestamps {
                // The client checks this: an older server would ignore
                // its ask and never send the report.
                ours["hw_report"] = json!(REPORT_VERSION);
            }
            (Box::new(ch), ours)
        }
    };
    oob.send(&Reply::Welcome { endpoint })
        .map_err(|e| err("protocol", e))?;
    Ok(ch)
}

/// The model parameters of a `--transport model` spec (between
/// processes the model rides on a UDP carrier, `transport/model.rs`).
fn model_of(spec: &ChannelSpec) -> Option<ModelParams> {
    spec.model.filter(|_| spec.transport == Transport::Model)
}

/// `spec` with the client's `--model` from its Hello (the client's
/// parameters win: both ends must emulate the same network). A model
/// that is not a string of parameters is refused ([`admit`]), not dropped.
fn with_hello_model(spec: &ChannelSpec, hello: &Hello) -> Result<ChannelSpec, String> {
    let asked = match hello.params.get("model") {
        None => None,
        Some(Value::String(m)) => Some(m.parse::<ModelParams>().map_err(|e| e.0)?),
        Some(m) => {
            return Err(format!(
                "malformed model {m}; run the same ibprobe version on both ends"
            ))
        }
    };
    Ok(ChannelSpec {
        model: asked.or(spec.model),
        ..spec.clone()
    })
}

/// The memory cap a server holds sessions to, and how its operator
/// raises it (named in the refusal).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct MemoryCap {
    /// Bytes a session may ask for ([`crate::spec::session_memory`]).
    pub bytes: u64,
    /// The flag or config key that raises it, e.g. `--max-session-memory`.
    pub raise: &'static str,
}

impl MemoryCap {
    /// The default cap ([`peer::DEFAULT_MAX_SESSION_MEMORY`]), raised by `raise`.
    pub fn default_with(raise: &'static str) -> MemoryCap {
        MemoryCap {
            bytes: peer::DEFAULT_MAX_SESSION_MEMORY,
            raise,
        }
    }
}

/// What a Hello that passed [`admit`] asks the server to open.
#[derive(Clone, Debug, PartialEq)]
pub struct Admitted {
    /// The channel: the server's knobs, the client's size, op and model.
    pub spec: ChannelSpec,
    /// The stream, when the client asked for one.
    pub stream: Option<StreamHello>,
    /// How the client asks the server to receive (its poll is the
    /// client's; a server may put its own).
    pub receiver: Receiver,
    /// The session's memory ([`crate::spec::session_memory`]), at most the cap.
    pub memory: u64,
}

/// The one check of a decoded Hello, before anything is allocated,
/// opened or waited on: the channel `spec` the server would open for it
/// (with the client's model), the stream's knobs, the receive-side
/// settings and every wait against [`peer`]'s bounds, and the session's
/// memory against `cap`. Pure: no socket, no file. Err: the one line the
/// client is refused with.
pub fn admit(hello: &Hello, spec: &ChannelSpec, cap: MemoryCap) -> Result<Admitted, String> {
    let spec = with_hello_model(spec, hello)?;
    spec.check().map_err(|e| e.0)?;
    let stream = stream_hello(hello).transpose()?;
    if let Some(sh) = &stream {
        sh.check_peer(&spec)?;
    }
    let receiver = receiver(hello)?;
    check_peer_wait(
        "--consume-delay",
        receiver.consume_delay,
        peer::MAX_CONSUME_DELAY,
    )
    .map_err(|e| e.0)?;
    if let Some(m) = model_of(&spec) {
        let bytes = stream.as_ref().map_or(spec.size, |s| s.spec.slot_size);
        m.check_peer(bytes).map_err(|e| e.0)?;
    }
    let memory = session_memory(&spec, stream.as_ref().map(|s| &s.spec));
    if memory > cap.bytes {
        let (asked, fix) = match &stream {
            Some(s) => (
                format!(
                    "--slots {} x --slot-size {} B, --window {}",
                    s.spec.slots, s.spec.slot_size, s.spec.window
                ),
                "ask for fewer or smaller slots",
            ),
            None => (
                format!("--size {} B", spec.size),
                "ask for a smaller --size",
            ),
        };
        return Err(format!(
            "this session needs {} of memory here ({memory} B: {asked}), the server allows {} per session; {fix}, or have the server's operator raise {}",
            show_bytes(memory),
            show_bytes(cap.bytes),
            cap.raise
        ));
    }
    Ok(Admitted {
        spec,
        stream,
        receiver,
        memory,
    })
}

/// What a stream client asks of the server, in its Hello's
/// `params.stream`: the stream's knobs and what the receiving loop needs
/// (the warm-up to leave out, the consume delay, the timeout).
#[derive(Clone, Debug, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct StreamHello {
    /// The stream's knobs.
    pub spec: StreamSpec,
    /// Messages before the measured ones.
    pub warmup: u64,
    /// The receiver's `--consume-delay`.
    pub consume_delay: Duration,
    /// `--timeout`.
    pub timeout: Duration,
    /// What the server runs on the stream: absent, the receiving loop of
    /// `ibprobe stream`; [`LOGGP_WORKLOAD`], `ibprobe loggp`'s answering
    /// loop (`probe/loggp.rs`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub workload: Option<String>,
}

/// The [`StreamHello::workload`] of `ibprobe loggp`.
pub const LOGGP_WORKLOAD: &str = "loggp";

impl StreamHello {
    /// Every check of a stream a client asks a server for, over the
    /// channel `ch`: [`StreamSpec::check`], [`StreamSpec::check_peer`],
    /// the workload, the warm-up, and the waits against [`peer`]'s bounds.
    pub fn check_peer(&self, ch: &ChannelSpec) -> Result<(), String> {
        self.spec.check(ch).map_err(|e| e.0)?;
        self.spec.check_peer().map_err(|e| e.0)?;
        if let Some(w) = self.workload.as_deref().filter(|w| *w != LOGGP_WORKLOAD) {
            return Err(format!(
                "stream workload {w:?} is not served (only the receiving loop and {LOGGP_WORKLOAD:?}); run the same ibprobe version on both ends"
            ));
        }
        if self.warmup > peer::MAX_WARMUP {
            return Err(format!(
                "--warmup {}: a server skips at most {} warm-up messages; lower --warmup",
                self.warmup,
                peer::MAX_WARMUP
            ));
        }
        check_peer_wait("--timeout", self.timeout, peer::MAX_TIMEOUT)
            .and_then(|()| {
                check_peer_wait(
                    "--consume-delay",
                    self.consume_delay,
                    peer::MAX_CONSUME_DELAY,
                )
            })
            .map_err(|e| e.0)
    }
}

/// The stream a client's Hello asks for (None: a one-message channel).
pub fn stream_hello(hello: &Hello) -> Option<Result<StreamHello, String>> {
    let v = hello.params.get("stream")?;
    Some(serde_json::from_value(v.clone()).map_err(|e| {
        format!("malformed stream settings {v} ({e}); run the same ibprobe version on both ends")
    }))
}

/// The client end of a stream's handshake: sends the Hello for `spec`
/// with `stream` in its params and returns its end, connected.
pub fn open_stream_client(
    oob: &mut Oob,
    spec: &ChannelSpec,
    stream: &StreamHello,
) -> Result<Box<dyn SlotEnd>, SessionError> {
    spec.check().map_err(OpenError::from)?;
    stream.spec.check(spec).map_err(OpenError::from)?;
    let local_ip = oob.local_addr().map_err(|e| err("connect", e))?.ip();
    let server_ip = oob.peer_addr().ip();
    let mut params = json!({ "op": spec.verbs.op, "poll": spec.poll, "stream": stream });
    if let Some(m) = model_of(spec) {
        params["model"] = json!(m.to_string());
    }
    let (slots, slot_size) = (stream.spec.slots, stream.spec.slot_size);
    let mut handshake = |endpoint| send_hello(oob, spec, &params, endpoint);
    Ok(match spec.transport {
        Transport::Udp | Transport::Model => {
            let mut u =
                UdpSlots::bind(SocketAddr::new(local_ip, 0), slot_size).map_err(OpenError::from)?;
            let port = u.local_addr().map_err(OpenError::from)?.port();
            let ep = handshake(json!({ "port": port }))?;
            let sport = udp_port(&ep).ok_or_else(|| malformed("udp", &ep))?;
            u.connect(SocketAddr::new(server_ip, sport))
                .map_err(OpenError::from)?;
            match model_of(spec) {
                Some(m) => Box::new(ModelUdpSlots::new(m, u, model_clock())),
                None => Box::new(u),
            }
        }
        Transport::Shm => {
            let ep = handshake(Value::Null)?;
            let path = server_shm_path(&ep)?;
            Box::new(
                ShmSlots::open(path, stream.spec.shm_ring_slots(), slot_size, Side::Client)
                    .map_err(|e| shm_elsewhere(e, server_ip))?,
            )
        }
        Transport::Rc | Transport::Uc | Transport::Ud => {
            let vcfg = VerbsConfig::new(spec).map_err(OpenError::from)?;
            let (prepared, ep) =
                verbs::prepare_slots(&vcfg, slots, slot_size).map_err(OpenError::from)?;
            let theirs = handshake(serde_json::to_value(&ep).unwrap_or_default())?;
            let theirs = server_verbs_endpoint(&theirs)?;
            Box::new(prepared.connect(&theirs).map_err(OpenError::from)?)
        }
    })
}

/// The server end of a stream's handshake: opens this end of the stream
/// the client's Hello asks for and answers Welcome (or refuses, with
/// the reason, as [`open_server`] does).
pub fn open_stream_server(
    oob: &mut Oob,
    hello: &Hello,
    spec: &ChannelSpec,
    stream: &StreamHello,
) -> Result<Box<dyn SlotEnd>, SessionError> {
    let peer = oob.peer_addr();
    let local_ip = oob.local_addr().map_err(|e| err("protocol", e))?.ip();
    let with_model = match with_hello_model(spec, hello) {
        Ok(s) => s,
        Err(e) => return Err(refuse(oob, e)),
    };
    let spec = &with_model;
    if let Err(e) = spec.check().and_then(|()| stream.spec.check(spec)) {
        return Err(refuse(oob, e.0));
    }
    let (slots, slot_size) = (stream.spec.slots, stream.spec.slot_size);
    let (end, endpoint): (Box<dyn SlotEnd>, Value) = match spec.transport {
        Transport::Udp | Transport::Model => {
            let cport = client_udp_port(oob, hello)?;
            let mut u = match UdpSlots::bind(SocketAddr::new(local_ip, 0), slot_size) {
                Ok(u) => u,
                Err(e) => return Err(refuse(oob, e.to_string())),
            };
            u.connect(SocketAddr::new(peer.ip(), cport))
                .map_err(OpenError::from)?;
            let port = u.local_addr().map_err(OpenError::from)?.port();
            let end: Box<dyn SlotEnd> = match model_of(spec) {
                Some(m) => Box::new(ModelUdpSlots::new(m, u, model_clock())),
                None => Box::new(u),
            };
            (end, json!({ "port": port }))
        }
        Transport::Shm => {
            let path = shm::default_path();
            match ShmSlots::create(&path, stream.spec.shm_ring_slots(), slot_size, Side::Server) {
                Ok(s) => (Box::new(s), json!({ "path": path.display().to_string() })),
                Err(e) => return Err(refuse(oob, e.to_string())),
            }
        }
        Transport::Rc | Transport::Uc | Transport::Ud => {
            let theirs = client_verbs_endpoint(oob, hello)?;
            let prepared =
                VerbsConfig::new(spec).and_then(|v| verbs::prepare_slots(&v, slots, slot_size));
            let (prepared, ours) = match prepared {
                Ok(p) => p,
                Err(e) => return Err(refuse(oob, e.message)),
            };
            let end = prepared.connect(&theirs).map_err(OpenError::from)?;
            (
                Box::new(end),
                serde_json::to_value(&ours).unwrap_or_default(),
            )
        }
    };
    oob.send(&Reply::Welcome { endpoint })
        .map_err(|e| err("protocol", e))?;
    Ok(end)
}

/// How a served session ended well.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ServeEnd {
    /// The client said Done; `sent` is what it says it sent.
    Done {
        /// Messages the client sent.
        sent: u64,
    },
    /// The client closed without a word after an orderly run.
    Closed,
    /// The stop flag (Ctrl-C) ended it.
    Interrupted,
}

/// What [`serve`] did: messages echoed and how it ended.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Served {
    /// Messages echoed.
    pub echoed: u64,
    /// How it ended.
    pub end: ServeEnd,
}

/// The server side of a session after the handshake: echoes on `ch`
/// (pinned to `cpu` if given, receiving as the client asked, see
/// [`receiver`]) until the client says Done, vanishes or
/// `stop` is set. A client that finished may close its end of the
/// transport before the server looks at the out-of-band connection, so
/// after a transport error the server asks the connection for up to
/// `grace` before it calls the client lost.
pub fn serve(
    oob: &mut Oob,
    ch: &mut dyn Channel,
    clock: &Clock,
    stop: &AtomicBool,
    cpu: Option<usize>,
    receiver: &Receiver,
    grace: Duration,
) -> Result<Served, SessionError> {
    let peer = oob.peer_addr();
    let mut closing = None;
    // --hw-timestamps (the client asked, the channel stamps): keep each
    // echo's T3/T4, with HCA/host clock pairs around the session for the
    // rate; the report goes to the client after its Done.
    let mut hw = ch.hw_clock().map(|c| (c, ResponderLog::new(), Vec::new()));
    if let Some((_, _, pairs)) = hw.as_mut() {
        hw_pair(ch, clock, pairs);
    }
    let r = runner::serve(
        ch,
        clock,
        stop,
        cpu,
        receiver,
        || match oob.poll_closing() {
            Closing::Open => true,
            other => {
                closing = Some(other);
                false
            }
        },
        hw.as_mut().map(|h| &mut h.1),
    );
    if let (Some((mut c, log, mut pairs)), Some(Closing::Done(_))) = (hw, &closing) {
        hw_pair(ch, clock, &mut pairs);
        let _ = c.calibrate(&pairs);
        oob.send(&ResponderReport::new(&c, &log.stamps, log.overflow))
            .map_err(|e| err("protocol", e))?;
    }
    let echoed = match r {
        Ok((n, EchoEnd::Interrupted)) => {
            return Ok(Served {
                echoed: n,
                end: ServeEnd::Interrupted,
            })
        }
        Ok((n, EchoEnd::Finished)) => n,
        Err(e) => {
            let t0 = Instant::now();
            loop {
                match oob.poll_closing() {
                    Closing::Open if t0.elapsed() < grace => {
                        std::thread::sleep(Duration::from_millis(5))
                    }
                    Closing::Done(d) => {
                        return Ok(Served {
                            echoed: 0,
                            end: ServeEnd::Done { sent: d.sent },
                        })
                    }
                    _ => {
                        let detail = match e {
                            TransportError::PeerLost(why) => {
                                format!("client {peer} lost mid-run: {why}")
                            }
                            e => format!("client {peer}: {e}"),
                        };
                        return Err(err("peer_lost", detail));
                    }
                }
            }
        }
    };
    match closing {
        Some(Closing::Done(d)) => Ok(Served {
            echoed,
            end: ServeEnd::Done { sent: d.sent },
        }),
        Some(Closing::Gone(e)) => Err(err(
            "peer_lost",
            format!("client {peer} vanished after {echoed} messages: {e}"),
        )),
        _ => Ok(Served {
            echoed,
            end: ServeEnd::Closed,
        }),
    }
}

/// One (HCA ticks, host ns) pair for the rate of the HCA clock (cold).
fn hw_pair(ch: &dyn Channel, clock: &Clock, pairs: &mut Vec<(u64, u64)>) {
    if let Some(t) = ch.hw_clock_now() {
        pairs.push((t, clock.ticks_to_ns(clock.now())));
    }
}

/// The client's side of `--hw-timestamps` after its run: says Done (the
/// server then sends its [`ResponderReport`]) and splits `outcome`'s round
/// trips with it. Err: one line (the report did not come, or is of
/// another version).
pub fn hw_finish(oob: &mut Oob, outcome: &mut Outcome) -> Result<(), SessionError> {
    let sent = outcome.sent + outcome.warmup_count;
    hw_finish_after(oob, outcome, sent)
}

/// [`hw_finish`] for a session that sent `sent` messages in all.
fn hw_finish_after(oob: &mut Oob, outcome: &mut Outcome, sent: u64) -> Result<(), SessionError> {
    let Some(log) = outcome.hw.as_ref() else {
        return Ok(());
    };
    oob.send(&Done {
        sent,
        interrupted: outcome.interrupted,
    })
    .map_err(|e| err("protocol", e))?;
    let rep: ResponderReport = oob
        .recv("hardware timestamp report")
        .map_err(|e| err("protocol", e))?;
    outcome.hw_split = Some(log.split_with(&rep).map_err(|e| err("protocol", e))?);
    Ok(())
}

/// The client end as a daemon uses it: one connection to a responder,
/// any number of rounds.
pub struct ClientSession {
    oob: Oob,
    ch: Box<dyn Channel>,
    sent: u64,
}

impl ClientSession {
    /// Connects to `addr` (giving up after `timeout`), proves the mesh
    /// `secret` if one is given, agrees on the channel `spec` describes
    /// and opens it.
    pub fn connect(
        addr: SocketAddr,
        spec: &ChannelSpec,
        timeout: Duration,
        secret: Option<&Secret>,
    ) -> Result<ClientSession, SessionError> {
        let mut oob = Oob::connect(&addr.to_string(), addr.port(), timeout)
            .map_err(|e| err("connect", e))?
            .with_secret(secret.cloned());
        let ch = open_client(&mut oob, spec, Value::Null)?;
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

    /// Tells the responder the session is over and, when `last` (the
    /// last round's outcome) carries hardware timestamps, takes the
    /// responder's and splits it (see [`hw_finish`]).
    pub fn finish_split(mut self, last: &mut Outcome) -> Result<(), SessionError> {
        if last.hw.is_none() {
            self.finish();
            return Ok(());
        }
        let sent = self.sent;
        hw_finish_after(&mut self.oob, last, sent)
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
#[derive(Clone, Debug)]
pub struct ResponderOptions {
    /// Verbs device to answer on (None: the first with an active port).
    pub dev: Option<String>,
    /// How long a client may take to say hello (each read; the
    /// responder's owner bounds the whole handshake).
    pub handshake_timeout: Duration,
    /// The mesh secret clients must prove (None: everyone is served).
    pub secret: Option<Secret>,
    /// Sessions that may echo with busy polling at once (each spins a
    /// core); past it a client asking for busy polling is echoed with
    /// event polling (a few µs more on its RTT, no core spent).
    pub max_busy: usize,
    /// Sessions busy polling now (shared by the responder's sessions).
    pub busy: Arc<AtomicUsize>,
    /// The memory one session may take ([`admit`]).
    pub memory: MemoryCap,
}

/// The config key that raises a responder's [`MemoryCap`].
pub const RESPONDER_MEMORY_KEY: &str = "[responder] max_session_memory";

impl Default for ResponderOptions {
    fn default() -> Self {
        ResponderOptions {
            dev: None,
            handshake_timeout: Duration::default(),
            secret: None,
            max_busy: 0,
            busy: Arc::default(),
            memory: MemoryCap::default_with(RESPONDER_MEMORY_KEY),
        }
    }
}

/// The longest consume delay a responder honours per message (it spins
/// that long): a client cannot make it spin for long. The same bound as
/// `ibprobe server`'s ([`peer::MAX_CONSUME_DELAY`]).
pub const MAX_RESPONDER_CONSUME_DELAY: Duration = peer::MAX_CONSUME_DELAY;

/// A busy-polling slot of a responder, given back on drop.
struct BusySlot<'a>(&'a AtomicUsize);

impl Drop for BusySlot<'_> {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Ordering::Relaxed);
    }
}

/// A busy-polling slot if fewer than `max` are taken.
fn busy_slot(busy: &AtomicUsize, max: usize) -> Option<BusySlot<'_>> {
    busy.fetch_update(Ordering::Relaxed, Ordering::Relaxed, |n| {
        (n < max).then_some(n + 1)
    })
    .ok()
    .map(|_| BusySlot(busy))
}

/// What the owner of a responder session (ibexporter's responder) sees of
/// it and how it ends it, shared with the thread running [`respond`].
#[derive(Debug, Default)]
pub struct Liveness {
    /// Set by the owner to end the session (eviction, idle, shutdown).
    pub stop: AtomicBool,
    /// Set by [`respond`] once the client is welcomed (the handshake is over).
    pub greeted: AtomicBool,
    /// Messages that arrived so far: the owner calls a session idle when
    /// this stops moving.
    pub arrived: AtomicU64,
}

/// A channel that counts arrivals into a [`Liveness`] (one relaxed
/// store per message: no lock, no syscall).
struct Watched<'a> {
    ch: &'a mut dyn Channel,
    live: &'a Liveness,
}

impl Watched<'_> {
    fn seen(&self, got: Option<u64>) -> Option<u64> {
        if got.is_some() {
            self.live.arrived.fetch_add(1, Ordering::Relaxed);
        }
        got
    }
}

impl Channel for Watched<'_> {
    fn post(&mut self, seq: u64) -> Result<(), TransportError> {
        self.ch.post(seq)
    }
    fn poll_recv(&mut self) -> Result<Option<u64>, TransportError> {
        let got = self.ch.poll_recv()?;
        Ok(self.seen(got))
    }
    fn poll_send_done(&mut self) -> Result<Option<u64>, TransportError> {
        self.ch.poll_send_done()
    }
    fn has_send_completions(&self) -> bool {
        self.ch.has_send_completions()
    }
    fn is_signaled(&self, seq: u64) -> bool {
        self.ch.is_signaled(seq)
    }
    fn wait_recv(&mut self, clock: &Clock, timeout_ns: u64) -> Result<Option<u64>, TransportError> {
        let got = self.ch.wait_recv(clock, timeout_ns)?;
        Ok(self.seen(got))
    }
    fn stamp_target(&mut self) -> Result<crate::sys::verbs::StampWord, TransportError> {
        self.ch.stamp_target()
    }
    fn arrived_stamp(&self) -> u64 {
        self.ch.arrived_stamp()
    }
    fn info(&self) -> crate::transport::TransportInfo {
        self.ch.info()
    }
}

/// How long a responder asks a client that closed its transport whether
/// it said Done.
const RESPONDER_GRACE: Duration = Duration::from_millis(20);

/// The transports a responder answers: the shared-memory ring needs
/// both ends on one host, and the model spins a core for as long as its
/// parameters say; a daemon offers neither.
const SERVED: [Transport; 4] = [Transport::Udp, Transport::Rc, Transport::Uc, Transport::Ud];

/// Serves one client on `oob` until it says Done, vanishes or
/// `live.stop` is set; returns the messages echoed. Answers udp, rc, uc
/// and ud ([`SERVED`]), each Hello first through [`admit`] (its memory
/// against `o.memory`). With `o.secret`, the client must prove it first
/// (else the error's reason is `auth`). Refusals are sent to the client
/// too.
pub fn respond(mut oob: Oob, o: &ResponderOptions, live: &Liveness) -> Result<u64, SessionError> {
    oob = oob.with_secret(o.secret.clone());
    let hello = oob.read_hello().map_err(|e| match e {
        OobError::Auth(_) => err("auth", e),
        e => err("protocol", e),
    })?;
    let spec = match requested(&hello, o.dev.as_deref()) {
        Ok(s) if SERVED.contains(&s.transport) => s,
        Ok(s) => {
            return Err(refuse(
                &mut oob,
                format!(
                    "transport {:?} is not served here; use udp, rc, uc or ud (ibprobe server serves shm and model)",
                    s.transport.name()
                ),
            ))
        }
        Err(e) => return Err(refuse(&mut oob, e)),
    };
    let Admitted {
        mut spec,
        mut receiver,
        ..
    } = match admit(&hello, &spec, o.memory) {
        Ok(a) => a,
        Err(e) => return Err(refuse(&mut oob, e)),
    };
    let spins = receiver.poll == Poll::Busy || spec.poll == Poll::Busy;
    let _slot = match spins.then(|| busy_slot(&o.busy, o.max_busy)) {
        Some(None) => {
            receiver.poll = Poll::Event;
            spec.poll = Poll::Event;
            None
        }
        slot => slot.flatten(),
    };
    let mut ch = open_server(&mut oob, &hello, &spec)?;
    live.greeted.store(true, Ordering::Relaxed);
    let clock = Clock::monotonic();
    let mut watched = Watched {
        ch: ch.as_mut(),
        live,
    };
    let served = serve(
        &mut oob,
        &mut watched,
        &clock,
        &live.stop,
        None,
        &receiver,
        RESPONDER_GRACE,
    )?;
    Ok(served.echoed)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::probe::hwts::fake::Stamped;
    use std::net::TcpListener;

    fn stream_hello(transport: &str, slots: u32, slot_size: usize) -> Hello {
        let sh = StreamHello {
            spec: StreamSpec {
                slots,
                window: slots,
                slot_size,
                ..StreamSpec::default()
            },
            warmup: 0,
            consume_delay: Duration::ZERO,
            timeout: Duration::from_secs(1),
            workload: None,
        };
        Hello {
            transport: transport.into(),
            size: 32,
            params: json!({ "op": "send", "stream": sh }),
            endpoint: Value::Null,
        }
    }

    /// The verbs transports cannot run here (no RDMA device outside the
    /// lab): their slot pools and echo buffers are bounded by the same
    /// check, before `verbs::prepare` would register anything.
    #[test]
    fn verbs_sessions_are_bounded_by_the_same_check() {
        let cap = MemoryCap::default_with("--max-session-memory");
        for t in ["rc", "uc"] {
            let h = stream_hello(t, 4096, 1 << 20);
            let spec = requested(&h, None).unwrap();
            let e = admit(&h, &spec, cap).unwrap_err();
            assert!(
                e.contains("12.0 GiB") && e.contains("--max-session-memory"),
                "{e}"
            );
            let h = stream_hello(t, 64, 4096);
            let a = admit(&h, &requested(&h, None).unwrap(), cap).unwrap();
            // Two pools of 64 slots of 4 KiB (+ a cache line each) and the
            // receiving queue: about 0.8 MiB.
            assert!((512 << 10..1 << 20).contains(&a.memory), "{}", a.memory);
        }
        let h = stream_hello("rc", 1 << 20, 64);
        let e = admit(&h, &requested(&h, None).unwrap(), cap).unwrap_err();
        assert!(e.contains("at most 4096 slots"), "{e}");
        // A round trip of 1 GiB messages over rc: its send and receive
        // rings would take many GiB.
        let mut h = stream_hello("rc", 64, 4096);
        h.params = json!({ "op": "send" });
        h.size = 1 << 30;
        let e = admit(&h, &requested(&h, None).unwrap(), cap).unwrap_err();
        assert!(
            e.contains("--size 1073741824 B") && e.contains("smaller --size"),
            "{e}"
        );
    }

    #[test]
    fn a_model_hello_is_checked_with_its_slot_size() {
        let cap = MemoryCap::default_with("--max-session-memory");
        let mut h = stream_hello("model", 64, 65_536);
        h.params["model"] = json!("L=1us,os=1us,or=1us,g=1us,G=1us");
        let spec = requested(&h, None).unwrap();
        // 64 KiB x 1 us per byte: 65 ms per slot.
        let e = admit(&h, &spec, cap).unwrap_err();
        assert!(
            e.contains("65536 B messages") && e.contains("at most 50ms"),
            "{e}"
        );
        h.params["model"] = json!("L=1us,os=1us,or=1us,g=1us,G=1ps");
        assert!(admit(&h, &spec, cap).is_ok());
        h.params["model"] = json!("L=1us");
        assert!(admit(&h, &spec, cap).unwrap_err().contains("missing"));
    }

    /// The `--hw-timestamps` exchange end to end over a real out-of-band
    /// connection: the server's echo keeps T3/T4 from its (stamping)
    /// channel and sends its report after the client's Done; the client
    /// splits its round trips with it.
    #[test]
    fn the_responder_reports_its_stamps_after_done() {
        let l = TcpListener::bind("127.0.0.1:0").unwrap();
        let port = l.local_addr().unwrap().port();
        let (c, s) = ShmChannel::pair(64).unwrap();
        let clock = Clock::monotonic();
        let server = std::thread::spawn(move || {
            let mut oob = Oob::accept(&l, Duration::from_secs(5)).unwrap();
            // Responder: T3 = at + 0, T4 = at + 50.
            let mut ch = Stamped::new(s, 7, 50, 0);
            let stop = AtomicBool::new(false);
            serve(
                &mut oob,
                &mut ch,
                &clock,
                &stop,
                None,
                &Receiver::default(),
                Duration::from_secs(1),
            )
            .unwrap()
        });
        let mut oob =
            Oob::connect(&format!("127.0.0.1:{port}"), port, Duration::from_secs(5)).unwrap();
        // Prober: T2 = at + 0, T5 = at + 300: network = 300 - 50.
        let mut ch = Stamped::new(c, 60_000, 0, 300);
        let cfg = ProbeConfig {
            length: crate::probe::Length::Count(500),
            warmup: 10,
            mode: Mode::RoundTrip,
            lock_memory: false,
            hw_timestamps: true,
            ..ProbeConfig::default()
        };
        let stop = AtomicBool::new(false);
        let mut o = runner::run(&cfg, &mut ch, &clock, &stop, None).unwrap();
        hw_finish(&mut oob, &mut o).unwrap();
        let served = server.join().unwrap();
        assert_eq!(served.echoed, 510);
        assert_eq!(served.end, ServeEnd::Done { sent: 510 });
        let sp = &o.hw_split.as_ref().unwrap().split;
        assert_eq!(sp.len() + sp.invalid, 500);
        assert_eq!((sp.missing_prober, sp.missing_responder), (0, 0));
        assert!(!sp.is_empty());
        assert_eq!(
            (sp.network_rtt.summary().min_ns, sp.network_rtt.max_ns()),
            (250, 250)
        );
        assert_eq!(sp.responder_delay.max_ns(), 50);
    }
}
