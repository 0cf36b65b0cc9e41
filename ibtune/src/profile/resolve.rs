//! Resolving a profile against a host: every symbolic choice ("4 cores
//! local to mlx5_0", "cpuset:rt0", "local") becomes concrete CPUs, nodes and
//! IRQs, and everything the host cannot do is refused with a position.
//!
//! Why it exists: plan, apply, verify and run must all act on the same
//! concrete numbers, computed once, and a wrong profile must fail before
//! anything on the host is touched.

use super::error::ProfileError;
use super::schema::{CpuField, IrqMode, Profile, ScalarValue, TunedSpec};
use crate::host::{CpuSet, Host, HostRoot};
use crate::sys::MemPolicy;
use serde::Serialize;
use std::collections::BTreeMap;
use std::ops::Range;
use toml::Spanned;

/// A profile with every choice made for one host.
#[derive(Debug, Clone, Serialize)]
pub struct Resolved {
    /// Profile name.
    pub name: String,
    /// Profile description.
    pub description: String,
    /// File it came from.
    pub path: String,
    /// Cpusets, in file order.
    pub cpusets: Vec<ResolvedCpuset>,
    /// IRQ placements, in file order.
    pub irqs: Vec<ResolvedIrq>,
    /// CPUs irqbalance must stay away from, if any placement asks for it.
    pub irqbalance_ban: Option<CpuSet>,
    /// Memory policy for `ibtune run`.
    pub mem_policy: Option<MemPolicy>,
    /// The tuned profile ibtune writes and activates.
    pub tuned: Option<ResolvedTuned>,
    /// `/dev/cpu_dma_latency` value to hold, in microseconds.
    pub dma_latency_us: Option<i32>,
    /// Sysctls, sorted by name.
    pub sysctls: Vec<(String, String)>,
    /// cpufreq governor for all CPUs with cpufreq.
    pub governor: Option<String>,
    /// Deepest idle-state exit latency allowed on cpuset CPUs.
    pub max_cstate_latency_us: Option<u64>,
    /// Transparent huge pages mode.
    pub thp: Option<String>,
    /// Huge pages per node and size, in file order.
    pub hugepages: Vec<ResolvedHugepages>,
    /// Kernel command line parameters to advise.
    pub boot: Vec<BootParam>,
}

/// Huge pages of one size on one NUMA node, concrete.
#[derive(Debug, Clone, Serialize)]
pub struct ResolvedHugepages {
    /// NUMA node.
    pub node: u32,
    /// Page size as written (`2M`, `1G`).
    pub size: String,
    /// Page size in kB (the sysfs folder `hugepages-<kB>kB`).
    pub size_kb: u64,
    /// Pages wanted on the node.
    pub count: u64,
}

/// The page sizes `[[hugepages]]` accepts: the word and its size in kB.
pub const HUGEPAGE_SIZES: [(&str, u64); 2] = [("2M", 2048), ("1G", 1_048_576)];

/// One cpuset, concrete.
#[derive(Debug, Clone, Serialize)]
pub struct ResolvedCpuset {
    /// Name from the profile.
    pub name: String,
    /// cgroup directory name (`ibtune-<name>`).
    pub cgroup: String,
    /// CPUs.
    pub cpus: CpuSet,
    /// Memory nodes.
    pub mems: CpuSet,
    /// Exclusive of other cpusets.
    pub exclusive: bool,
    /// Out of load balancing.
    pub isolated: bool,
    /// How the CPUs were chosen, as written in the profile.
    pub chosen_by: String,
}

/// One device's IRQ placement, concrete.
#[derive(Debug, Clone, Serialize)]
pub struct ResolvedIrq {
    /// Device name.
    pub device: String,
    /// Target CPUs.
    pub targets: CpuSet,
    /// Spread or single.
    pub mode: IrqMode,
    /// Each IRQ and the CPUs it goes to.
    pub assignments: Vec<(u32, CpuSet)>,
}

