//! The probe vocabulary, defined once: transports, verbs operations,
//! polling, inline and signaling policies, the verbs and stream knobs, the
//! sizes each transport carries and which combinations work.
//!
//! The CLI (`cli/args.rs`), the handshake and ibexporter's config all speak
//! these words: `FromStr`/`Display` is the spelling users write, serde the
//! one JSON and the handshake carry. Every static check of a channel is
//! [`ChannelSpec::check`], so a refusal reads the same whoever asked and
//! comes before any resource is created; checks that need the device
//! happen when it is opened (`crate::verbs::prepare`).

use std::fmt;
use std::ops::RangeInclusive;
use std::str::FromStr;

use serde::Serialize;

use ibhost::vocabulary;
pub use ibhost::words::SpecError;

fn bad<T>(m: impl Into<String>) -> Result<T, SpecError> {
    Err(SpecError(m.into()))
}

vocabulary! {
    /// Which transport carries the messages.
    Transport, "transport" {
        Shm = "shm", "Shared-memory ring (same host): the zero-latency reference.";
        Udp = "udp", "Kernel UDP sockets: the Ethernet reference.";
        Rc = "rc", "Verbs reliable connection.";
        Uc = "uc", "Verbs unreliable connection.";
        Ud = "ud", "Verbs unreliable datagram.";
        Model = "model", "A LogGP network of given parameters (--model L=..,os=..,or=..,g=..,G=..), emulated in real time (between processes on a UDP carrier, whose own costs add).";
    }
}

vocabulary! {
    /// Verbs queue pair transport type (the verbs subset of [`Transport`]).
    QpType, "QP type" {
        Rc = "rc", "Reliable connection.";
        Uc = "uc", "Unreliable connection.";
        Ud = "ud", "Unreliable datagram.";
    }
}

vocabulary! {
    /// What each verbs message is (`--op`).
    Op, "op" {
        Send = "send", "Send; consumes a receive on the peer.";
        SendImm = "send-imm", "Send with immediate (the sequence number in the immediate).";
        WriteImm = "write-imm", "RDMA write with immediate; consumes a receive, data lands in the peer's target buffer.";
        Write = "write", "RDMA write; the peer polls the last byte of its target buffer (as ib_write_lat does). No receive, no receive completion.";
    }
}

vocabulary! {
    /// How a loop waits for an arrival (`--poll`).
    Poll, "polling mode" {
        Busy = "busy", "Spin (ibv_poll_cq, a non-blocking read): lowest latency, one core at 100%.";
        Event = "event", "Sleep until something arrives (a verbs completion channel, poll(2) on the UDP socket).";
    }
}

impl Transport {
    /// The verbs QP type, for rc/uc/ud.
    pub fn qp_type(self) -> Option<QpType> {
        match self {
            Transport::Rc => Some(QpType::Rc),
            Transport::Uc => Some(QpType::Uc),
            Transport::Ud => Some(QpType::Ud),
            Transport::Shm | Transport::Udp | Transport::Model => None,
        }
    }

    pub fn is_verbs(self) -> bool {
        self.qp_type().is_some()
    }

    /// Whether event polling has something to sleep on (not the shm ring).
    pub fn can_sleep(self) -> bool {
        !matches!(self, Transport::Shm | Transport::Model)
    }

    /// The message sizes this transport carries with `op`, and why the
    /// bounds are what they are (for error messages).
    pub fn size_range(self, op: Op) -> (RangeInclusive<usize>, &'static str) {
        match self {
            Transport::Shm => (1..=SHM_MAX_SIZE, "one slot of the shared-memory ring"),
            Transport::Model => (
                1..=SHM_MAX_SIZE,
                "the model carries its messages in a shared-memory ring",
            ),
            Transport::Udp => (
                UDP_MIN_SIZE..=UDP_MAX_SIZE,
                "the payload carries an 8-byte sequence number; 65507 bytes is one datagram",
            ),
            Transport::Ud => (1..=UD_MAX_SIZE, "UD sends one packet"),
            Transport::Rc | Transport::Uc if op == Op::Write => (
                1..=VERBS_MAX_SIZE,
                "the receiver polls the last byte; a verbs length is 32 bits",
            ),
            Transport::Rc | Transport::Uc => (0..=VERBS_MAX_SIZE, "a verbs length is 32 bits"),
        }
    }

    pub fn check_size(self, op: Op, size: usize) -> Result<(), SpecError> {
        let (range, why) = self.size_range(op);
        if range.contains(&size) {
            return Ok(());
        }
        bad(format!(
            "{self} message size {size} B is out of range {}..={} B ({why}); pick a --size in that range",
            range.start(),
            range.end()
        ))
    }
}

impl From<QpType> for Transport {
    fn from(q: QpType) -> Transport {
        match q {
            QpType::Rc => Transport::Rc,
            QpType::Uc => Transport::Uc,
            QpType::Ud => Transport::Ud,
        }
    }
}

