//! The handshake: one client opener ([`open_client`]) and one server
//! opener ([`open_server`]). Each end is made by its transport
//! (`transport::opener`; verbs here, through `crate::verbs`); what
//! differs between a one-message channel and a stream is a [`Shape`].

use std::net::IpAddr;

use serde_json::{json, Map, Value};

use super::error::{err, oob_err, protocol, refuse, SessionError};
use super::hello::{model_of, slot_format_is_ours, with_hello_model, StreamHello};
use crate::clock::hwts::REPORT_VERSION;
use crate::probe::config::Receiver;
use crate::probe::open::OpenError;
use crate::probe::session::oob::{Hello, Oob, Reply};
use crate::spec::{ChannelSpec, SpecError, SLOT_FORMAT};
use crate::transport::open::{Ask, Carry, End, EndError};
use crate::transport::stream::SlotEnd;
use crate::transport::{self, Channel};
use crate::verbs::{self, VerbsConfig, VerbsError};

/// What a session runs on its channel, as far as the handshake cares:
/// what its ends carry and what its Hello adds (the server learns the
/// shape from `params.stream`).
pub trait Shape {
    type End;
    /// A verbs end prepared, waiting for its peer.
    type Verbs: PreparedEnd<End = Self::End>;

    /// The shape's own check (after [`ChannelSpec::check`]).
    fn check(&self, _spec: &ChannelSpec) -> Result<(), SpecError> {
        Ok(())
    }
    /// Whether the session exchanges hardware completion timestamps.
    fn stamps(&self, _spec: &ChannelSpec) -> bool {
        false
    }
    /// The Hello's params beneath the channel's op, poll, model and
    /// `hw_timestamps`.
    fn ask(&self, spec: &ChannelSpec) -> Map<String, Value>;
    fn carry(&self) -> Carry<'_>;
    fn end(end: End) -> Self::End;
    fn verbs(&self, cfg: &VerbsConfig) -> Result<(Self::Verbs, verbs::Endpoint), VerbsError>;
    /// What the server's Welcome adds for [`Shape::check_welcome`].
    fn welcome(&self, _endpoint: &mut Value) {}
    fn check_welcome(&self, _theirs: &Value, _server: IpAddr) -> Result<(), SessionError> {
        Ok(())
    }
}

pub trait PreparedEnd {
    type End;
    fn connect(self, peer: &verbs::Endpoint) -> Result<Self::End, VerbsError>;
}

/// A channel of one message at a time.
#[derive(Clone, Debug, Default)]
pub struct OneMessage {
    /// What the client adds to its Hello's params (e.g. its probe
    /// configuration, for the server's log).
    pub params: Value,
}

impl Shape for OneMessage {
    type End = Box<dyn Channel>;
    type Verbs = verbs::Prepared;

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
    fn carry(&self) -> Carry<'_> {
        Carry::Messages
    }
    // Every `Opens` answers a carry with its own kind of end.
    fn end(end: End) -> Self::End {
        match end {
            End::Messages(ch) => ch,
            End::Slots(_) => unreachable!("a transport made slots for one-message ends"),
        }
    }
    fn verbs(&self, cfg: &VerbsConfig) -> Result<(verbs::Prepared, verbs::Endpoint), VerbsError> {
        verbs::prepare(cfg)
    }
}

impl Shape for StreamHello {
    type End = Box<dyn SlotEnd>;
    type Verbs = verbs::PreparedSlots;

