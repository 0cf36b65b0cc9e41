//! Turning a resolved profile into the ordered list of settings to apply.
//!
//! Why it exists: the order matters (ban irqbalance before pinning IRQs,
//! enable the cpuset controller before making a partition, write a tuned
//! profile before activating it), and plan, apply and verify must agree on
//! it. [`build`] is the only place that decides it.

use super::item::{Action, Cmp, Item, Observed, Status};
use crate::host::{CgroupMode, Host, HostRoot};
use crate::profile::{Resolved, ResolvedCpuset};
use serde::Serialize;

/// A plan: items in apply order, each observed on the host.
#[derive(Debug, Clone, Serialize)]
pub struct Plan {
    /// Profile name.
    pub profile: String,
    /// Profile file.
    pub profile_path: String,
    /// Host root.
    pub root: String,
    /// cgroup mode used for cpusets.
    pub cgroup_mode: CgroupMode,
    /// Items with their observed state.
    pub items: Vec<PlannedItem>,
    /// Counts by status.
    pub summary: Summary,
}

/// An item and what was observed.
#[derive(Debug, Clone, Serialize)]
pub struct PlannedItem {
    /// The item.
    #[serde(flatten)]
    pub item: Item,
    /// What the host has now.
    #[serde(flatten)]
    pub observed: Observed,
}

/// Counts of items by status.
#[derive(Debug, Clone, Default, Serialize, PartialEq, Eq)]
pub struct Summary {
    /// Already as wanted.
    pub ok: usize,
    /// To change (verify: drifted).
    pub change: usize,
    /// Cannot be applied here.
    pub blocked: usize,
    /// Boot advice only.
    pub advice: usize,
    /// Applied, but the kernel granted fewer huge pages than asked.
    pub short: usize,
}

impl Plan {
    /// Observes every item on `root`.
    pub fn observe(r: &Resolved, host: &Host, root: &HostRoot) -> Plan {
        let mut plan = Plan {
            profile: r.name.clone(),
            profile_path: r.path.clone(),
            root: root.dir().display().to_string(),
            cgroup_mode: host.cgroup.mode,
            items: Vec::new(),
            summary: Summary::default(),
        };
        for item in build(r, host, root) {
            plan.push(item, root);
        }
        plan
    }

    /// Adds an item the profile does not hold (`apply --boot-file`),
    /// observed on `root`, at the end of the apply order.
    pub fn push(&mut self, item: Item, root: &HostRoot) {
        let observed = item.observe(root);
        self.items.push(PlannedItem { item, observed });
        self.recount();
    }

    /// Marks as [`Status::Short`] every page count that an apply in
    /// `journalled` (the keys of the open journal) set and the kernel
    /// granted only in part: re-applying cannot be told from fixing, so
    /// `verify` says what is missing and why.
    pub fn mark_short(&mut self, journalled: &std::collections::BTreeSet<String>) {
        for i in &mut self.items {
            if i.observed.status == Status::Change
                && journalled.contains(&i.item.key)
                && i.item.shortfall(&i.observed.current).is_some()
            {
                i.observed.status = Status::Short;
            }
        }
        self.recount();
    }

    /// The shortfall messages of the items marked short.
    pub fn short(&self) -> Vec<String> {
        self.items
            .iter()
            .filter(|i| i.observed.status == Status::Short)
            .filter_map(|i| i.item.shortfall(&i.observed.current))
            .collect()
    }

    fn recount(&mut self) {
        let mut summary = Summary::default();
        for i in &self.items {
            match i.observed.status {
                Status::Ok => summary.ok += 1,
                Status::Change => summary.change += 1,
                Status::Blocked => summary.blocked += 1,
                Status::Advice => summary.advice += 1,
                Status::Short => summary.short += 1,
            }
        }
        self.summary = summary;
    }
}

impl Plan {
    /// "what (why)" of every item that cannot be applied on this host.
    pub fn blocked(&self) -> Vec<String> {
        self.items
            .iter()
            .filter(|i| i.observed.status == Status::Blocked)
            .map(|i| {
                format!(
                    "{} ({})",
                    i.item.what,
                    i.item.blocked.clone().unwrap_or_default()
                )
            })
            .collect()
    }
}

/// Host path of a cpuset's cgroup directory, in the mode in use.
pub fn cgroup_dir(host: &Host, cs: &ResolvedCpuset) -> Option<String> {
    let mount = match host.cgroup.mode {
        CgroupMode::V2 => host.cgroup.v2_mount.as_deref()?,
        CgroupMode::V1 => host.cgroup.v1_cpuset_mount.as_deref()?,
        CgroupMode::None => return None,
    };
    Some(format!("{}/{}", mount.trim_end_matches('/'), cs.cgroup))
}

/// Host path of the file a process writes its pid to, to join a cpuset.
pub fn cgroup_procs_file(host: &Host, cs: &ResolvedCpuset) -> Option<String> {
    let dir = cgroup_dir(host, cs)?;
    Some(match host.cgroup.mode {
        CgroupMode::V2 => format!("{dir}/cgroup.procs"),
        _ => format!("{dir}/tasks"),
    })
}

