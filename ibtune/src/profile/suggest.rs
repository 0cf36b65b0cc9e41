//! `ibtune suggest`: a starting profile derived from the host as
//! discovered and what the user intends (which HCAs, how many cores each,
//! which CPUs stay housekeeping), every choice with a one-line reason.
//!
//! Why it exists: writing a first profile means reading the topology
//! (SMT siblings, NUMA nodes, each HCA's node and IRQs) and knowing the
//! rules that make a profile safe; a generator that applies those rules
//! the same way on every host gives a profile that plans without a
//! warning, applies, verifies and reverts, and says why it chose what it
//! chose. The rules ([`layout`]):
//! - isolated CPUs are whole cores (every online SMT sibling of a core
//!   together), on the NUMA node of the HCA they serve;
//! - CPU 0's core, every core of a `--reserve` CPU, and at least one core
//!   on every NUMA node stay housekeeping;
//! - each HCA's IRQs go to the housekeeping CPUs of its own node;
//! - the sysctls, idle-state limit, THP and boot advice of the busy-poll
//!   case (`profiles/busy-poll-1hca.toml`), each only where this host has
//!   the file it sets.
//!
//! Two steps, both pure: [`layout`] chooses the CPUs, [`suggest`] turns a
//! layout into a [`Suggestion`] (sections of keys with their values and
//! reasons), which renders as commented TOML ([`Suggestion::to_toml`]) or
//! JSON ([`Suggestion::to_json`]). Nothing here reads the host: the model
//! comes from discovery's bounded readers.

use super::resolve::HUGEPAGE_SIZES;
use super::rules::name_problem;
use crate::host::{CgroupMode, CpuSet, Host, RdmaDevice};
use serde::Serialize;
use std::collections::BTreeMap;
use toml::Value;

/// Cores per HCA when `--isolate auto`: as `profiles/busy-poll-1hca.toml`
/// (one busy-polling thread and one for the rest of the real-time work),
/// fewer when the HCA's node cannot spare them beyond one housekeeping core.
pub const AUTO_CORES: usize = 2;

/// The idle-state exit latency limit on the isolated CPUs, in microseconds
/// (as `busy-poll-1hca`: C1/C1E stay, C6 and deeper go).
pub const MAX_CSTATE_US: u64 = 10;

/// Which HCAs the profile serves.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum HcaChoice {
    /// Every RDMA device found (the default).
    Every,
    /// No HCA: isolated cores alone (`--hca none`).
    None,
    /// These devices, in this order.
    Named(Vec<String>),
}

/// How many cores to isolate per HCA.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Isolate {
    /// [`AUTO_CORES`], fewer where a node cannot spare them.
    Auto,
    /// Exactly this many (1 or more); refused where a node cannot spare them.
    Cores(usize),
}

/// A huge page pool the user asks for: page size and count.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct HugePages {
    /// Page size in KiB (2048 for 2M, 1048576 for 1G).
    pub size_kb: u64,
    /// Number of pages.
    pub count: u64,
}

/// What the user states; the host supplies the rest.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Intent {
    /// HCAs to serve.
    pub hcas: HcaChoice,
    /// Cores per HCA.
    pub isolate: Isolate,
    /// CPUs that must stay housekeeping (their whole cores do).
    pub reserve: CpuSet,
    /// Huge pages on each node of the isolated cores (`[[hugepages]]`,
    /// nodes "local"); 2M and 1G pages only.
    pub hugepages: Option<HugePages>,
}

impl Default for Intent {
    fn default() -> Self {
        Intent {
            hcas: HcaChoice::Every,
            isolate: Isolate::Auto,
            reserve: CpuSet::new(),
            hugepages: None,
        }
    }
}

/// Why no profile was suggested.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SuggestError {
    /// The intent names something this host lacks or the profile cannot
    /// say (an unknown HCA, an offline CPU, a huge page size or count it
    /// cannot hold): bad input.
    #[error("{0}")]
    Input(String),
    /// The host cannot be tuned as asked (one CPU, no HCA, no cpuset
    /// controller, a node without cores to spare): the reason and what to do.
    #[error("{0}")]
    CannotTune(String),
}

/// One physical core: every online SMT sibling, on one node.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Core {
    /// Its CPUs.
    pub cpus: CpuSet,
    /// Its NUMA node.
    pub node: u32,
}

/// The isolated cores chosen for one HCA (or, with `--hca none`, the one group).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Group {
    /// The HCA served; `None` with `--hca none`.
    pub hca: Option<String>,
    /// The cpuset's name.
    pub cpuset: String,
    /// The node of the HCA and of these cores.
    pub node: u32,
    /// The isolated cores (indices into [`Layout::cores`]).
    pub cores: Vec<usize>,
    /// Their CPUs.
    pub cpus: CpuSet,
    /// Where the HCA's IRQs go: the housekeeping CPUs of its node; empty
    /// without an HCA or for one without IRQs (a software device).
    pub irq_cpus: CpuSet,
    /// The HCA's IRQs that are placed (the async vector is left alone).
    pub irqs: usize,
}

/// The CPU choice for a host and an intent.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Layout {
    /// Every online core, ascending by first CPU.
    pub cores: Vec<Core>,
    /// One group per HCA served.
    pub groups: Vec<Group>,
    /// Every online CPU not isolated.
    pub housekeeping: CpuSet,
    /// Cores per HCA as resolved (auto made concrete, per node).
    pub per_node: BTreeMap<u32, usize>,
}

impl Layout {
    /// Every isolated CPU.
    pub fn isolated(&self) -> CpuSet {
        self.groups
            .iter()
            .fold(CpuSet::new(), |a, g| a.union(&g.cpus))
    }
}

/// The online cores of `host`: CPUs grouped by (package, core id, node),
/// as `resolve` groups "N cores local to DEV", ascending by first CPU.
pub fn cores(host: &Host) -> Vec<Core> {
    let mut by: BTreeMap<(u32, u32, u32), CpuSet> = BTreeMap::new();
    for c in &host.cpus.list {
        by.entry((c.package, c.core, c.node))
            .or_default()
            .insert(c.id);
    }
    let mut v: Vec<Core> = by
        .into_iter()
        .map(|((_, _, node), cpus)| Core { cpus, node })
        .collect();
    v.sort_by_key(|c| c.cpus.first());
    v
}

/// The node an HCA serves: its NUMA node when that node has CPUs, else the
/// only node with CPUs, else the one node all its local CPUs are on.
fn hca_node(host: &Host, dev: &RdmaDevice, cpu_nodes: &CpuSet) -> Option<u32> {
    if let Some(n) = dev.numa_node.filter(|n| cpu_nodes.contains(*n)) {
        return Some(n);
    }
    if cpu_nodes.len() == 1 {
        return cpu_nodes.first();
    }
    let local = dev.local_cpus.as_ref()?;
    let nodes: CpuSet = host
        .cpus
        .list
        .iter()
        .filter(|c| local.contains(c.id))
        .map(|c| c.node)
        .collect();
    (nodes.len() == 1).then(|| nodes.first()).flatten()
}