    fn check(&self, spec: &ChannelSpec) -> Result<(), SpecError> {
        self.spec.check(spec)
    }
    fn ask(&self, _: &ChannelSpec) -> Map<String, Value> {
        Map::from_iter([
            ("stream".to_string(), json!(self)),
            ("slot_format".to_string(), json!(SLOT_FORMAT)),
        ])
    }
    fn carry(&self) -> Carry<'_> {
        Carry::Slots(&self.spec)
    }
    fn end(end: End) -> Self::End {
        match end {
            End::Slots(slots) => slots,
            End::Messages(_) => unreachable!("a transport made a channel for a stream"),
        }
    }
    fn verbs(
        &self,
        cfg: &VerbsConfig,
    ) -> Result<(verbs::PreparedSlots, verbs::Endpoint), VerbsError> {
        verbs::prepare_slots(cfg, self.spec.slots, self.spec.slot_size)
    }
    fn welcome(&self, endpoint: &mut Value) {
        if let Value::Object(m) = endpoint {
            m.insert("slot_format".into(), json!(SLOT_FORMAT));
        }
    }
    /// An older server ignores the client's `slot_format` and would read
    /// its compact slots as garbage: refused here, before the run.
    fn check_welcome(&self, theirs: &Value, server: IpAddr) -> Result<(), SessionError> {
        slot_format_is_ours(theirs.get("slot_format"), &format!("server {server}"))
            .map_err(|e| err("refused", e))
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

/// The client end of the handshake on `oob`: its end of the channel,
/// connected to the server's.
pub fn open_client<S: Shape>(
    oob: &mut Oob,
    spec: &ChannelSpec,
    shape: &S,
) -> Result<S::End, SessionError> {
    spec.check()
        .and_then(|()| shape.check(spec))
        .map_err(OpenError::from)?;
    let ask = Ask {
        local: oob.local_addr().map_err(|e| err("connect", e))?.ip(),
        peer: oob.peer_addr().ip(),
        spec,
        carry: shape.carry(),
    };
    let params = hello_params(spec, shape);
    let server_ip = ask.peer;
    let mut handshake = |endpoint| {
        let transport = spec.transport.name().into();
        let hello = Hello {
            transport,
            size: spec.size,
            params: params.clone(),
            endpoint,
        };
        oob.handshake(&hello).map_err(oob_err)
    };
    let Some(opens) = transport::opener(spec.transport) else {
        return verbs_client(spec, shape, ask.peer, handshake);
    };
    let (finish, ours) = opens
        .client(ask)
        .map_err(|e| client_error(e, &Value::Null))?;
    let theirs = handshake(ours)?;
    shape.check_welcome(&theirs, server_ip)?;
    let end = finish(&theirs).map_err(|e| client_error(e, &theirs))?;
    Ok(S::end(end))
}

fn verbs_client<S: Shape>(
    spec: &ChannelSpec,
    shape: &S,
    server_ip: IpAddr,
    mut handshake: impl FnMut(Value) -> Result<Value, SessionError>,
) -> Result<S::End, SessionError> {
    let (prepared, ep) = VerbsConfig::new(spec)
        .and_then(|v| shape.verbs(&v))
        .map_err(OpenError::from)?;
    let theirs = handshake(serde_json::to_value(&ep).unwrap_or_default())?;
    shape.check_welcome(&theirs, server_ip)?;
    if shape.stamps(spec) && theirs.get("hw_report") != Some(&json!(REPORT_VERSION)) {
        return Err(err(
            "refused",
            format!("server {server_ip} does not report hardware completion timestamps (version {REPORT_VERSION}); run the same ibprobe version on both ends, or run without --hw-timestamps"),
        ));
    }
    let malformed = |_| protocol(malformed_line("verbs", &theirs));
    let theirs = serde_json::from_value(theirs.clone()).map_err(malformed)?;
    Ok(prepared.connect(&theirs).map_err(OpenError::from)?)
}

/// The client's error when its transport could not make its end; `ep`:
/// the server's endpoint, once it came.
fn client_error(e: EndError, ep: &Value) -> SessionError {
    match e {
        EndError::Malformed(what) => protocol(malformed_line(what, ep)),
        EndError::Refused(m) => OpenError::refused(m).into(),
        EndError::Setup(m) => err("setup", m),
        EndError::Failed(e) => OpenError::from(e).into(),
    }
}

/// The Hello's params: `shape`'s, with the channel's own put over them.
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

fn malformed_line(what: &str, ep: &Value) -> String {
    format!("malformed {what} endpoint {ep}; run the same ibprobe version on both ends")
}

/// The server end of the handshake: opens its end for the client's
/// `hello` and answers Welcome; a failure before is sent as a refusal.
pub fn open_server<S: Shape>(
    oob: &mut Oob,
    hello: &Hello,
    spec: &ChannelSpec,
    shape: &S,
) -> Result<S::End, SessionError> {
    let (local, peer) = (
        oob.local_addr().map_err(protocol)?.ip(),
        oob.peer_addr().ip(),
    );
    let spec = &with_hello_model(spec, hello).map_err(|e| refuse(oob, e))?;
    if let Err(e) = spec.check().and_then(|()| shape.check(spec)) {
        return Err(refuse(oob, e.0));
    }
    let (end, mut endpoint) = match transport::opener(spec.transport) {
        Some(opens) => {
            let ask = Ask {
                local,
                peer,
                spec,
                carry: shape.carry(),
            };
            let (end, ours) = opens
                .server(ask, &hello.endpoint)
                .map_err(|e| server_error(oob, hello, e))?;
            (S::end(end), ours)
        }
        None => verbs_server(oob, hello, spec, shape)?,
    };
    shape.welcome(&mut endpoint);
    oob.send(&Reply::Welcome { endpoint }).map_err(protocol)?;
    Ok(end)
}

/// The server's error when its transport could not make its end.
fn server_error(oob: &mut Oob, hello: &Hello, e: EndError) -> SessionError {
    match e {
        EndError::Malformed(what) => refuse(oob, malformed_line(what, &hello.endpoint)),
        EndError::Refused(m) | EndError::Setup(m) => refuse(oob, m),
        EndError::Failed(e) => OpenError::from(e).into(),
    }
}

/// The server's verbs end, connected, and its Welcome's endpoint.
fn verbs_server<S: Shape>(
    oob: &mut Oob,
    hello: &Hello,
    spec: &ChannelSpec,
    shape: &S,
) -> Result<(S::End, Value), SessionError> {
    let theirs: verbs::Endpoint = serde_json::from_value(hello.endpoint.clone()).map_err(|e| {
        let why =
            format!("malformed verbs endpoint ({e}); run the same ibprobe version on both ends");
        refuse(oob, why)
    })?;
    let (prepared, ours) = VerbsConfig::new(spec)
        .and_then(|v| shape.verbs(&v))
        .map_err(|e| refuse(oob, e.message))?;
    let end = prepared.connect(&theirs).map_err(OpenError::from)?;
    let mut ours = serde_json::to_value(&ours).unwrap_or_default();
    if shape.stamps(spec) {
        // The client checks this: an older server would ignore its ask
        // and never send the report.
        ours["hw_report"] = json!(REPORT_VERSION);
    }
    Ok((end, ours))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::spec::{StreamSpec, Transport};
    use std::time::Duration;

    /// The Hello's params per shape: the wire format (a change here breaks
    /// older peers).
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
            json!({ "op": op, "poll": poll, "stream": sh, "slot_format": SLOT_FORMAT })
        );
        let model = "L=1us,os=1us,or=1us,g=1us,G=1ns";
        spec.transport = Transport::Model;
        spec.model = Some(model.parse().unwrap());
        let m = json!(spec.model.unwrap().to_string());
        assert_eq!(hello_params(&spec, &sh)["model"], m);
        assert_eq!(hello_params(&spec, &OneMessage::default())["model"], m);
    }
}
