//! CPU inventory from `/sys/devices/system/cpu/`: online and isolated CPUs,
//! and per CPU its package, core, SMT siblings, node, governor and C-states.
//!
//! Why it exists: choosing real-time cores (whole cores, no SMT sibling
//! shared with housekeeping, on the HCA's node) and checking governors and
//! C-states all need this per-CPU view.

use super::cpulist::CpuSet;
use super::model::{CState, Cpu, Cpus, NumaNode};
use super::root::HostRoot;

const CPU_BASE: &str = "/sys/devices/system/cpu";

/// Reads a cpulist file, `None` when absent or unparsable.
fn read_list(root: &HostRoot, p: &str) -> Option<CpuSet> {
    root.read_opt(p).and_then(|t| CpuSet::parse_list(&t).ok())
}

/// Reads a topology id; negative values (`-1` on some virtual machines) and
/// garbage become `None`.
fn read_id(root: &HostRoot, p: &str) -> Option<u32> {
    root.read_parse::<i64>(p)
        .and_then(|v| u32::try_from(v).ok())
}

/// The cpuidle states of one CPU, in index order.
///
/// Why it exists: profiles disable deep C-states per CPU; verify compares
/// each state's `disable` flag.
pub fn read_cstates(root: &HostRoot, cpu: u32) -> Vec<CState> {
    let dir = format!("{CPU_BASE}/cpu{cpu}/cpuidle");
    root.list(&dir)
        .into_iter()
        .filter_map(|name| {
            let index: u32 = name.strip_prefix("state")?.parse().ok()?;
            let sd = format!("{dir}/{name}");
            Some(CState {
                index,
                name: root
                    .read_opt(&format!("{sd}/name"))
                    .unwrap_or_else(|| format!("state{index}")),
                latency_us: root.read_parse(&format!("{sd}/latency")).unwrap_or(0),
                disabled: root
                    .read_parse::<u32>(&format!("{sd}/disable"))
                    .is_some_and(|d| d != 0),
            })
        })
        .collect()
}

/// The NUMA node of a CPU: the node whose CPU list holds it, else the
/// `cpuN/nodeM` link sysfs puts in the CPU's directory, else 0.
fn node_of(root: &HostRoot, cpu: u32, nodes: &[NumaNode]) -> u32 {
    if let Some(n) = nodes.iter().find(|n| n.cpus.contains(cpu)) {
        return n.id;
    }
    root.list(&format!("{CPU_BASE}/cpu{cpu}"))
        .iter()
        .find_map(|e| e.strip_prefix("node")?.parse().ok())
        .unwrap_or(0)
}

/// Reads the CPU inventory. `nodes` (from [`super::numa::discover_numa`])
/// gives each CPU its node. A missing or unreadable `online` file gives an
/// empty inventory; [`super::discover`] checks for it first.
pub fn discover_cpus(root: &HostRoot, nodes: &[NumaNode]) -> Cpus {
    let online = read_list(root, &format!("{CPU_BASE}/online")).unwrap_or_default();
    let isolated = read_list(root, &format!("{CPU_BASE}/isolated")).unwrap_or_default();
    let list = online
        .iter()
        .map(|id| {
            let topo = format!("{CPU_BASE}/cpu{id}/topology");
            let siblings = read_list(root, &format!("{topo}/thread_siblings_list"))
                .or_else(|| read_list(root, &format!("{topo}/core_cpus_list")))
                .filter(|s| !s.is_empty())
                .unwrap_or_else(|| CpuSet::from_iter_u32([id]));
            Cpu {
                id,
                package: read_id(root, &format!("{topo}/physical_package_id")).unwrap_or(0),
                core: read_id(root, &format!("{topo}/core_id")).unwrap_or(id),
                siblings,
                node: node_of(root, id, nodes),
                governor: root
                    .read_opt(&format!("{CPU_BASE}/cpu{id}/cpufreq/scaling_governor"))
                    .filter(|g| !g.is_empty()),
                cstates: read_cstates(root, id),
            }
        })
        .collect();
    Cpus {
        online,
        isolated,
        list,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_topology() {
        let dir = tempfile::tempdir().unwrap();
        let root = HostRoot::new(dir.path()).unwrap();
        root.put("/sys/devices/system/cpu/online", "0-3\n");
        root.put("/sys/devices/system/cpu/isolated", "\n");
        for c in 0..4u32 {
            let t = format!("/sys/devices/system/cpu/cpu{c}/topology");
            root.put(&format!("{t}/physical_package_id"), "0\n");
            root.put(&format!("{t}/core_id"), &format!("{}\n", c % 2));
            root.put(
                &format!("{t}/thread_siblings_list"),
                if c % 2 == 0 { "0,2\n" } else { "1,3\n" },
            );
        }
        root.put(
            "/sys/devices/system/cpu/cpu1/cpufreq/scaling_governor",
            "performance\n",
        );
        let idle = "/sys/devices/system/cpu/cpu1/cpuidle";
        root.put(&format!("{idle}/state0/name"), "POLL\n");
        root.put(&format!("{idle}/state0/latency"), "0\n");
        root.put(&format!("{idle}/state0/disable"), "0\n");
        root.put(&format!("{idle}/state1/name"), "C6\n");
        root.put(&format!("{idle}/state1/latency"), "133\n");
        root.put(&format!("{idle}/state1/disable"), "1\n");
        root.put(
            "/sys/devices/system/cpu/cpu3/topology/physical_package_id",
            "-1\n",
        );
        root.mkdir_all("/sys/devices/system/cpu/cpu3/node1")
            .unwrap();

        let nodes = vec![NumaNode {
            id: 0,
            cpus: CpuSet::parse_list("0-2").unwrap(),
            mem_total_kb: None,
        }];
        let c = discover_cpus(&root, &nodes);
        assert_eq!(c.online.to_list(), "0-3");
        assert!(c.isolated.is_empty());
        assert_eq!(c.list.len(), 4);
        assert_eq!(c.list[2].siblings.to_list(), "0,2");
        assert_eq!(c.list[1].core, 1);
        assert_eq!(c.list[1].governor.as_deref(), Some("performance"));
        assert_eq!(c.list[0].governor, None);
        assert_eq!(c.list[1].cstates.len(), 2);
        assert_eq!(c.list[1].cstates[1].name, "C6");
        assert_eq!(c.list[1].cstates[1].latency_us, 133);
        assert!(c.list[1].cstates[1].disabled);
        assert_eq!(c.list[3].package, 0);
        assert_eq!(c.list[3].node, 1);
    }

    #[test]
    fn empty_root_gives_empty_inventory() {
        let dir = tempfile::tempdir().unwrap();
        let root = HostRoot::new(dir.path()).unwrap();
        let c = discover_cpus(&root, &[]);
        assert!(c.online.is_empty());
        assert!(c.list.is_empty());
    }
}