/// The cpuset name for an HCA: `rt-<hca>` when that is a valid name, else `rt<i>`.
fn cpuset_name(hca: Option<&str>, i: usize) -> String {
    match hca {
        None => "rt".into(),
        Some(h) => {
            let n = format!("rt-{h}");
            if name_problem(&n).is_none() {
                n
            } else {
                format!("rt{i}")
            }
        }
    }
}

/// Chooses the isolated cores and the IRQ CPUs, or says why it cannot.
pub fn layout(host: &Host, intent: &Intent) -> Result<Layout, SuggestError> {
    if let Some(h) = intent.hugepages {
        if !HUGEPAGE_SIZES.iter().any(|(_, kb)| *kb == h.size_kb) {
            return Err(SuggestError::Input(format!(
                "--hugepage-pool: pages of {} KiB are not a size a profile sets; use 2M:COUNT or 1G:COUNT",
                h.size_kb
            )));
        }
    }
    if let Isolate::Cores(0) = intent.isolate {
        return Err(SuggestError::Input(
            "--isolate 0 isolates nothing; give 1 or more cores per HCA, or auto".into(),
        ));
    }
    let online = &host.cpus.online;
    let offline = intent.reserve.difference(online);
    if !offline.is_empty() {
        return Err(SuggestError::Input(format!(
            "--reserve names CPUs {offline}, which are not online here (online: {online}); reserve CPUs from {online}"
        )));
    }
    if host.cpus.list.len() < 2 {
        return Err(SuggestError::CannotTune(format!(
            "this host has {} online CPU ({online}): isolating a core would leave nothing for the rest of the system. Tune a host with at least two cores",
            host.cpus.list.len()
        )));
    }
    if host.cgroup.mode == CgroupMode::None {
        return Err(SuggestError::CannotTune(
            "no cpuset cgroup controller is mounted, so cores cannot be isolated at run time: mount cgroup2 (or the v1 cpuset hierarchy), then run suggest again".into(),
        ));
    }

    // The HCAs, each with its node.
    let cpu_nodes: CpuSet = host.cpus.list.iter().map(|c| c.node).collect();
    let devices: Vec<&RdmaDevice> = match &intent.hcas {
        HcaChoice::None => Vec::new(),
        HcaChoice::Every => {
            if host.rdma_devices.is_empty() {
                return Err(SuggestError::CannotTune(
                    "no RDMA device found (/sys/class/infiniband is empty): there is no HCA to place cores and IRQs next to. Load the HCA's driver, or pass --hca none for isolated cores alone".into(),
                ));
            }
            host.rdma_devices.iter().collect()
        }
        HcaChoice::Named(names) => {
            let mut v = Vec::new();
            for n in names {
                match host.device(n) {
                    Some(d) => v.push(d),
                    None => {
                        return Err(SuggestError::Input(format!(
                            "--hca {n}: no such RDMA device here; devices: {}",
                            if host.rdma_devices.is_empty() {
                                "none (pass --hca none for isolated cores alone)".to_string()
                            } else {
                                host.device_names().join(", ")
                            }
                        )))
                    }
                }
            }
            v
        }
    };
    let mut wanted: Vec<(Option<&RdmaDevice>, u32)> = Vec::new();
    for d in &devices {
        let node = hca_node(host, d, &cpu_nodes).ok_or_else(|| {
            SuggestError::CannotTune(format!(
                "{}: the kernel does not say which NUMA node it is on (numa_node -1, no single-node local_cpulist) on a host with {} nodes, so its local cores are unknown. Fix the firmware's NUMA table, or leave it out with --hca naming the others",
                d.name,
                cpu_nodes.len()
            ))
        })?;
        wanted.push((Some(d), node));
    }

    let cores = cores(host);
    // Housekeeping by rule: CPU 0's core (the lowest online CPU's), and every core of a reserved CPU.
    let first_cpu = online.first();
    let forced: Vec<bool> = cores
        .iter()
        .map(|c| {
            c.cpus.intersects(&intent.reserve) || first_cpu.is_some_and(|f| c.cpus.contains(f))
        })
        .collect();
    // Per node, the cores that may be isolated, best first: those the
    // kernel already isolates (isolcpus), then the highest-numbered, as
    // "N cores local to DEV" picks them; the last one a node keeps stays
    // housekeeping when no rule already keeps one there.
    let iso = &host.cpus.isolated;
    let mut spare: BTreeMap<u32, Vec<usize>> = BTreeMap::new();
    for node in cpu_nodes.iter() {
        let mut c: Vec<usize> = (0..cores.len())
            .filter(|&i| cores[i].node == node && !forced[i])
            .collect();
        c.sort_by_key(|&i| {
            std::cmp::Reverse((
                cores[i].cpus.intersects(iso),
                cores[i].cpus.iter().next_back(),
            ))
        });
        let kept = (0..cores.len()).any(|i| cores[i].node == node && forced[i]);
        if !kept {
            c.pop();
        }
        spare.insert(node, c);
    }

    if matches!(intent.hcas, HcaChoice::None) {
        // No HCA: the node with the most cores to spare (the lowest on a tie).
        let node = spare
            .iter()
            .max_by_key(|(n, c)| (c.len(), std::cmp::Reverse(**n)))
            .map(|(n, _)| *n)
            .unwrap_or(0);
        wanted.push((None, node));
    }

    let mut per_node: BTreeMap<u32, usize> = BTreeMap::new();
    for node in wanted.iter().map(|w| w.1) {
        *per_node.entry(node).or_default() += 1;
    }
    let none = intent.hcas == HcaChoice::None;
    let mut per_node_cores = BTreeMap::new();
    for (&node, &hcas) in &per_node {
        let free = spare.get(&node).map_or(0, Vec::len);
        let node_cpus: CpuSet = host
            .cpus
            .list
            .iter()
            .filter(|c| c.node == node)
            .map(|c| c.id)
            .collect();
        let kept = host_cpus_kept(&cores, &forced, node);
        let serving = wanted
            .iter()
            .filter(|w| w.1 == node)
            .map(|w| {
                w.0.map_or("the isolated cores".to_string(), |d| d.name.clone())
            })
            .collect::<Vec<_>>()
            .join(", ");
        let n = match intent.isolate {
            Isolate::Auto => (free / hcas).min(AUTO_CORES),
            Isolate::Cores(n) => n,
        };
        if n == 0 || n * hcas > free {
            return Err(SuggestError::CannotTune(format!(
                "node {node} (CPUs {node_cpus}) can spare {} for {serving}, keeping {} for housekeeping; {} needs {}. {}",
                plural(free, "core", "cores"),
                if kept.is_empty() {
                    "one core".to_string()
                } else {
                    format!(
                        "CPU{} {kept}{}",
                        if kept.len() == 1 { "" } else { "s" },
                        if intent.reserve.is_empty() {
                            String::new()
                        } else {
                            format!(" (with --reserve {})", intent.reserve)
                        }
                    )
                },
                match (intent.isolate, none) {
                    (Isolate::Cores(n), true) => format!("--isolate {n}"),
                    (Isolate::Cores(n), false) => format!("--isolate {n} for {}", plural(hcas, "HCA", "HCAs")),
                    (Isolate::Auto, true) => "isolating anything".to_string(),
                    (Isolate::Auto, false) => format!("one core for each of {}", plural(hcas, "HCA", "HCAs")),
                },
                plural(n.max(1) * hcas, "core", "cores"),
                match intent.isolate {
                    Isolate::Cores(_) if free >= hcas => format!("Ask for fewer: --isolate {}", free / hcas),
                    _ if !intent.reserve.is_empty() => "Reserve fewer CPUs, or tune a host with more cores".to_string(),
                    _ if !none => "Serve fewer HCAs on this node with --hca, or tune a host with more cores".to_string(),
                    _ => "Tune a host with more cores".to_string(),
                }
            )));
        }
        per_node_cores.insert(node, n);
    }

    let mut taken: BTreeMap<u32, usize> = BTreeMap::new();
    let mut groups = Vec::new();
    for (i, (dev, node)) in wanted.iter().enumerate() {
        let n = per_node_cores[node];
        let at = taken.entry(*node).or_default();
        let mut picked: Vec<usize> = spare[node][*at..*at + n].to_vec();
        *at += n;
        picked.sort_unstable();
        let cpus = picked
            .iter()
            .fold(CpuSet::new(), |a, &c| a.union(&cores[c].cpus));
        groups.push(Group {
            hca: dev.map(|d| d.name.clone()),
            cpuset: cpuset_name(dev.map(|d| d.name.as_str()), i),
            node: *node,
            cores: picked,
            cpus,
            irq_cpus: CpuSet::new(),
            irqs: dev.map_or(0, |d| d.irqs.iter().filter(|q| !q.is_async).count()),
        });
    }
    let isolated = groups.iter().fold(CpuSet::new(), |a, g| a.union(&g.cpus));
    let housekeeping = online.difference(&isolated);
    for g in groups.iter_mut().filter(|g| g.hca.is_some() && g.irqs > 0) {
        g.irq_cpus = cores
            .iter()
            .filter(|c| c.node == g.node)
            .fold(CpuSet::new(), |a, c| a.union(&c.cpus))
            .intersection(&housekeeping);
    }
    Ok(Layout {
        cores,
        groups,
        housekeeping,
        per_node: per_node_cores,
    })
}

