//! What a client's Hello asks for ([`requested`], [`receiver`],
//! [`stream_hello`]), and the one check of it ([`admit`]: [`peer`]'s
//! bounds and a [`MemoryCap`]) before anything is allocated, opened or
//! waited on. Pure: no socket, no file.

use std::time::Duration;

use serde_json::{json, Value};

use crate::probe::config::{ProbeConfig, Receiver};
use crate::probe::session::oob::Hello;
use crate::spec::{
    check_peer_wait, peer, session_memory, show_bytes, ChannelSpec, ModelParams, Op, Poll,
    StreamSpec, StreamWorkload, Transport, SLOT_FORMAT,
};

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

/// The channel a Hello asks for, on this server's verbs device `dev`.
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
/// The model parameters of a `--transport model` spec.
pub(super) fn model_of(spec: &ChannelSpec) -> Option<ModelParams> {
    spec.model.filter(|_| spec.transport == Transport::Model)
}

/// `spec` with the client's `--model` (it wins: both ends must emulate
/// the same network); a malformed one is refused, not dropped.
pub(super) fn with_hello_model(spec: &ChannelSpec, hello: &Hello) -> Result<ChannelSpec, String> {
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

/// The memory cap a server holds sessions to ([`session_memory`]), and
/// the flag or config key that raises it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct MemoryCap {
    pub bytes: u64,
    pub raise: &'static str,
}

impl MemoryCap {
    pub fn default_with(raise: &'static str) -> MemoryCap {
        MemoryCap {
            bytes: peer::DEFAULT_MAX_SESSION_MEMORY,
            raise,
        }
    }
}

/// What a Hello that passed [`admit`] asks the server to open, and the
/// session's memory ([`session_memory`]).
#[derive(Clone, Debug, PartialEq)]
pub struct Admitted {
    pub spec: ChannelSpec,
    pub stream: Option<StreamHello>,
    pub receiver: Receiver,
    pub memory: u64,
}

/// The one check of a decoded Hello against the server's `spec`,
/// [`peer`]'s bounds and `cap`. Err: the line the client is refused with.
pub fn admit(hello: &Hello, spec: &ChannelSpec, cap: MemoryCap) -> Result<Admitted, String> {
    let spec = with_hello_model(spec, hello)?;
    spec.check().map_err(|e| e.0)?;
    let stream = stream_hello(hello).transpose()?;
    if let Some(sh) = &stream {
        sh.check_peer(&spec)?;
    }
    let receiver = receiver(hello)?;
    let delay = receiver.consume_delay;
    check_peer_wait("--consume-delay", delay, peer::MAX_CONSUME_DELAY).map_err(|e| e.0)?;
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

/// What a stream client asks of the server (its Hello's `params.stream`).
#[derive(Clone, Debug, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct StreamHello {
    pub spec: StreamSpec,
    pub warmup: u64,
    pub consume_delay: Duration,
    pub timeout: Duration,
    /// What the server runs on the stream: a [`StreamWorkload`]'s word,
    /// absent for [`StreamWorkload::Stream`] (see [`StreamHello::asking`]).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub workload: Option<String>,
}

impl StreamHello {
    /// None for the receiving loop.
    pub fn asking(w: StreamWorkload) -> Option<String> {
        (w != StreamWorkload::Stream).then(|| w.name().into())
    }

    /// None: a word this server does not serve.
    pub fn served(&self) -> Option<StreamWorkload> {
        StreamWorkload::ALL
            .iter()
            .copied()
            .find(|&w| Self::asking(w).as_deref() == self.workload.as_deref())
    }

    /// Every check of a stream a client asks a server for, over `ch`.
    pub fn check_peer(&self, ch: &ChannelSpec) -> Result<(), String> {
        self.spec.check(ch).map_err(|e| e.0)?;
        self.spec.check_peer().map_err(|e| e.0)?;
        if let (None, Some(w)) = (self.served(), &self.workload) {
            let named = StreamWorkload::ALL.iter().filter_map(|&w| Self::asking(w));
            let named: Vec<String> = named.map(|w| format!("{w:?}")).collect();
            return Err(format!(
                "stream workload {w:?} is not served (only the receiving loop and {}); run the same ibprobe version on both ends",
                named.join(", ")
            ));
        }
        if self.warmup > peer::MAX_WARMUP {
            return Err(format!(
                "--warmup {}: a server skips at most {} warm-up messages; lower --warmup",
                self.warmup,
                peer::MAX_WARMUP
            ));
        }
        check_peer_wait("--timeout", self.timeout, peer::MAX_TIMEOUT).map_err(|e| e.0)?;
        let delay = self.consume_delay;
        check_peer_wait("--consume-delay", delay, peer::MAX_CONSUME_DELAY).map_err(|e| e.0)
    }

    /// The receiving loop's configuration for messages of `size` bytes.
    pub fn receiver_config(&self, size: usize) -> ProbeConfig {
        ProbeConfig {
            size,
            warmup: self.warmup,
            timeout: self.timeout,
            consume_delay: self.consume_delay,
            ..ProbeConfig::default()
        }
    }
}

/// The stream a client's Hello asks for (None: a one-message channel).
pub fn stream_hello(hello: &Hello) -> Option<Result<StreamHello, String>> {
    let v = hello.params.get("stream")?;
    if let Err(e) = slot_format_is_ours(hello.params.get("slot_format"), "client") {
        return Some(Err(e));
    }
    Some(serde_json::from_value(v.clone()).map_err(|e| {
        format!("malformed stream settings {v} ({e}); run the same ibprobe version on both ends")
    }))
}

/// A peer's `slot_format` (absent before [`SLOT_FORMAT`] 2) against ours;
/// `who` the peer ("client", "server ...").
pub fn slot_format_is_ours(said: Option<&Value>, who: &str) -> Result<(), String> {
    if said == Some(&json!(SLOT_FORMAT)) {
        return Ok(());
    }
    let theirs = match said {
        None => "an older layout (no slot_format: 32 B of header and record per message)".into(),
        Some(v) => format!("layout {v}"),
    };
    Err(format!(
        "the {who} writes stream slots in {theirs}, this ibprobe in layout {SLOT_FORMAT}; run the same ibprobe version on both ends"
    ))
}
