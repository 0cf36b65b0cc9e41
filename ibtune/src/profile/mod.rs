//! Latency profiles: the TOML files under `profiles/`.
//!
//! Why it exists: a profile is the user's statement of what the host should
//! look like during a run. This module parses it strictly (unknown keys are
//! errors) keeping the position of every value, so that [`resolve`] can
//! reject "CPU 99 does not exist" at `file:line:column` with a fix.
//!
//! The schema, section by section (see `profiles/*.toml` for full examples):
//!
//! ```toml
//! [profile]
//! name = "busy-poll"
//! description = "one HCA, busy polling"
//!
//! [[cpuset]]                        # zero or more
//! name = "rt0"
//! cpus = "4 cores local to mlx5_0"  # or "16,18,20,22" or [16, 18, 20, 22]
//! mems = "local"                    # or "0" or [0]; default "local"
//! exclusive = true                  # no other cpuset may use these CPUs
//! isolated = true                   # v2: partition "isolated"; v1: no load balancing
//!
//! [[irq]]                           # IRQ placement, per device
//! device = "mlx5_0"
//! cpus = "cpuset:rt0"               # or "local" or a CPU list
//! mode = "spread"                   # one CPU per IRQ, round robin; or "single"
//! ban_irqbalance = true             # keep irqbalance off these CPUs
//!
//! [numa]
//! policy = "bind"                   # memory policy for `ibtune run`
//!
//! [tuned]
//! base = "latency-performance"
//! drop = ["force_latency"]
//! [tuned.settings]
//! "sysctl.kernel.timer_migration" = "0"
//!
//! [dma_latency]
//! us = 0                            # or "off"
//!
//! [sysctl]
//! "kernel.sched_rt_runtime_us" = "-1"
//!
//! [cpu]
//! governor = "performance"
//! max_cstate_latency_us = 10        # disable deeper idle states on cpuset CPUs
//! thp = "never"
//!
//! [boot]
//! isolcpus = true                   # advise isolcpus/nohz_full/rcu_nocbs for isolated cpusets
//! nohz_full = true
//! rcu_nocbs = true
//! required = false                  # true: a missing parameter counts as drift
//! ```

mod error;
pub mod resolve;
pub mod rules;

pub use error::{ProfileError, SourcePos};
pub use resolve::{resolve, Resolved, ResolvedCpuset, ResolvedIrq};

use crate::sys::MemPolicy;
use serde::Deserialize;
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use toml::Spanned;

/// A parsed profile file, positions kept for error messages.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Profile {
    /// Name and description.
    pub profile: Meta,
    /// Cpusets to create.
    #[serde(default)]
    pub cpuset: Vec<CpusetSpec>,
    /// IRQ placement per device.
    #[serde(default)]
    pub irq: Vec<IrqSpec>,
    /// Memory policy for processes launched with `ibtune run`.
    #[serde(default)]
    pub numa: Option<NumaSpec>,
    /// The tuned profile to activate.
    #[serde(default)]
    pub tuned: Option<TunedSpec>,
    /// `/dev/cpu_dma_latency` to hold.
    #[serde(default)]
    pub dma_latency: Option<DmaLatencySpec>,
    /// Sysctls to set, by dotted name.
    #[serde(default)]
    pub sysctl: BTreeMap<String, Spanned<ScalarValue>>,
    /// Direct CPU settings (governor, idle states, THP).
    #[serde(default)]
    pub cpu: Option<CpuSpec>,
    /// Kernel command line advice.
    #[serde(default)]
    pub boot: Option<BootSpec>,
    /// The file it came from and its text (not part of the TOML).
    #[serde(skip)]
    pub source: Source,
}

/// Where a profile came from, for error positions.
#[derive(Debug, Clone, Default)]
pub struct Source {
    /// The file path as given.
    pub path: PathBuf,
    /// The file's text.
    pub text: String,
}

/// `[profile]`.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Meta {
    /// Short name; used in cgroup and tuned profile names, so `[A-Za-z0-9_-]`.
    pub name: Spanned<String>,
    /// One line for `plan` and `show`.
    #[serde(default)]
    pub description: String,
}

/// A CPU list as a user may write it.
#[derive(Debug, Clone, Deserialize)]
#[serde(untagged)]
pub enum CpuField {
    /// `[16, 18, 20, 22]`.
    List(Vec<u32>),
    /// `"16,18,20,22"`, `"4 cores local to mlx5_0"`, `"local"`, `"cpuset:rt0"`.
    Text(String),
}