/// The CPUs of a node's cores that a rule keeps housekeeping.
fn host_cpus_kept(cores: &[Core], forced: &[bool], node: u32) -> CpuSet {
    cores
        .iter()
        .zip(forced)
        .filter(|(c, f)| **f && c.node == node)
        .fold(CpuSet::new(), |a, (c, _)| a.union(&c.cpus))
}

/// One key of the profile with its value and why it was chosen.
#[derive(Debug, Clone, Serialize)]
pub struct Entry {
    /// The key, as in the profile (`cpus`, `kernel.timer_migration`).
    pub key: String,
    /// Its value.
    pub value: Value,
    /// One line: why this value, with the host facts behind it.
    pub why: String,
}

/// One table (`[sysctl]`) or array-of-tables element (`[[cpuset]]`).
#[derive(Debug, Clone, Serialize)]
pub struct Section {
    /// The table's name.
    pub name: String,
    /// True for an element of an array of tables (`[[cpuset]]`, `[[irq]]`).
    pub array: bool,
    /// The keys in order.
    pub entries: Vec<Entry>,
}

/// A suggested profile: notes about the host and intent, then its sections.
#[derive(Debug, Clone, Serialize)]
pub struct Suggestion {
    /// Lines for the head of the file: the host, the intent, how to use it,
    /// and what was left out and why.
    pub notes: Vec<String>,
    /// The profile's tables in file order.
    pub sections: Vec<Section>,
    /// The CPU choice behind it.
    pub layout: Layout,
}

/// True when the kernel release names a PREEMPT_RT build (`6.1.0-18-rt-amd64`,
/// `6.6.15-rt22`, `5.14.0-362.el9.x86_64+rt`).
pub fn is_preempt_rt(release: &str) -> bool {
    release.split(['-', '+', '.', '_']).any(|w| {
        w == "rt"
            || (w.starts_with("rt") && w[2..].chars().all(|c| c.is_ascii_digit()) && w.len() > 2)
    })
}

/// One-line text for a comment: control characters (a newline in a name
/// read from the host) become `?`, so a comment never ends early.
fn one_line(s: &str) -> String {
    s.chars()
        .map(|c| if c.is_control() { '?' } else { c })
        .collect()
}

/// `1 core`, `2 cores`.
fn plural(n: usize, one: &str, many: &str) -> String {
    format!("{n} {}", if n == 1 { one } else { many })
}

fn entry(key: &str, value: impl Into<Value>, why: impl Into<String>) -> Entry {
    Entry {
        key: key.into(),
        value: value.into(),
        why: one_line(&why.into()),
    }
}

fn section(name: &str, array: bool, entries: Vec<Entry>) -> Section {
    Section {
        name: name.into(),
        array,
        entries,
    }
}

/// The busy-poll sysctls: name, value, why.
const SYSCTLS: &[(&str, i64, &str)] = &[
    (
        "kernel.sched_rt_runtime_us",
        -1,
        "a busy-polling SCHED_FIFO thread must never be throttled",
    ),
    (
        "kernel.timer_migration",
        0,
        "timers stay on the CPU that armed them, off the isolated cores",
    ),
    (
        "vm.stat_interval",
        10,
        "vmstat work reaches the isolated cores every 10 s, not every second",
    ),
];

