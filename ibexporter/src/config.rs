//! The exporter's TOML configuration, checked completely at start.
//!
//! Why it exists: the exporter runs unattended for months; a typo found at
//! start (`probe.poll = "evnt"`) is a one-line fix, the same typo found by
//! a silent default is a wrong dashboard. So every key is known (unknown
//! keys are refused), every value is range-checked, and every refusal is
//! ONE line: `file:line:column: key = value: what is wrong; what to do`.
//!
//! [`load`] reads a file, [`parse`] parses text, [`Config::default`] is the
//! built-in default used when no file is given. The commented example
//! `ibexporter/examples/ibexporter.toml` shows every key with its default:
//!
//! ```toml
//! listen = "0.0.0.0:9427"        # HTTP address for /metrics (IP:port; [::]:9427 for IPv6)
//! web_config = "/etc/ibexporter/web.yml"  # optional: TLS / basic auth (Prometheus web config)
//! source = "hostA"               # this exporter's `source` label; default: the host name
//!
//! [local]                        # what is probed on this host without any target
//! hca_loopback = true            # every active port of every local HCA, in loopback
//! reference = ["shm", "udp"]     # reference transports (shm, udp), in loopback
//! host_wakeup = true             # SCHED_FIFO wake-up latency
//! wakeup_cpus = "all"            # "all" or a CPU list such as "2-3,6"
//!
//! [probe]
//! interval = "10s"               # one round per target per interval
//! probes_per_interval = 100      # messages per round
//! rate_hz = 1000                 # pacing inside a round
//! timeout = "1s"                 # per message; must be below interval
//! poll = "event"                 # busy | event
//! window = "5m"                  # sliding window of the percentile summary
//! sizes = [32]                   # message sizes in bytes
//! transport = "rc"               # default for remote targets: rc | uc | ud | udp
//! op = "send"                    # send | send-imm | write-imm | write (verbs only)
//!
//! [budget]
//! max_core_fraction = 0.01       # probing CPU as a share of one core; throttle above
//! min_interval = "10s"           # default: probe.interval
//! max_interval = "5m"
//!
//! [responder]
//! enabled = true
//! bind = "0.0.0.0:18515"
//!
//! [targets]
//! skip_self = true               # drop targets that are this exporter's own responder
//! resolve_timeout = "2s"         # bound on every DNS lookup
//! static = [ { host = "10.0.0.2", port = 18515, labels = { rack = "r1" }, transport = "udp", sizes = [32, 4096] } ]
//! file_sd = [ { path = "/etc/ibexporter/pinglist.json", refresh = "30s" } ]
//! dns = [ { name = "ibexporter.rdma.svc.cluster.local", port = 18515, refresh = "30s" } ]
//!
//! [cardinality]
//! max_peer_series = 200          # per-peer `target` values up to this many peers
//! group_label = "rack"           # above it, peers are aggregated by this label
//!
//! [tuning]                       # optional: watch an ibtune profile for drift
//! profile = "/etc/ibtune/latency.toml"
//! root = "/"
//! state_dir = "/var/lib/ibtune"
//! min_interval = "10s"
//! ```
//!
//! Every remote target (`static`, `file_sd`, `dns` entries) may set its own
//! `transport`, `op` and `sizes`; what it leaves out comes from `[probe]`.

use serde::Deserialize;
use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::net::{IpAddr, SocketAddr};
use std::ops::Range;
use std::path::{Path, PathBuf};
use std::time::Duration;
use toml::Spanned;

/// The default HTTP listen address (`ibexporter`'s registered-style port).
pub const DEFAULT_LISTEN: &str = "0.0.0.0:9427";
/// The default responder port; also the port assumed for targets that give none.
pub const DEFAULT_RESPONDER_PORT: u16 = 18515;
/// Label names the exporter sets itself; a target label may not reuse them
/// (it would clash with, or silently replace, the exporter's own label).
pub const RESERVED_LABELS: &[&str] = &[
    "source",
    "target",
    "transport",
    "op",
    "size",
    "le",
    "quantile",
    "result",
    "job",
    "instance",
];
/// The highest CPU number a CPU list may name (the kernel's NR_CPUS limit is 8192).
pub const MAX_CPU: usize = 8191;

// ---------------------------------------------------------------------------
// The validated configuration (what the rest of the exporter reads).
// ---------------------------------------------------------------------------

/// The whole, validated exporter configuration.
///
/// Why it exists: one typed value that the scheduler, the collectors and
/// `main` read, with every default filled in and every check done.
#[derive(Debug, Clone, PartialEq)]
pub struct Config {
    /// Where the HTTP server listens for `/metrics` (default `0.0.0.0:9427`).
    pub listen: SocketAddr,
    /// Optional Prometheus web config file (TLS, basic auth); parsed by `http`.
    pub web_config: Option<PathBuf>,
    /// This exporter's name in the `source` label (default: the host name).
    pub source: String,
    /// What is probed on this host itself.
    pub local: LocalConfig,
    /// How probes are run.
    pub probe: ProbeSettings,
    /// The CPU budget for probing and how throttling may stretch the interval.
    pub budget: BudgetConfig,
    /// The responder that answers other exporters' probes.
    pub responder: ResponderConfig,
    /// Where remote targets come from.
    pub targets: TargetsConfig,
    /// How many `target` label values are allowed before peers are grouped.
    pub cardinality: CardinalityConfig,
    /// The ibtune profile drift watch (`profile` = `None`: off).
    pub tuning: TuningSettings,
}

/// `[local]`: the built-in probes of this host.
///
/// Why it exists: a host with no peers still has useful latencies (HCA
/// loopback, the shm/udp references, scheduler wake-up).
#[derive(Debug, Clone, PartialEq)]
pub struct LocalConfig {
    /// Probe every active port of every local HCA in loopback (default true).
    pub hca_loopback: bool,
    /// Reference transports probed in loopback (default `["shm", "udp"]`).
    pub reference: Vec<Reference>,
    /// Measure SCHED_FIFO wake-up latency (default true).
    pub host_wakeup: bool,
    /// CPUs whose wake-up latency is measured (default all allowed CPUs).
    pub wakeup_cpus: CpuSelection,
}

/// A reference transport for `[local].reference`.
///
/// Why it exists: the zero-network baselines that HCA numbers are read against.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Reference {
    /// The shared-memory ring: the floor of what any transport can reach.
    Shm,
    /// Kernel UDP over loopback: the socket-stack baseline.
    Udp,
}

impl Reference {
    /// The config spelling (`shm`, `udp`).
    pub fn name(self) -> &'static str {
        match self {
            Reference::Shm => "shm",
            Reference::Udp => "udp",
        }
    }
}

/// A set of CPUs: all that this process may use, or an explicit list.
///
/// Why it exists: `wakeup_cpus = "all"` must follow the process's affinity
/// at run time, while a list is fixed at start.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum CpuSelection {
    /// Every CPU in the process's affinity mask, looked up at run time.
    All,
    /// These CPUs, sorted and without duplicates.
    List(Vec<usize>),
}

