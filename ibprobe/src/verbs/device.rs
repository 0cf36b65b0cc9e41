//! Device listing and the device-side helpers the channel setup shares:
//! opening a device by name, picking the GID, probing the max inline size.
//!
//! Why it exists: `ibprobe devices` and every verbs run start here, and the
//! run's report names what was picked (device, port, GID, inline).

use std::net::Ipv6Addr;
use std::sync::Arc;

use serde::Serialize;
use sideway::ibverbs::address::GidType;
use sideway::ibverbs::device::{DeviceInfo as _, DeviceList};
use sideway::ibverbs::device_context::{DeviceContext, LinkLayer, Mtu, PortState};
use sideway::ibverbs::protection_domain::ProtectionDomain;
use sideway::ibverbs::queue_pair::QueuePairType;

use super::error::{chain, OrCall, VerbsError};
use crate::spec::QpType;

/// One RDMA device, as `ibprobe devices` prints it.
#[derive(Clone, Debug, Serialize)]
pub struct DeviceInfo {
    /// e.g. "rxe0", "mlx5_0".
    pub name: String,
    /// Node GUID, "xxxx:xxxx:xxxx:xxxx" as ibv_devinfo prints it.
    pub node_guid: String,
    pub ports: Vec<PortInfo>,
    /// NUMA node of the device's PCI function (None: not reported, e.g. rxe).
    pub numa_node: Option<i32>,
    /// CPUs local to the device (sysfs local_cpulist; None for rxe).
    pub local_cpus: Option<String>,
    pub caps: DeviceCaps,
}

#[derive(Clone, Debug, Serialize)]
pub struct PortInfo {
    pub port: u8,
    /// "down", "init", "armed", "active", "active_defer".
    pub state: String,
    /// "InfiniBand" or "Ethernet".
    pub link_layer: String,
    /// Active and max MTU in bytes.
    pub active_mtu: u32,
    pub max_mtu: u32,
    /// Port LID (InfiniBand; 0 on RoCE).
    pub lid: u16,
    /// The GID table entries that are set.
    pub gids: Vec<GidInfo>,
}

#[derive(Clone, Debug, Serialize)]
pub struct GidInfo {
    /// GID index (what `--gid-index` takes).
    pub index: u32,
    /// As an IPv6 address.
    pub gid: String,
    /// "IB", "RoCE v1" or "RoCE v2".
    pub gid_type: String,
    /// Whether the GID is an IPv4-mapped address (::ffff:a.b.c.d), the
    /// usual RoCE v2 choice.
    pub ipv4_mapped: bool,
    /// Network device the GID belongs to (RoCE), if known.
    pub netdev: Option<String>,
}

#[derive(Clone, Copy, Debug, Serialize)]
pub struct DeviceCaps {
    /// Largest inline send on an RC QP, found by creating QPs with
    /// increasing max_inline_data (devices do not report it).
    pub max_inline_rc: u32,
    pub max_qp_wr: u32,
    pub max_cqe: u32,
    /// Whether completions can carry HCA timestamps (completion_timestamp_mask != 0).
    pub completion_timestamps: bool,
    /// HCA core clock in kHz (0 when not reported).
    pub hca_core_clock_khz: u64,
}

/// Lists every RDMA device with its ports, GIDs, locality and capabilities.
/// No libibverbs, or no device: a `NoDevice` error saying "no RDMA device".
pub fn devices() -> Result<Vec<DeviceInfo>, VerbsError> {
    let list = device_list()?;
    let mut out = Vec::new();
    for dev in list.iter() {
        let name = dev.name();
        let ctx = dev.open().or_call(&format!("ibv_open_device {name}"))?;
        out.push(describe(&name, &ctx, u64::from_be(dev.guid().as_u64()))?);
    }
    Ok(out)
}

fn device_list() -> Result<DeviceList, VerbsError> {
    let list = DeviceList::new()
        .map_err(|e| VerbsError::no_device(&format!("ibv_get_device_list: {}", chain(&e))))?;
    if list.is_empty() {
        return Err(VerbsError::no_device("libibverbs found no device"));
    }
    Ok(list)
}