/// Suggests a profile for `host` and `intent`.
pub fn suggest(host: &Host, intent: &Intent) -> Result<Suggestion, SuggestError> {
    let l = layout(host, intent)?;
    let iso = l.isolated();
    let rt = host.kernel_release.as_deref().is_some_and(is_preempt_rt);
    let threads = l.cores.iter().map(|c| c.cpus.len()).max().unwrap_or(1);
    let nodes: CpuSet = l.cores.iter().map(|c| c.node).collect();
    let mut notes = Vec::new();
    let hcas: Vec<String> = host
        .rdma_devices
        .iter()
        .map(|d| {
            format!(
                "{} (node {})",
                d.name,
                d.numa_node.map_or("?".to_string(), |n| n.to_string())
            )
        })
        .collect();
    notes.push(format!(
        "Suggested by `ibtune suggest` for the host at {}: kernel {}{}, {} CPUs in {} cores ({}), {} NUMA node(s), HCAs: {}.",
        host.root,
        host.kernel_release.as_deref().unwrap_or("?"),
        if rt { " (PREEMPT_RT)" } else { "" },
        host.cpus.list.len(),
        l.cores.len(),
        if threads > 1 { format!("SMT, {threads} threads per core") } else { "no SMT".into() },
        nodes.len(),
        if hcas.is_empty() { "none".into() } else { hcas.join(", ") }
    ));
    notes.push(format!(
        "Intent: {}; {}{}.",
        match &intent.hcas {
            HcaChoice::Every => "every HCA found".to_string(),
            HcaChoice::None => "no HCA (--hca none)".to_string(),
            HcaChoice::Named(n) => format!("--hca {}", n.join(",")),
        },
        match intent.isolate {
            Isolate::Auto => format!(
                "--isolate auto ({AUTO_CORES} cores{}, fewer where a node cannot spare them; here {})",
                if intent.hcas == HcaChoice::None { "" } else { " per HCA" },
                l.per_node
                    .iter()
                    .map(|(n, c)| format!("{c} on node {n}"))
                    .collect::<Vec<_>>()
                    .join(", ")
            ),
            Isolate::Cores(n) => format!("--isolate {n} (cores per HCA)"),
        },
        if intent.reserve.is_empty() {
            String::new()
        } else {
            format!("; --reserve {} (with their whole cores)", intent.reserve)
        }
    ));
    notes.push(format!(
        "Isolated: CPUs {iso}; housekeeping: CPUs {} (CPU {}'s core and at least one core on every node).",
        l.housekeeping,
        host.cpus.online.first().unwrap_or(0)
    ));
    notes.push(
        "Check it with `ibtune plan FILE`, apply it with `sudo ibtune apply FILE`, then `ibtune verify FILE`; `sudo ibtune revert` undoes it.".into(),
    );
    if rt {
        notes.push("The kernel is PREEMPT_RT: with the cores isolated, a SCHED_FIFO thread (`ibtune run --fifo`) gets bounded wake-up latency.".into());
    } else {
        notes.push("The kernel is not PREEMPT_RT: isolation removes most interference; a PREEMPT_RT kernel would also bound wake-up latency.".into());
    }

    let mut sections = Vec::new();
    let desc = l
        .groups
        .iter()
        .map(|g| {
            format!(
                "{}: CPUs {} on node {}",
                g.hca.as_deref().unwrap_or("isolated"),
                g.cpus,
                g.node
            )
        })
        .collect::<Vec<_>>()
        .join("; ");
    sections.push(section(
        "profile",
        false,
        vec![
            entry(
                "name",
                "suggested",
                "the cgroups and the tuned profile are named after it (ibtune-suggested); rename it freely",
            ),
            entry(
                "description",
                format!("isolated whole cores next to each HCA, IRQs on local housekeeping CPUs ({desc})"),
                "one line for plan and show",
            ),
        ],
    ));

    for g in &l.groups {
        let core_list: Vec<String> = g
            .cores
            .iter()
            .map(|&c| {
                let core = &l.cores[c];
                format!("{{{}}}", core.cpus)
            })
            .collect();
        let why_cpus = format!(
            "{} on node {}{}: {}{}",
            plural(g.cores.len(), "whole core", "whole cores") + " " + &core_list.join(" "),
            g.node,
            g.hca
                .as_deref()
                .map_or(String::new(), |h| format!(", local to {h}")),
            if threads > 1 {
                "every SMT sibling comes with its core"
            } else {
                "no SMT here, one CPU per core"
            },
            if g.cpus.intersects(&host.cpus.isolated) {
                format!("; the kernel already isolates {}", host.cpus.isolated)
            } else {
                String::new()
            }
        );
        sections.push(section(
            "cpuset",
            true,
            vec![
                entry(
                    "name",
                    g.cpuset.as_str(),
                    format!(
                        "the real-time cpuset{}: run the work in it with `ibtune run FILE --cpuset {}`",
                        g.hca.as_deref().map_or(String::new(), |h| format!(" of {h}")),
                        g.cpuset
                    ),
                ),
                entry("cpus", g.cpus.to_list(), why_cpus),
                entry(
                    "mems",
                    g.node.to_string(),
                    format!("memory on node {}, the node of these CPUs{}", g.node, if g.hca.is_some() { " and of the HCA" } else { "" }),
                ),
                entry("exclusive", true, "no other cpuset may share these CPUs"),
                entry(
                    "isolated",
                    true,
                    match host.cgroup.mode {
                        CgroupMode::V1 => "cgroup v1 here: no load balancing inside the cpuset (sched_load_balance 0)",
                        _ => "cgroup v2 here: an isolated partition takes these CPUs out of load balancing at run time",
                    },
                ),
            ],
        ));
    }

    for g in l.groups.iter().filter(|g| !g.irq_cpus.is_empty()) {
        let hca = g.hca.as_deref().unwrap_or_default();
        let dev = host.device(hca);
        let asyncs = dev.map_or(0, |d| d.irqs.iter().filter(|q| q.is_async).count());
        sections.push(section(
            "irq",
            true,
            vec![
                entry(
                    "device",
                    hca,
                    format!(
                        "{hca}: {} IRQ(s) to place{}",
                        g.irqs,
                        if asyncs > 0 {
                            format!("; its async vector ({asyncs}) stays where it is")
                        } else {
                            String::new()
                        }
                    ),
                ),
                entry(
                    "cpus",
                    g.irq_cpus.to_list(),
                    format!(
                        "the housekeeping CPUs of node {}, {hca}'s node: interrupts stay off the isolated cores and on the HCA's socket",
                        g.node
                    ),
                ),
                entry("mode", "spread", format!("one IRQ per CPU, round robin over those {} CPU(s)", g.irq_cpus.len())),
                entry(
                    "ban_irqbalance",
                    false,
                    if host.irqbalance.running {
                        "irqbalance is running: banning it from these CPUs would push other IRQs onto the isolated cores; it keeps off them once [boot] is in, but may move these IRQs again (stop it to keep them)"
                    } else {
                        "irqbalance is not running: nothing moves these IRQs back; a ban here would steer other IRQs to the isolated cores"
                    },
                ),
            ],
        ));
    }
    for g in l.groups.iter().filter(|g| g.hca.is_some() && g.irqs == 0) {
        notes.push(format!(
            "{} has no IRQs to place (a software device such as rxe has none): no [[irq]] for it.",
            g.hca.as_deref().unwrap_or_default()
        ));
    }

    sections.push(section(
        "numa",
        false,
        vec![entry(
            "policy",
            "bind",
            "`ibtune run` binds the work's memory to its cpuset's node",
        )],
    ));

    if host.tuned.installed {
        sections.push(section(
            "tuned",
            false,
            vec![
                entry(
                    "base",
                    "latency-performance",
                    format!(
                        "tuned is installed (active profile: {}): latency-performance sets the host-wide latency settings",
                        host.tuned.active_profile.as_deref().unwrap_or("none")
                    ),
                ),
                entry(
                    "drop",
                    Value::Array(vec![Value::from("force_latency")]),
                    format!(
                        "force_latency keeps every CPU out of idle and fights [cpu] max_cstate_latency_us, which does it on the isolated cores only{}",
                        if host.tuned.force_latency_active { " (the active profile sets it now)" } else { "" }
                    ),
                ),
            ],
        ));
    } else {
        notes.push("tuned is not installed: no [tuned] section.".into());
    }

    let mut sysctl = Vec::new();
    for (name, value, why) in SYSCTLS {
        match host.sysctls.get(*name) {
            Some(cur) => sysctl.push(entry(name, *value, format!("now {}: {why}", cur.trim()))),
            None => notes.push(format!(
                "sysctl {name} is not on this kernel (or not readable): left out."
            )),
        }
    }
    if !sysctl.is_empty() {
        sections.push(section("sysctl", false, sysctl));
    }

    let deep: BTreeMap<&str, u64> = host
        .cpus
        .list
        .iter()
        .filter(|c| iso.contains(c.id))
        .flat_map(|c| c.cstates.iter())
        .filter(|s| s.latency_us > MAX_CSTATE_US)
        .map(|s| (s.name.as_str(), s.latency_us))
        .collect();
    let mut cpu = vec![entry(
        "max_cstate_latency_us",
        MAX_CSTATE_US as i64,
        if deep.is_empty() {
            format!("no idle state above {MAX_CSTATE_US} us on the isolated CPUs now: a guard, nothing to disable yet")
        } else {
            format!(
                "the isolated CPUs have {}: states above {MAX_CSTATE_US} us go there, the rest of the host keeps them",
                deep.iter()
                    .map(|(n, l)| format!("{n} ({l} us exit)"))
                    .collect::<Vec<_>>()
                    .join(", ")
            )
        },
    )];
    match &host.thp {
        Some(now) => cpu.push(entry(
            "thp",
            "never",
            format!(
                "now {}: no khugepaged compaction stalls under the real-time work",
                one_line(now)
            ),
        )),
        None => notes.push("transparent huge pages are not readable here: thp left out.".into()),
    }
    sections.push(section("cpu", false, cpu));

    if let Some(h) = intent.hugepages {
        sections.push(hugepages_section(host, &l, h)?);
    }

    let now = |v: &Option<String>, name: &str| {
        v.as_deref()
            .map_or(format!("now no {name}"), |x| format!("now {name}={x}"))
    };
    let c = &host.cmdline;
    sections.push(section(
        "boot",
        false,
        vec![
            entry(
                "isolcpus",
                true,
                format!(
                    "advise isolcpus=managed_irq,domain,{iso} ({}): no scheduler domain, no managed IRQ on them from boot",
                    now(&c.isolcpus, "isolcpus")
                ),
            ),
            entry(
                "nohz_full",
                true,
                format!("advise nohz_full={iso} ({}): no scheduler tick on a busy core", now(&c.nohz_full, "nohz_full")),
            ),
            entry(
                "rcu_nocbs",
                true,
                format!("advise rcu_nocbs={iso} ({}): RCU callbacks run on housekeeping CPUs", now(&c.rcu_nocbs, "rcu_nocbs")),
            ),
            entry(
                "required",
                false,
                "advice until you reboot with them: verify does not count them as drift",
            ),
        ],
    ));

    Ok(Suggestion {
        notes: notes.into_iter().map(|n| one_line(&n)).collect(),
        sections,
        layout: l,
    })
}

