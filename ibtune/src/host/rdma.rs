//! RDMA devices from `/sys/class/infiniband/`: identity, PCI placement,
//! PCIe link, ports, GIDs, netdevs and interrupts.
//!
//! Why it exists: every placement decision ibtune makes is relative to the
//! HCA (its NUMA node, its local CPUs, its IRQs), and ibprobe needs the
//! port, GID index and netdev to talk over it.

use super::cpulist::CpuSet;
use super::irq::{device_irqs, InterruptLine};
use super::model::{Gid, PcieLink, RdmaDevice, RdmaPort};
use super::root::HostRoot;

/// Where the kernel lists RDMA devices.
pub const IB_BASE: &str = "/sys/class/infiniband";

/// The RDMA devices' names under [`IB_BASE`], in name order (empty when
/// there are none).
///
/// Why it exists: `ibtune show` and the exporter's HCA collector list the
/// same devices, and hidden entries are never devices.
pub fn device_names(root: &HostRoot) -> Vec<String> {
    root.list(IB_BASE)
        .into_iter()
        .filter(|n| !n.starts_with('.'))
        .collect()
}

/// The port numbers of the device directory `dev_dir`, ascending (entries
/// of `ports/` that are not numbers are skipped).
fn port_numbers(root: &HostRoot, dev_dir: &str) -> Vec<u32> {
    let mut ports: Vec<u32> = root
        .list(&format!("{dev_dir}/ports"))
        .iter()
        .filter_map(|p| p.parse().ok())
        .collect();
    ports.sort_unstable();
    ports
}

/// True for a PCI address such as `0000:41:00.0` (domain optional).
///
/// Why it exists: the `device` link of a non-PCI device must not be
/// mistaken for a PCI function.
pub fn is_pci_addr(s: &str) -> bool {
    let (head, func) = match s.rsplit_once('.') {
        Some(x) => x,
        None => return false,
    };
    if func.is_empty() || !func.chars().all(|c| c.is_ascii_digit()) {
        return false;
    }
    let parts: Vec<&str> = head.split(':').collect();
    let hex = |p: &str, n: usize| p.len() == n && p.chars().all(|c| c.is_ascii_hexdigit());
    match parts.as_slice() {
        [d, b, s] => {
            d.len() >= 4 && d.chars().all(|c| c.is_ascii_hexdigit()) && hex(b, 2) && hex(s, 2)
        }
        [b, s] => hex(b, 2) && hex(s, 2),
        _ => false,
    }
}

/// The PCI address behind a device: `PCI_SLOT_NAME` of `device/uevent`,
/// else the name the `device` link points to, if it looks like one.
fn pci_addr_of(root: &HostRoot, dev_dir: &str) -> Option<String> {
    if let Ok(uevent) = root.read(&format!("{dev_dir}/device/uevent")) {
        if let Some(v) = uevent
            .lines()
            .find_map(|l| l.trim().strip_prefix("PCI_SLOT_NAME="))
            .map(str::trim)
            .filter(|v| !v.is_empty())
        {
            return Some(v.to_string());
        }
    }
    let target = root.read_link(&format!("{dev_dir}/device"))?;
    let base = target.file_name()?.to_string_lossy().into_owned();
    is_pci_addr(&base).then_some(base)
}

/// The leading number of a PCIe speed string (`8.0 GT/s PCIe` gives 8.0).
fn speed_value(s: &str) -> Option<f64> {
    let num: String = s
        .trim()
        .chars()
        .take_while(|c| c.is_ascii_digit() || *c == '.')
        .collect();
    num.parse().ok()
}

/// A link width (`8`, or `x8` as some tools write it).
fn parse_width(s: &str) -> Option<u32> {
    s.trim().trim_start_matches(['x', 'X']).parse().ok()
}

