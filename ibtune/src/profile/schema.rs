//! What a profile file may say: the typed sections, as parsed (positions
//! kept). Loading is `super::Profile::load`; checks are `rules.rs` and
//! `resolve.rs`.

use crate::sys::MemPolicy;
use serde::Deserialize;
use std::collections::BTreeMap;
use std::path::PathBuf;
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
    /// Huge pages reserved per NUMA node.
    #[serde(default)]
    pub hugepages: Vec<HugepagesSpec>,
    /// Kernel command line parameters (checked against `/proc/cmdline`).
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

/// `[[hugepages]]`: a count of pages of one size on some NUMA nodes.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct HugepagesSpec {
    /// Page size: `"2M"` or `"1G"`.
    pub size: Spanned<String>,
    /// Pages per node.
    pub count: Spanned<u64>,
    /// Nodes: `[0, 1]`, `"0-1"`, or `"local"` (the memory nodes of the
    /// profile's cpusets, the default).
    #[serde(default)]
    pub nodes: Option<Spanned<CpuField>>,
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
    /// Ask for `irqaffinity=<CPUs outside the isolated cpusets>`.
    #[serde(default)]
    pub irqaffinity: bool,
    /// Ask for the `[cpu] max_cstate_latency_us` limit at boot, for every
    /// CPU: `intel_idle.max_cstate=N processor.max_cstate=N`.
    #[serde(default)]
    pub max_cstate: Option<Spanned<bool>>,
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