/// `[probe]`: how every probe round is run.
///
/// Why it exists: the knobs that trade measurement detail for load.
#[derive(Debug, Clone, PartialEq)]
pub struct ProbeSettings {
    /// One round per target per interval (default 10 s).
    pub interval: Duration,
    /// Messages per round (default 100).
    pub probes_per_interval: u32,
    /// Messages per second inside a round (default 1000).
    pub rate_hz: f64,
    /// A message with no answer after this long is lost (default 1 s; < interval).
    pub timeout: Duration,
    /// Busy or event polling (default event: probing must not burn a core).
    pub poll: Poll,
    /// Sliding window of the percentile summary (default 5 m; >= interval).
    pub window: Duration,
    /// Default message sizes in bytes (default `[32]`).
    pub sizes: Vec<usize>,
    /// Default transport for remote targets (default rc).
    pub transport: Transport,
    /// Default verbs operation for remote targets (default send).
    pub op: Op,
}

/// How a probe waits for an arrival.
///
/// Why it exists: busy polling is the lowest latency but costs a core;
/// a continuous exporter normally polls by event.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Poll {
    /// Spin on the completion queue / socket.
    Busy,
    /// Block on the completion channel / socket.
    Event,
}

impl Poll {
    /// The config spelling.
    pub fn name(self) -> &'static str {
        match self {
            Poll::Busy => "busy",
            Poll::Event => "event",
        }
    }

    /// The same choice in ibprobe's probe loop.
    pub fn to_probe(self) -> ibprobe::probe::config::Poll {
        match self {
            Poll::Busy => ibprobe::probe::config::Poll::Busy,
            Poll::Event => ibprobe::probe::config::Poll::Event,
        }
    }

    /// The same choice in ibprobe's verbs setup.
    pub fn to_verbs(self) -> ibprobe::verbs::PollMode {
        match self {
            Poll::Busy => ibprobe::verbs::PollMode::Busy,
            Poll::Event => ibprobe::verbs::PollMode::Event,
        }
    }
}

/// The transport a remote target is probed over.
///
/// Why it exists: part of a target's identity (the same peer may be probed
/// over RC and UDP) and of its `transport` label.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Transport {
    /// Verbs reliable connection.
    Rc,
    /// Verbs unreliable connection.
    Uc,
    /// Verbs unreliable datagram.
    Ud,
    /// Kernel UDP sockets.
    Udp,
}

impl Transport {
    /// The config and label spelling (`rc`, `uc`, `ud`, `udp`).
    pub fn name(self) -> &'static str {
        match self {
            Transport::Rc => "rc",
            Transport::Uc => "uc",
            Transport::Ud => "ud",
            Transport::Udp => "udp",
        }
    }

    /// Parses the config spelling (case-insensitive).
    pub fn parse(s: &str) -> Option<Transport> {
        match s.to_ascii_lowercase().as_str() {
            "rc" => Some(Transport::Rc),
            "uc" => Some(Transport::Uc),
            "ud" => Some(Transport::Ud),
            "udp" => Some(Transport::Udp),
            _ => None,
        }
    }

    /// The verbs QP type, or `None` for udp.
    pub fn qp_type(self) -> Option<ibprobe::verbs::QpType> {
        match self {
            Transport::Rc => Some(ibprobe::verbs::QpType::Rc),
            Transport::Uc => Some(ibprobe::verbs::QpType::Uc),
            Transport::Ud => Some(ibprobe::verbs::QpType::Ud),
            Transport::Udp => None,
        }
    }
}

/// What each verbs message is.
///
/// Why it exists: send and write latencies differ; the `op` label says which
/// was measured. Ignored (always `send`) for udp.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Op {
    /// Send (consumes a receive at the peer).
    Send,
    /// Send with immediate.
    SendImm,
    /// RDMA write with immediate.
    WriteImm,
    /// RDMA write, the peer polls memory.
    Write,
}

impl Op {
    /// The config and label spelling (`send`, `send-imm`, `write-imm`, `write`).
    pub fn name(self) -> &'static str {
        match self {
            Op::Send => "send",
            Op::SendImm => "send-imm",
            Op::WriteImm => "write-imm",
            Op::Write => "write",
        }
    }

    /// Parses the config spelling (case-insensitive; `_` accepted for `-`).
    pub fn parse(s: &str) -> Option<Op> {
        match s.to_ascii_lowercase().replace('_', "-").as_str() {
            "send" => Some(Op::Send),
            "send-imm" => Some(Op::SendImm),
            "write-imm" => Some(Op::WriteImm),
            "write" => Some(Op::Write),
            _ => None,
        }
    }

    /// The same operation in ibprobe's verbs setup.
    pub fn to_verbs(self) -> ibprobe::verbs::Op {
        match self {
            Op::Send => ibprobe::verbs::Op::Send,
            Op::SendImm => ibprobe::verbs::Op::SendImm,
            Op::WriteImm => ibprobe::verbs::Op::WriteImm,
            Op::Write => ibprobe::verbs::Op::Write,
        }
    }
}

/// `[budget]`: how much CPU probing may use.
///
/// Why it exists: an exporter must not disturb the real-time work it
/// watches; above the budget the scheduler stretches the interval.
#[derive(Debug, Clone, PartialEq)]
pub struct BudgetConfig {
    /// Probing CPU time as a share of one core, in (0, 1] (default 0.01).
    pub max_core_fraction: f64,
    /// The shortest interval throttling may return to (default: `probe.interval`).
    pub min_interval: Duration,
    /// The longest interval throttling may stretch to (default 5 m).
    pub max_interval: Duration,
}

/// `[responder]`: answering other exporters' probes.
///
/// Why it exists: exporters form a mesh; each one's responder is the
/// other end of everyone else's probes.
#[derive(Debug, Clone, PartialEq)]
pub struct ResponderConfig {
    /// Run the responder (default true).
    pub enabled: bool,
    /// Address it listens on (default `0.0.0.0:18515`).
    pub bind: SocketAddr,
}

/// How one remote target (or every target of one source) is probed.
///
/// Why it exists: each source may override the `[probe]` defaults.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TargetProbe {
    /// Transport (from the entry, else `probe.transport`).
    pub transport: Transport,
    /// Verbs operation (from the entry, else `probe.op`; `send` for udp).
    pub op: Op,
    /// Message sizes (from the entry, else `probe.sizes`).
    pub sizes: Vec<usize>,
}

/// `[targets]`: where remote targets come from.
///
/// Why it exists: the inputs of [`crate::targets::TargetSet`].
#[derive(Debug, Clone, PartialEq)]
pub struct TargetsConfig {
    /// Skip targets whose address is one of this host's and whose port is the
    /// responder's (default true): a mesh does not probe itself.
    pub skip_self: bool,
    /// Bound on every DNS lookup (default 2 s).
    pub resolve_timeout: Duration,
    /// `static`: fixed targets.
    pub static_targets: Vec<StaticTarget>,
    /// `file_sd`: Prometheus file_sd JSON pinglists.
    pub file_sd: Vec<FileSdSource>,
    /// `dns`: names whose every A/AAAA record is a target.
    pub dns: Vec<DnsSource>,
}

