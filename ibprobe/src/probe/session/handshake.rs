//! The handshake itself: one client opener ([`open_client`]) and one
//! server opener ([`open_server`]), whatever the session runs on its
//! channel. The transport skeleton (udp or model, shm, verbs) stands
//! here once per side; what differs between a one-message channel and a
//! stream of slots (the ends each transport makes, what the Hello adds)
//! is a [`Shape`]: [`OneMessage`] or [`StreamHello`].

use std::net::{IpAddr, SocketAddr};
use std::path::Path;

use serde_json::{json, Map, Value};

use super::error::{err, oob_err, refuse, SessionError};
use super::hello::{model_of, with_hello_model, StreamHello};
use crate::clock::hwts::REPORT_VERSION;
use crate::probe::config::Receiver;
use crate::probe::open::{model_clock, udp_bound, OpenError};
use crate::probe::session::oob::{Hello, Oob, Reply};
use crate::spec::{ChannelSpec, ModelParams, SpecError, Transport};
use crate::transport::model::{ModelUdpChannel, ModelUdpSlots};
use crate::transport::shm::{self, ShmChannel, ShmSlots, Side};
use crate::transport::stream::SlotEnd;
use crate::transport::udp::{UdpChannel, UdpSlots};
use crate::transport::{Channel, TransportError};
use crate::verbs::{self, VerbsConfig, VerbsError};

/// What a session runs on its channel, as far as the handshake cares:
/// the end each transport makes for it and what its Hello adds. The
/// server learns the shape from the Hello (`params.stream`).
pub trait Shape {
    /// This end of the channel, as its user drives it.
    type End;
    /// A UDP end before it is connected.
    type Udp: UdpEnd;
    /// A verbs end prepared (QP, registered buffers), waiting for its peer.
    type Verbs: PreparedEnd<End = Self::End>;

    /// The shape's own check of the channel `spec` (after [`ChannelSpec::check`]).
    fn check(&self, spec: &ChannelSpec) -> Result<(), SpecError>;
    /// Whether the session exchanges hardware completion timestamps.
    fn stamps(&self, spec: &ChannelSpec) -> bool;
    /// What the client's Hello params carry beside the channel's op,
    /// poll, model and `hw_timestamps` (which [`open_client`] puts over them).
    fn ask(&self, spec: &ChannelSpec) -> Map<String, Value>;
    /// A UDP socket bound to `ip` (any port) for this shape.
    fn udp(&self, ip: IpAddr, spec: &ChannelSpec) -> Result<Self::Udp, OpenError>;
    /// The end over a connected UDP socket: the socket itself, or the
    /// `model` riding on it.
    fn over_udp(&self, u: Self::Udp, model: Option<ModelParams>, spec: &ChannelSpec) -> Self::End;
    /// The shared-memory ring at `path`: the server creates it, the client opens it.
    fn shm(&self, path: &Path, spec: &ChannelSpec, side: Side)
        -> Result<Self::End, TransportError>;
    /// This end's verbs resources and the endpoint to hand to the peer.
    fn verbs(&self, cfg: &VerbsConfig) -> Result<(Self::Verbs, verbs::Endpoint), VerbsError>;
}

/// A UDP end of either shape: bound, then connected to the peer's port.
pub trait UdpEnd {
    /// The address this end receives on.
    fn local_addr(&self) -> Result<SocketAddr, TransportError>;
    /// Connects to the peer: only its datagrams are received from now on.
    fn connect(&mut self, peer: SocketAddr) -> Result<(), TransportError>;
}

/// A verbs end of either shape, prepared and waiting for its peer.
pub trait PreparedEnd {
    /// The connected end.
    type End;
    /// Connects the QP to the peer's endpoint.
    fn connect(self, peer: &verbs::Endpoint) -> Result<Self::End, VerbsError>;
}

/// A channel of one message at a time (`ibprobe client`/`server`, the
/// daemon's rounds and responder).
#[derive(Clone, Debug, Default)]
pub struct OneMessage {
    /// What the client adds to its Hello's params (e.g. its probe
    /// configuration, for the server's log); the server side leaves it empty.
    pub params: Value,
}