/// Builds the items of `r` in apply order.
pub fn build(r: &Resolved, host: &Host, root: &HostRoot) -> Vec<Item> {
    let mut items = Vec::new();
    let file = |key: String, what: String, path: String, value: String, cmp: Cmp| Item {
        key,
        what,
        action: Action::File { path, value, cmp },
        blocked: None,
    };

    // 1. irqbalance first, so it does not move IRQs back while we pin them.
    if let Some(ban) = &r.irqbalance_ban {
        if let Some(path) = &host.irqbalance.config_file {
            items.push(Item {
                key: "irqbalance/banned_cpulist".into(),
                what: "irqbalance: IRQBALANCE_BANNED_CPULIST".into(),
                action: Action::IrqbalanceBan {
                    path: path.clone(),
                    cpus: ban.clone(),
                    restart: root.is_live() && host.irqbalance.running,
                },
                blocked: None,
            });
        } else if host.irqbalance.running {
            items.push(Item {
                key: "irqbalance/banned_cpulist".into(),
                what: "irqbalance: IRQBALANCE_BANNED_CPULIST".into(),
                action: Action::IrqbalanceBan {
                    path: "/etc/default/irqbalance".into(),
                    cpus: ban.clone(),
                    restart: root.is_live(),
                },
                blocked: None,
            });
        }
    }

    // 2. cpusets.
    if host.cgroup.mode == CgroupMode::V2 && !r.cpusets.is_empty() {
        let mount = host.cgroup.v2_mount.clone().unwrap_or_default();
        items.push(Item {
            key: "cgroup/subtree_control/cpuset".into(),
            what: "cgroup v2 root: enable the cpuset controller".into(),
            action: Action::Controller {
                path: format!("{}/cgroup.subtree_control", mount.trim_end_matches('/')),
                controller: "cpuset".into(),
            },
            blocked: None,
        });
    }
    for cs in &r.cpusets {
        let blocked = match host.cgroup.mode {
            CgroupMode::None => Some("no cpuset cgroup controller is mounted (mount cgroup2, or the v1 cpuset hierarchy)".to_string()),
            _ => None,
        };
        let Some(dir) = cgroup_dir(host, cs) else {
            items.push(Item {
                key: format!("cpuset/{}", cs.name),
                what: format!("cpuset {}: cgroup", cs.name),
                action: Action::Dir {
                    path: format!("/sys/fs/cgroup/{}", cs.cgroup),
                    cgroup: true,
                },
                blocked,
            });
            continue;
        };
        let k = |s: &str| format!("cpuset/{}/{s}", cs.name);
        // cgroup v2 files always carry the "cpuset." prefix; v1 drops it under `noprefix`.
        let pre = if host.cgroup.mode == CgroupMode::V1 && host.cgroup.v1_noprefix {
            ""
        } else {
            "cpuset."
        };
        // One cpuset attribute file: key suffix, file name after the prefix, value, comparison.
        let attr = |key: &str, name: &str, value: String, cmp: Cmp| {
            file(
                k(key),
                format!("cpuset {}: {pre}{name}", cs.name),
                format!("{dir}/{pre}{name}"),
                value,
                cmp,
            )
        };
        items.push(Item {
            key: k("cgroup"),
            what: format!("cpuset {}: cgroup {dir}", cs.name),
            action: Action::Dir {
                path: dir.clone(),
                cgroup: true,
            },
            blocked: None,
        });
        items.push(attr("cpus", "cpus", format!("{}\n", cs.cpus), Cmp::CpuList));
        items.push(attr("mems", "mems", format!("{}\n", cs.mems), Cmp::CpuList));
        match host.cgroup.mode {
            CgroupMode::V2 if cs.exclusive => {
                if host.cgroup.v2_has_exclusive {
                    items.push(attr(
                        "cpus.exclusive",
                        "cpus.exclusive",
                        format!("{}\n", cs.cpus),
                        Cmp::CpuList,
                    ));
                }
                let part = if cs.isolated { "isolated" } else { "root" };
                items.push(attr(
                    "partition",
                    "cpus.partition",
                    format!("{part}\n"),
                    Cmp::Partition,
                ));
            }
            CgroupMode::V1 => {
                if cs.exclusive {
                    items.push(attr(
                        "cpu_exclusive",
                        "cpu_exclusive",
                        "1\n".into(),
                        Cmp::Text,
                    ));
                }
                if cs.isolated {
                    // v1 has no partitions: isolation is "no load balancing inside".
                    items.push(attr(
                        "sched_load_balance",
                        "sched_load_balance",
                        "0\n".into(),
                        Cmp::Text,
                    ));
                }
            }
            _ => {}
        }
    }

    // 3. IRQ affinity.
    for irq in &r.irqs {
        for (n, cpus) in &irq.assignments {
            let name = host
                .device(&irq.device)
                .and_then(|d| d.irqs.iter().find(|i| i.irq == *n))
                .and_then(|i| i.name.clone())
                .unwrap_or_else(|| irq.device.clone());
            items.push(file(
                format!("irq/{n}/affinity"),
                format!("IRQ {n} ({name}) smp_affinity_list"),
                format!("/proc/irq/{n}/smp_affinity_list"),
                format!("{cpus}\n"),
                Cmp::CpuList,
            ));
        }
    }

    // 4. sysctls.
    for (name, value) in &r.sysctls {
        if let Ok(path) = crate::host::kernel::sysctl_path(name) {
            items.push(file(
                format!("sysctl/{name}"),
                format!("sysctl {name}"),
                path,
                format!("{value}\n"),
                Cmp::Text,
            ));
        }
    }

    // 5. CPU frequency and idle states.
    if let Some(g) = &r.governor {
        for cpu in host.cpus.list.iter().filter(|c| c.governor.is_some()) {
            let id = cpu.id;
            items.push(file(
                format!("cpu/{id}/governor"),
                format!("CPU {id} cpufreq governor"),
                format!("/sys/devices/system/cpu/cpu{id}/cpufreq/scaling_governor"),
                format!("{g}\n"),
                Cmp::Text,
            ));
        }
    }
    if let Some(max) = r.max_cstate_latency_us {
        let rt = r.cpuset_cpus();
        for cpu in host.cpus.list.iter().filter(|c| rt.contains(c.id)) {
            for st in cpu.cstates.iter().filter(|s| s.latency_us > max) {
                let id = cpu.id;
                items.push(file(
                    format!("cpu/{id}/cstate/{}", st.index),
                    format!(
                        "CPU {id} idle state {} ({} us exit latency) disabled",
                        st.name, st.latency_us
                    ),
                    format!(
                        "/sys/devices/system/cpu/cpu{id}/cpuidle/state{}/disable",
                        st.index
                    ),
                    "1\n".into(),
                    Cmp::Text,
                ));
            }
        }
    }

    // 6. THP.
    if let Some(t) = &r.thp {
        items.push(file(
            "thp/enabled".into(),
            "transparent huge pages".into(),
            "/sys/kernel/mm/transparent_hugepage/enabled".into(),
            format!("{t}\n"),
            Cmp::Bracket,
        ));
    }

    // 7. Huge pages per node: the kernel may grant fewer (apply reads back).
    for h in &r.hugepages {
        let dir = format!(
            "/sys/devices/system/node/node{}/hugepages/hugepages-{}kB",
            h.node, h.size_kb
        );
        let blocked = (!root.is_dir(&dir)).then(|| {
            format!(
                "this kernel has no {} huge pages on node {} (no {dir}): the CPU lacks the page size, or the kernel was built without it",
                h.size, h.node
            )
        });
        items.push(Item {
            key: format!("hugepages/node{}/{}", h.node, h.size),
            what: format!("node {}: {} hugepages", h.node, h.size),
            action: Action::File {
                path: format!("{dir}/nr_hugepages"),
                value: format!("{}\n", h.count),
                cmp: Cmp::Pages,
            },
            blocked,
        });
    }

    // 8. tuned: write the child profile, then activate it.
    if let Some(t) = &r.tuned {
        let blocked = (!host.tuned.installed)
            .then(|| "tuned is not installed (Debian: apt-get install tuned); remove [tuned] or install it".to_string());
        let base = if root.is_dir("/etc/tuned/profiles") {
            "/etc/tuned/profiles"
        } else {
            "/etc/tuned"
        };
        let dir = format!("{base}/{}", t.profile_name);
        items.push(Item {
            key: "tuned/profile-dir".into(),
            what: format!("tuned profile folder {dir}"),
            action: Action::Dir {
                path: dir.clone(),
                cgroup: false,
            },
            blocked: blocked.clone(),
        });
        items.push(Item {
            key: "tuned/profile-conf".into(),
            what: format!("tuned profile {} (includes {})", t.profile_name, t.base),
            action: Action::File {
                path: format!("{dir}/tuned.conf"),
                value: t.conf.clone(),
                cmp: Cmp::Text,
            },
            blocked: blocked.clone(),
        });
        items.push(Item {
            key: "tuned/active".into(),
            what: "tuned active profile".into(),
            action: Action::TunedProfile {
                name: t.profile_name.clone(),
            },
            blocked,
        });
    }

    // 9. cpu_dma_latency, held by a process.
    if let Some(us) = r.dma_latency_us {
        let blocked = (!root.exists("/dev/cpu_dma_latency"))
            .then(|| "this kernel has no /dev/cpu_dma_latency".to_string());
        items.push(Item {
            key: "dma_latency/hold".into(),
            what: "/dev/cpu_dma_latency held by `ibtune hold`".into(),
            action: Action::Hold { us },
            blocked,
        });
    }

    // 10. Boot parameters: checked against /proc/cmdline, never set at run time.
    for b in &r.boot {
        items.push(Item {
            key: format!("boot/{}", b.name),
            what: format!("kernel command line {}", b.name),
            action: Action::Boot {
                name: b.name.clone(),
                value: b.value.clone(),
                required: b.required,
            },
            blocked: None,
        });
    }
    items
}