/// `[[hugepages]]` for `--hugepage-pool SIZE:COUNT`: COUNT pages on each
/// node of the isolated cores (`nodes = "local"`), refused where a node's
/// memory cannot hold them.
fn hugepages_section(host: &Host, l: &Layout, h: HugePages) -> Result<Section, SuggestError> {
    let word = HUGEPAGE_SIZES
        .iter()
        .find(|(_, kb)| *kb == h.size_kb)
        .map(|(w, _)| *w)
        .ok_or_else(|| SuggestError::Input("--hugepage-pool: use 2M:COUNT or 1G:COUNT".into()))?;
    let nodes: std::collections::BTreeSet<u32> = l.groups.iter().map(|g| g.node).collect();
    let mut now = Vec::new();
    for n in &nodes {
        let mem_kb = host
            .numa_nodes
            .iter()
            .find(|x| x.id == *n)
            .and_then(|x| x.mem_total_kb);
        if let Some(mem_kb) = mem_kb {
            if h.count.saturating_mul(h.size_kb) > mem_kb {
                return Err(SuggestError::Input(format!(
                    "--hugepage-pool {word}:{}: {} MiB of pages on node {n}, which has {} MiB of memory; ask for fewer",
                    h.count,
                    h.count.saturating_mul(h.size_kb) >> 10,
                    mem_kb >> 10
                )));
            }
        }
        now.push(format!("node {n}"));
    }
    Ok(section(
        "hugepages",
        true,
        vec![
            entry("size", word, "--hugepage-pool: the page size asked for"),
            entry(
                "count",
                h.count as i64,
                "--hugepage-pool: pages on each node of the isolated cores; apply says per node when the kernel grants fewer",
            ),
            entry(
                "nodes",
                "local",
                format!(
                    "the memory nodes of the cpusets ({}): RDMA buffers registered there, ibprobe --hugepages maps from them",
                    now.join(", ")
                ),
            ),
        ],
    ))
}

impl Suggestion {
    /// The profile as TOML: the notes as a head comment, and a comment
    /// line above every key saying why.
    pub fn to_toml(&self) -> String {
        let mut s = String::new();
        for n in &self.notes {
            s.push_str("# ");
            s.push_str(n);
            s.push('\n');
        }
        for sec in &self.sections {
            s.push('\n');
            if sec.array {
                s.push_str(&format!("[[{}]]\n", sec.name));
            } else {
                s.push_str(&format!("[{}]\n", sec.name));
            }
            for e in &sec.entries {
                s.push_str("# ");
                s.push_str(&e.why);
                s.push('\n');
                let mut one = toml::Table::new();
                one.insert(e.key.clone(), e.value.clone());
                s.push_str(&toml::to_string(&one).unwrap_or_default());
            }
        }
        s
    }