/// The tuned child profile ibtune writes.
#[derive(Debug, Clone, Serialize)]
pub struct ResolvedTuned {
    /// Name of the written profile (`ibtune-<name>`).
    pub profile_name: String,
    /// Base profile it includes.
    pub base: String,
    /// The `tuned.conf` text.
    pub conf: String,
}

/// A kernel command line parameter the profile wants.
#[derive(Debug, Clone, Serialize)]
pub struct BootParam {
    /// `isolcpus`, `nohz_full`, `rcu_nocbs`, `irqaffinity`,
    /// `intel_idle.max_cstate`, `processor.max_cstate` or `idle`.
    pub name: String,
    /// Its value.
    pub value: String,
    /// Whether its absence counts as drift.
    pub required: bool,
}

impl Resolved {
    /// The cpuset with this name.
    pub fn cpuset(&self, name: &str) -> Option<&ResolvedCpuset> {
        self.cpusets.iter().find(|c| c.name == name)
    }

    /// Union of the CPUs of every cpuset.
    pub fn cpuset_cpus(&self) -> CpuSet {
        self.cpusets
            .iter()
            .fold(CpuSet::new(), |a, c| a.union(&c.cpus))
    }
}

/// Resolves `p` against `host`, or says where the profile is wrong for it.
pub fn resolve(p: &Profile, host: &Host, root: &HostRoot) -> Result<Resolved, ProfileError> {
    let online = &host.cpus.online;
    let mut cpusets: Vec<ResolvedCpuset> = Vec::new();
    let mut taken = CpuSet::new();

    for cs in &p.cpuset {
        let name = cs.name.get_ref().clone();
        if let Some(why) = super::rules::name_problem(&name) {
            return Err(p.err(
                cs.name.span(),
                format!("cpuset name {why}"),
                "use 1 to 64 letters, digits, '-' and '_'",
            ));
        }
        if cpusets.iter().any(|c| c.name == name) {
            return Err(p.err(
                cs.name.span(),
                format!("cpuset {name:?} is defined twice"),
                "give each [[cpuset]] a distinct name",
            ));
        }
        let (cpus, chosen_by) = cpus_of(p, host, &cs.cpus, &taken, &cpusets, false)?;
        if cpus.is_empty() {
            return Err(p.err(
                cs.cpus.span(),
                format!("cpuset {name:?} has no CPUs"),
                "list at least one CPU",
            ));
        }
        let mems = match &cs.mems {
            None => host.nodes_of(&cpus),
            Some(m) => nodes_of_field(p, host, m, &cpus)?,
        };
        if cs.exclusive || cs.isolated {
            if let Some(other) = cpusets
                .iter()
                .find(|o| (o.exclusive || o.isolated) && o.cpus.intersects(&cpus))
            {
                return Err(p.err(
                    cs.cpus.span(),
                    format!(
                        "cpuset {name:?} ({cpus}) overlaps exclusive cpuset {:?} ({}) on CPUs {}",
                        other.name,
                        other.cpus,
                        other.cpus.intersection(&cpus)
                    ),
                    "exclusive cpusets must not share CPUs: choose disjoint CPU lists",
                ));
            }
            taken = taken.union(&cpus);
        }
        cpusets.push(ResolvedCpuset {
            cgroup: format!("ibtune-{name}"),
            name,
            cpus,
            mems,
            exclusive: cs.exclusive || cs.isolated,
            isolated: cs.isolated,
            chosen_by,
        });
        if !online.is_empty() && online.difference(&taken).is_empty() {
            return Err(p.err(
                cs.cpus.span(),
                format!("the exclusive cpusets take every CPU of this host ({online})"),
                "leave at least one CPU (conventionally CPU 0) for the rest of the system",
            ));
        }
    }

    let mut irqs = Vec::new();
    let mut ban: Option<CpuSet> = None;
    for spec in &p.irq {
        let dev_name = spec.device.get_ref();
        let dev = device_or_err(p, host, dev_name, spec.device.span())?;
        let (targets, _) = cpus_of(p, host, &spec.cpus, &CpuSet::new(), &cpusets, true)?;
        let targets = if matches!(spec.cpus.get_ref(), CpuField::Text(t) if t.trim() == "local") {
            host.local_cpus_of(dev)
        } else {
            targets
        };
        if targets.is_empty() {
            return Err(p.err(
                spec.cpus.span(),
                "IRQ target CPU list is empty",
                "list at least one CPU",
            ));
        }
        let lines: Vec<u32> = dev
            .irqs
            .iter()
            .filter(|i| spec.include_async || !i.is_async)
            .map(|i| i.irq)
            .collect();
        if lines.is_empty() {
            return Err(p.err(
                spec.device.span(),
                format!("{dev_name} has no IRQs (none in msi_irqs or /proc/interrupts); software devices such as rxe have none"),
                "remove this [[irq]] section for this device",
            ));
        }
        let tl: Vec<u32> = targets.iter().collect();
        let assignments = lines
            .iter()
            .enumerate()
            .map(|(i, irq)| {
                let cpus = match spec.mode {
                    IrqMode::Spread => CpuSet::from_iter_u32([tl[i % tl.len()]]),
                    IrqMode::Single => CpuSet::from_iter_u32([tl[0]]),
                };
                (*irq, cpus)
            })
            .collect();
        if spec.ban_irqbalance {
            ban = Some(ban.unwrap_or_default().union(&targets));
        }
        irqs.push(ResolvedIrq {
            device: dev_name.clone(),
            targets,
            mode: spec.mode,
            assignments,
        });
    }

    let tuned = p.tuned.as_ref().map(|t| tuned_conf(p.name(), t));

    let dma_latency_us = match &p.dma_latency {
        None => None,
        Some(d) => match d.us.get_ref() {
            ScalarValue::Text(t) if t == "off" => None,
            ScalarValue::Int(v) if (0..=i32::MAX as i64).contains(v) => Some(*v as i32),
            _ => {
                return Err(p.err(
                    d.us.span(),
                    "dma_latency.us must be microseconds (0 or more) or \"off\"",
                    "write e.g. `us = 0` or `us = \"off\"`",
                ))
            }
        },
    };

    let mut sysctls = Vec::new();
    for (name, v) in &p.sysctl {
        let path = match crate::host::kernel::sysctl_path(name) {
            Ok(path) => path,
            Err(e) => {
                return Err(p.err(
                    v.span(),
                    e.to_string(),
                    "use a dotted sysctl name such as vm.swappiness",
                ))
            }
        };
        if !root.exists(&path) {
            return Err(p.err(
                v.span(),
                format!("sysctl {name} does not exist on this kernel ({path} is absent)"),
                "remove it, or check the name with `sysctl -a`",
            ));
        }
        sysctls.push((name.clone(), v.get_ref().as_setting()));
    }

    let cpu = p.cpu.clone().unwrap_or_default();
    let thp = match &cpu.thp {
        None => None,
        Some(t) => {
            let v = t.get_ref();
            if !["always", "madvise", "never"].contains(&v.as_str()) {
                return Err(p.err(
                    t.span(),
                    format!("thp {v:?} is not a THP mode"),
                    "use always, madvise or never",
                ));
            }
            Some(v.clone())
        }
    };

    let hugepages = hugepages(p, host, &cpusets)?;
    let boot = boot_params(p, host, &cpusets, cpu.max_cstate_latency_us)?;

    Ok(Resolved {
        name: p.name().to_string(),
        description: p.profile.description.clone(),
        path: p.source.path.display().to_string(),
        cpusets,
        irqs,
        irqbalance_ban: ban,
        mem_policy: p.numa.as_ref().map(|n| n.policy),
        tuned,
        dma_latency_us,
        sysctls,
        governor: cpu.governor.as_ref().map(|g| g.get_ref().clone()),
        max_cstate_latency_us: cpu.max_cstate_latency_us,
        thp,
        hugepages,
        boot,
    })
}