fn describe(name: &str, ctx: &Arc<DeviceContext>, guid: u64) -> Result<DeviceInfo, VerbsError> {
    let attr = ctx.query_device().or_call("ibv_query_device_ex")?;
    let ports = (1..=attr.phys_port_cnt())
        .map(|p| port_info(name, ctx, p))
        .collect::<Result<_, _>>()?;
    let pd = ctx.alloc_pd().or_call("ibv_alloc_pd")?;
    let max_inline_rc = probe_max_inline(ctx, &pd, QpType::Rc);
    let numa_node =
        crate::sys::mem::rdma_device_numa_node(name).and_then(|n| i32::try_from(n).ok());
    let local_cpus = sysfs_line(format!("/sys/class/infiniband/{name}/device/local_cpulist"));
    Ok(DeviceInfo {
        name: name.to_string(),
        node_guid: format!(
            "{:04x}:{:04x}:{:04x}:{:04x}",
            (guid >> 48) & 0xffff,
            (guid >> 32) & 0xffff,
            (guid >> 16) & 0xffff,
            guid & 0xffff
        ),
        ports,
        numa_node,
        local_cpus,
        caps: DeviceCaps {
            max_inline_rc,
            max_qp_wr: attr.max_qp_wr().max(0) as u32,
            max_cqe: attr.max_cqe().max(0) as u32,
            completion_timestamps: attr.completion_timestamp_mask() != 0,
            hca_core_clock_khz: attr.hca_core_clock(),
        },
    })
}

/// The path MTUs verbs knows, with their bytes.
const MTUS: [(Mtu, u32); 5] = [
    (Mtu::Mtu256, 256),
    (Mtu::Mtu512, 512),
    (Mtu::Mtu1024, 1024),
    (Mtu::Mtu2048, 2048),
    (Mtu::Mtu4096, 4096),
];

pub(crate) fn mtu_bytes(m: Mtu) -> u32 {
    MTUS.iter().find(|e| e.0 == m).map_or(0, |e| e.1)
}

pub(crate) fn mtu_from_bytes(b: u32) -> Option<Mtu> {
    MTUS.iter().find(|e| e.1 == b).map(|e| e.0)
}

fn state_name(s: PortState) -> &'static str {
    match s {
        PortState::Down => "down",
        PortState::Initializing => "init",
        PortState::Armed => "armed",
        PortState::Active => "active",
        PortState::ActiveDefer => "active_defer",
        PortState::Nop => "nop",
    }
}

fn port_info(name: &str, ctx: &Arc<DeviceContext>, port: u8) -> Result<PortInfo, VerbsError> {
    let pa = ctx.query_port(port).or_call("ibv_query_port")?;
    Ok(PortInfo {
        port,
        state: state_name(pa.port_state()).to_string(),
        link_layer: match pa.link_layer() {
            LinkLayer::Ethernet => "Ethernet",
            _ => "InfiniBand",
        }
        .to_string(),
        active_mtu: mtu_bytes(pa.active_mtu()),
        max_mtu: mtu_bytes(pa.max_mtu()),
        lid: pa.lid(),
        gids: gid_table(name, ctx, port)?,
    })
}

fn gid_table(name: &str, ctx: &Arc<DeviceContext>, port: u8) -> Result<Vec<GidInfo>, VerbsError> {
    let table = ctx.query_gid_table().or_call("ibv_query_gid_table")?;
    let set = table
        .iter()
        .filter(|e| e.port_num() == port as u32 && !e.gid().is_zero());
    Ok(set
        .map(|e| GidInfo {
            index: e.gid_index(),
            gid: Ipv6Addr::from(e.gid().raw).to_string(),
            gid_type: match e.gid_type() {
                GidType::InfiniBand => "IB",
                GidType::RoceV1 => "RoCE v1",
                GidType::RoceV2 => "RoCE v2",
            }
            .to_string(),
            ipv4_mapped: Ipv6Addr::from(e.gid().raw).to_ipv4_mapped().is_some(),
            netdev: sysfs_line(format!(
                "/sys/class/infiniband/{name}/ports/{port}/gid_attrs/ndevs/{}",
                e.gid_index()
            )),
        })
        .collect())
}

/// A sysfs file's one line, trimmed; None when unreadable or empty.
fn sysfs_line(path: String) -> Option<String> {
    let s = ibhost::file::read_pseudo(path, ibhost::file::MAX_PSEUDO_FILE).ok()?;
    Some(s.trim().to_string()).filter(|s| !s.is_empty())
}

pub(crate) struct OpenedPort {
    pub name: String,
    pub ctx: Arc<DeviceContext>,
    pub port: u8,
    pub active_mtu: u32,
    pub lid: u16,
    pub ethernet: bool,
    pub max_qp_wr: u32,
    pub gids: Vec<GidInfo>,
    /// completion_timestamp_mask (0: completions carry no HCA timestamp).
    pub ts_mask: u64,
    /// hca_core_clock, kHz.
    pub hca_khz: u64,
}