    /// The profile as a TOML table (what the TOML text parses to).
    pub fn table(&self) -> toml::Table {
        let mut t = toml::Table::new();
        for sec in &self.sections {
            let body: toml::Table = sec
                .entries
                .iter()
                .map(|e| (e.key.clone(), e.value.clone()))
                .collect();
            if sec.array {
                if let Value::Array(a) = t
                    .entry(sec.name.clone())
                    .or_insert_with(|| Value::Array(Vec::new()))
                {
                    a.push(Value::Table(body));
                }
            } else {
                t.insert(sec.name.clone(), Value::Table(body));
            }
        }
        t
    }

    /// The JSON form: the profile as data, each key's reason by its path
    /// (`cpuset[0].cpus`), the notes, and the layout.
    pub fn to_json(&self) -> serde_json::Value {
        let mut why = serde_json::Map::new();
        let mut seen: BTreeMap<&str, usize> = BTreeMap::new();
        for sec in &self.sections {
            let at = if sec.array {
                let i = seen.entry(&sec.name).or_default();
                let p = format!("{}[{i}]", sec.name);
                *i += 1;
                p
            } else {
                sec.name.clone()
            };
            for e in &sec.entries {
                why.insert(format!("{at}.{}", e.key), e.why.clone().into());
            }
        }
        serde_json::json!({
            "schema": "ibtune.suggest/1",
            "profile": self.table(),
            "why": why,
            "notes": self.notes,
            "layout": self.layout,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::host::model::*;
    use crate::host::HostRoot;
    use crate::profile::{resolve, Profile};
    use proptest::prelude::*;

    /// A synthetic host: `nodes` nodes (one package each) of `cores` cores
    /// with `smt` threads, numbered as Linux does (every core's first
    /// thread, then every core's second); one HCA per entry of `hcas` on
    /// that node (`None`: the kernel does not know), with 4 completion IRQs
    /// and an async one.
    fn host(nodes: u32, cores: u32, smt: u32, hcas: &[Option<u32>]) -> Host {
        let per_thread = nodes * cores;
        let mut list = Vec::new();
        for t in 0..smt {
            for n in 0..nodes {
                for c in 0..cores {
                    let id = t * per_thread + n * cores + c;
                    list.push(Cpu {
                        id,
                        package: n,
                        core: c,
                        siblings: (0..smt).map(|s| s * per_thread + n * cores + c).collect(),
                        node: n,
                        governor: None,
                        cstates: vec![CState {
                            index: 0,
                            name: "C6".into(),
                            latency_us: 133,
                            disabled: false,
                        }],
                    });
                }
            }
        }
        list.sort_by_key(|c| c.id);
        let online: CpuSet = list.iter().map(|c| c.id).collect();
        let numa_nodes = (0..nodes)
            .map(|n| NumaNode {
                id: n,
                cpus: list.iter().filter(|c| c.node == n).map(|c| c.id).collect(),
                mem_total_kb: None,
            })
            .collect();
        let irq = |n: u32, is_async| Irq {
            irq: n,
            name: Some(if is_async {
                format!("mlx5_async{n}")
            } else {
                format!("mlx5_comp{n}")
            }),
            source: "msi_irqs".into(),
            affinity: None,
            effective_affinity: None,
            is_async,
        };
        let rdma_devices = hcas
            .iter()
            .enumerate()
            .map(|(i, node)| RdmaDevice {
                name: format!("mlx5_{i}"),
                hca_type: None,
                fw_ver: None,
                node_guid: None,
                pci_addr: Some(format!("0000:{i:02x}:00.0")),
                numa_node: *node,
                local_cpus: None,
                pcie: None,
                ports: vec![],
                netdevs: vec![],
                irqs: (0..5)
                    .map(|k| irq(100 + 10 * i as u32 + k, k == 0))
                    .collect(),
            })
            .collect();
        Host {
            root: "/synthetic".into(),
            kernel_release: Some("6.8.0".into()),
            topology_source: "sysfs".into(),
            cpus: Cpus {
                online,
                isolated: CpuSet::new(),
                list,
            },
            numa_nodes,
            rdma_devices,
            cmdline: KernelCmdline::default(),
            cgroup: CgroupInfo {
                mode: CgroupMode::V2,
                v2_mount: Some("/sys/fs/cgroup".into()),
                v2_controllers: vec!["cpuset".into()],
                v1_cpuset_mount: None,
                v1_noprefix: false,
                v2_has_exclusive: true,
            },
            irqbalance: IrqBalance {
                running: false,
                config_file: None,
                banned_cpus: None,
            },
            tuned: Tuned {
                installed: false,
                active_profile: None,
                force_latency_active: false,
            },
            cpu_dma_latency_us: None,
            thp: Some("madvise".into()),
            sysctls: BTreeMap::new(),
            read_problems: vec![],
        }
    }

    fn set(s: &str) -> CpuSet {
        CpuSet::parse_list(s).unwrap()
    }

    fn intent(hcas: HcaChoice, isolate: Isolate, reserve: &str) -> Intent {
        Intent {
            hcas,
            isolate,
            reserve: set(reserve),
            hugepages: None,
        }
    }

    /// Every rule the layout promises, on any host; `Err` names the broken one.
    fn check_rules(h: &Host, i: &Intent, l: &Layout) -> Result<(), String> {
        let iso = l.isolated();
        for c in &h.cpus.list {
            let half = c.siblings.intersection(&h.cpus.online);
            if half.intersects(&iso) && !half.is_subset(&iso) {
                return Err(format!("half of core {half} isolated ({iso})"));
            }
        }
        for n in &h.numa_nodes {
            if !n.cpus.is_empty() && n.cpus.is_subset(&iso) {
                return Err(format!("node {} keeps no housekeeping CPU", n.id));
            }
        }
        if iso.contains(h.cpus.online.first().unwrap()) {
            return Err("the first CPU's core is isolated".into());
        }
        if iso.intersects(&i.reserve) {
            return Err(format!(
                "reserved CPUs isolated: {}",
                iso.intersection(&i.reserve)
            ));
        }
        for g in &l.groups {
            let node_cpus = &h.numa_nodes.iter().find(|n| n.id == g.node).unwrap().cpus;
            if !g.cpus.is_subset(node_cpus) {
                return Err(format!("{:?}: CPUs {} off node {}", g.hca, g.cpus, g.node));
            }
            if let Some(d) = g.hca.as_deref().and_then(|n| h.device(n)) {
                if d.numa_node.is_some_and(|n| n != g.node) {
                    return Err(format!(
                        "{} on node {:?}, cores on {}",
                        d.name, d.numa_node, g.node
                    ));
                }
                if g.irq_cpus.is_empty()
                    || !g.irq_cpus.is_subset(node_cpus)
                    || g.irq_cpus.intersects(&iso)
                {
                    return Err(format!(
                        "{}: IRQ CPUs {} not local housekeeping",
                        d.name, g.irq_cpus
                    ));
                }
            }
        }
        Ok(())
    }

    /// The suggestion as text parses as a profile, resolves against the
    /// host, and its IRQ placement raises no warning.
    fn plans_clean(h: &Host, s: &Suggestion) -> Result<(), String> {
        let text = s.to_toml();
        let p = Profile::parse(std::path::Path::new("suggested.toml"), &text)
            .map_err(|e| format!("{e}\n{text}"))?;
        let dir = tempfile::tempdir().unwrap();
        let r = resolve(&p, h, &HostRoot::new(dir.path()).unwrap()).map_err(|e| e.to_string())?;
        let placements: Vec<(&str, &CpuSet)> = r
            .irqs
            .iter()
            .map(|i| (i.device.as_str(), &i.targets))
            .collect();
        let w = crate::host::warnings::irq_placement_warnings(h, &placements);
        if !w.is_empty() {
            return Err(format!("{w:?}"));
        }
        if r.cpuset_cpus() != s.layout.isolated() {
            return Err(format!(
                "resolved {} != layout {}",
                r.cpuset_cpus(),
                s.layout.isolated()
            ));
        }
        Ok(())
    }

    #[test]
    fn smt_two_nodes_whole_cores_on_each_hca_node() {
        // 2 nodes x 4 cores x 2 threads: node 0 cores {0,8} {1,9} {2,10} {3,11}.
        let h = host(2, 4, 2, &[Some(0), Some(1)]);
        let i = Intent::default();
        let s = suggest(&h, &i).unwrap();
        let l = &s.layout;
        assert_eq!(l.groups[0].cpus, set("2-3,10-11"));
        assert_eq!(l.groups[1].cpus, set("6-7,14-15"));
        assert_eq!(l.groups[0].irq_cpus, set("0-1,8-9"));
        assert_eq!(l.groups[1].irq_cpus, set("4-5,12-13"));
        assert_eq!(l.groups[0].irqs, 4, "the async vector is not placed");
        check_rules(&h, &i, l).unwrap();
        plans_clean(&h, &s).unwrap();
        let t = s.to_toml();
        assert!(
            t.contains("# 2 whole cores {2,10} {3,11} on node 0, local to mlx5_0"),
            "{t}"
        );
    }

    /// The rule check itself fails on a layout that breaks each rule.
    #[test]
    fn the_rule_check_catches_each_broken_rule() {
        let h = host(2, 4, 2, &[Some(0), Some(1)]);
        let i = Intent::default();
        let good = layout(&h, &i).unwrap();
        let mut half = good.clone();
        half.groups[0].cpus = set("3,11,2");
        half.groups[0].cpus = half.groups[0].cpus.difference(&set("10"));
        assert!(check_rules(&h, &i, &half)
            .unwrap_err()
            .contains("half of core"));
        let mut remote = good.clone();
        remote.groups[0].irq_cpus = set("4");
        assert!(check_rules(&h, &i, &remote)
            .unwrap_err()
            .contains("not local"));
        let mut on_iso = good.clone();
        on_iso.groups[0].irq_cpus = set("2");
        assert!(check_rules(&h, &i, &on_iso)
            .unwrap_err()
            .contains("not local"));
        let mut all = good.clone();
        all.groups[0].cpus = set("0-3,8-11");
        assert!(check_rules(&h, &i, &all).is_err());
        let mut wrong_node = good;
        wrong_node.groups[0].cpus = set("6,14");
        assert!(check_rules(&h, &i, &wrong_node)
            .unwrap_err()
            .contains("off node"));
    }

    #[test]
    fn smt_off_one_node() {
        let h = host(1, 4, 1, &[Some(0)]);
        let s = suggest(&h, &Intent::default()).unwrap();
        assert_eq!(s.layout.groups[0].cpus, set("2-3"));
        assert_eq!(s.layout.groups[0].irq_cpus, set("0-1"));
        assert!(s.to_toml().contains("no SMT here"), "{}", s.to_toml());
        plans_clean(&h, &s).unwrap();
    }

    #[test]
    fn four_nodes_hca_on_node_1() {
        let h = host(4, 4, 2, &[Some(1)]);
        let i = intent(HcaChoice::Every, Isolate::Cores(3), "");
        let s = suggest(&h, &i).unwrap();
        let g = &s.layout.groups[0];
        assert_eq!(g.node, 1);
        // Node 1: cores {4,20} .. {7,23}; the lowest stays housekeeping.
        assert_eq!(g.cpus, set("5-7,21-23"));
        assert_eq!(g.irq_cpus, set("4,20"));
        assert_eq!(s.layout.housekeeping, h.cpus.online.difference(&g.cpus));
        check_rules(&h, &i, &s.layout).unwrap();
        plans_clean(&h, &s).unwrap();
    }

    #[test]
    fn two_hcas_on_one_node_share_it() {
        let h = host(2, 4, 1, &[Some(1), Some(1)]);
        let s = suggest(&h, &Intent::default()).unwrap();
        // Node 1 has 3 cores to spare: auto gives each HCA one.
        assert_eq!(s.layout.per_node[&1], 1);
        assert_eq!(s.layout.groups[0].cpus, set("7"));
        assert_eq!(s.layout.groups[1].cpus, set("6"));
        plans_clean(&h, &s).unwrap();
        let e = suggest(&h, &intent(HcaChoice::Every, Isolate::Cores(2), "")).unwrap_err();
        assert!(
            matches!(&e, SuggestError::CannotTune(m) if m.contains("node 1") && m.contains("Ask for fewer: --isolate 1")),
            "{e}"
        );
    }

    /// One CPU, or one core with its SMT sibling: nothing to isolate.
    #[test]
    fn a_host_without_a_spare_core_gets_a_reason() {
        for (smt, says) in [(1, "1 online CPU"), (2, "can spare 0 cores")] {
            let e = suggest(&host(1, 1, smt, &[Some(0)]), &Intent::default()).unwrap_err();
            assert!(
                matches!(&e, SuggestError::CannotTune(m) if m.contains(says)),
                "{e}"
            );
        }
    }

    #[test]
    fn no_hca_gets_a_reason_unless_none() {
        let h = host(2, 4, 2, &[]);
        let e = suggest(&h, &Intent::default()).unwrap_err();
        assert!(
            matches!(&e, SuggestError::CannotTune(m) if m.contains("--hca none")),
            "{e}"
        );
        let i = intent(HcaChoice::None, Isolate::Auto, "");
        let s = suggest(&h, &i).unwrap();
        assert_eq!(s.layout.groups.len(), 1);
        assert_eq!(s.layout.groups[0].hca, None);
        assert_eq!(s.layout.groups[0].cpus.len(), 4);
        assert!(!s.to_toml().contains("[[irq]]"));
        check_rules(&h, &i, &s.layout).unwrap();
        plans_clean(&h, &s).unwrap();
    }

    #[test]
    fn a_reserved_cpu_keeps_its_whole_core() {
        let h = host(1, 4, 2, &[Some(0)]);
        let i = intent(HcaChoice::Every, Isolate::Auto, "3");
        let s = suggest(&h, &i).unwrap();
        // Core {3,7} is reserved: cores {1,5} {2,6} isolated.
        assert_eq!(s.layout.groups[0].cpus, set("1-2,5-6"));
        check_rules(&h, &i, &s.layout).unwrap();
    }

    #[test]
    fn an_unknown_node_on_a_multi_node_host_gets_a_reason() {
        let h = host(2, 4, 1, &[None]);
        let e = suggest(&h, &Intent::default()).unwrap_err();
        assert!(
            matches!(&e, SuggestError::CannotTune(m) if m.contains("mlx5_0") && m.contains("NUMA node")),
            "{e}"
        );
        // One node: the only one.
        let h = host(1, 4, 1, &[None]);
        assert_eq!(
            suggest(&h, &Intent::default()).unwrap().layout.groups[0].node,
            0
        );
    }

    #[test]
    fn bad_intent_is_input() {
        let h = host(1, 4, 1, &[Some(0)]);
        let named = intent(HcaChoice::Named(vec!["mlx5_9".into()]), Isolate::Auto, "");
        assert!(
            matches!(suggest(&h, &named), Err(SuggestError::Input(m)) if m.contains("devices: mlx5_0"))
        );
        let offline = intent(HcaChoice::Every, Isolate::Auto, "9");
        assert!(
            matches!(suggest(&h, &offline), Err(SuggestError::Input(m)) if m.contains("not online"))
        );
        let huge = Intent {
            hugepages: Some(HugePages {
                size_kb: 1 << 20,
                count: 8,
            }),
            ..Intent::default()
        };
        let s = suggest(&h, &huge).unwrap();
        let t = s.to_toml();
        assert!(
            t.contains("[[hugepages]]\n") && t.contains("size = \"1G\"") && t.contains("count = 8"),
            "{t}"
        );
        plans_clean(&h, &s).unwrap();
        let odd = Intent {
            hugepages: Some(HugePages {
                size_kb: 64,
                count: 8,
            }),
            ..Intent::default()
        };
        assert!(
            matches!(suggest(&h, &odd), Err(SuggestError::Input(m)) if m.contains("2M:COUNT or 1G:COUNT"))
        );
    }

    #[test]
    fn no_cpuset_controller_gets_a_reason() {
        let mut h = host(1, 4, 1, &[Some(0)]);
        h.cgroup.mode = CgroupMode::None;
        assert!(
            matches!(suggest(&h, &Intent::default()), Err(SuggestError::CannotTune(m)) if m.contains("cpuset"))
        );
    }

    #[test]
    fn host_facts_never_break_a_comment() {
        let mut h = host(1, 4, 1, &[Some(0)]);
        h.tuned.installed = true;
        h.tuned.active_profile = Some("evil\n[profile]\nname = \"x\"".into());
        h.thp = Some("always\nbogus = 1".into());
        let s = suggest(&h, &Intent::default()).unwrap();
        plans_clean(&h, &s).unwrap();
        let t = s.to_toml();
        assert!(t.lines().all(|l| !l.starts_with("bogus")), "{t}");
    }

    #[test]
    fn json_is_the_toml_as_data() {
        let h = host(2, 4, 2, &[Some(0), Some(1)]);
        let s = suggest(&h, &Intent::default()).unwrap();
        let parsed: toml::Table = toml::from_str(&s.to_toml()).unwrap();
        let j = s.to_json();
        assert_eq!(j["profile"], serde_json::to_value(&parsed).unwrap());
        let keys: usize = s.sections.iter().map(|x| x.entries.len()).sum();
        assert_eq!(
            j["why"].as_object().unwrap().len(),
            keys,
            "one reason per key"
        );
        assert!(j["why"]["cpuset[1].cpus"]
            .as_str()
            .unwrap()
            .contains("mlx5_1"));
    }

    #[test]
    fn preempt_rt_from_the_release() {
        for r in [
            "6.1.0-18-rt-amd64",
            "6.6.15-rt22",
            "5.14.0-362.el9.x86_64+rt",
        ] {
            assert!(is_preempt_rt(r), "{r}");
        }
        for r in [
            "6.8.9-300.fc40.x86_64",
            "6.1.0-27-amd64",
            "6.2.0-rtx",
            "6.1-art",
        ] {
            assert!(!is_preempt_rt(r), "{r}");
        }
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(200))]

        /// On any topology, whatever the intent: whole cores, housekeeping
        /// on every node, IRQs local and not isolated, and the profile
        /// resolves with no placement warning; a host with room for
        /// the default intent always gets a profile.
        #[test]
        fn rules_hold_on_any_topology(
            nodes in 1u32..=4,
            cores in 1u32..=6,
            smt in 1u32..=2,
            hca_nodes in proptest::collection::vec(0u32..4, 0..=3),
            unknown in any::<bool>(),
            none in any::<bool>(),
            isolate in prop_oneof![Just(Isolate::Auto), (1usize..=3).prop_map(Isolate::Cores)],
            reserve in proptest::collection::vec(0u32..48, 0..=2),
        ) {
            let hcas: Vec<Option<u32>> = hca_nodes
                .iter()
                .map(|n| if unknown && nodes == 1 { None } else { Some(n % nodes) })
                .collect();
            let h = host(nodes, cores, smt, &hcas);
            let reserve: CpuSet = reserve.into_iter().filter(|c| h.cpus.online.contains(*c)).collect();
            let i = Intent {
                hcas: if none { HcaChoice::None } else { HcaChoice::Every },
                isolate,
                reserve,
                hugepages: None,
            };
            match suggest(&h, &i) {
                Ok(s) => {
                    prop_assert_eq!(check_rules(&h, &i, &s.layout), Ok(()));
                    prop_assert_eq!(plans_clean(&h, &s), Ok(()));
                }
                Err(e) => {
                    prop_assert!(!e.to_string().is_empty());
                    // Room for the default: each HCA node (or node 0) has a
                    // housekeeping core and one more per HCA.
                    let mut need: BTreeMap<u32, u32> = BTreeMap::new();
                    if none {
                        need.insert(0, 1);
                    } else {
                        for n in hcas.iter().map(|n| n.unwrap_or(0)) {
                            *need.entry(n).or_default() += 1;
                        }
                    }
                    let roomy = (none || !hcas.is_empty())
                        && i.reserve.is_empty()
                        && i.isolate == Isolate::Auto
                        && need.values().all(|&k| cores > k);
                    prop_assert!(!roomy, "refused a roomy host: {}", e);
                }
            }
        }
    }
}
