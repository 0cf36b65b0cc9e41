//! NUMA topology from the system libhwloc (through the safe `hwlocality`
//! bindings), for the live machine only.
//!
//! Why it exists: hwloc knows about firmware quirks that plain sysfs parsing
//! does not (memory-less nodes, odd numbering, heterogeneous memory), so on
//! the live host its NUMA view is preferred; snapshots have no kernel behind
//! them and always use sysfs.

use super::cpulist::CpuSet;
use super::model::NumaNode;
use super::root::HostRoot;
use hwlocality::object::types::ObjectType;
use hwlocality::topology::builder::BuildFlags;
use hwlocality::topology::Topology;

/// NUMA nodes as hwloc sees them: id (OS index), CPUs (OS indexes of the
/// node's cpuset), and memory. `None` for snapshot roots, or when hwloc
/// fails or reports no node.
///
/// The topology includes disallowed CPUs, so a process confined to a cpuset
/// still sees the whole host, as sysfs does.
pub fn hwloc_numa_nodes(root: &HostRoot) -> Option<Vec<NumaNode>> {
    if !root.is_live() {
        return None;
    }
    let topology = Topology::builder()
        .with_flags(BuildFlags::INCLUDE_DISALLOWED)
        .ok()?
        .build()
        .ok()?;
    let mut nodes: Vec<NumaNode> = topology
        .objects_with_type(ObjectType::NUMANode)
        .filter_map(|obj| {
            let id = u32::try_from(obj.os_index()?).ok()?;
            let cpus: CpuSet = obj
                .cpuset()
                .map(|set| {
                    set.iter_set()
                        .filter_map(|i| u32::try_from(usize::from(i)).ok())
                        .collect()
                })
                .unwrap_or_default();
            let mem = obj.total_memory();
            Some(NumaNode {
                id,
                cpus,
                mem_total_kb: (mem > 0).then_some(mem / 1024),
            })
        })
        .collect();
    nodes.sort_by_key(|n| n.id);
    nodes.dedup_by_key(|n| n.id);
    (!nodes.is_empty()).then_some(nodes)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::host::numa::discover_numa;

    #[test]
    fn snapshot_roots_do_not_use_hwloc() {
        let dir = tempfile::tempdir().unwrap();
        let root = HostRoot::new(dir.path()).unwrap();
        assert!(hwloc_numa_nodes(&root).is_none());
    }

    /// On this live machine, hwloc's nodes and their CPUs agree with sysfs.
    #[test]
    fn hwloc_agrees_with_sysfs_on_this_host() {
        let root = HostRoot::live();
        let Some(online) = root
            .read_opt("/sys/devices/system/cpu/online")
            .and_then(|t| CpuSet::parse_list(&t).ok())
        else {
            eprintln!("no /sys/devices/system/cpu/online; skipping");
            return;
        };
        let sysfs = discover_numa(&root, &online);
        let Some(hw) = hwloc_numa_nodes(&root) else {
            panic!("hwloc returned no NUMA nodes on the live host");
        };
        let view = |v: &[NumaNode]| -> Vec<(u32, String)> {
            v.iter()
                .map(|n| (n.id, n.cpus.intersection(&online).to_list()))
                .collect()
        };
        assert_eq!(view(&hw), view(&sysfs), "hwloc vs sysfs NUMA view");
        let hw_cpus = hw.iter().fold(CpuSet::new(), |a, n| a.union(&n.cpus));
        assert!(
            online.is_subset(&hw_cpus),
            "hwloc misses online CPUs: {hw_cpus} vs {online}"
        );
    }
}