impl QpType {
    /// "RC", "UC", "UD", as verbs documents write them.
    pub fn upper(self) -> &'static str {
        match self {
            QpType::Rc => "RC",
            QpType::Uc => "UC",
            QpType::Ud => "UD",
        }
    }
}

impl Op {
    /// Whether the peer consumes a receive work request.
    pub fn needs_recv(self) -> bool {
        !matches!(self, Op::Write)
    }

    /// Whether the op is an RDMA write (needs the peer's rkey/address).
    pub fn is_write(self) -> bool {
        matches!(self, Op::Write | Op::WriteImm)
    }
}

/// Largest shm message: one ring slot.
pub const SHM_MAX_SIZE: usize = 1 << 20;
/// Smallest udp message: 8 bytes carry the sequence number.
pub const UDP_MIN_SIZE: usize = 8;
/// Largest udp message: one IPv4 datagram.
pub const UDP_MAX_SIZE: usize = 65_507;
/// Largest UD message: one packet at the largest MTU (the port's is checked later).
pub const UD_MAX_SIZE: usize = 4096;
/// Largest verbs message: a 32-bit length.
pub const VERBS_MAX_SIZE: usize = u32::MAX as usize;
/// The path MTUs verbs knows, in bytes.
pub const MTUS: [u32; 5] = [256, 512, 1024, 2048, 4096];

/// `--inline`: which messages go inline in the work request.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum InlineMode {
    /// Inline when the message fits the device's max inline.
    Auto,
    Off,
    /// Inline messages up to N bytes (N must not exceed the device max).
    Bytes(u32),
}

impl FromStr for InlineMode {
    type Err = SpecError;
    fn from_str(s: &str) -> Result<InlineMode, SpecError> {
        match s {
            "auto" => Ok(InlineMode::Auto),
            "off" | "0" => Ok(InlineMode::Off),
            n => n
                .parse()
                .map(InlineMode::Bytes)
                .map_err(|_| SpecError(format!("bad --inline {n:?}: auto | off | N bytes"))),
        }
    }
}

impl fmt::Display for InlineMode {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            InlineMode::Auto => f.write_str("auto"),
            InlineMode::Off => f.write_str("off"),
            InlineMode::Bytes(n) => write!(f, "{n}"),
        }
    }
}

/// `--signal`: which sends ask for a completion.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum SignalMode {
    Every,
    /// Every Nth send is signaled (1 <= N <= SQ depth).
    Period(u32),
    /// SQ depth / 2 (the thesis's best).
    Auto,
}

impl SignalMode {
    /// A stream's policy without `--signal`: a stream waits for no single send
    /// (signaling every send cost 2.5% of the rate on rxe, stream-design.md).
    pub const STREAM_DEFAULT: SignalMode = SignalMode::Auto;
}

impl FromStr for SignalMode {
    type Err = SpecError;
    fn from_str(s: &str) -> Result<SignalMode, SpecError> {
        match s {
            "every" | "1" => Ok(SignalMode::Every),
            "auto" => Ok(SignalMode::Auto),
            n => n
                .parse()
                .map(SignalMode::Period)
                .map_err(|_| SpecError(format!("bad --signal {n:?}: every | N | auto"))),
        }
    }
}

impl fmt::Display for SignalMode {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            SignalMode::Every => f.write_str("every"),
            SignalMode::Auto => f.write_str("auto"),
            SignalMode::Period(n) => write!(f, "{n}"),
        }
    }
}

/// The verbs knobs of a channel (ignored by shm and udp). `Default` is
/// the CLI's defaults.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct VerbsKnobs {
    /// None: the first device with an active port.
    pub dev: Option<String>,
    /// Receiver's device in one-way loopback (None: same as `dev`).
    pub peer_dev: Option<String>,
    pub port: u8,
    /// GID index (None: the IPv4-mapped RoCE v2 GID on Ethernet).
    pub gid_index: Option<u32>,
    pub op: Op,
    pub inline: InlineMode,
    /// Signaling policy; None: the workload's (every send for round trips
    /// and one-way probes, [`SignalMode::STREAM_DEFAULT`] for streams).
    pub signal: Option<SignalMode>,
    pub sq_depth: u32,
    pub rq_depth: u32,
    /// Receives kept posted (None: the RQ depth).
    pub rq_prepost: Option<u32>,
    /// Path MTU in bytes (None: the port's active MTU).
    pub mtu: Option<u32>,
    pub hugepages: bool,
    /// `--hw-timestamps`: completion queues that stamp each completion with
    /// the HCA's clock (refused where completion_timestamp_mask is 0).
    pub hw_timestamps: bool,
}

impl Default for VerbsKnobs {
    fn default() -> Self {
        VerbsKnobs {
            dev: None,
            peer_dev: None,
            port: 1,
            gid_index: None,
            op: Op::Send,
            inline: InlineMode::Auto,
            signal: None,
            sq_depth: 128,
            rq_depth: 128,
            rq_prepost: None,
            mtu: None,
            hugepages: false,
            hw_timestamps: false,
        }
    }
}