/// `[[cpuset]]`.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct CpusetSpec {
    /// Name; the cgroup is `ibtune-<name>`.
    pub name: Spanned<String>,
    /// The CPUs.
    pub cpus: Spanned<CpuField>,
    /// Memory nodes; default `"local"` (the nodes of its CPUs).
    #[serde(default)]
    pub mems: Option<Spanned<CpuField>>,
    /// No other cpuset may share these CPUs.
    #[serde(default)]
    pub exclusive: bool,
    /// Take the CPUs out of the scheduler's load balancing.
    #[serde(default)]
    pub isolated: bool,
}

/// How a device's IRQs are spread over the target CPUs.
#[derive(Debug, Clone, Copy, Deserialize, serde::Serialize, PartialEq, Eq, Default)]
#[serde(rename_all = "lowercase")]
pub enum IrqMode {
    /// Each IRQ on one CPU, round robin over the targets.
    #[default]
    Spread,
    /// Every IRQ on the first target CPU.
    Single,
}

/// `[[irq]]`.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct IrqSpec {
    /// RDMA device whose IRQs are placed.
    pub device: Spanned<String>,
    /// Target CPUs.
    pub cpus: Spanned<CpuField>,
    /// Spread or single.
    #[serde(default)]
    pub mode: IrqMode,
    /// Ban irqbalance from the target CPUs (so it does not undo the pinning).
    #[serde(default = "yes")]
    pub ban_irqbalance: bool,
    /// Also move the async/event vector (mlx5_async*); off by default, as the
    /// Mellanox scripts do.
    #[serde(default)]
    pub include_async: bool,
}

fn yes() -> bool {
    true
}

/// `[numa]`.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct NumaSpec {
    /// Memory policy applied by `ibtune run` (nodes: the cpuset's `mems`).
    pub policy: MemPolicy,
}

/// `[tuned]`.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TunedSpec {
    /// Profile to include, e.g. `latency-performance`.
    pub base: Spanned<String>,
    /// Options of the base to drop, `force_latency` or `cpu.force_latency`.
    #[serde(default)]
    pub drop: Vec<Spanned<String>>,
    /// Extra settings, `"section.option" = "value"`.
    #[serde(default)]
    pub settings: BTreeMap<String, Spanned<ScalarValue>>,
}

/// `[dma_latency]`.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct DmaLatencySpec {
    /// Microseconds to hold, or `"off"`.
    pub us: Spanned<ScalarValue>,
}

/// `[cpu]`.
#[derive(Debug, Clone, Deserialize, Default)]
#[serde(deny_unknown_fields)]
pub struct CpuSpec {
    /// cpufreq governor for every CPU that has cpufreq.
    #[serde(default)]
    pub governor: Option<Spanned<String>>,
    /// Disable idle states with a higher exit latency on cpuset CPUs.
    #[serde(default)]
    pub max_cstate_latency_us: Option<u64>,
    /// Transparent huge pages mode: `always`, `madvise` or `never`.
    #[serde(default)]
    pub thp: Option<Spanned<String>>,
}

/// `[boot]`.
#[derive(Debug, Clone, Deserialize, Default)]
#[serde(deny_unknown_fields)]
pub struct BootSpec {
    /// Advise `isolcpus=managed_irq,domain,<isolated cpusets>`.
    #[serde(default)]
    pub isolcpus: bool,
    /// Advise `nohz_full=<isolated cpusets>`.
    #[serde(default)]
    pub nohz_full: bool,
    /// Advise `rcu_nocbs=<isolated cpusets>`.
    #[serde(default)]
    pub rcu_nocbs: bool,
    /// Count a missing parameter as drift in `verify`.
    #[serde(default)]
    pub required: bool,
}

/// A TOML scalar written as a setting value (`10`, `"never"`, `true`).
#[derive(Debug, Clone, Deserialize, PartialEq)]
#[serde(untagged)]
pub enum ScalarValue {
    /// An integer.
    Int(i64),
    /// A boolean (written as 1/0).
    Bool(bool),
    /// Text.
    Text(String),
}

impl ScalarValue {
    /// The value as it is written into a kernel file.
    pub fn as_setting(&self) -> String {
        match self {
            ScalarValue::Int(i) => i.to_string(),
            ScalarValue::Bool(b) => if *b { "1" } else { "0" }.to_string(),
            ScalarValue::Text(s) => s.clone(),
        }
    }
}

impl Profile {
    /// Reads and parses a profile file. A bare name (`thesis-2hca`) is
    /// looked up as `profiles/<name>.toml`, `/etc/ibtune/profiles/<name>.toml` and
    /// `/usr/share/ibtune/profiles/<name>.toml` (the package's).
    pub fn load(path: &Path) -> Result<Profile, ProfileError> {
        let path = locate(path);
        // A regular file of at most 1 MiB: a FIFO or /dev/zero named as a
        // profile is refused at once instead of hanging or filling memory.
        let text =
            ibhost::file::read_small_text(&path, ibhost::file::MAX_SMALL_FILE).map_err(|e| {
                ProfileError::Io {
                    path: path.clone(),
                    message: match e {
                        ibhost::file::SmallFileError::Io { source, .. } => source.to_string(),
                        other => other.to_string(),
                    },
                }
            })?;
        Profile::parse(&path, &text)
    }

