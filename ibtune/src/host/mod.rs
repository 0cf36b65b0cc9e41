//! Host discovery: what the machine is, read through a [`HostRoot`].
//!
//! Why it exists: ibtune, ibprobe and ibexporter all need the same facts
//! (which CPUs are local to which HCA, where its IRQs are, which cgroup
//! mode is in use). One module per concern reads them; [`discover`] puts
//! them together into the typed [`Host`] model.

pub mod activity;
pub mod cgroup;
pub mod cpu;
pub mod cpulist;
#[cfg(feature = "hwloc")]
pub mod hwloc;
pub mod irq;
pub mod kernel;
pub mod model;
pub mod numa;
pub mod rdma;
pub mod root;
pub mod services;
pub mod warnings;

pub use cpulist::CpuSet;
pub use model::*;
pub use root::{Entry, EntryKind, HostIoError, HostLock, HostResult, HostRoot, LockError};

use std::collections::BTreeMap;

/// The file whose presence makes a directory a host root.
const CPU_ONLINE: &str = "/sys/devices/system/cpu/online";

/// NUMA nodes from hwloc on the live host, when built with it.
#[cfg(feature = "hwloc")]
fn hwloc_nodes(root: &HostRoot) -> Option<Vec<NumaNode>> {
    hwloc::hwloc_numa_nodes(root)
}

#[cfg(not(feature = "hwloc"))]
fn hwloc_nodes(_root: &HostRoot) -> Option<Vec<NumaNode>> {
    None
}

/// Reads the whole host model from a root (`/` or a snapshot directory).
///
/// Only fails when the root is not a host at all (no readable
/// `/sys/devices/system/cpu/online`, or one that is not a CPU list); every
/// other missing or unreadable file just leaves its part of the model empty.
/// On the live host with the `hwloc` feature, NUMA nodes come from hwloc
/// (memory sizes filled from sysfs where hwloc has none) and
/// `topology_source` says `"hwloc+sysfs"`.
pub fn discover(root: &HostRoot) -> anyhow::Result<Host> {
    let dir = root.dir().display().to_string();
    let online_text = root
        .read(CPU_ONLINE)
        .map_err(|e| anyhow::anyhow!("{dir} is not a host root: {CPU_ONLINE} is missing ({e})"))?;
    let online = CpuSet::parse_list(&online_text)
        .map_err(|e| anyhow::anyhow!("{dir} is not a host root: {CPU_ONLINE}: {e}"))?;

    let sysfs_nodes = numa::discover_numa(root, &online);
    let (numa_nodes, topology_source) = match hwloc_nodes(root) {
        Some(mut nodes) => {
            for n in &mut nodes {
                if let Some(s) = sysfs_nodes.iter().find(|s| s.id == n.id) {
                    n.mem_total_kb = s.mem_total_kb.or(n.mem_total_kb);
                }
            }
            (nodes, "hwloc+sysfs")
        }
        None => (sysfs_nodes, "sysfs"),
    };

    let cpus = cpu::discover_cpus(root, &numa_nodes);
    let (interrupts, read_problems) = irq::read_interrupts(root);
    let rdma_devices = rdma::discover_rdma(root, &interrupts);
    let kernel_release = kernel::read_osrelease(root);
    let cgroup = cgroup::discover_cgroup(root, kernel_release.as_deref());
    let sysctls: BTreeMap<String, String> = kernel::PROFILE_SYSCTLS
        .iter()
        .filter_map(|name| kernel::read_sysctl(root, name).map(|v| (name.to_string(), v)))
        .collect();

    Ok(Host {
        root: dir,
        kernel_release,
        topology_source: topology_source.to_string(),
        cpus,
        numa_nodes,
        rdma_devices,
        cmdline: kernel::read_cmdline(root),
        cgroup,
        irqbalance: services::discover_irqbalance(root),
        tuned: services::discover_tuned(root),
        cpu_dma_latency_us: kernel::read_cpu_dma_latency(root),
        thp: kernel::read_thp_mode(root),
        sysctls,
        read_problems,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn empty_dir_is_not_a_host_root() {
        let dir = tempfile::tempdir().unwrap();
        let root = HostRoot::new(dir.path()).unwrap();
        let e = discover(&root).unwrap_err().to_string();
        assert!(e.contains("is not a host root"), "{e}");
        assert!(
            e.contains("/sys/devices/system/cpu/online is missing"),
            "{e}"
        );
    }

    #[test]
    fn minimal_root() {
        let dir = tempfile::tempdir().unwrap();
        let root = HostRoot::new(dir.path()).unwrap();
        root.mkdir_all("/sys/devices/system/cpu").unwrap();
        root.write(CPU_ONLINE, b"0-1\n").unwrap();
        let h = discover(&root).unwrap();
        assert_eq!(h.topology_source, "sysfs");
        assert_eq!(h.numa_nodes.len(), 1);
        assert_eq!(h.cpus.list.len(), 2);
        assert!(h.rdma_devices.is_empty());
        assert_eq!(h.cgroup.mode, CgroupMode::None);
        assert!(h.sysctls.is_empty());
    }

    #[test]
    fn live_host_discovers() {
        let h = discover(&HostRoot::live()).unwrap();
        assert!(!h.cpus.online.is_empty());
        assert!(!h.numa_nodes.is_empty());
        if cfg!(feature = "hwloc") {
            assert_eq!(h.topology_source, "hwloc+sysfs");
        }
        // The model serializes (this is `ibtune show --json`).
        serde_json::to_string(&h).unwrap();
    }
}