/// One `targets.static` entry.
///
/// Why it exists: the simplest way to name a few peers.
#[derive(Debug, Clone, PartialEq)]
pub struct StaticTarget {
    /// An IP address or a DNS name (resolved with a timeout, first address used).
    pub host: String,
    /// The peer's responder port (default 18515).
    pub port: u16,
    /// Extra labels on this target's series.
    pub labels: BTreeMap<String, String>,
    /// Transport, op and sizes.
    pub probe: TargetProbe,
}

/// One `targets.file_sd` entry.
///
/// Why it exists: pinglists generated by a controller (as in Pingmesh),
/// in Prometheus' file_sd JSON format.
#[derive(Debug, Clone, PartialEq)]
pub struct FileSdSource {
    /// The JSON file.
    pub path: PathBuf,
    /// How often its size/mtime is checked (default 30 s); SIGHUP forces a reload.
    pub refresh: Duration,
    /// Port for targets written without one (default 18515).
    pub port: u16,
    /// Labels added to every target of the file (the file's labels win).
    pub labels: BTreeMap<String, String>,
    /// Transport, op and sizes, unless a group sets `__transport`, `__op`, `__sizes`.
    pub probe: TargetProbe,
}

/// One `targets.dns` entry.
///
/// Why it exists: a headless Kubernetes Service names every exporter pod.
#[derive(Debug, Clone, PartialEq)]
pub struct DnsSource {
    /// The name to resolve (all A and AAAA records).
    pub name: String,
    /// The responder port of every address (default 18515).
    pub port: u16,
    /// How often the name is resolved again (default 30 s).
    pub refresh: Duration,
    /// Labels added to every target.
    pub labels: BTreeMap<String, String>,
    /// Transport, op and sizes.
    pub probe: TargetProbe,
}

/// `[cardinality]`: bounds the number of series.
///
/// Why it exists: per-peer series grow with the mesh; see
/// [`crate::targets::cardinality`] for the formula.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CardinalityConfig {
    /// Up to this many peers, each has its own `target` value (default 200).
    pub max_peer_series: usize,
    /// Above it, peers are grouped by this target label (default `rack`).
    pub group_label: String,
}

/// `[tuning]`: watch an ibtune profile for drift.
///
/// Why it exists: drift (an IRQ moved back) explains latency changes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TuningSettings {
    /// The profile (file or ibtune name); `None`: no drift watch (default).
    pub profile: Option<PathBuf>,
    /// Host root (default `/`).
    pub root: PathBuf,
    /// ibtune's state directory (default `/var/lib/ibtune`).
    pub state_dir: PathBuf,
    /// Scrapes within this time of the last verification reuse it (default 10 s).
    pub min_interval: Duration,
}

impl TuningSettings {
    /// The drift collector's configuration, or `None` when no profile is set.
    pub fn collector_config(&self) -> Option<crate::collect::tuning::TuningConfig> {
        let profile = self.profile.clone()?;
        let mut c = crate::collect::tuning::TuningConfig::new(profile);
        c.root = self.root.clone();
        c.state_dir = self.state_dir.clone();
        c.min_interval = self.min_interval;
        Some(c)
    }
}

impl Default for Config {
    /// The built-in default: what the exporter does without a config file.
    fn default() -> Self {
        parse("", "<built-in default>").expect("the built-in default is valid")
    }
}

// ---------------------------------------------------------------------------
// Errors.
// ---------------------------------------------------------------------------

/// Why a configuration was refused: one line, with file, position and key.
///
/// Why it exists: the operator must be able to fix the file from this line
/// alone (`ibexporter.toml:12:9: probe.poll = "evnt": unknown polling
/// mode; use busy or event`).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{}", self.render())]
pub struct ConfigError {
    /// The file name (or the origin name given to [`parse`]).
    pub origin: String,
    /// 1-based line and column (in characters), when known.
    pub pos: Option<(usize, usize)>,
    /// The dotted key (`probe.poll`, `targets.static[1].port`), when known.
    pub key: Option<String>,
    /// What is wrong and what to do, one line.
    pub message: String,
}

impl ConfigError {
    fn render(&self) -> String {
        let mut s = self.origin.clone();
        if let Some((l, c)) = self.pos {
            let _ = write!(s, ":{l}:{c}");
        }
        let _ = write!(s, ": {}", self.message);
        s.replace(['\n', '\r'], " ")
    }
}

/// A 1-based (line, column) of a byte offset; column counts characters.
fn line_col(text: &str, offset: usize) -> (usize, usize) {
    let mut offset = offset.min(text.len());
    while !text.is_char_boundary(offset) {
        offset -= 1;
    }
    let before = &text[..offset];
    let line = before.matches('\n').count() + 1;
    let start = before.rfind('\n').map(|i| i + 1).unwrap_or(0);
    (line, before[start..].chars().count() + 1)
}

/// Formats a value the way it appears in TOML, for messages.
fn q(s: &str) -> String {
    format!("{s:?}")
}

struct Ctx<'a> {
    origin: &'a str,
    text: &'a str,
}

impl Ctx<'_> {
    /// `origin:line:col: key = value: message`.
    fn bad(&self, span: Range<usize>, key: &str, value: &str, message: &str) -> ConfigError {
        ConfigError {
            origin: self.origin.to_string(),
            pos: Some(line_col(self.text, span.start)),
            key: Some(key.to_string()),
            message: format!("{key} = {value}: {message}"),
        }
    }

    fn bad_s<T>(&self, v: &Spanned<T>, key: &str, value: &str, message: &str) -> ConfigError {
        self.bad(v.span(), key, value, message)
    }

    fn duration(&self, v: &Spanned<String>, key: &str) -> Result<Duration, ConfigError> {
        parse_duration(v.get_ref()).map_err(|e| self.bad_s(v, key, &q(v.get_ref()), &e))
    }

    fn positive_duration(&self, v: &Spanned<String>, key: &str) -> Result<Duration, ConfigError> {
        let d = self.duration(v, key)?;
        if d.is_zero() {
            return Err(self.bad_s(
                v,
                key,
                &q(v.get_ref()),
                "must be longer than zero; give a positive duration such as \"10s\"",
            ));
        }
        Ok(d)
    }

    fn port(&self, v: &Spanned<i64>, key: &str) -> Result<u16, ConfigError> {
        match u16::try_from(*v.get_ref()) {
            Ok(p) if p > 0 => Ok(p),
            _ => Err(self.bad_s(
                v,
                key,
                &v.get_ref().to_string(),
                "not a port; use 1..=65535 (the responder's default is 18515)",
            )),
        }
    }

    fn socket_addr(&self, v: &Spanned<String>, key: &str) -> Result<SocketAddr, ConfigError> {
        v.get_ref().trim().parse().map_err(|_| {
            self.bad_s(
                v,
                key,
                &q(v.get_ref()),
                "not an IP:port address; write e.g. \"0.0.0.0:9427\" or \"[::]:9427\" (no host names)",
            )
        })
    }
}

// ---------------------------------------------------------------------------
// Durations.
// ---------------------------------------------------------------------------

