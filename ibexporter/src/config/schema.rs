//! The typed, validated configuration a running exporter reads: every
//! default filled in, every value checked, no positions.
//!
//! Why it exists: the daemon, the engine and the target sources read
//! these types and nothing else; how they were written (TOML, flags) is
//! `raw`'s and `convert`'s business. The rules a value must follow wherever
//! it comes from (sizes per transport, transport/op pairs, label names)
//! live here too, beside the types they check, because the file_sd
//! pinglists apply them as well.

use std::collections::BTreeMap;
use std::net::{IpAddr, SocketAddr};
use std::path::PathBuf;
use std::time::Duration;

/// The default HTTP listen address (`ibexporter`'s registered-style port).
pub const DEFAULT_LISTEN: &str = "0.0.0.0:9427";
/// The default responder port; also the port assumed for targets that give none.
pub const DEFAULT_RESPONDER_PORT: u16 = 18515;

/// `cardinality.max_peer_series` when not set: per-peer series up to 200 peers.
pub const DEFAULT_MAX_PEER_SERIES: usize = 200;
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
    /// Optional mesh secret key file: the responder serves only peers that
    /// prove it, and remote targets are probed with it.
    pub secret_file: Option<PathBuf>,
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
    /// Reference transports probed in loopback: shm (the floor of what
    /// any transport can reach) and udp (the socket-stack baseline);
    /// default both.
    pub reference: Vec<Transport>,
    /// Measure SCHED_FIFO wake-up latency (default true).
    pub host_wakeup: bool,
    /// CPUs whose wake-up latency is measured (default all allowed CPUs).
    pub wakeup_cpus: CpuSelection,
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
    /// Remote verbs targets: hardware completion timestamps and the
    /// R-Pingmesh split (default false; both ends' devices must stamp
    /// completions; unverified on hardware by this project).
    pub hw_timestamps: bool,
    /// Count with perf events even where no CPU PMU exists (default
    /// false: where a PMU exists they count cycles, instructions and cache
    /// misses anyway; elsewhere the kernel's own accounting gives the
    /// switches, migrations and faults without a perf event on the
    /// thread; ibnoise's `counters/perf.rs` says why).
    pub perf_counters: bool,
}

/// The probe words (`transport`, `op`, `poll`) are ibprobe's own
/// vocabulary (`ibprobe::spec`): the same types, spellings and checks as
/// `ibprobe`'s command line. Remote targets take the transports that
/// cross hosts ([`target_transport`]).
pub use ibprobe::spec::{Op, Poll, Transport};

/// Parses a target's `transport` (case-insensitive): rc, uc, ud or udp;
/// the shared-memory ring (`shm`) cannot reach another host.
pub fn target_transport(s: &str) -> Option<Transport> {
    s.parse().ok().filter(|t| *t != Transport::Shm)
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
    /// Address it listens on (default: the IP of `listen`, port 18515).
    pub bind: SocketAddr,
    /// Whether `bind` was written in the file (else it follows `listen`,
    /// and so does a `--listen` given on the command line).
    pub bind_given: bool,
    /// The memory one probe session may take here, in bytes (default
    /// 256 MiB, `ibprobe::spec::peer::DEFAULT_MAX_SESSION_MEMORY`); a
    /// peer asking for more is refused.
    pub max_session_memory: u64,
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
    /// The probe plan: whom this exporter probes in each round.
    pub plan: PlanConfig,
}

/// `targets.plan*`: the probe plan (see [`crate::targets::plan`]).
///
/// Why it exists: probing every peer does not scale past one round's
/// worth of peers; every exporter derives its share of one cluster plan.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PlanConfig {
    /// `auto` (default), `full` or `rack-mesh`.
    pub choice: PlanChoice,
    /// The target label naming a target's rack (default `rack`).
    pub rack_label: String,
    /// Probes per ordered rack pair per round under `rack-mesh` (default 1).
    pub rack_peers: usize,
}

impl Default for PlanConfig {
    fn default() -> Self {
        PlanConfig {
            choice: PlanChoice::Auto,
            rack_label: "rack".into(),
            rack_peers: 1,
        }
    }
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

/// The plan chosen in the config (`targets.plan`).
///
/// Why it exists: one word list for the config, the CLI and the metrics.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum PlanChoice {
    /// `full` while every member fits one round, else `rack-mesh`.
    Auto,
    /// Every member every round.
    Full,
    /// Own rack every round, k probes per rack pair per round.
    RackMesh,
}

impl PlanChoice {
    /// Every choice, in the order of the docs.
    pub const ALL: [PlanChoice; 3] = [PlanChoice::Auto, PlanChoice::Full, PlanChoice::RackMesh];

    /// Its spelling.
    pub fn name(self) -> &'static str {
        match self {
            PlanChoice::Auto => "auto",
            PlanChoice::Full => "full",
            PlanChoice::RackMesh => "rack-mesh",
        }
    }
}

impl std::fmt::Display for PlanChoice {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

impl std::str::FromStr for PlanChoice {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        PlanChoice::ALL
            .into_iter()
            .find(|c| c.name().eq_ignore_ascii_case(s.trim()))
            .ok_or_else(|| format!("{s:?}: unknown plan; use auto, full or rack-mesh"))
    }
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
    /// ibtune's state directory (default: ibtune's own for `root`:
    /// `/var/lib/ibtune` for `/`, `/var/lib/ibtune/roots/NAME` for a snapshot).
    pub state_dir: Option<PathBuf>,
    /// Scrapes within this time of the last verification reuse it (default 10 s).
    pub min_interval: Duration,
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
    // ibprobe's limits for a send (a probe message needs 1 byte at least).
    let (range, why) = transport.size_range(Op::Send);
    let (lo, hi) = ((*range.start()).max(1), *range.end());
    match usize::try_from(size) {
        Ok(s) if (lo..=hi).contains(&s) => Ok(s),
        _ => Err(format!(
            "size {size} is out of range for {transport}; use {lo}..={hi} bytes ({why})"
        )),
    }
}

/// Checks a transport/op pair with ibprobe's rule (`ibprobe::spec::check_combo`):
/// UD has no RDMA writes; udp only sends.
///
/// Why it exists: these combinations fail deep in verbs setup; refused at
/// start they name the key to change.
pub fn check_combo(transport: Transport, op: Op) -> Result<(), String> {
    ibprobe::spec::check_combo(transport, op, Poll::Busy).map_err(|e| e.0)
}

/// Whether `host` is an IP address or a syntactically valid DNS name.
pub(super) fn valid_host(host: &str) -> bool {
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