fn device_or_err<'h>(
    p: &Profile,
    host: &'h Host,
    name: &str,
    span: Range<usize>,
) -> Result<&'h crate::host::RdmaDevice, ProfileError> {
    host.device(name).ok_or_else(|| {
        let present = host.device_names();
        p.err(
            span,
            format!(
                "{name} not found; devices: {}",
                if present.is_empty() { "none".to_string() } else { present.join(", ") }
            ),
            if present.is_empty() {
                "this host has no RDMA device: remove the device references, or run in the Soft-RoCE lab".to_string()
            } else {
                format!("use one of: {}", present.join(", "))
            },
        )
    })
}

/// Resolves a CPU field. `irq_context` allows `local` and `cpuset:NAME`.
fn cpus_of(
    p: &Profile,
    host: &Host,
    f: &Spanned<CpuField>,
    taken: &CpuSet,
    cpusets: &[ResolvedCpuset],
    irq_context: bool,
) -> Result<(CpuSet, String), ProfileError> {
    let span = f.span();
    let online = &host.cpus.online;
    let set = match f.get_ref() {
        CpuField::List(v) => CpuSet::from_iter_u32(v.iter().copied()),
        CpuField::Text(t) => {
            let t = t.trim();
            if let Some(name) = t.strip_prefix("cpuset:") {
                if !irq_context {
                    return Err(p.err(
                        span,
                        "\"cpuset:NAME\" is only allowed in [[irq]] cpus",
                        "list CPUs explicitly",
                    ));
                }
                let cs = cpusets
                    .iter()
                    .find(|c| c.name == name.trim())
                    .ok_or_else(|| {
                        let names: Vec<&str> = cpusets.iter().map(|c| c.name.as_str()).collect();
                        p.err(
                            span.clone(),
                            format!(
                                "no cpuset named {:?}; cpusets: {}",
                                name.trim(),
                                if names.is_empty() {
                                    "none defined".to_string()
                                } else {
                                    names.join(", ")
                                }
                            ),
                            "name a [[cpuset]] defined in this profile",
                        )
                    })?;
                return Ok((cs.cpus.clone(), t.to_string()));
            }
            if t == "local" {
                if !irq_context {
                    return Err(p.err(
                        span,
                        "\"local\" is only allowed in [[irq]] cpus",
                        "use \"N cores local to <device>\"",
                    ));
                }
                return Ok((CpuSet::new(), t.to_string()));
            }
            if let Some((n, dev)) = parse_cores_local(t) {
                let dev = device_or_err(p, host, dev, span.clone())?;
                let cpus = pick_local_cores(host, dev, n, taken).map_err(|m| {
                    p.err(
                        span.clone(),
                        m,
                        "ask for fewer cores, or list CPUs explicitly",
                    )
                })?;
                return Ok((cpus, t.to_string()));
            }
            if t.chars().next().is_some_and(|c| c.is_ascii_digit()) && t.contains(" core") {
                return Err(p.err(
                    span,
                    format!("cannot read {t:?}"),
                    "write \"N cores local to <device>\", e.g. \"4 cores local to mlx5_0\"",
                ));
            }
            CpuSet::parse_list(t).map_err(|e| {
                p.err(
                    span.clone(),
                    e.to_string(),
                    "write a CPU list (\"16,18,20-22\"), an array, or \"N cores local to <device>\"",
                )
            })?
        }
    };
    let missing = set.difference(online);
    if !missing.is_empty() {
        return Err(p.err(
            span,
            format!("CPUs {missing} do not exist on this host (online: {online})"),
            format!("use CPUs from {online}"),
        ));
    }
    let text = set.to_list();
    Ok((set, text))
}