impl VerbsKnobs {
    /// Receives kept posted: `rq_prepost`, or the RQ depth.
    pub fn rq_prepost(&self) -> u32 {
        self.rq_prepost.unwrap_or(self.rq_depth)
    }
}

/// Everything needed to open a channel: the one description of a
/// channel that `probe::open`, the handshake and ibexporter share.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct ChannelSpec {
    pub transport: Transport,
    /// Message size in bytes.
    pub size: usize,
    pub poll: Poll,
    /// Ignored by shm and udp.
    pub verbs: VerbsKnobs,
    /// `--model`: the LogGP parameters of `--transport model`.
    pub model: Option<ModelParams>,
}

impl ChannelSpec {
    /// A channel of `transport` with messages of `size` bytes, busy
    /// polling and the default verbs knobs.
    pub fn new(transport: Transport, size: usize) -> ChannelSpec {
        ChannelSpec {
            transport,
            size,
            poll: Poll::Busy,
            verbs: VerbsKnobs::default(),
            model: None,
        }
    }

    /// Every static check (size, transport/op/poll, verbs knobs), as one
    /// line naming the limit and what to do.
    pub fn check(&self) -> Result<(), SpecError> {
        let (t, v) = (self.transport, &self.verbs);
        check_combo(t, v.op, self.poll)?;
        if t == Transport::Model && self.model.is_none() {
            return bad("--transport model needs its parameters: --model L=5us,os=1us,or=1.5us,g=2us,G=1ns (or --model spin)");
        }
        if t == Transport::Ud && self.size > UD_MAX_SIZE {
            return bad(format!(
                "UD message {} B > {UD_MAX_SIZE} B: UD sends one packet",
                self.size
            ));
        }
        if t.is_verbs() && v.op == Op::Write && self.size == 0 {
            return bad("write with size 0: the receiver polls the last byte (size >= 1)");
        }
        t.check_size(v.op, self.size)?;
        if !t.is_verbs() {
            return Ok(());
        }
        if v.sq_depth == 0 || v.rq_depth == 0 {
            return bad("SQ and RQ depth must be >= 1");
        }
        if let Some(SignalMode::Period(n)) = v.signal {
            if n == 0 {
                return bad("signal period 0: use every, N >= 1 or auto");
            }
            if n > v.sq_depth {
                return bad(format!(
                    "signal period {n} > SQ depth {}: the send queue would fill before a completion frees it",
                    v.sq_depth
                ));
            }
        }
        if v.rq_prepost() > v.rq_depth {
            return bad(format!(
                "rq prepost {} > RQ depth {}",
                v.rq_prepost(),
                v.rq_depth
            ));
        }
        if v.op.needs_recv() && v.rq_prepost() == 0 {
            return bad(format!("rq prepost 0: {} needs posted receives", v.op));
        }
        match v.mtu {
            Some(m) if !MTUS.contains(&m) => {
                bad(format!("mtu {m}: 256 | 512 | 1024 | 2048 | 4096"))
            }
            _ => Ok(()),
        }
    }
}

/// Checks a transport/op/poll combination.
pub fn check_combo(t: Transport, op: Op, poll: Poll) -> Result<(), SpecError> {
    match (t, op, poll) {
        (Transport::Ud, o, _) if o.is_write() => bad(format!(
            "{o} on UD: UD has no RDMA writes (use send or send-imm, or transport rc/uc)"
        )),
        (Transport::Shm | Transport::Udp | Transport::Model, o, _) if o != Op::Send => bad(format!(
            "{t} only sends messages, so op {o} does not apply; use op send (or leave op out), or a verbs transport"
        )),
        (_, Op::Write, Poll::Event) => bad("poll event with write: plain RDMA write raises no receive completion (use write-imm or poll busy)"),
        (Transport::Shm | Transport::Model, _, Poll::Event) => bad(format!(
            "--poll event with --transport {t}: the shared-memory ring has nothing to sleep on; use --transport udp|rc|uc|ud, or drop --poll"
        )),
        _ => Ok(()),
    }
}

/// Where the stamping thread (`--stamp-thread`) means something: one-way
/// verbs loopback, no inline data, room for the stamp. `other_clock`: the
/// flag that takes the arrival off this process's clock, if given.
pub fn check_stamp(
    t: Transport,
    inline: InlineMode,
    size: usize,
    other_clock: Option<&str>,
) -> Result<(), SpecError> {
    if t.qp_type().is_none() {
        return bad(format!(
            "--stamp-thread with --transport {t}: no HCA reads the buffer, so there is no \"before the HCA read\" to measure; use --transport rc|uc|ud"
        ));
    }
    if inline != InlineMode::Off {
        return bad(format!(
            "--stamp-thread with --inline {inline}: the CPU copies an inline payload into the work request at post time, so no HCA read happens later to split t_send at; pass --inline off"
        ));
    }
    if let Some(flag) = other_clock {
        return bad(format!(
            "--stamp-thread splits one-way latency on one clock, in loopback; drop {flag}"
        ));
    }
    if size < 24 {
        return bad(format!(
            "--stamp-thread with --size {size}: the stamp is bytes 8..16 of the payload, after the sequence number and before the last byte; use --size 24 or more"
        ));
    }
    Ok(())
}

