//! Host discovery against the fixture trees in `tests/fixtures/`: each
//! fixture's key facts (topology, HCA placement, IRQs, cgroup mode,
//! services) must come out of `discover()` as the fixture README describes.
//! Discovery only reads, so the trees are used in place.

use ibtune::host::warnings::{self, host_warnings};
use ibtune::host::{discover, CgroupMode, CpuSet, Host, HostRoot};

fn fixture(name: &str) -> Host {
    let dir = format!("{}/../tests/fixtures/{name}", env!("CARGO_MANIFEST_DIR"));
    let root = HostRoot::new(&dir).unwrap_or_else(|e| panic!("fixture {name}: {e}"));
    assert!(!root.is_live());
    discover(&root).unwrap_or_else(|e| panic!("discover {name}: {e:#}"))
}

fn set(s: &str) -> CpuSet {
    CpuSet::parse_list(s).unwrap()
}

fn codes(v: &[warnings::Warning]) -> Vec<&'static str> {
    v.iter().map(|w| w.code).collect()
}

#[test]
fn thesis_two_socket_mlx5() {
    let h = fixture("thesis-2s-mlx5");
    assert_eq!(h.topology_source, "sysfs");
    assert_eq!(h.cpus.online, set("0-23"));
    assert_eq!(h.cpus.list.len(), 24);
    let even: CpuSet = (0..24).step_by(2).collect();
    let odd: CpuSet = (1..24).step_by(2).collect();
    assert_eq!(h.numa_nodes.len(), 2);
    assert_eq!(h.numa_nodes[0].cpus, even);
    assert_eq!(h.numa_nodes[1].cpus, odd);
    assert!(h.numa_nodes.iter().all(|n| n.mem_total_kb.is_some()));
    assert_eq!(h.cpu(3).map(|c| c.node), Some(1));

    assert_eq!(h.device_names(), ["mlx5_0", "mlx5_1"]);
    let m0 = h.device("mlx5_0").unwrap();
    assert_eq!(m0.numa_node, Some(0));
    assert_eq!(m0.local_cpus.as_ref(), Some(&even));
    assert_eq!(h.local_cpus_of(m0), even);
    assert!(m0.pci_addr.is_some());
    assert_eq!(m0.irqs.len(), 8);
    assert_eq!(m0.irqs.iter().filter(|i| i.is_async).count(), 1);
    assert!(m0.irqs.iter().all(|i| i.source == "msi_irqs"));
    assert!(m0
        .irqs
        .iter()
        .all(|i| i.name.is_some() && i.affinity.is_some()));
    assert_eq!(m0.ports.len(), 1);
    assert_eq!(m0.ports[0].link_layer.as_deref(), Some("InfiniBand"));
    assert!(m0.netdevs.is_empty());

    let m1 = h.device("mlx5_1").unwrap();
    assert_eq!(m1.numa_node, Some(1));
    assert_eq!(m1.local_cpus.as_ref(), Some(&odd));
    assert_eq!(m1.irqs.len(), 8);
    assert_eq!(m1.irqs.iter().filter(|i| i.is_async).count(), 1);

    assert_eq!(h.cgroup.mode, CgroupMode::V2);
    assert_eq!(h.cgroup.v2_mount.as_deref(), Some("/sys/fs/cgroup"));
    assert!(h.irqbalance.running);
    assert_eq!(h.irqbalance.banned_cpus, None);
    assert!(h.tuned.installed);
    assert_eq!(
        h.tuned.active_profile.as_deref(),
        Some("latency-performance")
    );
    assert!(h.tuned.force_latency_active);
    assert_eq!(h.cpu_dma_latency_us, Some(2_000_000_000));
    assert_eq!(h.sysctls.len(), ibtune::host::kernel::PROFILE_SYSCTLS.len());

    // Real-time cores next to mlx5_0: mlx5_1 is remote, irqbalance will
    // move IRQs onto them, tuned forces a latency.
    let rt = set("16,18,20,22");
    let w = host_warnings(&h, Some(&rt));
    let c = codes(&w);
    assert!(c.contains(&warnings::HCA_REMOTE_NUMA), "{c:?}");
    assert!(w
        .iter()
        .any(|x| x.code == warnings::HCA_REMOTE_NUMA && x.message.contains("mlx5_1")));
    assert!(!w
        .iter()
        .any(|x| x.code == warnings::HCA_REMOTE_NUMA && x.message.contains("mlx5_0")));
    assert!(c.contains(&warnings::IRQBALANCE_UNBANNED), "{c:?}");
    assert!(c.contains(&warnings::TUNED_FORCE_LATENCY), "{c:?}");
    assert!(!c.contains(&warnings::PCIE_DOWNTRAINED), "{c:?}");
}