/// Parses "N cores local to DEV" (also "core").
fn parse_cores_local(t: &str) -> Option<(usize, &str)> {
    let mut w = t.split_whitespace();
    let n: usize = w.next()?.parse().ok()?;
    let unit = w.next()?;
    if unit != "cores" && unit != "core" {
        return None;
    }
    if w.next()? != "local" || w.next()? != "to" {
        return None;
    }
    let dev = w.next()?;
    if w.next().is_some() {
        return None;
    }
    Some((n, dev))
}

/// Picks `n` whole physical cores local to `dev`: cores already isolated
/// on the kernel command line first, then the highest-numbered,
/// never the core of CPU 0 and never CPUs already taken. All online SMT
/// siblings of a chosen core come with it, as cpu-partitioning advises.
fn pick_local_cores(
    host: &Host,
    dev: &crate::host::RdmaDevice,
    n: usize,
    taken: &CpuSet,
) -> Result<CpuSet, String> {
    let local = host.local_cpus_of(dev);
    let mut cores: BTreeMap<(u32, u32), CpuSet> = BTreeMap::new();
    for cpu in local.iter() {
        let key = match host.cpu(cpu) {
            Some(c) => (c.package, c.core),
            None => (u32::MAX, cpu),
        };
        cores.entry(key).or_default().insert(cpu);
    }
    let cpu0_core = host.cpu(0).map(|c| (c.package, c.core));
    let mut free: Vec<CpuSet> = cores
        .into_iter()
        .filter(|(k, cpus)| Some(*k) != cpu0_core && !cpus.contains(0) && !cpus.intersects(taken))
        .map(|(_, cpus)| cpus)
        .collect();
    // Cores with CPUs the kernel already isolates (isolcpus) first, then the highest-numbered.
    let iso = &host.cpus.isolated;
    free.sort_by_key(|c| std::cmp::Reverse((c.intersects(iso), c.iter().next_back())));
    if free.len() < n {
        return Err(format!(
            "{n} cores local to {} wanted, but only {} are free (local CPUs: {local}; already taken: {taken}; the core of CPU 0 is never taken)",
            dev.name,
            free.len()
        ));
    }
    Ok(free
        .into_iter()
        .take(n)
        .fold(CpuSet::new(), |a, c| a.union(&c)))
}