/// Where hardware completion timestamps (`--hw-timestamps`) mean
/// something; whether the device stamps completions is known only when it
/// is opened (`verbs/setup.rs`).
pub fn check_hw_timestamps(
    t: Transport,
    signal: Option<SignalMode>,
    round_trip: bool,
    peer_dev: bool,
) -> Result<(), SpecError> {
    let signal = signal.unwrap_or(SignalMode::Every);
    if t.qp_type().is_none() {
        return bad(format!(
            "--hw-timestamps with --transport {t}: completion timestamps are taken by an RDMA device; use --transport rc|uc|ud on a device with a non-zero completion_timestamp_mask (ibprobe devices --json: completion_timestamps), or run without --hw-timestamps"
        ));
    }
    if !matches!(signal, SignalMode::Every | SignalMode::Period(1)) {
        return bad(format!(
            "--hw-timestamps with --signal {signal}: the split needs the send completion of every probe; pass --signal every (or leave --signal out)"
        ));
    }
    if !round_trip && t == Transport::Rc {
        return bad("--hw-timestamps in one-way loopback over rc: an RC send completes after the ACK, later than the arrival; use --transport ud or uc (or ibprobe client for the round-trip split)");
    }
    if !round_trip && peer_dev {
        return bad("--hw-timestamps with --peer-dev: the two devices' clocks differ and one-way loopback subtracts one from the other; drop --peer-dev (or use ibprobe server/client, whose split needs no shared clock)");
    }
    Ok(())
}

vocabulary! {
    /// How a stream's receiver gives credits back (`--credit-return`).
    CreditReturn, "credit return" {
        Piggyback = "piggyback", "In the header of reverse traffic (acks, echoes), or a small message when there is none.";
        Message = "message", "A small message every --credit-batch consumed slots.";
        Write = "write", "An RDMA write of the consumed-slot counter into the sender's memory (rc only).";
    }
}

vocabulary! {
    no_from_str
    /// The answering side of a paired workload (`probe/workload/`) a stream
    /// Hello's `workload` names (absent: the first).
    StreamWorkload {
        Stream = "stream", "The receiving loop of `ibprobe stream`.";
        Loggp = "loggp", "The answering loop of `ibprobe loggp`'s PRTT bursts.";
    }
}

/// Bytes at the start of every stream slot: total length, messages in
/// the slot, flags, piggybacked credits, first sequence number.
pub const SLOT_HEADER: usize = 16;
/// Bytes before each message's payload in a slot: its sequence number
/// and the tick the application handed it over.
pub const RECORD_HEADER: usize = 16;
/// Bytes before the payload of a compact slot (one whole message, batch
/// 1: header and record folded into one, `probe/workload/slot.rs`).
pub const COMPACT_HEADER: usize = 16;
/// The version of the stream slots' layout (`probe/workload/slot.rs`),
/// checked in the stream handshake. 2: the compact slot.
pub const SLOT_FORMAT: u32 = 2;

/// Bytes a data slot of `batch` messages of `size` bytes puts on the wire
/// (batch 1: a compact slot, unless `--stamp-thread`).
pub fn data_slot_bytes(batch: u32, size: usize) -> usize {
    match batch {
        0 | 1 => COMPACT_HEADER + size,
        k => SLOT_HEADER + k as usize * (RECORD_HEADER + size),
    }
}

/// The fewest slots an shm stream ring gets when `--slots` allows: room for
/// control slots besides the data in flight, so they never block the receiver.
pub const SHM_RING_MIN: u32 = 8;

/// A streaming workload's knobs (`ibprobe/docs/stream-design.md`);
/// [`StreamSpec::check`] holds every refusal of a combination.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, serde::Deserialize)]
pub struct StreamSpec {
    /// Slots per direction (every receive slot is posted up front).
    pub slots: u32,
    /// Bytes per slot; a message larger than a slot spans several.
    pub slot_size: usize,
    /// Credits: slots posted and not yet seen consumed (at most `slots`).
    pub window: u32,
    /// Messages packed into one slot before it is posted (1: no batching).
    pub batch: u32,
    /// A partial batch is posted this long after its first message.
    pub flush: Option<std::time::Duration>,
    /// Posted slots that may await an ack (None: no acks; 1: stop-and-wait).
    pub pipeline: Option<u32>,
    pub credit_return: CreditReturn,
    /// One credit return per this many consumed slots.
    pub credit_batch: u32,
}

