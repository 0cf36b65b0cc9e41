//! NUMA nodes from `/sys/devices/system/node/`.
//!
//! Why it exists: the real-time cores, their memory and the HCA should sit
//! on one node; everything that places CPUs or warns about remote HCAs
//! starts from this list.

use super::cpulist::CpuSet;
use super::model::NumaNode;
use super::root::HostRoot;

/// `MemTotal` in kB from a node's `meminfo` (`Node 0 MemTotal: 32768 kB`)
/// or from `/proc/meminfo` (`MemTotal: 32768 kB`).
///
/// Why it exists: both formats carry the same field with a different prefix.
pub fn parse_mem_total_kb(text: &str) -> Option<u64> {
    text.lines().find_map(|line| {
        let (head, value) = line.split_once(':')?;
        if head.split_whitespace().last()? != "MemTotal" {
            return None;
        }
        value.split_whitespace().next()?.parse().ok()
    })
}

/// NUMA nodes with their CPUs and memory. When the kernel has no node
/// directories (no NUMA support), returns one node 0 holding every online
/// CPU and the memory of `/proc/meminfo`.
pub fn discover_numa(root: &HostRoot, online: &CpuSet) -> Vec<NumaNode> {
    let base = "/sys/devices/system/node";
    let mut nodes: Vec<NumaNode> = root
        .list(base)
        .into_iter()
        .filter_map(|name| {
            let id: u32 = name.strip_prefix("node")?.parse().ok()?;
            let dir = format!("{base}/{name}");
            let cpus = root
                .read_opt(&format!("{dir}/cpulist"))
                .and_then(|t| CpuSet::parse_list(&t).ok())
                .or_else(|| {
                    root.read_opt(&format!("{dir}/cpumap"))
                        .and_then(|t| CpuSet::parse_mask(&t).ok())
                })
                .unwrap_or_default();
            let mem_total_kb = root
                .read(&format!("{dir}/meminfo"))
                .ok()
                .and_then(|t| parse_mem_total_kb(&t));
            Some(NumaNode {
                id,
                cpus,
                mem_total_kb,
            })
        })
        .collect();
    nodes.sort_by_key(|n| n.id);
    if nodes.is_empty() {
        nodes.push(NumaNode {
            id: 0,
            cpus: online.clone(),
            mem_total_kb: root
                .read("/proc/meminfo")
                .ok()
                .and_then(|t| parse_mem_total_kb(&t)),
        });
    }
    nodes
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn meminfo_formats() {
        assert_eq!(
            parse_mem_total_kb("Node 1 MemTotal:       65536000 kB\nNode 1 MemFree: 1 kB\n"),
            Some(65_536_000)
        );
        assert_eq!(parse_mem_total_kb("MemTotal:  1024 kB\n"), Some(1024));
        assert_eq!(parse_mem_total_kb("MemFree: 1 kB\n"), None);
        assert_eq!(parse_mem_total_kb("MemTotal: x kB\n"), None);
    }

    #[test]
    fn nodes_and_fallback() {
        let dir = tempfile::tempdir().unwrap();
        let root = HostRoot::new(dir.path()).unwrap();
        let online = CpuSet::parse_list("0-3").unwrap();
        root.mkdir_all("/proc").unwrap();
        root.write("/proc/meminfo", b"MemTotal: 2048 kB\n").unwrap();
        let n = discover_numa(&root, &online);
        assert_eq!(n.len(), 1);
        assert_eq!(n[0].id, 0);
        assert_eq!(n[0].cpus, online);
        assert_eq!(n[0].mem_total_kb, Some(2048));

        for (i, l) in [(0, "0,2"), (1, "1,3"), (10, "")] {
            root.mkdir_all(&format!("/sys/devices/system/node/node{i}"))
                .unwrap();
            root.write(
                &format!("/sys/devices/system/node/node{i}/cpulist"),
                l.as_bytes(),
            )
            .unwrap();
        }
        root.write("/sys/devices/system/node/online", b"0-1,10\n")
            .unwrap();
        root.write(
            "/sys/devices/system/node/node1/meminfo",
            b"Node 1 MemTotal: 100 kB\n",
        )
        .unwrap();
        let n = discover_numa(&root, &online);
        assert_eq!(n.iter().map(|x| x.id).collect::<Vec<_>>(), [0, 1, 10]);
        assert_eq!(n[0].cpus.to_list(), "0,2");
        assert_eq!(n[1].mem_total_kb, Some(100));
        assert!(n[2].cpus.is_empty());
    }
}
