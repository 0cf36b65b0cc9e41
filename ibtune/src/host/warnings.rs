//! Host-level warnings in the spirit of `mlnx_tune`'s report: facts about
//! the machine that will cost latency whatever profile is applied.
//!
//! Why it exists: some problems (an HCA on the wrong socket, a down-trained
//! PCIe link, irqbalance undoing IRQ pinning) cannot be fixed by ibtune but
//! must be shown before anyone trusts a measurement taken on the host.

use super::cpulist::CpuSet;
use super::model::Host;
use serde::Serialize;

/// One warning: a stable code for scripts and tests, and a message for people.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Warning {
    /// Stable identifier, e.g. `pcie_downtrained`.
    pub code: &'static str,
    /// What is wrong and what it costs.
    pub message: String,
}

/// Code: the HCA sits on another NUMA node than the real-time CPUs.
pub const HCA_REMOTE_NUMA: &str = "hca_remote_numa";
/// Code: a profile sends an HCA's IRQs to CPUs of another NUMA node.
pub const HCA_IRQ_REMOTE: &str = "hca_irq_remote";
/// Code: the PCIe link runs below the device's maximum speed or width.
pub const PCIE_DOWNTRAINED: &str = "pcie_downtrained";
/// Code: irqbalance runs and may move the HCA's IRQs.
pub const IRQBALANCE_UNBANNED: &str = "irqbalance_unbanned";
/// Code: the active tuned profile sets `force_latency`.
pub const TUNED_FORCE_LATENCY: &str = "tuned_force_latency";
/// Code: the kernel does not know the HCA's NUMA node on a multi-node host.
pub const HCA_NUMA_UNKNOWN: &str = "hca_numa_unknown";
/// A host file did not read as the kernel writes it (garbage lines in
/// `/proc/interrupts`): the IRQ set ibtune works on may be wrong.
pub const HOST_READ_PROBLEM: &str = "host_read_problem";

/// Warnings about where a profile sends HCA interrupts: one per device
/// (`placements`: its name and the CPUs its IRQs go to) whose known NUMA
/// node has none of those CPUs. Every `plan`, `apply` and `verify` prints
/// them, not only `show --profile`: a profile with both cpusets on one
/// HCA's node would otherwise pin the other HCA's IRQs across the socket
/// interconnect without a word.
pub fn irq_placement_warnings(host: &Host, placements: &[(&str, &CpuSet)]) -> Vec<Warning> {
    let mut out = Vec::new();
    for (device, cpus) in placements {
        let Some(dev) = host.rdma_devices.iter().find(|d| d.name == *device) else {
            continue;
        };
        let (Some(node), false) = (dev.numa_node, cpus.is_empty()) else {
            continue;
        };
        let nodes = host.nodes_of(cpus);
        if host.numa_nodes.len() > 1 && !nodes.contains(node) {
            out.push(w(
                HCA_IRQ_REMOTE,
                format!(
                    "{device} is on NUMA node {node}, but the profile sends its IRQs to CPUs {cpus} \
                     on node(s) {nodes}: every completion interrupt crosses the socket \
                     interconnect; place them on node {node}'s CPUs (a cpuset of CPUs local to {device})"
                ),
            ));
        }
    }
    out
}

fn w(code: &'static str, message: String) -> Warning {
    Warning { code, message }
}