impl Default for StreamSpec {
    fn default() -> Self {
        StreamSpec {
            slots: 64,
            slot_size: 4096,
            window: 64,
            batch: 1,
            flush: None,
            pipeline: None,
            credit_return: CreditReturn::Piggyback,
            credit_batch: 1,
        }
    }
}

impl CreditReturn {
    /// How a stream over `t` returns credits unless `--credit-return` says:
    /// on rc without acks [`CreditReturn::Write`] (no receive on the
    /// sender's side; measured in `ibprobe/docs/stream-design.md`); else,
    /// and with `--pipeline` (each ack carries a credit for free), piggyback.
    pub fn default_for(t: Transport, pipeline: Option<u32>) -> CreditReturn {
        if t == Transport::Rc && pipeline.is_none() {
            CreditReturn::Write
        } else {
            CreditReturn::Piggyback
        }
    }
}

impl StreamSpec {
    /// Consumed slots per credit return unless `--credit-batch` says: half
    /// the window for a counter write (free to read; the other half stays
    /// in flight), a quarter for a message (a receive on the sender's side).
    pub fn default_credit_batch(ret: CreditReturn, window: u32) -> u32 {
        let per = match ret {
            CreditReturn::Write => 2,
            CreditReturn::Piggyback | CreditReturn::Message => 4,
        };
        (window / per).max(1)
    }

    /// Slots of each shm ring: `--slots`, but at most twice what can be in
    /// flight (the window, or the pipeline depth when smaller) and at least
    /// [`SHM_RING_MIN`]: a longer ring only spreads the same messages over
    /// more cache lines (`ibprobe/docs/stream-design.md`). Both ends compute
    /// it from the same spec.
    pub fn shm_ring_slots(&self) -> u32 {
        let in_flight = self.pipeline.map_or(self.window, |d| d.min(self.window));
        self.slots
            .min(in_flight.saturating_mul(2).max(SHM_RING_MIN))
    }

    /// How many messages of `size` bytes fit one slot (0: it needs more).
    pub fn per_slot(&self, size: usize) -> usize {
        self.slot_size.saturating_sub(SLOT_HEADER) / (RECORD_HEADER + size)
    }

    /// `--stamp-thread` on this stream: the rules of [`check_stamp`] (`host`:
    /// to a server, on another clock), and every message in one slot (the
    /// last fragment of a longer one can be too short to keep the stamp).
    pub fn check_stamp(
        &self,
        t: Transport,
        inline: InlineMode,
        size: usize,
        host: bool,
    ) -> Result<(), SpecError> {
        check_stamp(t, inline, size, host.then_some("HOST"))?;
        if self.per_slot(size) == 0 {
            return bad(format!(
                "--stamp-thread with --size {size}: the message needs more than one slot of --slot-size {}, and a stamp is one slot's; use --slot-size {} or more",
                self.slot_size,
                SLOT_HEADER + RECORD_HEADER + size
            ));
        }
        Ok(())
    }

    /// Every static check of a stream over `ch`, as one line.
    pub fn check(&self, ch: &ChannelSpec) -> Result<(), SpecError> {
        let t = ch.transport;
        if self.slots == 0 {
            return bad("--slots 0: a stream needs at least 1 slot; e.g. --slots 64");
        }
        if self.window == 0 {
            return bad("--window 0: the sender could never post; pass --window N with N >= 1");
        }
        if self.window > self.slots {
            return bad(format!(
                "--window {} > --slots {}: a credit is a posted receive slot; raise --slots or lower --window",
                self.window, self.slots
            ));
        }
        if self.batch == 0 {
            return bad("--batch 0: a batch holds at least 1 message; --batch 1 is no batching");
        }
        let fit = self.per_slot(ch.size);
        if self.batch > 1 && (fit as u64) < u64::from(self.batch) {
            return bad(format!(
                "--batch {} x --size {} B does not fit a {} B slot ({SLOT_HEADER} B header, {RECORD_HEADER} B per message); {}",
                self.batch,
                ch.size,
                self.slot_size,
                match fit {
                    0 | 1 => "batch 1 fits; raise --slot-size to batch more".to_string(),
                    k => format!("at most --batch {k} fits, or raise --slot-size"),
                }
            ));
        }
        if self.flush.is_some_and(|f| f.is_zero()) {
            return bad("--flush 0: a partial batch would never wait; leave --flush out to flush only when full");
        }
        if let Some(d) = self.pipeline {
            if d == 0 {
                return bad("--pipeline 0: at least 1 slot must be allowed unacknowledged (1 is stop-and-wait)");
            }
            if d > self.window {
                return bad(format!(
                    "--pipeline {d} > --window {}: an unacknowledged slot also holds a credit; raise --window or lower --pipeline",
                    self.window
                ));
            }
        }
        if self.credit_return == CreditReturn::Write && t != Transport::Rc {
            return bad(format!(
                "--credit-return write with --transport {t}: the credit counter is an RDMA write, which needs rc; use piggyback or message"
            ));
        }
        if self.credit_batch == 0 || self.credit_batch > self.window {
            return bad(format!(
                "--credit-batch {}: use 1..={} (the window); a larger batch would hold every credit back",
                self.credit_batch, self.window
            ));
        }
        // A slot travels as one message, so the message-size table bounds
        // it from above; from below it must hold the header and one message.
        let (range, why) = t.size_range(Op::Send);
        let smallest = SLOT_HEADER + RECORD_HEADER + 1;
        if !(smallest..=*range.end()).contains(&self.slot_size) {
            return bad(format!(
                "--slot-size {} B with --transport {t}: use {smallest}..={} B ({why}, and room for the {SLOT_HEADER} B header and one message)",
                self.slot_size,
                range.end()
            ));
        }
        Ok(())
    }
}

