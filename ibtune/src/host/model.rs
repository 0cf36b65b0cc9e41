//! The typed model of a host, as discovery produces it and `ibtune show
//! --json` prints it.
//!
//! Why it exists: profiles are resolved, plans computed and warnings raised
//! against this one model, never against raw files, so every consumer
//! (ibtune, ibprobe's CPU placement, ibexporter's drift metrics) agrees on
//! what the host is. Field names are the JSON schema: rename with care.

use super::cpulist::CpuSet;
use serde::Serialize;
use std::collections::BTreeMap;

/// Everything discovery knows about one host.
#[derive(Debug, Clone, Serialize)]
pub struct Host {
    /// Root the host was read from (`/` for the live machine).
    pub root: String,
    /// Kernel release from `/proc/sys/kernel/osrelease`, if readable.
    pub kernel_release: Option<String>,
    /// Where the topology came from: `"sysfs"` or `"hwloc+sysfs"`.
    pub topology_source: String,
    /// CPUs and their topology.
    pub cpus: Cpus,
    /// NUMA nodes (one node 0 holding every CPU when the kernel has no NUMA).
    pub numa_nodes: Vec<NumaNode>,
    /// RDMA devices from `/sys/class/infiniband`.
    pub rdma_devices: Vec<RdmaDevice>,
    /// Kernel command line and the latency-relevant parameters in it.
    pub cmdline: KernelCmdline,
    /// cgroup version and mounts.
    pub cgroup: CgroupInfo,
    /// irqbalance: running, and its banned CPU list.
    pub irqbalance: IrqBalance,
    /// tuned: installed, active profile.
    pub tuned: Tuned,
    /// `/dev/cpu_dma_latency`'s current value in microseconds, if readable.
    pub cpu_dma_latency_us: Option<i64>,
    /// Transparent huge pages mode (`always`, `madvise`, `never`).
    pub thp: Option<String>,
    /// Current values of the sysctls profiles touch, by dotted name.
    pub sysctls: BTreeMap<String, String>,
    /// What looked wrong while reading the host (garbage lines in
    /// `/proc/interrupts`, an unreadable one): shown as warnings by `show`,
    /// `plan`, `apply` and `verify`.
    pub read_problems: Vec<String>,
}

/// CPU inventory.
#[derive(Debug, Clone, Serialize)]
pub struct Cpus {
    /// `/sys/devices/system/cpu/online`.
    pub online: CpuSet,
    /// `/sys/devices/system/cpu/isolated` (from isolcpus), possibly empty.
    pub isolated: CpuSet,
    /// One entry per online CPU, ascending.
    pub list: Vec<Cpu>,
}

/// One logical CPU.
#[derive(Debug, Clone, Serialize)]
pub struct Cpu {
    /// Logical CPU number.
    pub id: u32,
    /// Socket (`topology/physical_package_id`).
    pub package: u32,
    /// Core id within the package (`topology/core_id`).
    pub core: u32,
    /// SMT siblings including itself (`topology/thread_siblings_list`).
    pub siblings: CpuSet,
    /// NUMA node holding this CPU.
    pub node: u32,
    /// cpufreq governor, `None` without cpufreq.
    pub governor: Option<String>,
    /// cpuidle states in index order.
    pub cstates: Vec<CState>,
}

/// One cpuidle state of one CPU.
#[derive(Debug, Clone, Serialize)]
pub struct CState {
    /// Index (`stateN`).
    pub index: u32,
    /// Name (`POLL`, `C1`, `C1E`, ...).
    pub name: String,
    /// Exit latency in microseconds.
    pub latency_us: u64,
    /// Whether the state is disabled.
    pub disabled: bool,
}

/// One NUMA node.
#[derive(Debug, Clone, Serialize)]
pub struct NumaNode {
    /// Node number.
    pub id: u32,
    /// CPUs on the node (`nodeN/cpulist`).
    pub cpus: CpuSet,
    /// Memory in kB (`MemTotal` of `nodeN/meminfo`), if known.
    pub mem_total_kb: Option<u64>,
}