fn nodes_of_field(
    p: &Profile,
    host: &Host,
    f: &Spanned<CpuField>,
    cpus: &CpuSet,
) -> Result<CpuSet, ProfileError> {
    let set = match f.get_ref() {
        CpuField::Text(t) if t.trim() == "local" => return Ok(host.nodes_of(cpus)),
        CpuField::List(v) => CpuSet::from_iter_u32(v.iter().copied()),
        CpuField::Text(t) => CpuSet::parse_list(t).map_err(|e| {
            p.err(
                f.span(),
                e.to_string(),
                "write \"local\", a node list such as \"0\", or an array",
            )
        })?,
    };
    let nodes = host.node_ids();
    if set.is_empty() {
        return Err(p.err(
            f.span(),
            "the NUMA node list is empty",
            format!("use nodes from {nodes}, or \"local\""),
        ));
    }
    let missing = set.difference(&nodes);
    if !missing.is_empty() {
        return Err(p.err(
            f.span(),
            format!("NUMA nodes {missing} do not exist on this host (nodes: {nodes})"),
            format!("use nodes from {nodes}, or \"local\""),
        ));
    }
    Ok(set)
}

fn tuned_conf(profile: &str, t: &TunedSpec) -> ResolvedTuned {
    let base = t.base.get_ref().clone();
    let mut sections: BTreeMap<String, Vec<(String, String)>> = BTreeMap::new();
    for d in t.drop.iter().map(|d| d.get_ref()) {
        let (sec, opt) = d.split_once('.').unwrap_or(("cpu", d.as_str()));
        sections
            .entry(sec.to_string())
            .or_default()
            .push(("drop".into(), opt.to_string()));
    }
    for (k, v) in &t.settings {
        let (sec, opt) = k.split_once('.').unwrap_or(("main", k.as_str()));
        sections
            .entry(sec.to_string())
            .or_default()
            .push((opt.to_string(), v.get_ref().as_setting()));
    }
    let mut conf = format!(
        "# Written by ibtune for profile {profile}; `ibtune revert` removes it.\n[main]\nsummary=ibtune {profile}: {base}{}\ninclude={base}\n",
        if t.drop.is_empty() { String::new() } else { format!(" without {}", t.drop.iter().map(|d| d.get_ref().as_str()).collect::<Vec<_>>().join(", ")) }
    );
    if let Some(main) = sections.remove("main") {
        for (k, v) in main {
            conf.push_str(&format!("{k}={v}\n"));
        }
    }
    for (sec, opts) in sections {
        conf.push_str(&format!("\n[{sec}]\n"));
        // tuned takes one `drop=` line with a comma-separated list.
        let drops: Vec<&str> = opts
            .iter()
            .filter(|(k, _)| k == "drop")
            .map(|(_, v)| v.as_str())
            .collect();
        if !drops.is_empty() {
            conf.push_str(&format!("drop={}\n", drops.join(",")));
        }
        for (k, v) in opts.iter().filter(|(k, _)| k != "drop") {
            conf.push_str(&format!("{k}={v}\n"));
        }
    }
    ResolvedTuned {
        profile_name: format!("ibtune-{profile}"),
        base,
        conf,
    }
}