    /// Parses profile text; `path` is only used in messages.
    pub fn parse(path: &Path, text: &str) -> Result<Profile, ProfileError> {
        let mut p: Profile = toml::from_str(text).map_err(|e| {
            let span = e.span().unwrap_or(0..0);
            let message = if e.message().contains("untagged enum CpuField") {
                "not a CPU or node list".to_string()
            } else if e.message().contains("untagged enum ScalarValue") {
                "not a number, boolean or string".to_string()
            } else {
                e.message().trim().to_string()
            };
            ProfileError::at(path, text, span, message, toml_fix(e.message()))
        })?;
        p.source = Source {
            path: path.to_path_buf(),
            text: text.to_string(),
        };
        rules::check(&p)?;
        Ok(p)
    }

    /// An error at a span of this profile's text.
    pub fn err(
        &self,
        span: std::ops::Range<usize>,
        message: impl Into<String>,
        fix: impl Into<String>,
    ) -> ProfileError {
        ProfileError::at(
            &self.source.path,
            &self.source.text,
            span,
            message.into(),
            fix.into(),
        )
    }

    /// The profile's name.
    pub fn name(&self) -> &str {
        self.profile.name.get_ref()
    }
}

/// Finds a profile by path, or by bare name in the usual folders.
fn locate(p: &Path) -> PathBuf {
    if p.exists() || p.components().count() > 1 || p.extension().is_some() {
        return p.to_path_buf();
    }
    let name = format!("{}.toml", p.display());
    let mut dirs = vec![
        PathBuf::from("profiles"),
        PathBuf::from("/etc/ibtune/profiles"),
        // The Debian package's copies (scripts/package).
        PathBuf::from("/usr/share/ibtune/profiles"),
    ];
    if let Ok(exe) = std::env::current_exe() {
        // Running from a checkout: target/<profile>/ibtune -> ../../profiles.
        if let Some(top) = exe
            .parent()
            .and_then(|d| d.parent())
            .and_then(|d| d.parent())
        {
            dirs.push(top.join("profiles"));
        }
    }
    dirs.push(PathBuf::from(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../profiles"
    )));
    dirs.into_iter()
        .map(|d| d.join(&name))
        .find(|c| c.exists())
        .unwrap_or_else(|| p.to_path_buf())
}

fn toml_fix(msg: &str) -> String {
    if msg.contains("unknown field") {
        "remove or rename the key; the schema is in profiles/README.md".into()
    } else if msg.contains("missing field") {
        "add the missing key".into()
    } else if msg.contains("untagged enum CpuField") {
        "write a CPU list as an array ([16, 18]), a string (\"16,18,20-22\"), or \"N cores local to <device>\"".into()
    } else if msg.contains("untagged enum ScalarValue") {
        "write a number, true/false, or a string".into()
    } else if msg.contains("unknown variant") {
        "use one of the values the message lists (they are lower case)".into()
    } else if msg.contains("invalid type") || msg.contains("invalid value") {
        "give a value of the type the message names; the schema is in profiles/README.md".into()
    } else {
        "fix the TOML syntax at this position".into()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(t: &str) -> Result<Profile, ProfileError> {
        Profile::parse(Path::new("t.toml"), t)
    }

    #[test]
    fn minimal_profile() {
        let p = parse("[profile]\nname = \"x\"\n").unwrap();
        assert_eq!(p.name(), "x");
        assert!(p.cpuset.is_empty());
    }

    #[test]
    fn unknown_key_has_position() {
        let e =
            parse("[profile]\nname = \"x\"\n\n[[cpuset]]\nname = \"a\"\ncpus = [1]\nbogus = 1\n")
                .unwrap_err();
        let s = e.to_string();
        assert!(s.starts_with("t.toml:7:1:"), "{s}");
        assert!(s.contains("bogus"), "{s}");
    }

    #[test]
    fn bad_name_rejected() {
        let e = parse("[profile]\nname = \"a b\"\n").unwrap_err();
        assert!(e.to_string().contains("t.toml:2:8"), "{e}");
    }

    #[test]
    fn scalar_values() {
        let p = parse("[profile]\nname=\"x\"\n[sysctl]\n\"vm.swappiness\" = 10\n\"a.b\" = \"-1\"\n\"c.d\" = true\n")
            .unwrap();
        let v: Vec<String> = p
            .sysctl
            .values()
            .map(|v| v.get_ref().as_setting())
            .collect();
        assert_eq!(v, ["-1", "1", "10"]);
    }
}