/// One RDMA device (an HCA, or a Soft-RoCE rxe device).
#[derive(Debug, Clone, Serialize)]
pub struct RdmaDevice {
    /// Device name, e.g. `mlx5_0` or `rxe0`.
    pub name: String,
    /// Kernel driver/provider hint (`hca_type`, or the driver name).
    pub hca_type: Option<String>,
    /// Firmware version.
    pub fw_ver: Option<String>,
    /// Node GUID.
    pub node_guid: Option<String>,
    /// PCI function behind it (`0000:3b:00.0`); `None` for software devices.
    pub pci_addr: Option<String>,
    /// NUMA node of the PCI function; `None` when the kernel says -1 or there is no PCI device.
    pub numa_node: Option<u32>,
    /// CPUs local to the device (`device/local_cpulist`).
    pub local_cpus: Option<CpuSet>,
    /// PCIe link state.
    pub pcie: Option<PcieLink>,
    /// Ports in number order.
    pub ports: Vec<RdmaPort>,
    /// Network interfaces of the PCI function (`device/net/*`), the RoCE netdevs.
    pub netdevs: Vec<String>,
    /// The device's interrupts.
    pub irqs: Vec<Irq>,
}

/// PCIe link: current against maximum.
#[derive(Debug, Clone, Serialize)]
pub struct PcieLink {
    /// e.g. `8.0 GT/s PCIe`.
    pub current_speed: Option<String>,
    /// e.g. `8.0 GT/s PCIe`.
    pub max_speed: Option<String>,
    /// Lanes in use.
    pub current_width: Option<u32>,
    /// Lanes supported.
    pub max_width: Option<u32>,
    /// True when the link runs below its maximum speed or width.
    pub downtrained: bool,
}

/// One port of an RDMA device.
#[derive(Debug, Clone, Serialize)]
pub struct RdmaPort {
    /// Port number (from 1).
    pub port: u32,
    /// `4: ACTIVE` as the kernel writes it.
    pub state: Option<String>,
    /// `5: LinkUp`.
    pub phys_state: Option<String>,
    /// `InfiniBand` or `Ethernet`.
    pub link_layer: Option<String>,
    /// e.g. `100 Gb/sec (4X EDR)`.
    pub rate: Option<String>,
    /// The port's netdev from `gid_attrs/ndevs/0` (RoCE), if any.
    pub netdev: Option<String>,
    /// Non-zero GIDs with their index, type and netdev.
    pub gids: Vec<Gid>,
}

/// One populated GID table entry.
#[derive(Debug, Clone, Serialize)]
pub struct Gid {
    /// Table index (what `--gid-index` takes).
    pub index: u32,
    /// The GID as the kernel prints it.
    pub gid: String,
    /// `IB/RoCE v1` or `RoCE v2`, if given.
    pub gid_type: Option<String>,
    /// Netdev the GID belongs to, if given.
    pub netdev: Option<String>,
}

/// One interrupt line.
#[derive(Debug, Clone, Serialize)]
pub struct Irq {
    /// IRQ number.
    pub irq: u32,
    /// Name from `/proc/interrupts` (`mlx5_comp3@pci:0000:3b:00.0`).
    pub name: Option<String>,
    /// How it was found: `"msi_irqs"` or `"proc_interrupts"`.
    pub source: String,
    /// `/proc/irq/N/smp_affinity_list`.
    pub affinity: Option<CpuSet>,
    /// `/proc/irq/N/effective_affinity_list`, if the kernel has it.
    pub effective_affinity: Option<CpuSet>,
    /// True for the async/event vector (mlx5_async*), which pinning skips.
    pub is_async: bool,
}

/// Kernel command line.
#[derive(Debug, Clone, Serialize, Default)]
pub struct KernelCmdline {
    /// The whole line.
    pub raw: String,
    /// `isolcpus=` value (flags such as `domain,managed_irq,` kept).
    pub isolcpus: Option<String>,
    /// `nohz_full=` value.
    pub nohz_full: Option<String>,
    /// `rcu_nocbs=` value.
    pub rcu_nocbs: Option<String>,
    /// `irqaffinity=` value.
    pub irqaffinity: Option<String>,
}