/// `[[hugepages]]`: one entry per node and size; sizes, nodes and counts
/// that the host cannot hold are refused here, before anything is written.
fn hugepages(
    p: &Profile,
    host: &Host,
    cpusets: &[ResolvedCpuset],
) -> Result<Vec<ResolvedHugepages>, ProfileError> {
    let mut out: Vec<ResolvedHugepages> = Vec::new();
    for h in &p.hugepages {
        let size = h.size.get_ref().trim();
        let Some(&(word, size_kb)) = HUGEPAGE_SIZES.iter().find(|(w, _)| *w == size) else {
            return Err(p.err(
                h.size.span(),
                format!("hugepages size {size:?} is not a huge page size ibtune sets"),
                "use \"2M\" or \"1G\"",
            ));
        };
        let local = cpusets.iter().fold(CpuSet::new(), |a, c| a.union(&c.mems));
        let nodes = match &h.nodes {
            Some(f) if !matches!(f.get_ref(), CpuField::Text(t) if t.trim() == "local") => {
                nodes_of_field(p, host, f, &CpuSet::new())?
            }
            _ if local.is_empty() => {
                let span = h.nodes.as_ref().map_or(h.size.span(), |f| f.span());
                return Err(p.err(
                    span,
                    "hugepages nodes = \"local\" means the memory nodes of the profile's cpusets, and it has none",
                    format!("add a [[cpuset]], or name the nodes: nodes = [0] (nodes: {})", host.node_ids()),
                ));
            }
            _ => local,
        };
        let count = *h.count.get_ref();
        for node in nodes.iter() {
            if out.iter().any(|o| o.node == node && o.size_kb == size_kb) {
                return Err(p.err(
                    h.size.span(),
                    format!("{word} hugepages on node {node} are set twice"),
                    "give each node and size one [[hugepages]] entry",
                ));
            }
            let mem_kb = host
                .numa_nodes
                .iter()
                .find(|n| n.id == node)
                .and_then(|n| n.mem_total_kb);
            if let Some(mem_kb) = mem_kb {
                if count.saturating_mul(size_kb) > mem_kb {
                    return Err(p.err(
                        h.count.span(),
                        format!(
                            "{count} {word} hugepages need {} MiB, more than node {node}'s {} MiB of memory",
                            count.saturating_mul(size_kb) >> 10,
                            mem_kb >> 10
                        ),
                        "ask for fewer pages per node",
                    ));
                }
            }
            out.push(ResolvedHugepages {
                node,
                size: word.to_string(),
                size_kb,
                count,
            });
        }
    }
    Ok(out)
}