/// Opens `want` (or the first device whose `port` is active) and checks
/// the port is up.
pub(crate) fn open_port(want: Option<&str>, port: u8) -> Result<OpenedPort, VerbsError> {
    let list = device_list()?;
    let names: Vec<String> = list.iter().map(|d| d.name()).collect();
    for dev in list.iter() {
        let name = dev.name();
        if want.is_some_and(|w| w != name) {
            continue;
        }
        let ctx = dev.open().or_call(&format!("ibv_open_device {name}"))?;
        let attr = ctx.query_device().or_call("ibv_query_device_ex")?;
        if port == 0 || port > attr.phys_port_cnt() {
            if want.is_some() {
                return Err(VerbsError::config(format!(
                    "port {port} not on {name} (ports 1..={})",
                    attr.phys_port_cnt()
                )));
            }
            continue;
        }
        let pa = ctx.query_port(port).or_call("ibv_query_port")?;
        let active = matches!(pa.port_state(), PortState::Active | PortState::ActiveDefer);
        if !active {
            if want.is_some() {
                return Err(VerbsError::config(format!(
                    "{name} port {port} is {} (not active)",
                    state_name(pa.port_state())
                )));
            }
            continue;
        }
        return Ok(OpenedPort {
            gids: gid_table(&name, &ctx, port)?,
            name,
            port,
            active_mtu: mtu_bytes(pa.active_mtu()),
            lid: pa.lid(),
            ethernet: pa.link_layer() == LinkLayer::Ethernet,
            max_qp_wr: attr.max_qp_wr().max(0) as u32,
            ts_mask: attr.completion_timestamp_mask(),
            hca_khz: attr.hca_core_clock(),
            ctx,
        });
    }
    let names = names.join(", ");
    Err(VerbsError::config(match want {
        Some(w) => format!("{w} not found; devices: {names}"),
        None => format!("no device with port {port} active; devices: {names}"),
    }))
}

/// The GID a QP uses: an explicit index (checked), else on Ethernet the
/// IPv4-mapped RoCE v2 GID, else any RoCE v2 GID; on InfiniBand none
/// (LID routing) unless an index is given.
pub(crate) fn pick_gid(p: &OpenedPort, want: Option<u32>) -> Result<Option<GidInfo>, VerbsError> {
    if let Some(i) = want {
        return p
            .gids
            .iter()
            .find(|g| g.index == i)
            .cloned()
            .map(Some)
            .ok_or_else(|| {
                let have: Vec<String> = p.gids.iter().map(|g| g.index.to_string()).collect();
                VerbsError::config(format!(
                    "gid index {i} not set on {} port {} (set: {})",
                    p.name,
                    p.port,
                    have.join(", ")
                ))
            });
    }
    if !p.ethernet {
        return Ok(None);
    }
    let v2 = |g: &&GidInfo| g.gid_type == "RoCE v2";
    p.gids
        .iter()
        .filter(v2)
        .find(|g| g.ipv4_mapped)
        .or_else(|| p.gids.iter().find(v2))
        .cloned()
        .map(Some)
        .ok_or_else(|| {
            VerbsError::config(format!(
                "no RoCE v2 GID on {} port {}; pass --gid-index",
                p.name, p.port
            ))
        })
}

pub(crate) fn to_sideway(t: QpType) -> QueuePairType {
    match t {
        QpType::Rc => QueuePairType::ReliableConnection,
        QpType::Uc => QueuePairType::UnreliableConnection,
        QpType::Ud => QueuePairType::UnreliableDatagram,
    }
}

/// Largest max_inline_data a QP of type `t` can be created with: a binary
/// search over QP creations (0..=8192), since devices do not report it.
pub(crate) fn probe_max_inline(
    ctx: &Arc<DeviceContext>,
    pd: &Arc<ProtectionDomain>,
    t: QpType,
) -> u32 {
    let Ok(cq) = ctx.create_cq_builder().setup_cqe(2).build() else {
        return 0;
    };
    let try_create = |n: u32| {
        pd.create_qp_builder()
            .setup_qp_type(to_sideway(t))
            .setup_max_send_wr(1)
            .setup_max_recv_wr(1)
            .setup_max_inline_data(n)
            .setup_send_cq(Arc::clone(&cq))
            .setup_recv_cq(Arc::clone(&cq))
            .build()
            .is_ok()
    };
    let (mut lo, mut hi) = (0u32, 8192u32);
    if !try_create(0) {
        return 0;
    }
    while lo < hi {
        let mid = lo + (hi - lo).div_ceil(2);
        if try_create(mid) {
            lo = mid;
        } else {
            hi = mid - 1;
        }
    }
    lo
}
