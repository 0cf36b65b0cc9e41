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
//! secret_file = "/etc/ibexporter/mesh.key" # optional: the mesh secret (same file on every member)
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
//! bind = "0.0.0.0:18515"         # default: the IP of `listen`, port 18515
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
//! state_dir = "/var/lib/ibtune"   # default: ibtune's own for root (one folder per root)
//! min_interval = "10s"
//! ```
//!
//! Every remote target (`static`, `file_sd`, `dns` entries) may set its own
//! `transport`, `op` and `sizes`; what it leaves out comes from `[probe]`.
//!
//! Map of this folder (text -> raw -> schema):
//! - `raw`: the TOML as written, every value with its position;
//!   unknown keys and wrong TOML types are refused there;
//! - `convert`: raw to schema: defaults, ranges, cross-key checks, and
//!   [`static_targets`] for targets given as values (`--target`);
//! - `schema`: the typed, validated [`Config`] the daemon reads, and the
//!   value rules shared with the file_sd pinglists ([`check_size`],
//!   [`check_combo`], [`check_label_name`]);
//! - `error`: [`ConfigError`], the one-line refusal with `file:line:col`;
//! - `values`: the duration and CPU-list syntaxes ([`parse_duration`],
//!   [`format_duration`], [`parse_cpulist`]), shared with the command line.
//!
//! Everything public is re-exported here; the files are private.

mod convert;
mod error;
mod raw;
mod schema;
mod values;

pub use convert::static_targets;
pub use error::ConfigError;
pub use schema::{
    check_combo, check_label_name, check_size, target_transport, BudgetConfig, CardinalityConfig,
    Config, CpuSelection, DnsSource, FileSdSource, LocalConfig, Op, PlanChoice, PlanConfig, Poll,
    ProbeSettings, ResponderConfig, StaticTarget, TargetProbe, TargetsConfig, Transport,
    TuningSettings, DEFAULT_LISTEN, DEFAULT_MAX_PEER_SERIES, DEFAULT_RESPONDER_PORT,
    RESERVED_LABELS,
};
pub use values::{format_duration, parse_cpulist, parse_duration};

use std::path::Path;

use error::Ctx;

/// Reads and checks a config file.
///
/// Why it exists: `main`'s `--config FILE`. Errors name the file.
pub fn load(path: impl AsRef<Path>) -> Result<Config, ConfigError> {
    let path = path.as_ref();
    let origin = path.display().to_string();
    let text = ibhost::file::read_small_text(path, ibhost::file::MAX_SMALL_FILE).map_err(|e| {
        ConfigError {
            origin: origin.clone(),
            pos: None,
            key: None,
            message: format!(
                "{e}; check the path, or run without --config for the built-in default"
            ),
        }
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
    let raw = raw::parse(&cx)?;
    convert::convert(&cx, raw)
}

impl Default for Config {
    /// The built-in default: what the exporter does without a config file.
    fn default() -> Self {
        parse("", "<built-in default>").expect("the built-in default is valid")
    }
}