/// `[boot]`: the kernel parameters the profile asks for. The CPU lists come
/// from the isolated cpusets; `irqaffinity` is every other online CPU (the
/// housekeeping CPUs); the C-state limit is the deepest idle state whose
/// exit latency is within `[cpu] max_cstate_latency_us` on every cpuset CPU,
/// for both idle drivers (each ignores the other's parameter), since the
/// kernel command line cannot limit some CPUs only.
fn boot_params(
    p: &Profile,
    host: &Host,
    cpusets: &[ResolvedCpuset],
    max_latency_us: Option<u64>,
) -> Result<Vec<BootParam>, ProfileError> {
    let Some(b) = &p.boot else {
        return Ok(Vec::new());
    };
    let iso = cpusets
        .iter()
        .filter(|c| c.isolated)
        .fold(CpuSet::new(), |a, c| a.union(&c.cpus));
    let mut v = Vec::new();
    let mut add = |on: bool, name: &str, value: String| {
        if on {
            v.push(BootParam {
                name: name.into(),
                value,
                required: b.required,
            })
        }
    };
    if !iso.is_empty() {
        let housekeeping = host.cpus.online.difference(&iso);
        add(b.isolcpus, "isolcpus", format!("managed_irq,domain,{iso}"));
        add(b.nohz_full, "nohz_full", iso.to_list());
        add(b.rcu_nocbs, "rcu_nocbs", iso.to_list());
        add(
            b.irqaffinity && !housekeeping.is_empty(),
            "irqaffinity",
            housekeeping.to_list(),
        );
    }
    if let Some(m) = b.max_cstate.as_ref().filter(|m| *m.get_ref()) {
        let Some(limit) = max_latency_us else {
            return Err(p.err(
                m.span(),
                "[boot] max_cstate needs the limit of [cpu] max_cstate_latency_us",
                "add max_cstate_latency_us = N (microseconds) to [cpu]",
            ));
        };
        let rt = cpusets.iter().fold(CpuSet::new(), |a, c| a.union(&c.cpus));
        let deepest = host
            .cpus
            .list
            .iter()
            .filter(|c| rt.is_empty() || rt.contains(c.id))
            .filter(|c| !c.cstates.is_empty())
            .map(|c| {
                c.cstates
                    .iter()
                    .filter(|s| s.latency_us <= limit)
                    .map(|s| s.index)
                    .max()
                    .unwrap_or(0)
            })
            .min();
        match deepest {
            None => {
                return Err(p.err(
                    m.span(),
                    "[boot] max_cstate: this host lists no idle states (no cpuidle), so there is no limit to compute",
                    "remove max_cstate from [boot]",
                ))
            }
            // Index 0 is polling: intel_idle.max_cstate=0 would disable the
            // driver and hand the CPU to deeper ACPI states, so poll instead.
            Some(0) => add(true, "idle", "poll".into()),
            Some(n) => {
                add(true, "intel_idle.max_cstate", n.to_string());
                add(true, "processor.max_cstate", n.to_string());
            }
        }
    }
    Ok(v)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cores_local_grammar() {
        assert_eq!(
            parse_cores_local("4 cores local to mlx5_0"),
            Some((4, "mlx5_0"))
        );
        assert_eq!(parse_cores_local("1 core local to rxe0"), Some((1, "rxe0")));
        assert_eq!(parse_cores_local("4 cores near mlx5_0"), None);
        assert_eq!(parse_cores_local("x cores local to a"), None);
    }
}