/// Which cgroup hierarchy controls cpusets.
#[derive(Debug, Clone, Copy, Serialize, PartialEq, Eq)]
#[serde(rename_all = "lowercase")]
pub enum CgroupMode {
    /// cgroup v2 with the cpuset controller: partitions.
    V2,
    /// cgroup v1 cpuset hierarchy: cpu_exclusive cpusets.
    V1,
    /// No usable cpuset controller.
    None,
}

/// cgroup mounts.
#[derive(Debug, Clone, Serialize)]
pub struct CgroupInfo {
    /// The mode ibtune will use for cpusets.
    pub mode: CgroupMode,
    /// Mount point of the cgroup2 hierarchy, if mounted.
    pub v2_mount: Option<String>,
    /// Controllers available at the v2 root (`cgroup.controllers`).
    pub v2_controllers: Vec<String>,
    /// Mount point of the v1 cpuset hierarchy, if mounted.
    pub v1_cpuset_mount: Option<String>,
    /// True when the v1 cpuset mount uses `noprefix` (files named `cpus`, not `cpuset.cpus`).
    pub v1_noprefix: bool,
    /// True when the kernel has `cpuset.cpus.exclusive` (v2, Linux 6.7+).
    pub v2_has_exclusive: bool,
}

/// irqbalance state.
#[derive(Debug, Clone, Serialize)]
pub struct IrqBalance {
    /// Whether an irqbalance process is running (from `/proc/*/comm`).
    pub running: bool,
    /// Config file found (`/etc/default/irqbalance` or `/etc/sysconfig/irqbalance`).
    pub config_file: Option<String>,
    /// `IRQBALANCE_BANNED_CPULIST` from that file, if set.
    pub banned_cpus: Option<CpuSet>,
}

/// tuned state.
#[derive(Debug, Clone, Serialize)]
pub struct Tuned {
    /// True when `tuned-adm` is installed or `/etc/tuned` exists.
    pub installed: bool,
    /// `/etc/tuned/active_profile`, if set.
    pub active_profile: Option<String>,
    /// True when the active profile (or one it includes, as far as ibtune
    /// can read them) sets `force_latency`.
    pub force_latency_active: bool,
}

impl Host {
    /// The RDMA device with this name.
    pub fn device(&self, name: &str) -> Option<&RdmaDevice> {
        self.rdma_devices.iter().find(|d| d.name == name)
    }

    /// Names of all RDMA devices, for "not found; devices: ..." errors.
    pub fn device_names(&self) -> Vec<String> {
        self.rdma_devices.iter().map(|d| d.name.clone()).collect()
    }

    /// The CPU with this id.
    pub fn cpu(&self, id: u32) -> Option<&Cpu> {
        self.cpus.list.iter().find(|c| c.id == id)
    }

    /// Set of NUMA node ids.
    pub fn node_ids(&self) -> CpuSet {
        self.numa_nodes.iter().map(|n| n.id).collect()
    }

    /// NUMA nodes that hold any of these CPUs.
    pub fn nodes_of(&self, cpus: &CpuSet) -> CpuSet {
        self.numa_nodes
            .iter()
            .filter(|n| n.cpus.intersects(cpus))
            .map(|n| n.id)
            .collect()
    }

    /// CPUs local to a device: its `local_cpulist`, else its NUMA node's
    /// CPUs, else every online CPU (software devices such as rxe).
    pub fn local_cpus_of(&self, dev: &RdmaDevice) -> CpuSet {
        if let Some(l) = &dev.local_cpus {
            if !l.is_empty() {
                return l.intersection(&self.cpus.online);
            }
        }
        if let Some(n) = dev.numa_node {
            if let Some(node) = self.numa_nodes.iter().find(|x| x.id == n) {
                return node.cpus.clone();
            }
        }
        self.cpus.online.clone()
    }
}