/// The LogGP parameters of `--transport model` (`--model`), in
/// femtoseconds so that the sPIN paper's picosecond G is exact. `g` is
/// the gap between two messages' injections, `G` the gap per byte: a
/// message of `b` bytes occupies the link `g + G*b` and arrives
/// `o_s + G*b + L` after its send began (receiving it costs `o_r`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
pub struct ModelParams {
    pub l_fs: u64,
    pub os_fs: u64,
    pub or_fs: u64,
    pub g_fs: u64,
    /// G, per byte.
    pub big_g_fs: u64,
}

/// The sPIN paper's assumed future InfiniBand NIC (seed 002): o = 65 ns
/// (send and receive), g = 6.7 ns (150 M msg/s), G = 2.5 ps per BIT, so
/// 20 ps per byte, L = 50 ns of switch + 33.4 ns of wire = 83.4 ns.
pub const SPIN_PRESET: ModelParams = ModelParams {
    l_fs: 83_400_000,
    os_fs: 65_000_000,
    or_fs: 65_000_000,
    g_fs: 6_700_000,
    big_g_fs: 20_000,
};

impl ModelParams {
    /// (L, o_s, o_r, g, G) in fs (G in fs per byte).
    fn fs(&self) -> [u64; 5] {
        [self.l_fs, self.os_fs, self.or_fs, self.g_fs, self.big_g_fs]
    }

    /// (L, o_s, o_r, g, G) in ns (G in ns per byte).
    pub fn ns(&self) -> [f64; 5] {
        self.fs().map(|v| v as f64 / 1e6)
    }

    /// The smallest of L, o_s, o_r and g other than zero, in ns (for the
    /// real-time emulation's clock-resolution warning).
    pub fn smallest_ns(&self) -> f64 {
        let [l, os, or, g, _] = self.ns();
        [l, os, or, g]
            .into_iter()
            .filter(|v| *v > 0.0)
            .fold(f64::INFINITY, f64::min)
    }
}

impl std::fmt::Display for ModelParams {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let [l, os, or, g, big_g] = self.ns();
        write!(f, "L={l}ns,os={os}ns,or={or}ns,g={g}ns,G={big_g}ns")
    }
}

/// Parses `5us`, `1.5ns`, `20ps`, `1ms` into femtoseconds.
fn parse_fs(key: &str, v: &str) -> Result<u64, SpecError> {
    let v = v.trim();
    let (num, mult) = [("ps", 1e3), ("ns", 1e6), ("us", 1e9), ("ms", 1e12)]
        .iter()
        .find_map(|(u, m)| v.strip_suffix(u).map(|n| (n, *m)))
        .ok_or_else(|| {
            SpecError(format!(
                "--model {key}={v}: give a unit (ps, ns, us or ms), e.g. {key}=5us"
            ))
        })?;
    let x: f64 = num.trim().parse().map_err(|_| {
        SpecError(format!(
            "--model {key}={v}: {num:?} is not a number; e.g. {key}=1.5us"
        ))
    })?;
    if !x.is_finite() || x < 0.0 {
        return bad(format!(
            "--model {key}={v}: a LogGP parameter cannot be negative; use 0 or more"
        ));
    }
    let fs = (x * mult).round();
    if fs > 1e16 {
        return bad(format!(
            "--model {key}={v}: more than 10 s is not a network; use a smaller value"
        ));
    }
    Ok(fs as u64)
}

impl std::str::FromStr for ModelParams {
    type Err = SpecError;