const UNITS: &[(&str, u128)] = &[
    ("ns", 1),
    ("us", 1_000),
    ("µs", 1_000),
    ("ms", 1_000_000),
    ("s", 1_000_000_000),
    ("m", 60_000_000_000),
    ("h", 3_600_000_000_000),
    ("d", 86_400_000_000_000),
];

/// Parses a duration such as `"250ms"`, `"10s"`, `"5m"`, `"1h"` or `"1m30s"`.
///
/// Why it exists: durations are written the way Prometheus writes them;
/// no duration crate is in the workspace. Units: `ns`, `us` (`µs`), `ms`,
/// `s`, `m`, `h`, `d`; whole numbers only; several parts add up. The error
/// says what was wrong, for the caller to put after the key.
pub fn parse_duration(s: &str) -> Result<Duration, String> {
    let t = s.trim();
    if t.is_empty() {
        return Err("empty duration; write a number with a unit, e.g. \"10s\"".into());
    }
    let mut total: u128 = 0;
    let mut rest = t;
    while !rest.is_empty() {
        let digits = rest.bytes().take_while(|b| b.is_ascii_digit()).count();
        if digits == 0 {
            return Err(format!(
                "not a duration at {rest:?}; write a whole number with a unit (ms, s, m, h), e.g. \"250ms\" or \"1m30s\""
            ));
        }
        let n: u128 = rest[..digits]
            .parse()
            .map_err(|_| "number too large; use a larger unit".to_string())?;
        rest = &rest[digits..];
        let unit_len = rest
            .char_indices()
            .find(|(_, c)| c.is_ascii_digit())
            .map(|(i, _)| i)
            .unwrap_or(rest.len());
        let unit = &rest[..unit_len];
        let Some(&(_, mult)) = UNITS.iter().find(|(u, _)| *u == unit) else {
            return Err(if unit.is_empty() {
                format!("{n} has no unit; add one of ns, us, ms, s, m, h, d (e.g. \"{n}s\")")
            } else {
                format!("unknown unit {unit:?}; use ns, us, ms, s, m, h or d")
            });
        };
        total = n
            .checked_mul(mult)
            .and_then(|v| total.checked_add(v))
            .ok_or_else(|| "duration too long; use at most a few years".to_string())?;
        rest = &rest[unit_len..];
    }
    let secs = u64::try_from(total / 1_000_000_000)
        .map_err(|_| "duration too long; use at most a few years".to_string())?;
    Ok(Duration::new(secs, (total % 1_000_000_000) as u32))
}

/// Formats a duration so that [`parse_duration`] reads it back exactly
/// (`1h30m`, `250ms`, `1s500ms`, `0s`).
///
/// Why it exists: config values in logs and on `/` read like the file.
pub fn format_duration(d: Duration) -> String {
    let mut n = d.as_nanos();
    if n == 0 {
        return "0s".into();
    }
    let mut out = String::new();
    for (unit, mult) in [
        ("d", 86_400_000_000_000u128),
        ("h", 3_600_000_000_000),
        ("m", 60_000_000_000),
        ("s", 1_000_000_000),
        ("ms", 1_000_000),
        ("us", 1_000),
        ("ns", 1),
    ] {
        if n >= mult {
            let _ = write!(out, "{}{unit}", n / mult);
            n %= mult;
        }
    }
    out
}

/// Parses a kernel-style CPU list (`"0-3,8,10-11"`) into sorted, unique CPUs.
///
/// Why it exists: `wakeup_cpus` is written as the kernel writes CPU lists;
/// the error says which part is wrong.
pub fn parse_cpulist(s: &str) -> Result<Vec<usize>, String> {
    let mut v = Vec::new();
    if s.trim().is_empty() {
        return Err("empty CPU list; write \"all\" or CPUs such as \"2-3,6\"".into());
    }
    for part in s.split(',') {
        let p = part.trim();
        let num = |x: &str| -> Result<usize, String> {
            let x = x.trim();
            let c: usize = x.parse().map_err(|_| {
                format!("{p:?} is not a CPU or a range; write CPUs as \"2\" or \"2-5\" separated by commas")
            })?;
            if c > MAX_CPU {
                return Err(format!(
                    "CPU {c} is above the kernel's limit of {MAX_CPU}; use a CPU this host has"
                ));
            }
            Ok(c)
        };
        match p.split_once('-') {
            Some((a, b)) => {
                let (a, b) = (num(a)?, num(b)?);
                if a > b {
                    return Err(format!(
                        "range {p:?} runs backwards; write it low to high, \"{b}-{a}\""
                    ));
                }
                v.extend(a..=b);
            }
            None => v.push(num(p)?),
        }
    }
    v.sort_unstable();
    v.dedup();
    Ok(v)
}

/// Whether `name` may be used as a target label name.
///
/// Why it exists: static, file_sd and dns labels all follow the same rule
/// (Prometheus' `[a-zA-Z_][a-zA-Z0-9_]*`, no `__` prefix, none of
/// [`RESERVED_LABELS`]); the error says which part is broken and what to do.
pub fn check_label_name(name: &str) -> Result<(), String> {
    let mut chars = name.chars();
    let ok = match chars.next() {
        Some(c) if c.is_ascii_alphabetic() || c == '_' => {
            chars.all(|c| c.is_ascii_alphanumeric() || c == '_')
        }
        _ => false,
    };
    if !ok {
        return Err(
            "not a Prometheus label name; use letters, digits and '_' (not starting with a digit)"
                .into(),
        );
    }
    if name.starts_with("__") {
        return Err(
            "label names starting with \"__\" are reserved by Prometheus; rename it".into(),
        );
    }
    if RESERVED_LABELS.contains(&name) {
        return Err(format!(
            "the exporter sets this label itself; rename it (reserved: {})",
            RESERVED_LABELS.join(", ")
        ));
    }
    Ok(())
}

/// Checks message sizes for a transport: 8..=65507 for udp (8 bytes hold the
/// sequence number, 65507 is one datagram), 1..=4294967295 for verbs.
///
/// Why it exists: shared by the config and file_sd `__sizes`.
pub fn check_size(transport: Transport, size: i64) -> Result<usize, String> {
    let (lo, hi) = match transport {
        Transport::Udp => (
            ibprobe::transport::udp::MIN_SIZE as i64,
            ibprobe::transport::udp::MAX_SIZE as i64,
        ),
        _ => (1, u32::MAX as i64),
    };
    if size < lo || size > hi {
        let why = if transport == Transport::Udp {
            "8 bytes hold the sequence number, 65507 is one datagram"
        } else {
            "a verbs message has 1 byte at least and fits a 32-bit length"
        };
        return Err(format!(
            "size {size} is out of range for {}; use {lo}..={hi} bytes ({why})",
            transport.name()
        ));
    }
    Ok(size as usize)
}

/// Checks a transport/op pair: UD has no RDMA writes; udp only sends.
///
/// Why it exists: these combinations fail deep in verbs setup; refused at
/// start they name the key to change.
pub fn check_combo(transport: Transport, op: Op) -> Result<(), String> {
    match (transport, op) {
        (Transport::Ud, Op::Write | Op::WriteImm) => Err(format!(
            "ud has no RDMA writes, so op {} cannot run over it; use op send or send-imm, or transport rc/uc",
            op.name()
        )),
        (Transport::Udp, o) if o != Op::Send => Err(format!(
            "udp only sends datagrams, so op {} does not apply; use op send (or leave op out), or a verbs transport",
            o.name()
        )),
        _ => Ok(()),
    }
}