/// Warnings about the host, most important first per device. `rt_cpus` are
/// the real-time CPUs when a profile names them (enables the NUMA placement
/// check and narrows the irqbalance check to them).
pub fn host_warnings(host: &Host, rt_cpus: Option<&CpuSet>) -> Vec<Warning> {
    let mut out = Vec::new();
    let multi_node = host.numa_nodes.len() > 1;
    let rt_nodes = rt_cpus.map(|r| host.nodes_of(r));

    for dev in &host.rdma_devices {
        if let (Some(node), Some(rt), Some(rt_nodes)) = (dev.numa_node, rt_cpus, rt_nodes.as_ref())
        {
            if !rt.is_empty() && !rt_nodes.contains(node) {
                out.push(w(
                    HCA_REMOTE_NUMA,
                    format!(
                        "{} is on NUMA node {node}, but the real-time CPUs {rt} are on node(s) {rt_nodes}: \
                         every completion crosses the socket interconnect (fine only if {} is not used by the real-time work)",
                        dev.name, dev.name
                    ),
                ));
            }
        }
        if let Some(p) = dev.pcie.as_ref().filter(|p| p.downtrained) {
            let link = |speed: &Option<String>, width: Option<u32>| {
                format!(
                    "{} x{}",
                    speed.as_deref().unwrap_or("unknown speed"),
                    width.map_or_else(|| "?".to_string(), |x| x.to_string())
                )
            };
            out.push(w(
                PCIE_DOWNTRAINED,
                format!(
                    "{}{}: PCIe link is down-trained: running at {}, the device supports {} \
                     (check the slot, riser and BIOS link settings)",
                    dev.name,
                    dev.pci_addr
                        .as_deref()
                        .map(|a| format!(" ({a})"))
                        .unwrap_or_default(),
                    link(&p.current_speed, p.current_width),
                    link(&p.max_speed, p.max_width)
                ),
            ));
        }
        if dev.numa_node.is_none() && dev.pci_addr.is_some() && multi_node {
            out.push(w(
                HCA_NUMA_UNKNOWN,
                format!(
                    "{}: the kernel reports NUMA node -1 on a host with {} nodes, so its local CPUs \
                     cannot be trusted (enable ACPI SRAT / NUMA in the BIOS)",
                    dev.name,
                    host.numa_nodes.len()
                ),
            ));
        }
    }

    if host.irqbalance.running {
        let with_irqs: Vec<&str> = host
            .rdma_devices
            .iter()
            .filter(|d| !d.irqs.is_empty())
            .map(|d| d.name.as_str())
            .collect();
        let target = match rt_cpus {
            Some(r) => r.clone(),
            None => host
                .rdma_devices
                .iter()
                .filter(|d| !d.irqs.is_empty())
                .fold(CpuSet::new(), |acc, d| acc.union(&host.local_cpus_of(d))),
        };
        let banned = host.irqbalance.banned_cpus.clone().unwrap_or_default();
        let unbanned = target.difference(&banned);
        if !unbanned.is_empty() && (rt_cpus.is_some() || !with_irqs.is_empty()) {
            let whose = if rt_cpus.is_some() {
                "the real-time CPUs".to_string()
            } else {
                format!("the CPUs local to {}", with_irqs.join(", "))
            };
            out.push(w(
                IRQBALANCE_UNBANNED,
                format!(
                    "irqbalance is running and not banned from {whose} ({unbanned} not in \
                     IRQBALANCE_BANNED_CPULIST{}): it will undo IRQ pinning",
                    host.irqbalance
                        .config_file
                        .as_deref()
                        .map(|f| format!(" of {f}"))
                        .unwrap_or_default()
                ),
            ));
        }
    }

    if host.tuned.force_latency_active {
        out.push(w(
            TUNED_FORCE_LATENCY,
            format!(
                "tuned profile {} sets force_latency: it holds /dev/cpu_dma_latency and fights \
                 ibtune's own C-state settings (the thesis measured +700 ns median latency with it)",
                host.tuned.active_profile.as_deref().unwrap_or("(active)")
            ),
        ));
    }
    for p in &host.read_problems {
        out.push(w(HOST_READ_PROBLEM, p.clone()));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::host::model::*;

    fn host() -> Host {
        let node = |id, l: &str| NumaNode {
            id,
            cpus: CpuSet::parse_list(l).unwrap(),
            mem_total_kb: None,
        };
        let irq = |n| Irq {
            irq: n,
            name: Some(format!("mlx5_comp{n}")),
            source: "msi_irqs".into(),
            affinity: None,
            effective_affinity: None,
            is_async: false,
        };
        let dev = |name: &str, node: Option<u32>, local: &str, downtrained| RdmaDevice {
            name: name.into(),
            hca_type: None,
            fw_ver: None,
            node_guid: None,
            pci_addr: Some("0000:41:00.0".into()),
            numa_node: node,
            local_cpus: Some(CpuSet::parse_list(local).unwrap()),
            pcie: Some(PcieLink {
                current_speed: Some("8.0 GT/s PCIe".into()),
                max_speed: Some("16.0 GT/s PCIe".into()),
                current_width: Some(8),
                max_width: Some(16),
                downtrained,
            }),
            ports: vec![],
            netdevs: vec![],
            irqs: vec![irq(1)],
        };
        Host {
            root: "/x".into(),
            kernel_release: None,
            topology_source: "sysfs".into(),
            cpus: Cpus {
                online: CpuSet::parse_list("0-7").unwrap(),
                isolated: CpuSet::new(),
                list: vec![],
            },
            numa_nodes: vec![node(0, "0,2,4,6"), node(1, "1,3,5,7")],
            rdma_devices: vec![
                dev("mlx5_0", Some(0), "0,2,4,6", false),
                dev("mlx5_1", Some(1), "1,3,5,7", true),
                dev("mlx5_2", None, "", false),
            ],
            cmdline: KernelCmdline::default(),
            cgroup: CgroupInfo {
                mode: CgroupMode::V2,
                v2_mount: None,
                v2_controllers: vec![],
                v1_cpuset_mount: None,
                v1_noprefix: false,
                v2_has_exclusive: true,
            },
            irqbalance: IrqBalance {
                running: true,
                config_file: Some("/etc/default/irqbalance".into()),
                banned_cpus: Some(CpuSet::parse_list("2,4").unwrap()),
            },
            tuned: Tuned {
                installed: true,
                active_profile: Some("latency-performance".into()),
                force_latency_active: true,
            },
            cpu_dma_latency_us: None,
            thp: None,
            sysctls: Default::default(),
            read_problems: vec![],
        }
    }

    fn codes(v: &[Warning]) -> Vec<&'static str> {
        v.iter().map(|w| w.code).collect()
    }

    #[test]
    fn reports_each_problem() {
        let h = host();
        let rt = CpuSet::parse_list("2,4").unwrap();
        let v = host_warnings(&h, Some(&rt));
        assert_eq!(
            codes(&v),
            [
                HCA_REMOTE_NUMA,
                PCIE_DOWNTRAINED,
                HCA_NUMA_UNKNOWN,
                TUNED_FORCE_LATENCY
            ]
        );
        assert!(v[0].message.contains("mlx5_1"));
        assert!(
            v[1].message.contains("8.0 GT/s PCIe x8"),
            "{}",
            v[1].message
        );
        assert!(v[1].message.contains("16.0 GT/s PCIe x16"));
        assert!(v[3].message.contains("700 ns"));

        // Without rt CPUs, irqbalance is checked against the HCAs' local CPUs.
        let v = host_warnings(&h, None);
        assert!(codes(&v).contains(&IRQBALANCE_UNBANNED));
        assert!(!codes(&v).contains(&HCA_REMOTE_NUMA));
        let m = &v
            .iter()
            .find(|w| w.code == IRQBALANCE_UNBANNED)
            .unwrap()
            .message;
        assert!(m.contains("will undo IRQ pinning"), "{m}");
    }

    #[test]
    fn quiet_on_a_clean_host() {
        let mut h = host();
        h.rdma_devices.truncate(1);
        h.tuned.force_latency_active = false;
        h.irqbalance.running = false;
        assert!(host_warnings(&h, Some(&CpuSet::parse_list("2,4").unwrap())).is_empty());
        h.irqbalance.running = true;
        h.irqbalance.banned_cpus = Some(CpuSet::parse_list("0-7").unwrap());
        assert!(host_warnings(&h, None).is_empty());
        h.numa_nodes.truncate(1);
        h.rdma_devices[0].numa_node = None;
        assert!(host_warnings(&h, None).is_empty());
    }
}