    /// `L=5us,os=1us,or=1.5us,g=2us,G=1ns` (all five), or the preset
    /// `spin` with optional overrides (`spin,G=2.5ps`).
    fn from_str(s: &str) -> Result<ModelParams, SpecError> {
        let mut parts = s.split(',').map(str::trim).peekable();
        let mut v = [None; 5];
        if parts.next_if_eq(&"spin").is_some() {
            v = SPIN_PRESET.fs().map(Some);
        }
        const KEYS: [&str; 5] = ["L", "os", "or", "g", "G"];
        for part in parts {
            let (k, val) = part.split_once('=').ok_or_else(|| {
                SpecError(format!(
                    "--model {part:?}: write KEY=VALUE with a key of L, os, or, g, G (or the preset spin)"
                ))
            })?;
            let i = KEYS.iter().position(|x| *x == k.trim()).ok_or_else(|| {
                SpecError(format!(
                    "--model: unknown parameter {k:?}; the parameters are L, os, or, g, G (G per byte; the preset is spin)"
                ))
            })?;
            v[i] = Some(parse_fs(k.trim(), val)?);
        }
        let missing: Vec<&str> = KEYS
            .iter()
            .zip(v)
            .filter(|(_, x)| x.is_none())
            .map(|(k, _)| *k)
            .collect();
        if !missing.is_empty() {
            return bad(format!(
                "--model {s:?}: missing {}; give all of L, os, or, g, G (e.g. L=5us,os=1us,or=1.5us,g=2us,G=1ns) or start from the preset spin",
                missing.join(", ")
            ));
        }
        let [l_fs, os_fs, or_fs, g_fs, big_g_fs] = v.map(Option::unwrap_or_default);
        Ok(ModelParams {
            l_fs,
            os_fs,
            or_fs,
            g_fs,
            big_g_fs,
        })
    }
}

/// What a peer may ask of a server in its Hello, so `ibprobe server` and
/// ibexporter's responder refuse the same (`probe/session/hello.rs::admit`).
/// The CLI's own flags are not bound: an operator may ask their host for more.
pub mod peer {
    use std::time::Duration;

    /// Slots per direction of a stream: perftest's deepest queues are
    /// 8k; 4096 fill any window the measurements here use (64 by default)
    /// and keep a slot index far from overflow in every product below.
    pub const MAX_SLOTS: u32 = 4096;
    /// Messages packed into one slot: more than a 64 KiB datagram of
    /// 1-byte messages holds (17 B each) is never a batch that fits.
    pub const MAX_BATCH: u32 = 4096;
    /// Messages a stream or loggp client may announce as warm-up: a
    /// count the server only skips, bounded so every product of it stays
    /// far from u64 overflow.
    pub const MAX_WARMUP: u64 = 1 << 40;
    /// The longest `--timeout` a server honours: how long a vanished client
    /// can hold it (a lost message is declared after far less).
    pub const MAX_TIMEOUT: Duration = Duration::from_secs(10);
    /// The longest partial-batch flush timer a Hello may carry: the
    /// sender's, echoed back; as long as any wait it may cause here.
    pub const MAX_FLUSH: Duration = MAX_TIMEOUT;
    /// The longest time a server spends on each message it receives
    /// (`--consume-delay`, spun): a client cannot make it spin for long
    /// between two looks at the stop flag.
    pub const MAX_CONSUME_DELAY: Duration = Duration::from_millis(1);
    /// The longest a loggp session may stay silent before the server
    /// ends it (ten of its timeouts, at least 5 s, at most this).
    pub const MAX_LOGGP_IDLE: Duration = Duration::from_secs(30);
    /// The longest one message of `--transport model` may keep a server
    /// busy (o_s + g + G*b + L + o_r, spun without a look at the stop
    /// flag): a stop is seen within 100 ms between two messages.
    pub const MAX_MODEL_WAIT: Duration = Duration::from_millis(50);
    /// The memory a session may ask of a server unless its operator
    /// raises the cap (`ibprobe server --max-session-memory`, the
    /// responder's `max_session_memory`): ample for the default stream
    /// (64 slots of 4 KiB) and for 256 slots of 64 KiB datagrams.
    pub const DEFAULT_MAX_SESSION_MEMORY: u64 = 256 << 20;
    /// Model slots held by a receiver before their delivery time
    /// (`transport/model.rs`, `ModelUdpSlots`), counted in its memory.
    pub const MODEL_HELD_SLOTS: u64 = 256;
    /// Arrivals a model channel holds before their delivery time
    /// (`transport/model.rs`, 16 B each), counted in its memory.
    pub const MODEL_HELD_MESSAGES: u64 = 1 << 16;
    /// The slots of a one-message shm ring (`transport/shm.rs`), per
    /// direction, counted in its memory.
    pub const SHM_CHANNEL_SLOTS: u64 = 8;
}

/// A byte count as people write it: `4096`, `64KiB`, `256MiB`, `1GiB`
/// (binary units; `B` optional). For caps such as `--max-session-memory`.
pub fn parse_bytes(s: &str) -> Result<u64, SpecError> {
    let t = s.trim();
    let digits = t.find(|c: char| !c.is_ascii_digit()).unwrap_or(t.len());
    let (num, unit) = t.split_at(digits);
    let shift = match unit.trim() {
        "" | "B" => 0,
        "KiB" | "K" => 10,
        "MiB" | "M" => 20,
        "GiB" | "G" => 30,
        "TiB" | "T" => 40,
        u => {
            return bad(format!(
                "{s:?}: unknown unit {u:?}; write bytes with B, KiB, MiB, GiB or TiB, e.g. 256MiB"
            ))
        }
    };
    let n: u64 = num.parse().map_err(|_| {
        SpecError(format!(
            "{s:?} is not a byte count; write e.g. 256MiB or 1GiB"
        ))
    })?;
    n.checked_mul(1 << shift)
        .ok_or_else(|| SpecError(format!("{s:?} does not fit 64 bits; write a smaller size")))
}