#[test]
fn roce_single_socket() {
    let h = fixture("roce-1s");
    assert_eq!(h.cpus.online, set("0-15"));
    assert_eq!(h.numa_nodes.len(), 1);
    // SMT: every CPU has a sibling.
    assert!(
        h.cpus.list.iter().all(|c| c.siblings.len() == 2),
        "SMT siblings"
    );
    assert_eq!(
        h.cmdline.isolcpus.as_deref(),
        Some("managed_irq,domain,12-15")
    );
    assert_eq!(h.cmdline.nohz_full.as_deref(), Some("12-15"));

    let m = h.device("mlx5_0").unwrap();
    assert_eq!(m.pci_addr.as_deref(), Some("0000:41:00.0"));
    assert!(!m.irqs.is_empty());
    assert!(m.irqs.iter().all(|i| i.source == "proc_interrupts"));
    assert_eq!(m.irqs.iter().filter(|i| i.is_async).count(), 1);

    let pcie = m.pcie.as_ref().unwrap();
    assert!(pcie.downtrained);
    assert_eq!((pcie.current_width, pcie.max_width), (Some(8), Some(16)));
    assert!(pcie
        .current_speed
        .as_deref()
        .unwrap()
        .starts_with("8.0 GT/s"));
    assert!(pcie.max_speed.as_deref().unwrap().starts_with("16.0 GT/s"));

    assert_eq!(m.netdevs, ["enp65s0f0np0"]);
    let port = &m.ports[0];
    assert_eq!(port.link_layer.as_deref(), Some("Ethernet"));
    assert_eq!(port.netdev.as_deref(), Some("enp65s0f0np0"));
    assert!(port
        .gids
        .iter()
        .any(|g| g.gid_type.as_deref() == Some("RoCE v2")
            && g.netdev.as_deref() == Some("enp65s0f0np0")));
    assert!(port
        .gids
        .iter()
        .all(|g| !g.gid.chars().all(|c| c == '0' || c == ':')));

    assert_eq!(h.cgroup.mode, CgroupMode::V2);
    // 6.1: no cpuset.cpus.exclusive.
    assert!(!h.cgroup.v2_has_exclusive);

    let c = codes(&host_warnings(&h, None));
    assert!(c.contains(&warnings::PCIE_DOWNTRAINED), "{c:?}");
    assert!(!c.contains(&warnings::HCA_NUMA_UNKNOWN), "{c:?}");
}

#[test]
fn amd_four_nodes() {
    let h = fixture("amd-4node");
    assert_eq!(h.cpus.online, set("0-63"));
    assert_eq!(
        h.numa_nodes.iter().map(|n| n.id).collect::<Vec<_>>(),
        [0, 1, 2, 3]
    );
    let all = h
        .numa_nodes
        .iter()
        .fold(CpuSet::new(), |a, n| a.union(&n.cpus));
    assert_eq!(all, h.cpus.online);
    for c in &h.cpus.list {
        assert!(h.numa_nodes[c.node as usize].cpus.contains(c.id));
    }

    let m0 = h.device("mlx5_0").unwrap();
    let m1 = h.device("mlx5_1").unwrap();
    assert_eq!(m0.numa_node, Some(3));
    assert_eq!(m1.numa_node, Some(1));
    assert_eq!(h.local_cpus_of(m0), h.numa_nodes[3].cpus);
    assert_eq!(h.local_cpus_of(m1), h.numa_nodes[1].cpus);

    // Real-time cores on node 3, next to mlx5_0.
    let rt = set("28-31");
    assert_eq!(h.nodes_of(&rt), set("3"));
    let w = host_warnings(&h, Some(&rt));
    let remote: Vec<_> = w
        .iter()
        .filter(|x| x.code == warnings::HCA_REMOTE_NUMA)
        .collect();
    assert_eq!(remote.len(), 1, "{w:?}");
    assert!(remote[0].message.contains("mlx5_1"));
}

#[test]
fn this_host_capture() {
    let h = fixture("this-host");
    assert!(!h.cpus.online.is_empty());
    assert_eq!(h.cpus.list.len(), h.cpus.online.len());
    assert_eq!(h.cgroup.mode, CgroupMode::V1);
    assert!(h.cgroup.v1_cpuset_mount.is_some());
    assert!(h.rdma_devices.is_empty());
    assert!(!h.irqbalance.running);
    assert!(host_warnings(&h, None).is_empty());
}

#[test]
fn fixtures_serialize() {
    for f in ["this-host", "thesis-2s-mlx5", "roce-1s", "amd-4node"] {
        let h = fixture(f);
        let v = serde_json::to_value(&h).unwrap();
        assert_eq!(v["topology_source"], "sysfs", "{f}");
    }
}