impl Shape for OneMessage {
    type End = Box<dyn Channel>;
    type Udp = UdpChannel;
    type Verbs = verbs::Prepared;

    fn check(&self, _: &ChannelSpec) -> Result<(), SpecError> {
        Ok(())
    }
    fn stamps(&self, spec: &ChannelSpec) -> bool {
        spec.verbs.hw_timestamps
    }
    fn ask(&self, spec: &ChannelSpec) -> Map<String, Value> {
        let mut params = match &self.params {
            Value::Object(m) => m.clone(),
            _ => Map::new(),
        };
        params.entry("receiver").or_insert_with(|| {
            json!(Receiver {
                poll: spec.poll,
                ..Receiver::default()
            })
        });
        params
    }
    fn udp(&self, ip: IpAddr, spec: &ChannelSpec) -> Result<UdpChannel, OpenError> {
        udp_bound(ip, spec)
    }
    fn over_udp(&self, u: UdpChannel, model: Option<ModelParams>, spec: &ChannelSpec) -> Self::End {
        match model {
            Some(m) => Box::new(ModelUdpChannel::new(m, u, spec.size, model_clock())),
            None => Box::new(u),
        }
    }
    fn shm(
        &self,
        path: &Path,
        spec: &ChannelSpec,
        side: Side,
    ) -> Result<Self::End, TransportError> {
        Ok(Box::new(match side {
            Side::Server => ShmChannel::create(path, spec.size, side)?,
            Side::Client => ShmChannel::open(path, spec.size, side)?,
        }))
    }
    fn verbs(&self, cfg: &VerbsConfig) -> Result<(verbs::Prepared, verbs::Endpoint), VerbsError> {
        verbs::prepare(cfg)
    }
}

impl Shape for StreamHello {
    type End = Box<dyn SlotEnd>;
    type Udp = UdpSlots;
    type Verbs = verbs::PreparedSlots;

    fn check(&self, spec: &ChannelSpec) -> Result<(), SpecError> {
        self.spec.check(spec)
    }
    fn stamps(&self, _: &ChannelSpec) -> bool {
        false
    }
    fn ask(&self, _: &ChannelSpec) -> Map<String, Value> {
        Map::from_iter([("stream".to_string(), json!(self))])
    }
    fn udp(&self, ip: IpAddr, _: &ChannelSpec) -> Result<UdpSlots, OpenError> {
        Ok(UdpSlots::bind(SocketAddr::new(ip, 0), self.spec.slot_size)?)
    }
    fn over_udp(&self, u: UdpSlots, model: Option<ModelParams>, _: &ChannelSpec) -> Self::End {
        match model {
            Some(m) => Box::new(ModelUdpSlots::new(m, u, model_clock())),
            None => Box::new(u),
        }
    }
    fn shm(&self, path: &Path, _: &ChannelSpec, side: Side) -> Result<Self::End, TransportError> {
        let (slots, slot_size) = (self.spec.shm_ring_slots(), self.spec.slot_size);
        Ok(Box::new(match side {
            Side::Server => ShmSlots::create(path, slots, slot_size, side)?,
            Side::Client => ShmSlots::open(path, slots, slot_size, side)?,
        }))
    }
    fn verbs(
        &self,
        cfg: &VerbsConfig,
    ) -> Result<(verbs::PreparedSlots, verbs::Endpoint), VerbsError> {
        verbs::prepare_slots(cfg, self.spec.slots, self.spec.slot_size)
    }
}

impl UdpEnd for UdpChannel {
    fn local_addr(&self) -> Result<SocketAddr, TransportError> {
        UdpChannel::local_addr(self)
    }
    fn connect(&mut self, peer: SocketAddr) -> Result<(), TransportError> {
        UdpChannel::connect(self, peer)
    }
}

impl UdpEnd for UdpSlots {
    fn local_addr(&self) -> Result<SocketAddr, TransportError> {
        UdpSlots::local_addr(self)
    }
    fn connect(&mut self, peer: SocketAddr) -> Result<(), TransportError> {
        UdpSlots::connect(self, peer)
    }
}