/// Builds the PCIe link state from the four sysfs strings. `downtrained`
/// when the current speed or width is below the maximum (unknown values
/// never count as down-trained).
///
/// Why it exists: a down-trained link (x8 in an x16 slot, Gen3 on a Gen4
/// card) adds latency and caps bandwidth; mlnx_tune reports it first.
pub fn pcie_link(
    current_speed: Option<String>,
    max_speed: Option<String>,
    current_width: Option<String>,
    max_width: Option<String>,
) -> Option<PcieLink> {
    if current_speed.is_none()
        && max_speed.is_none()
        && current_width.is_none()
        && max_width.is_none()
    {
        return None;
    }
    let cw = current_width.as_deref().and_then(parse_width);
    let mw = max_width.as_deref().and_then(parse_width);
    let cs = current_speed.as_deref().and_then(speed_value);
    let ms = max_speed.as_deref().and_then(speed_value);
    let slower = matches!((cs, ms), (Some(c), Some(m)) if c > 0.0 && c < m);
    let narrower = matches!((cw, mw), (Some(c), Some(m)) if c > 0 && c < m);
    Some(PcieLink {
        current_speed,
        max_speed,
        current_width: cw,
        max_width: mw,
        downtrained: slower || narrower,
    })
}

/// True for an all-zero GID (an unpopulated table entry).
fn is_zero_gid(g: &str) -> bool {
    g.chars().all(|c| c == '0' || c == ':')
}

/// Reads one port of a device.
fn read_port(root: &HostRoot, dev_dir: &str, port: u32) -> RdmaPort {
    let pd = format!("{dev_dir}/ports/{port}");
    let opt = |f: &str| {
        root.read_opt(&format!("{pd}/{f}"))
            .filter(|s| !s.is_empty())
    };
    let mut gids: Vec<Gid> = root
        .list(&format!("{pd}/gids"))
        .into_iter()
        .filter_map(|n| {
            let index: u32 = n.parse().ok()?;
            let gid = root.read_opt(&format!("{pd}/gids/{n}"))?;
            if gid.is_empty() || is_zero_gid(&gid) {
                return None;
            }
            Some(Gid {
                index,
                gid,
                gid_type: opt(&format!("gid_attrs/types/{n}")),
                netdev: opt(&format!("gid_attrs/ndevs/{n}")),
            })
        })
        .collect();
    gids.sort_by_key(|g| g.index);
    RdmaPort {
        port,
        state: opt("state"),
        phys_state: opt("phys_state"),
        link_layer: opt("link_layer"),
        rate: opt("rate"),
        netdev: opt("gid_attrs/ndevs/0"),
        gids,
    }
}

/// Reads one RDMA device by name.
///
/// Why it exists: `discover_rdma` reads them all; callers that care about
/// one device (ibprobe `--device`) can read just that one.
pub fn read_rdma_device(root: &HostRoot, name: &str, interrupts: &[InterruptLine]) -> RdmaDevice {
    let dd = format!("{IB_BASE}/{name}");
    let opt = |f: &str| {
        root.read_opt(&format!("{dd}/{f}"))
            .filter(|s| !s.is_empty())
    };
    let pci_addr = pci_addr_of(root, &dd);
    let numa_node = root
        .read_parse::<i64>(&format!("{dd}/device/numa_node"))
        .and_then(|n| u32::try_from(n).ok());
    let local_cpus = opt("device/local_cpulist")
        .and_then(|t| CpuSet::parse_list(&t).ok())
        .or_else(|| opt("device/local_cpus").and_then(|t| CpuSet::parse_mask(&t).ok()));
    let pcie = pcie_link(
        opt("device/current_link_speed"),
        opt("device/max_link_speed"),
        opt("device/current_link_width"),
        opt("device/max_link_width"),
    );
    let ports: Vec<RdmaPort> = port_numbers(root, &dd)
        .into_iter()
        .map(|p| read_port(root, &dd, p))
        .collect();

    let mut netdevs: Vec<String> = root.list(&format!("{dd}/device/net"));
    if netdevs.is_empty() {
        // Soft-RoCE (rxe) has no PCI function: its netdev is in `parent`,
        // or in the GID table's netdev attributes.
        if let Some(p) = opt("parent") {
            netdevs.push(p);
        }
        for port in &ports {
            netdevs.extend(port.netdev.iter().cloned());
            netdevs.extend(port.gids.iter().filter_map(|g| g.netdev.clone()));
        }
    }
    let mut seen = std::collections::BTreeSet::new();
    netdevs.retain(|n| !n.is_empty() && seen.insert(n.clone()));

    let hca_type = opt("hca_type")
        .or_else(|| {
            root.read_link(&format!("{dd}/device/driver"))
                .and_then(|t| t.file_name().map(|f| f.to_string_lossy().into_owned()))
        })
        .or_else(|| software_kind(name, pci_addr.is_some()));
    let irqs = device_irqs(root, pci_addr.as_deref(), name, interrupts);
    RdmaDevice {
        name: name.to_string(),
        hca_type,
        fw_ver: opt("fw_ver"),
        node_guid: opt("node_guid"),
        pci_addr,
        numa_node,
        local_cpus,
        pcie,
        ports,
        netdevs,
        irqs,
    }
}