/// Whether `host` is an IP address or a syntactically valid DNS name.
fn valid_host(host: &str) -> bool {
    if host.parse::<IpAddr>().is_ok() {
        return true;
    }
    !host.is_empty()
        && host.len() <= 253
        && host.trim_end_matches('.').split('.').all(|l| {
            !l.is_empty()
                && l.len() <= 63
                && !l.starts_with('-')
                && !l.ends_with('-')
                && l.chars()
                    .all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '_')
        })
}

// ---------------------------------------------------------------------------
// The raw TOML shape (positions kept).
// ---------------------------------------------------------------------------

type S<T> = Spanned<T>;
type RawLabels = BTreeMap<S<String>, S<String>>;

#[derive(Deserialize, Default)]
#[serde(deny_unknown_fields)]
struct RawConfig {
    listen: Option<S<String>>,
    web_config: Option<S<String>>,
    source: Option<S<String>>,
    #[serde(default)]
    local: RawLocal,
    #[serde(default)]
    probe: RawProbe,
    #[serde(default)]
    budget: RawBudget,
    #[serde(default)]
    responder: RawResponder,
    #[serde(default)]
    targets: RawTargets,
    #[serde(default)]
    cardinality: RawCardinality,
    #[serde(default)]
    tuning: RawTuning,
}

#[derive(Deserialize, Default)]
#[serde(deny_unknown_fields)]
struct RawLocal {
    hca_loopback: Option<bool>,
    reference: Option<Vec<S<String>>>,
    host_wakeup: Option<bool>,
    wakeup_cpus: Option<S<String>>,
}

#[derive(Deserialize, Default)]
#[serde(deny_unknown_fields)]
struct RawProbe {
    interval: Option<S<String>>,
    probes_per_interval: Option<S<i64>>,
    rate_hz: Option<S<f64>>,
    timeout: Option<S<String>>,
    poll: Option<S<String>>,
    window: Option<S<String>>,
    sizes: Option<S<Vec<S<i64>>>>,
    transport: Option<S<String>>,
    op: Option<S<String>>,
}

#[derive(Deserialize, Default)]
#[serde(deny_unknown_fields)]
struct RawBudget {
    max_core_fraction: Option<S<f64>>,
    min_interval: Option<S<String>>,
    max_interval: Option<S<String>>,
}

#[derive(Deserialize, Default)]
#[serde(deny_unknown_fields)]
struct RawResponder {
    enabled: Option<bool>,
    bind: Option<S<String>>,
}