impl PreparedEnd for verbs::Prepared {
    type End = Box<dyn Channel>;
    fn connect(self, peer: &verbs::Endpoint) -> Result<Self::End, VerbsError> {
        Ok(Box::new(verbs::Prepared::connect(self, peer)?))
    }
}

impl PreparedEnd for verbs::PreparedSlots {
    type End = Box<dyn SlotEnd>;
    fn connect(self, peer: &verbs::Endpoint) -> Result<Self::End, VerbsError> {
        Ok(Box::new(verbs::PreparedSlots::connect(self, peer)?))
    }
}

/// The client end of the handshake on `oob`: sends the Hello for `spec`
/// and `shape` and returns its end of the channel connected to the
/// server's.
pub fn open_client<S: Shape>(
    oob: &mut Oob,
    spec: &ChannelSpec,
    shape: &S,
) -> Result<S::End, SessionError> {
    spec.check()
        .and_then(|()| shape.check(spec))
        .map_err(OpenError::from)?;
    let local_ip = oob.local_addr().map_err(|e| err("connect", e))?.ip();
    let server_ip = oob.peer_addr().ip();
    let params = hello_params(spec, shape);
    let mut handshake = |endpoint| send_hello(oob, spec, &params, endpoint);
    Ok(match spec.transport {
        Transport::Udp | Transport::Model => {
            let mut u = shape.udp(local_ip, spec)?;
            let port = u.local_addr().map_err(OpenError::from)?.port();
            let ep = handshake(json!({ "port": port }))?;
            let sport = udp_port(&ep).ok_or_else(|| malformed("udp", &ep))?;
            u.connect(SocketAddr::new(server_ip, sport))
                .map_err(OpenError::from)?;
            shape.over_udp(u, model_of(spec), spec)
        }
        Transport::Shm => {
            let ep = handshake(Value::Null)?;
            let path = server_shm_path(&ep)?;
            shape
                .shm(path, spec, Side::Client)
                .map_err(|e| shm_elsewhere(e, server_ip))?
        }
        Transport::Rc | Transport::Uc | Transport::Ud => {
            let (prepared, ep) = VerbsConfig::new(spec)
                .and_then(|v| shape.verbs(&v))
                .map_err(OpenError::from)?;
            let theirs = handshake(serde_json::to_value(&ep).unwrap_or_default())?;
            if shape.stamps(spec) && theirs.get("hw_report") != Some(&json!(REPORT_VERSION)) {
                return Err(err(
                    "refused",
                    format!("server {server_ip} does not report hardware completion timestamps (version {REPORT_VERSION}); run the same ibprobe version on both ends, or run without --hw-timestamps"),
                ));
            }
            let theirs = server_verbs_endpoint(&theirs)?;
            prepared.connect(&theirs).map_err(OpenError::from)?
        }
    })
}