/// The kind of a software RDMA device (no PCI function, no `hca_type`),
/// told by the kernel's naming: `rxe*` is Soft-RoCE, `siw*` soft iWARP.
fn software_kind(name: &str, has_pci: bool) -> Option<String> {
    if has_pci {
        None
    } else if name.starts_with("rxe") {
        Some("software RoCE (rxe)".into())
    } else if name.starts_with("siw") {
        Some("software iWARP (siw)".into())
    } else {
        None
    }
}

/// All RDMA devices under `/sys/class/infiniband`, in name order (empty
/// when there are none). `interrupts` is the parsed `/proc/interrupts`.
pub fn discover_rdma(root: &HostRoot, interrupts: &[InterruptLine]) -> Vec<RdmaDevice> {
    device_names(root)
        .into_iter()
        .map(|n| read_rdma_device(root, &n, interrupts))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::host::irq::parse_interrupts;

    #[test]
    fn pci_addresses() {
        assert!(is_pci_addr("0000:41:00.0"));
        assert!(is_pci_addr("10000:3b:00.7"));
        assert!(is_pci_addr("41:00.1"));
        assert!(!is_pci_addr("rxe0"));
        assert!(!is_pci_addr("0000:41:00"));
        assert!(!is_pci_addr("0000:4g:00.0"));
        assert!(!is_pci_addr("virtio3"));
    }

    #[test]
    fn pcie_downtraining() {
        let s = |x: &str| Some(x.to_string());
        let l = pcie_link(s("8.0 GT/s PCIe"), s("16.0 GT/s PCIe"), s("8"), s("16")).unwrap();
        assert!(l.downtrained);
        assert_eq!((l.current_width, l.max_width), (Some(8), Some(16)));
        let l = pcie_link(s("16.0 GT/s PCIe"), s("16.0 GT/s PCIe"), s("16"), s("16")).unwrap();
        assert!(!l.downtrained);
        let l = pcie_link(s("16.0 GT/s PCIe"), s("16.0 GT/s PCIe"), s("x8"), s("16")).unwrap();
        assert!(l.downtrained);
        let l = pcie_link(s("Unknown"), s("16.0 GT/s PCIe"), None, None).unwrap();
        assert!(!l.downtrained);
        assert!(pcie_link(None, None, None, None).is_none());
    }

    #[test]
    fn reads_a_roce_device() {
        let dir = tempfile::tempdir().unwrap();
        let root = HostRoot::new(dir.path()).unwrap();
        let d = "/sys/class/infiniband/mlx5_0";
        root.put(&format!("{d}/hca_type"), "MT4123\n");
        root.put(&format!("{d}/fw_ver"), "20.31.1014\n");
        root.put(&format!("{d}/node_guid"), "b859:9f03:00d4:1e2a\n");
        root.put(
            &format!("{d}/device/uevent"),
            "DRIVER=mlx5_core\nPCI_SLOT_NAME=0000:41:00.0\n",
        );
        root.put(&format!("{d}/device/numa_node"), "-1\n");
        root.put(&format!("{d}/device/local_cpulist"), "0-7\n");
        root.put(&format!("{d}/device/current_link_speed"), "8.0 GT/s PCIe\n");
        root.put(&format!("{d}/device/max_link_speed"), "16.0 GT/s PCIe\n");
        root.put(&format!("{d}/device/current_link_width"), "8\n");
        root.put(&format!("{d}/device/max_link_width"), "16\n");
        root.mkdir_all(&format!("{d}/device/net/enp65s0f0np0"))
            .unwrap();
        let p = format!("{d}/ports/1");
        root.put(&format!("{p}/state"), "4: ACTIVE\n");
        root.put(&format!("{p}/link_layer"), "Ethernet\n");
        root.put(
            &format!("{p}/gids/0"),
            "fe80:0000:0000:0000:ba59:9fff:fed4:1e2a\n",
        );
        root.put(
            &format!("{p}/gids/1"),
            "fe80:0000:0000:0000:ba59:9fff:fed4:1e2a\n",
        );
        root.put(
            &format!("{p}/gids/3"),
            "0000:0000:0000:0000:0000:ffff:c0a8:0101\n",
        );
        root.put(
            &format!("{p}/gids/4"),
            "0000:0000:0000:0000:0000:0000:0000:0000\n",
        );
        root.put(&format!("{p}/gid_attrs/types/0"), "IB/RoCE v1\n");
        root.put(&format!("{p}/gid_attrs/types/1"), "RoCE v2\n");
        root.put(&format!("{p}/gid_attrs/types/3"), "RoCE v2\n");
        root.put(&format!("{p}/gid_attrs/ndevs/0"), "enp65s0f0np0\n");
        root.put(&format!("{p}/gid_attrs/ndevs/3"), "enp65s0f0np0\n");
        let lines = parse_interrupts(
            "  CPU0\n 90: 1 IR-PCI-MSIX-0000:41:00.0 0-edge mlx5_async0@pci:0000:41:00.0\n\
             91: 1 IR-PCI-MSIX-0000:41:00.0 1-edge mlx5_comp0@pci:0000:41:00.0\n",
        );
        let devs = discover_rdma(&root, &lines);
        assert_eq!(devs.len(), 1);
        let m = &devs[0];
        assert_eq!(m.pci_addr.as_deref(), Some("0000:41:00.0"));
        assert_eq!(m.numa_node, None);
        assert_eq!(
            m.local_cpus.as_ref().map(|c| c.to_list()).as_deref(),
            Some("0-7")
        );
        assert!(m.pcie.as_ref().is_some_and(|p| p.downtrained));
        assert_eq!(m.netdevs, ["enp65s0f0np0"]);
        assert_eq!(m.ports.len(), 1);
        let port = &m.ports[0];
        assert_eq!(port.netdev.as_deref(), Some("enp65s0f0np0"));
        assert_eq!(
            port.gids.iter().map(|g| g.index).collect::<Vec<_>>(),
            [0, 1, 3]
        );
        assert_eq!(port.gids[2].gid_type.as_deref(), Some("RoCE v2"));
        assert_eq!(port.gids[1].netdev, None);
        assert_eq!(m.irqs.len(), 2);
        assert!(m.irqs[0].is_async);
        assert_eq!(m.irqs[0].source, "proc_interrupts");
    }

    #[test]
    fn rxe_device_without_pci() {
        let dir = tempfile::tempdir().unwrap();
        let root = HostRoot::new(dir.path()).unwrap();
        let d = "/sys/class/infiniband/rxe0";
        root.put(&format!("{d}/parent"), "eth0\n");
        root.put(&format!("{d}/ports/1/gid_attrs/ndevs/0"), "eth0\n");
        let devs = discover_rdma(&root, &[]);
        assert_eq!(devs[0].name, "rxe0");
        assert_eq!(devs[0].pci_addr, None);
        assert_eq!(devs[0].numa_node, None);
        assert!(devs[0].pcie.is_none());
        assert_eq!(devs[0].netdevs, ["eth0"]);
        assert_eq!(devs[0].hca_type.as_deref(), Some("software RoCE (rxe)"));
        assert!(devs[0].irqs.is_empty());
    }

    #[test]
    fn pci_addr_from_device_link() {
        let dir = tempfile::tempdir().unwrap();
        let root = HostRoot::new(dir.path()).unwrap();
        root.mkdir_all("/sys/devices/pci0000:00/0000:00:01.0/0000:3b:00.0")
            .unwrap();
        root.mkdir_all("/sys/class/infiniband/mlx5_0").unwrap();
        std::os::unix::fs::symlink(
            "../../../devices/pci0000:00/0000:00:01.0/0000:3b:00.0",
            root.display_path("/sys/class/infiniband/mlx5_0/device"),
        )
        .unwrap();
        let devs = discover_rdma(&root, &[]);
        assert_eq!(devs[0].pci_addr.as_deref(), Some("0000:3b:00.0"));
    }
}