/// `n` bytes for people: the largest binary unit that keeps one decimal.
pub fn show_bytes(n: u64) -> String {
    let units = [(40, "TiB"), (30, "GiB"), (20, "MiB"), (10, "KiB")];
    match units.iter().find(|(shift, _)| n >= 1u64 << shift) {
        Some((shift, u)) => format!("{:.1} {u}", n as f64 / (1u64 << shift) as f64),
        None => format!("{n} B"),
    }
}

impl StreamSpec {
    /// The bounds of [`peer`] on a stream a client asks a server for,
    /// beside [`StreamSpec::check`]'s rules (which hold for any stream).
    pub fn check_peer(&self) -> Result<(), SpecError> {
        use peer::{MAX_BATCH, MAX_SLOTS};
        if self.slots > MAX_SLOTS {
            return bad(format!(
                "--slots {}: a server serves at most {MAX_SLOTS} slots per direction; lower --slots",
                self.slots
            ));
        }
        if self.batch > MAX_BATCH {
            return bad(format!(
                "--batch {}: a server serves at most {MAX_BATCH}; lower --batch",
                self.batch
            ));
        }
        check_peer_wait("--flush", self.flush.unwrap_or_default(), peer::MAX_FLUSH)
    }
}

/// Refuses a wait a peer asks of a server (`flag`) longer than `max`.
pub fn check_peer_wait(
    flag: &str,
    asked: std::time::Duration,
    max: std::time::Duration,
) -> Result<(), SpecError> {
    if asked > max {
        return bad(format!(
            "{flag} {asked:?}: a server waits at most {max:?}; lower {flag}"
        ));
    }
    Ok(())
}

impl ModelParams {
    /// The longest one message of `bytes` keeps a server busy on this
    /// model (o_s + g + G*b + L + o_r), saturating.
    pub fn message_fs(&self, bytes: usize) -> u64 {
        let [l, os, or, g, big_g] = self.fs();
        [os, g, big_g.saturating_mul(bytes as u64), l, or]
            .into_iter()
            .fold(0, u64::saturating_add)
    }

    /// Refuses a model a peer asks a server to emulate whose one message
    /// of `bytes` would keep the server busy past [`peer::MAX_MODEL_WAIT`].
    pub fn check_peer(&self, bytes: usize) -> Result<(), SpecError> {
        let fs = self.message_fs(bytes);
        let max_fs = peer::MAX_MODEL_WAIT.as_nanos() as u64 * 1_000_000;
        if fs > max_fs {
            return bad(format!(
                "--model {self} with {bytes} B messages: one message takes {} ms (o_s + g + G*b + L + o_r), a server emulates at most {:?} per message; use smaller parameters or messages",
                fs / 1_000_000_000_000,
                peer::MAX_MODEL_WAIT
            ));
        }
        Ok(())
    }
}

/// The memory a server spends on one session of `ch` (and `stream`, if
/// asked): the transport's buffers and the receiving loop's queue. An upper
/// estimate in bytes, saturating, compared with the session-memory cap.
pub fn session_memory(ch: &ChannelSpec, stream: Option<&StreamSpec>) -> u64 {
    let line = |n: u64| n.saturating_add(63) / 64 * 64;
    let size = ch.size as u64;
    let v = &ch.verbs;
    let Some(s) = stream else {
        return match ch.transport {
            Transport::Udp => size.saturating_mul(2).saturating_add(1),
            Transport::Model => size
                .saturating_mul(2)
                .saturating_add(peer::MODEL_HELD_MESSAGES * 16),
            Transport::Shm => {
                line(size.saturating_add(8)).saturating_mul(2 * peer::SHM_CHANNEL_SLOTS)
            }
            Transport::Rc | Transport::Uc | Transport::Ud => line(size.saturating_add(64))
                .saturating_mul(u64::from(v.sq_depth) + u64::from(v.rq_prepost()) + 1),
        };
    };
    let slot = s.slot_size as u64;
    // The receiving loop's queue (a window of slots) and its spare slot.
    let queue = line(slot.max(64)).saturating_mul(u64::from(s.window) + 1);
    let end = match ch.transport {
        Transport::Udp => slot.saturating_mul(2),
        Transport::Model => slot.saturating_mul(peer::MODEL_HELD_SLOTS + 2),
        Transport::Shm => {
            line(slot.saturating_add(8)).saturating_mul(2 * u64::from(s.shm_ring_slots()))
        }
        Transport::Rc | Transport::Uc | Transport::Ud => {
            line(slot.saturating_add(64)).saturating_mul(2 * u64::from(s.slots) + 1)
        }
    };
    queue.saturating_add(end)
}