/// The Hello's params: what `shape` asks for, with the channel's op and
/// polling, its model and whether it asks for hardware timestamps put
/// over them.
fn hello_params<S: Shape>(spec: &ChannelSpec, shape: &S) -> Value {
    let mut params = shape.ask(spec);
    params.insert("op".into(), json!(spec.verbs.op));
    params.insert("poll".into(), json!(spec.poll));
    if let Some(m) = model_of(spec) {
        params.insert("model".into(), json!(m.to_string()));
    }
    if shape.stamps(spec) {
        params.insert("hw_timestamps".into(), json!(true));
    }
    Value::Object(params)
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

/// The client's UDP port from its Hello, or a refusal saying the
/// endpoint is malformed.
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
/// malformed.
fn client_verbs_endpoint(oob: &mut Oob, hello: &Hello) -> Result<verbs::Endpoint, SessionError> {
    serde_json::from_value(hello.endpoint.clone()).map_err(|e| {
        refuse(
            oob,
            format!("malformed verbs endpoint ({e}); run the same ibprobe version on both ends"),
        )
    })
}

/// The server end of the handshake: opens this end of the channel
/// `spec` and `shape` describe for the client's `hello`, and answers
/// Welcome with its endpoint. Any failure before the Welcome is sent to
/// the client as a refusal too.
pub fn open_server<S: Shape>(
    oob: &mut Oob,
    hello: &Hello,
    spec: &ChannelSpec,
    shape: &S,
) -> Result<S::End, SessionError> {
    let peer = oob.peer_addr();
    let local_ip = oob.local_addr().map_err(|e| err("protocol", e))?.ip();
    let with_model = match with_hello_model(spec, hello) {
        Ok(s) => s,
        Err(e) => return Err(refuse(oob, e)),
    };
    let spec = &with_model;
    if let Err(e) = spec.check().and_then(|()| shape.check(spec)) {
        return Err(refuse(oob, e.0));
    }
    let (end, endpoint) = match spec.transport {
        Transport::Udp | Transport::Model => {
            let cport = client_udp_port(oob, hello)?;
            let mut u = match shape.udp(local_ip, spec) {
                Ok(u) => u,
                Err(e) => return Err(refuse(oob, e.message)),
            };
            u.connect(SocketAddr::new(peer.ip(), cport))
                .map_err(OpenError::from)?;
            let port = u.local_addr().map_err(OpenError::from)?.port();
            (
                shape.over_udp(u, model_of(spec), spec),
                json!({ "port": port }),
            )
        }
        Transport::Shm => {
            let path = shm::default_path();
            match shape.shm(&path, spec, Side::Server) {
                Ok(s) => (s, json!({ "path": path.display().to_string() })),
                Err(e) => return Err(refuse(oob, e.to_string())),
            }
        }
        Transport::Rc | Transport::Uc | Transport::Ud => {
            let theirs = client_verbs_endpoint(oob, hello)?;
            let prepared = VerbsConfig::new(spec).and_then(|v| shape.verbs(&v));
            let (prepared, ours) = match prepared {
                Ok(p) => p,
                Err(e) => return Err(refuse(oob, e.message)),
            };
            let end = prepared.connect(&theirs).map_err(OpenError::from)?;
            let mut ours = serde_json::to_value(&ours).unwrap_or_default();
            if shape.stamps(spec) {
                // The client checks this: an older server would ignore
                // its ask and never send the report.
                ours["hw_report"] = json!(REPORT_VERSION);
            }
            (end, ours)
        }
    };
    oob.send(&Reply::Welcome { endpoint })
        .map_err(|e| err("protocol", e))?;
    Ok(end)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::spec::StreamSpec;
    use std::time::Duration;

    /// The Hello's params per shape, the fields a server reads (the wire
    /// format: a change here breaks older peers): a one-message client's
    /// own params under the channel's op, poll and `hw_timestamps` (its
    /// `receiver` kept); a stream's settings beside op and poll; the
    /// model on both.
    #[test]
    fn each_shape_asks_with_the_same_fields() {
        let mut spec = ChannelSpec::new(Transport::Rc, 64);
        spec.verbs.hw_timestamps = true;
        let (op, poll) = (json!(spec.verbs.op), json!(spec.poll));
        let mine = OneMessage {
            params: json!({ "op": "mine", "warmup": 5 }),
        };
        let receiver = json!(Receiver {
            poll: spec.poll,
            ..Receiver::default()
        });
        assert_eq!(
            hello_params(&spec, &mine),
            json!({ "op": op, "poll": poll, "warmup": 5, "hw_timestamps": true, "receiver": receiver })
        );
        let theirs = OneMessage {
            params: json!({ "receiver": "kept" }),
        };
        assert_eq!(hello_params(&spec, &theirs)["receiver"], "kept");
        let sh = StreamHello {
            spec: StreamSpec::default(),
            warmup: 0,
            consume_delay: Duration::ZERO,
            timeout: Duration::from_secs(1),
            workload: None,
        };
        assert_eq!(
            hello_params(&spec, &sh),
            json!({ "op": op, "poll": poll, "stream": sh })
        );
        let model = "L=1us,os=1us,or=1us,g=1us,G=1ns";
        spec.transport = Transport::Model;
        spec.model = Some(model.parse().unwrap());
        let m = json!(spec.model.unwrap().to_string());
        assert_eq!(hello_params(&spec, &sh)["model"], m);
        assert_eq!(hello_params(&spec, &OneMessage::default())["model"], m);
    }
}