#[derive(Deserialize, Default)]
#[serde(deny_unknown_fields)]
struct RawTargets {
    skip_self: Option<bool>,
    resolve_timeout: Option<S<String>>,
    #[serde(rename = "static", default)]
    static_: Vec<S<RawStatic>>,
    #[serde(default)]
    file_sd: Vec<S<RawFileSd>>,
    #[serde(default)]
    dns: Vec<S<RawDns>>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawStatic {
    host: S<String>,
    port: Option<S<i64>>,
    #[serde(default)]
    labels: RawLabels,
    transport: Option<S<String>>,
    op: Option<S<String>>,
    sizes: Option<S<Vec<S<i64>>>>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawFileSd {
    path: S<String>,
    refresh: Option<S<String>>,
    port: Option<S<i64>>,
    #[serde(default)]
    labels: RawLabels,
    transport: Option<S<String>>,
    op: Option<S<String>>,
    sizes: Option<S<Vec<S<i64>>>>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawDns {
    name: S<String>,
    port: Option<S<i64>>,
    refresh: Option<S<String>>,
    #[serde(default)]
    labels: RawLabels,
    transport: Option<S<String>>,
    op: Option<S<String>>,
    sizes: Option<S<Vec<S<i64>>>>,
}

#[derive(Deserialize, Default)]
#[serde(deny_unknown_fields)]
struct RawCardinality {
    max_peer_series: Option<S<i64>>,
    group_label: Option<S<String>>,
}

#[derive(Deserialize, Default)]
#[serde(deny_unknown_fields)]
struct RawTuning {
    profile: Option<S<String>>,
    root: Option<S<String>>,
    state_dir: Option<S<String>>,
    min_interval: Option<S<String>>,
}

// ---------------------------------------------------------------------------
// Loading and checking.
// ---------------------------------------------------------------------------

/// Reads and checks a config file.
///
/// Why it exists: `main`'s `--config FILE`. Errors name the file.
pub fn load(path: impl AsRef<Path>) -> Result<Config, ConfigError> {
    let path = path.as_ref();
    let origin = path.display().to_string();
    let text = std::fs::read_to_string(path).map_err(|e| ConfigError {
        origin: origin.clone(),
        pos: None,
        key: None,
        message: format!(
            "cannot read the config file: {e}; check the path, or run without --config for the built-in default"
        ),
    })?;
    parse(&text, &origin)
}

/// Parses and checks config text; `origin_name` (usually the file name)
/// starts every error message.
///
/// Why it exists: tests and `load` share one parser; an empty text gives
/// the built-in default.
pub fn parse(text: &str, origin_name: &str) -> Result<Config, ConfigError> {
    let cx = Ctx {
        origin: origin_name,
        text,
    };
    let raw = parse_raw(&cx)?;
    convert(&cx, raw)
}

fn parse_raw(cx: &Ctx) -> Result<RawConfig, ConfigError> {
    let de = toml::de::Deserializer::parse(cx.text).map_err(|e| toml_error(cx, &e, None))?;
    serde_path_to_error::deserialize(de).map_err(|e| {
        // Spanned<T> adds an internal segment; it means nothing to users.
        let path = e
            .path()
            .to_string()
            .replace(".$__serde_spanned_private_value", "");
        let path = (path != "." && !path.is_empty()).then_some(path);
        toml_error(cx, e.inner(), path)
    })
}

fn toml_error(cx: &Ctx, e: &toml::de::Error, path: Option<String>) -> ConfigError {
    let msg = e.message().trim().replace('\n', "; ");
    let fix = if msg.contains("unknown field") {
        "remove or rename the key; every key is documented in ibexporter/examples/ibexporter.toml"
    } else if msg.contains("missing field") {
        "add the missing key"
    } else if msg.contains("invalid type") || msg.contains("invalid value") {
        "give a value of the expected type (durations are strings such as \"10s\")"
    } else if msg.contains("duplicate key") {
        "give each key once"
    } else {
        "fix the TOML syntax at this position"
    };
    let message = match &path {
        Some(p) => format!("{p}: {msg}; {fix}"),
        None => format!("{msg}; {fix}"),
    };
    ConfigError {
        origin: cx.origin.to_string(),
        pos: e.span().map(|s| line_col(cx.text, s.start)),
        key: path,
        message,
    }
}

fn default_hostname() -> String {
    std::fs::read_to_string("/proc/sys/kernel/hostname")
        .ok()
        .map(|s| s.trim().to_string())
        .filter(|s| !s.is_empty())
        .or_else(|| std::env::var("HOSTNAME").ok().filter(|s| !s.is_empty()))
        .unwrap_or_else(|| "localhost".into())
}

fn convert(cx: &Ctx, raw: RawConfig) -> Result<Config, ConfigError> {
    let listen = match &raw.listen {
        Some(v) => cx.socket_addr(v, "listen")?,
        None => DEFAULT_LISTEN.parse().expect("valid default"),
    };
    let web_config = match &raw.web_config {
        Some(v) if v.get_ref().trim().is_empty() => {
            return Err(cx.bad_s(
                v,
                "web_config",
                "\"\"",
                "empty path; give the web config file, or remove the key for plain HTTP",
            ))
        }
        Some(v) => Some(PathBuf::from(v.get_ref())),
        None => None,
    };
    let source = match &raw.source {
        Some(v) => {
            let s = v.get_ref().trim();
            if s.is_empty() || s.chars().any(char::is_control) {
                return Err(cx.bad_s(
                    v,
                    "source",
                    &q(v.get_ref()),
                    "not usable as a label value; give this host's name, or remove the key to use the host name",
                ));
            }
            s.to_string()
        }
        None => default_hostname(),
    };

    let local = convert_local(cx, &raw.local)?;
    let probe = convert_probe(cx, &raw.probe)?;
    let budget = convert_budget(cx, &raw.budget, &probe)?;
    let responder = ResponderConfig {
        enabled: raw.responder.enabled.unwrap_or(true),
        bind: match &raw.responder.bind {
            Some(v) => cx.socket_addr(v, "responder.bind")?,
            None => SocketAddr::from(([0, 0, 0, 0], DEFAULT_RESPONDER_PORT)),
        },
    };
    let targets = convert_targets(cx, &raw.targets, &probe)?;
    let cardinality = CardinalityConfig {
        max_peer_series: match &raw.cardinality.max_peer_series {
            Some(v) => usize::try_from(*v.get_ref()).map_err(|_| {
                cx.bad_s(
                    v,
                    "cardinality.max_peer_series",
                    &v.get_ref().to_string(),
                    "must be 0 or more; 0 groups every peer, 200 is the default",
                )
            })?,
            None => 200,
        },
        group_label: match &raw.cardinality.group_label {
            Some(v) => {
                check_label_name(v.get_ref())
                    .map_err(|e| cx.bad_s(v, "cardinality.group_label", &q(v.get_ref()), &e))?;
                v.get_ref().clone()
            }
            None => "rack".into(),
        },
    };
    let t = &raw.tuning;
    let path = |v: &Option<S<String>>, key: &str, default: &str| -> Result<PathBuf, ConfigError> {
        match v {
            Some(v) if v.get_ref().trim().is_empty() => Err(cx.bad_s(
                v,
                key,
                "\"\"",
                &format!("empty path; give a path or remove the key (default {default:?})"),
            )),
            Some(v) => Ok(PathBuf::from(v.get_ref())),
            None => Ok(PathBuf::from(default)),
        }
    };
    let tuning = TuningSettings {
        profile: match &t.profile {
            Some(v) if v.get_ref().trim().is_empty() => {
                return Err(cx.bad_s(
                    v,
                    "tuning.profile",
                    "\"\"",
                    "empty profile; give a profile file or ibtune profile name, or remove the key to turn the drift watch off",
                ))
            }
            Some(v) => Some(PathBuf::from(v.get_ref())),
            None => None,
        },
        root: path(&t.root, "tuning.root", "/")?,
        state_dir: path(&t.state_dir, "tuning.state_dir", "/var/lib/ibtune")?,
        min_interval: match &t.min_interval {
            Some(v) => cx.duration(v, "tuning.min_interval")?,
            None => Duration::from_secs(10),
        },
    };
    Ok(Config {
        listen,
        web_config,
        source,
        local,
        probe,
        budget,
        responder,
        targets,
        cardinality,
        tuning,
    })
}

fn convert_local(cx: &Ctx, l: &RawLocal) -> Result<LocalConfig, ConfigError> {
    let mut reference = Vec::new();
    match &l.reference {
        Some(list) => {
            for (i, r) in list.iter().enumerate() {
                let key = format!("local.reference[{i}]");
                let v = match r.get_ref().to_ascii_lowercase().as_str() {
                    "shm" => Reference::Shm,
                    "udp" => Reference::Udp,
                    _ => {
                        return Err(cx.bad_s(
                            r,
                            &key,
                            &q(r.get_ref()),
                            "unknown reference transport; use shm or udp (HCAs are probed by hca_loopback)",
                        ))
                    }
                };
                if reference.contains(&v) {
                    return Err(cx.bad_s(
                        r,
                        &key,
                        &q(r.get_ref()),
                        "listed twice; give each reference once",
                    ));
                }
                reference.push(v);
            }
        }
        None => reference = vec![Reference::Shm, Reference::Udp],
    }
    let wakeup_cpus = match &l.wakeup_cpus {
        Some(v) if v.get_ref().trim().eq_ignore_ascii_case("all") => CpuSelection::All,
        Some(v) => CpuSelection::List(
            parse_cpulist(v.get_ref())
                .map_err(|e| cx.bad_s(v, "local.wakeup_cpus", &q(v.get_ref()), &e))?,
        ),
        None => CpuSelection::All,
    };
    Ok(LocalConfig {
        hca_loopback: l.hca_loopback.unwrap_or(true),
        reference,
        host_wakeup: l.host_wakeup.unwrap_or(true),
        wakeup_cpus,
    })
}

fn transport_of(cx: &Ctx, v: &S<String>, key: &str) -> Result<Transport, ConfigError> {
    Transport::parse(v.get_ref()).ok_or_else(|| {
        cx.bad_s(
            v,
            key,
            &q(v.get_ref()),
            "unknown transport; use rc, uc, ud or udp",
        )
    })
}

fn op_of(cx: &Ctx, v: &S<String>, key: &str) -> Result<Op, ConfigError> {
    Op::parse(v.get_ref()).ok_or_else(|| {
        cx.bad_s(
            v,
            key,
            &q(v.get_ref()),
            "unknown operation; use send, send-imm, write-imm or write",
        )
    })
}

fn sizes_of(
    cx: &Ctx,
    v: &S<Vec<S<i64>>>,
    key: &str,
    transport: Transport,
) -> Result<Vec<usize>, ConfigError> {
    if v.get_ref().is_empty() {
        return Err(cx.bad_s(
            v,
            key,
            "[]",
            "no sizes; give at least one size in bytes, e.g. [32]",
        ));
    }
    let mut out = Vec::new();
    for (i, s) in v.get_ref().iter().enumerate() {
        let k = format!("{key}[{i}]");
        let size = check_size(transport, *s.get_ref())
            .map_err(|e| cx.bad_s(s, &k, &s.get_ref().to_string(), &e))?;
        if out.contains(&size) {
            return Err(cx.bad_s(
                s,
                &k,
                &size.to_string(),
                "listed twice; give each size once",
            ));
        }
        out.push(size);
    }
    Ok(out)
}

fn convert_probe(cx: &Ctx, p: &RawProbe) -> Result<ProbeSettings, ConfigError> {
    let interval = match &p.interval {
        Some(v) => cx.positive_duration(v, "probe.interval")?,
        None => Duration::from_secs(10),
    };
    let probes_per_interval = match &p.probes_per_interval {
        Some(v) => match u32::try_from(*v.get_ref()) {
            Ok(n) if n >= 1 => n,
            _ => {
                return Err(cx.bad_s(
                    v,
                    "probe.probes_per_interval",
                    &v.get_ref().to_string(),
                    "must be 1..=4294967295; the default is 100",
                ))
            }
        },
        None => 100,
    };
    let max_rate = ibprobe::probe::config::MAX_RATE_HZ;
    let rate_hz = match &p.rate_hz {
        Some(v) => {
            let r = *v.get_ref();
            if !r.is_finite() || r <= 0.0 || r > max_rate {
                return Err(cx.bad_s(
                    v,
                    "probe.rate_hz",
                    &r.to_string(),
                    &format!("must be a rate above 0 and at most {max_rate} messages per second; the default is 1000"),
                ));
            }
            r
        }
        None => 1000.0,
    };
    if let Some(v) = &p.probes_per_interval {
        let round = probes_per_interval as f64 / rate_hz;
        if round >= interval.as_secs_f64() {
            return Err(cx.bad_s(
                v,
                "probe.probes_per_interval",
                &probes_per_interval.to_string(),
                &format!(
                    "at rate_hz {rate_hz} a round takes {round} s, not less than probe.interval {}; send fewer probes, raise rate_hz or lengthen interval",
                    format_duration(interval)
                ),
            ));
        }
    } else if probes_per_interval as f64 / rate_hz >= interval.as_secs_f64() {
        let (span, key, val) = match (&p.rate_hz, &p.interval) {
            (Some(r), _) => (r.span(), "probe.rate_hz", r.get_ref().to_string()),
            (None, Some(i)) => (i.span(), "probe.interval", q(i.get_ref())),
            (None, None) => (0..0, "probe.interval", "10s".into()),
        };
        return Err(cx.bad(
            span,
            key,
            &val,
            &format!(
                "a round of {probes_per_interval} probes at {rate_hz} Hz does not fit in probe.interval {}; raise rate_hz, lower probes_per_interval or lengthen interval",
                format_duration(interval)
            ),
        ));
    }
    let timeout = match &p.timeout {
        Some(v) => {
            let t = cx.positive_duration(v, "probe.timeout")?;
            if t >= interval {
                return Err(cx.bad_s(
                    v,
                    "probe.timeout",
                    &q(v.get_ref()),
                    &format!(
                        "must be shorter than probe.interval ({}), or a dead peer stalls every round; lower it (e.g. \"1s\")",
                        format_duration(interval)
                    ),
                ));
            }
            t
        }
        None => {
            let t = Duration::from_secs(1);
            if t >= interval {
                // Short intervals: the default timeout shrinks with them.
                interval / 2
            } else {
                t
            }
        }
    };
    let poll = match &p.poll {
        Some(v) => match v.get_ref().to_ascii_lowercase().as_str() {
            "busy" => Poll::Busy,
            "event" => Poll::Event,
            _ => {
                return Err(cx.bad_s(
                    v,
                    "probe.poll",
                    &q(v.get_ref()),
                    "unknown polling mode; use busy or event",
                ))
            }
        },
        None => Poll::Event,
    };
    let window = match &p.window {
        Some(v) => {
            let w = cx.positive_duration(v, "probe.window")?;
            if w < interval {
                return Err(cx.bad_s(
                    v,
                    "probe.window",
                    &q(v.get_ref()),
                    &format!(
                        "shorter than probe.interval ({}), so it would hold less than one round; make it at least the interval (e.g. \"5m\")",
                        format_duration(interval)
                    ),
                ));
            }
            w
        }
        None => Duration::from_secs(300).max(interval),
    };
    let transport = match &p.transport {
        Some(v) => transport_of(cx, v, "probe.transport")?,
        None => Transport::Rc,
    };
    let op = match &p.op {
        Some(v) => {
            let op = op_of(cx, v, "probe.op")?;
            // udp as default transport ignores op unless it is explicitly non-send.
            check_combo(transport, op).map_err(|e| cx.bad_s(v, "probe.op", &q(v.get_ref()), &e))?;
            op
        }
        None => Op::Send,
    };
    let sizes = match &p.sizes {
        Some(v) => sizes_of(cx, v, "probe.sizes", transport)?,
        None => vec![32],
    };
    Ok(ProbeSettings {
        interval,
        probes_per_interval,
        rate_hz,
        timeout,
        poll,
        window,
        sizes,
        transport,
        op,
    })
}

fn convert_budget(
    cx: &Ctx,
    b: &RawBudget,
    probe: &ProbeSettings,
) -> Result<BudgetConfig, ConfigError> {
    let max_core_fraction = match &b.max_core_fraction {
        Some(v) => {
            let f = *v.get_ref();
            if !(f > 0.0 && f <= 1.0) {
                return Err(cx.bad_s(
                    v,
                    "budget.max_core_fraction",
                    &f.to_string(),
                    "must be in (0, 1], a share of one core; e.g. 0.01 for 1 %",
                ));
            }
            f
        }
        None => 0.01,
    };
    let min_interval = match &b.min_interval {
        Some(v) => {
            let d = cx.positive_duration(v, "budget.min_interval")?;
            if d > probe.interval {
                return Err(cx.bad_s(
                    v,
                    "budget.min_interval",
                    &q(v.get_ref()),
                    &format!(
                        "longer than probe.interval ({}), which the budget could then never allow; make it at most the interval, or remove it",
                        format_duration(probe.interval)
                    ),
                ));
            }
            d
        }
        None => probe.interval,
    };
    let max_interval = match &b.max_interval {
        Some(v) => {
            let d = cx.positive_duration(v, "budget.max_interval")?;
            if d < probe.interval {
                return Err(cx.bad_s(
                    v,
                    "budget.max_interval",
                    &q(v.get_ref()),
                    &format!(
                        "shorter than probe.interval ({}); throttling only lengthens the interval, so make it at least that (e.g. \"5m\")",
                        format_duration(probe.interval)
                    ),
                ));
            }
            d
        }
        None => Duration::from_secs(300).max(probe.interval),
    };
    Ok(BudgetConfig {
        max_core_fraction,
        min_interval,
        max_interval,
    })
}

/// Resolves an entry's transport/op/sizes against the `[probe]` defaults.
fn target_probe(
    cx: &Ctx,
    key: &str,
    entry_span: Range<usize>,
    transport: &Option<S<String>>,
    op: &Option<S<String>>,
    sizes: &Option<S<Vec<S<i64>>>>,
    probe: &ProbeSettings,
) -> Result<TargetProbe, ConfigError> {
    let t = match transport {
        Some(v) => transport_of(cx, v, &format!("{key}.transport"))?,
        None => probe.transport,
    };
    let o = match op {
        Some(v) => {
            let o = op_of(cx, v, &format!("{key}.op"))?;
            check_combo(t, o)
                .map_err(|e| cx.bad_s(v, &format!("{key}.op"), &q(v.get_ref()), &e))?;
            o
        }
        // udp inherits no verbs op.
        None if t == Transport::Udp => Op::Send,
        None => {
            if let Err(e) = check_combo(t, probe.op) {
                let (span, k, val) = match transport {
                    Some(v) => (v.span(), format!("{key}.transport"), q(v.get_ref())),
                    None => (entry_span, key.to_string(), "{...}".into()),
                };
                return Err(cx.bad(
                    span,
                    &k,
                    &val,
                    &format!(
                        "with op {} inherited from probe.op: {e}; set op on this entry",
                        probe.op.name()
                    ),
                ));
            }
            probe.op
        }
    };
    let s = match sizes {
        Some(v) => sizes_of(cx, v, &format!("{key}.sizes"), t)?,
        None => {
            // The defaults were checked for probe.transport; check them for this one.
            for &size in &probe.sizes {
                if let Err(e) = check_size(t, size as i64) {
                    let (span, k, val) = match transport {
                        Some(v) => (v.span(), format!("{key}.transport"), q(v.get_ref())),
                        None => (entry_span.clone(), key.to_string(), "{...}".into()),
                    };
                    return Err(cx.bad(
                        span,
                        &k,
                        &val,
                        &format!(
                            "with sizes inherited from probe.sizes: {e}; set sizes on this entry"
                        ),
                    ));
                }
            }
            probe.sizes.clone()
        }
    };
    Ok(TargetProbe {
        transport: t,
        op: o,
        sizes: s,
    })
}

fn labels_of(
    cx: &Ctx,
    raw: &RawLabels,
    key: &str,
) -> Result<BTreeMap<String, String>, ConfigError> {
    let mut out = BTreeMap::new();
    for (k, v) in raw {
        let name = k.get_ref();
        check_label_name(name)
            .map_err(|e| cx.bad_s(k, &format!("{key}.labels.{name}"), &q(v.get_ref()), &e))?;
        out.insert(name.clone(), v.get_ref().clone());
    }
    Ok(out)
}

fn refresh_of(cx: &Ctx, v: &Option<S<String>>, key: &str) -> Result<Duration, ConfigError> {
    match v {
        Some(v) => cx.positive_duration(v, key),
        None => Ok(Duration::from_secs(30)),
    }
}

fn convert_targets(
    cx: &Ctx,
    t: &RawTargets,
    probe: &ProbeSettings,
) -> Result<TargetsConfig, ConfigError> {
    let resolve_timeout = match &t.resolve_timeout {
        Some(v) => cx.positive_duration(v, "targets.resolve_timeout")?,
        None => Duration::from_secs(2),
    };
    let mut static_targets: Vec<StaticTarget> = Vec::new();
    let mut seen: BTreeMap<(String, u16, Transport), (usize, usize)> = BTreeMap::new();
    for (i, e) in t.static_.iter().enumerate() {
        let key = format!("targets.static[{i}]");
        let r = e.get_ref();
        let host = r.host.get_ref().trim();
        let host = host
            .strip_prefix('[')
            .and_then(|h| h.strip_suffix(']'))
            .unwrap_or(host);
        if !valid_host(host) {
            return Err(cx.bad_s(
                &r.host,
                &format!("{key}.host"),
                &q(r.host.get_ref()),
                "not an IP address or host name; give e.g. \"10.0.0.2\", \"fe80::1\" or \"node7.example\" (the port goes in port)",
            ));
        }
        let port = match &r.port {
            Some(v) => cx.port(v, &format!("{key}.port"))?,
            None => DEFAULT_RESPONDER_PORT,
        };
        let probe = target_probe(cx, &key, e.span(), &r.transport, &r.op, &r.sizes, probe)?;
        let id = (host.to_ascii_lowercase(), port, probe.transport);
        if let Some(&(j, line)) = seen.get(&id) {
            return Err(cx.bad_s(
                &r.host,
                &format!("{key}.host"),
                &q(r.host.get_ref()),
                &format!(
                    "duplicate of targets.static[{j}] (line {line}): same host, port {port} and transport {}; remove one of them",
                    probe.transport.name()
                ),
            ));
        }
        seen.insert(id, (i, line_col(cx.text, r.host.span().start).0));
        static_targets.push(StaticTarget {
            host: host.to_string(),
            port,
            labels: labels_of(cx, &r.labels, &key)?,
            probe,
        });
    }
    let mut file_sd = Vec::new();
    for (i, e) in t.file_sd.iter().enumerate() {
        let key = format!("targets.file_sd[{i}]");
        let r = e.get_ref();
        if r.path.get_ref().trim().is_empty() {
            return Err(cx.bad_s(
                &r.path,
                &format!("{key}.path"),
                "\"\"",
                "empty path; give the pinglist JSON file",
            ));
        }
        file_sd.push(FileSdSource {
            path: PathBuf::from(r.path.get_ref()),
            refresh: refresh_of(cx, &r.refresh, &format!("{key}.refresh"))?,
            port: match &r.port {
                Some(v) => cx.port(v, &format!("{key}.port"))?,
                None => DEFAULT_RESPONDER_PORT,
            },
            labels: labels_of(cx, &r.labels, &key)?,
            probe: target_probe(cx, &key, e.span(), &r.transport, &r.op, &r.sizes, probe)?,
        });
    }
    let mut dns = Vec::new();
    for (i, e) in t.dns.iter().enumerate() {
        let key = format!("targets.dns[{i}]");
        let r = e.get_ref();
        let name = r.name.get_ref().trim();
        if !valid_host(name) || name.parse::<IpAddr>().is_ok() {
            return Err(cx.bad_s(
                &r.name,
                &format!("{key}.name"),
                &q(r.name.get_ref()),
                "not a DNS name; give e.g. \"ibexporter.rdma.svc.cluster.local\" (put IP addresses in targets.static)",
            ));
        }
        dns.push(DnsSource {
            name: name.to_string(),
            port: match &r.port {
                Some(v) => cx.port(v, &format!("{key}.port"))?,
                None => DEFAULT_RESPONDER_PORT,
            },
            refresh: refresh_of(cx, &r.refresh, &format!("{key}.refresh"))?,
            labels: labels_of(cx, &r.labels, &key)?,
            probe: target_probe(cx, &key, e.span(), &r.transport, &r.op, &r.sizes, probe)?,
        });
    }
    Ok(TargetsConfig {
        skip_self: t.skip_self.unwrap_or(true),
        resolve_timeout,
        static_targets,
        file_sd,
        dns,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn line_col_counts_chars() {
        assert_eq!(line_col("ab\ncde\n", 0), (1, 1));
        assert_eq!(line_col("ab\ncde\n", 4), (2, 2));
        assert_eq!(line_col("é=1\nx", 5), (2, 1));
    }

    #[test]
    fn durations_compose() {
        assert_eq!(parse_duration("1m30s"), Ok(Duration::from_secs(90)));
        assert_eq!(format_duration(Duration::from_millis(1500)), "1s500ms");
        assert!(parse_duration("10").unwrap_err().contains("no unit"));
    }
}
