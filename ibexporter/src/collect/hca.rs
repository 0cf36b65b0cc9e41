//! HCA port counters, port state and device identity from sysfs
//! (`/sys/class/infiniband/<device>/...`): counters, port states and rates
//! read fresh at every scrape (through files kept open), a device's
//! identity kept for a while.
//!
//! Why it exists: a latency regression often starts as link trouble
//! (symbol errors, a port that retrained to a lower rate, RNR retries on
//! Soft-RoCE, congestion notifications on RoCE). These are the counters that
//! show it, next to the tuning-drift and probe metrics of this exporter.
//!
//! # Metric families
//!
//! Every family has the labels `device` (e.g. `mlx5_0`) and `port` (e.g.
//! `1`), unless said otherwise.
//!
//! | family | type | extra labels | unit / meaning |
//! |---|---|---|---|
//! | `ibexporter_hca_info` | info (value 1) | `fw_ver`, `board_id`, `hca_type`, `node_guid`, `numa_node`; no `port` | identity of the device |
//! | `ibexporter_hca_port_info` | info (value 1) | `link_layer`, `netdev` | `InfiniBand` / `Ethernet`, and the port's netdev (`""` when none) |
//! | `ibexporter_hca_pcie_link_downtrained` | gauge | no `port` | 1 when the device's PCIe link runs below its maximum speed or width (`device/current_link_*` against `max_link_*`, as `ibtune show` judges it), else 0; absent when the kernel reports no link |
//! | `ibexporter_hca_pcie_link_width`, `..._max_width` | gauge | no `port` | PCIe lanes in use / supported (`device/current_link_width`, `max_link_width`) |
//! | `ibexporter_hca_port_state_id` | gauge | | `state`: 0 no change, 1 down, 2 init, 3 armed, 4 active, 5 active-defer |
//! | `ibexporter_hca_port_physical_state_id` | gauge | | `phys_state`: 1 sleep, 2 polling, 3 disabled, 4 port configuration training, 5 link up, 6 link error recovery, 7 phy test |
//! | `ibexporter_hca_port_rate_bytes_per_second` | gauge | | signalling rate from `rate` (`100 Gb/sec (4X EDR)` is 12.5e9) |
//! | `ibexporter_hca_port_transmit_bytes_total` | counter | | bytes: `counters/port_xmit_data` **times 4** |
//! | `ibexporter_hca_port_receive_bytes_total` | counter | | bytes: `counters/port_rcv_data` **times 4** |
//! | `ibexporter_hca_port_*_packets_total` | counter | | packets (see [`PORT_COUNTERS`]) |
//! | `ibexporter_hca_port_*_errors_total`, `..._discards_total`, ... | counter | | events (see [`PORT_COUNTERS`]) |
//! | `ibexporter_hca_hw_counter_total` | counter | `counter` | every file of `ports/<port>/hw_counters/` (port-level) and of `<device>/hw_counters/` (device-level, with `port=""`), as the driver counts it |
//! | `ibexporter_hca_read_errors_total` | counter | `file` | failed reads since the exporter started: `file` is relative to the port directory (`counters/symbol_error`), or to the device directory when `port=""` |
//!
//! The kernel reports `port_xmit_data` and `port_rcv_data` in 4-byte words
//! (the InfiniBand PortCounters unit, "octets divided by 4"); multiplying
//! by 4 gives bytes, as node_exporter's infiniband collector does. All
//! other counters are exported as read. `port_xmit_wait` counts ticks of the
//! port's sampling clock, not seconds.
//!
//! `hw_counters/lifespan` is a setting (how long, in ms, the driver caches
//! the values), not a counter, and is skipped.
//!
//! # Robustness
//!
//! A missing file or directory is normal (Soft-RoCE has no `counters/`,
//! most devices lack some of the PMA counters, `/sys/class/infiniband` is
//! absent without RDMA) and just means no sample. A file that exists but
//! cannot be read, or does not hold a number, loses only its own sample: it
//! is counted in `ibexporter_hca_read_errors_total` and logged once with
//! `tracing::warn!` until it reads again. A counter reading `N/A (no PMA)`
//! (kernels without a PMA for that port) is treated as absent.
//!
//! # What is read when
//!
//! The device list, the `counters/` and `hw_counters/` listings, port
//! states, rates and every counter are read at each scrape; the value
//! files are kept open between scrapes and read again at offset 0
//! ([`super::open_files`]: a kept file is let go when its device goes, its
//! read fails with `ENODEV`, or the listing shows another file under its
//! name). A device's identity (`fw_ver`, `board_id`, `hca_type`,
//! `node_guid`, NUMA node, PCIe link, its ports with their link layer and
//! netdev) is read when the device first appears and again at the first
//! scrape after [`IDENTITY_TTL`]: it changes only when the device is
//! re-plugged, re-flashed or its PCIe link retrains, and reading it (GID
//! tables included) took most of a scrape's file reads. A port added or
//! removed shows after the same delay.

use super::open_files::OpenFiles;
use crate::limits::MAX_KEPT_FILES;
use ibtune::host::rdma::{device_names, read_rdma_device, IB_BASE};
use ibtune::host::{EntryKind, HostRoot};
use prometheus_client::collector::Collector;
use prometheus_client::encoding::DescriptorEncoder;
use prometheus_client::metrics::MetricType;
use prometheus_client::registry::Unit;
use std::collections::{BTreeMap, BTreeSet};
use std::io;
use std::path::Path;
use std::sync::Mutex;
use std::time::{Duration, Instant};

/// The `hw_counters/` entry that is a setting, not a counter.
const HW_COUNTERS_LIFESPAN: &str = "lifespan";

/// How one file of `ports/<port>/counters/` is exported.
///
/// Why it exists: one table maps the kernel's file names to the exported
/// names, units and help, so the mapping can be read (and reviewed) in one
/// place.
#[derive(Debug, Clone, Copy)]
pub struct PortCounter {
    /// File name under `counters/`, as the kernel spells it.
    pub file: &'static str,
    /// Family name without the `_total` suffix the encoder adds (and
    /// without the unit, when [`PortCounter::bytes`] is set).
    pub name: &'static str,
    /// Help text.
    pub help: &'static str,
    /// True for the two data counters: the kernel value is in 4-byte words
    /// and is exported in bytes (times 4).
    pub bytes: bool,
}

const fn pc(file: &'static str, name: &'static str, help: &'static str) -> PortCounter {
    PortCounter {
        file,
        name,
        help,
        bytes: false,
    }
}

/// The `counters/` files exported, the set of node_exporter's infiniband
/// collector (the InfiniBand PortCounters and PortCountersExtended
/// attributes), with their exported names.
pub const PORT_COUNTERS: &[PortCounter] = &[
    PortCounter {
        file: "port_xmit_data",
        name: "ibexporter_hca_port_transmit",
        help: "Bytes transmitted on all VLs (counters/port_xmit_data, which counts 4-byte words, times 4)",
        bytes: true,
    },
    PortCounter {
        file: "port_rcv_data",
        name: "ibexporter_hca_port_receive",
        help: "Bytes received on all VLs (counters/port_rcv_data, which counts 4-byte words, times 4)",
        bytes: true,
    },
    pc("port_xmit_packets", "ibexporter_hca_port_transmit_packets", "Packets transmitted on all VLs, including errors (counters/port_xmit_packets)"),
    pc("port_rcv_packets", "ibexporter_hca_port_receive_packets", "Packets received on all VLs, including errors (counters/port_rcv_packets)"),
    pc("unicast_xmit_packets", "ibexporter_hca_port_unicast_transmit_packets", "Unicast packets transmitted (counters/unicast_xmit_packets)"),
    pc("unicast_rcv_packets", "ibexporter_hca_port_unicast_receive_packets", "Unicast packets received (counters/unicast_rcv_packets)"),
    pc("multicast_xmit_packets", "ibexporter_hca_port_multicast_transmit_packets", "Multicast packets transmitted (counters/multicast_xmit_packets)"),
    pc("multicast_rcv_packets", "ibexporter_hca_port_multicast_receive_packets", "Multicast packets received (counters/multicast_rcv_packets)"),
    pc("symbol_error", "ibexporter_hca_port_symbol_errors", "Minor link errors on one or more physical lanes (counters/symbol_error)"),
    pc("port_rcv_errors", "ibexporter_hca_port_receive_errors", "Received packets containing an error (counters/port_rcv_errors)"),
    pc("port_rcv_remote_physical_errors", "ibexporter_hca_port_receive_remote_physical_errors", "Received packets marked with the EBP delimiter (counters/port_rcv_remote_physical_errors)"),
    pc("port_rcv_switch_relay_errors", "ibexporter_hca_port_receive_switch_relay_errors", "Received packets the switch could not forward (counters/port_rcv_switch_relay_errors)"),
    pc("port_rcv_constraint_errors", "ibexporter_hca_port_receive_constraint_errors", "Received packets discarded by partition or raw-packet constraints (counters/port_rcv_constraint_errors)"),
    pc("port_xmit_constraint_errors", "ibexporter_hca_port_transmit_constraint_errors", "Packets not transmitted because of partition or raw-packet constraints (counters/port_xmit_constraint_errors)"),
    pc("port_rcv_discards", "ibexporter_hca_port_receive_discards", "Inbound packets discarded because the port was down or congested (counters/port_rcv_discards)"),
    pc("port_xmit_discards", "ibexporter_hca_port_transmit_discards", "Outbound packets discarded because the port was down or congested (counters/port_xmit_discards)"),
    pc("local_link_integrity_errors", "ibexporter_hca_port_local_link_integrity_errors", "Times local physical errors exceeded the LocalPhyErrors threshold (counters/local_link_integrity_errors)"),
    pc("excessive_buffer_overrun_errors", "ibexporter_hca_port_excessive_buffer_overrun_errors", "Runs of flow-control periods each with a buffer overrun (counters/excessive_buffer_overrun_errors)"),
    pc("VL15_dropped", "ibexporter_hca_port_vl15_dropped_packets", "Incoming VL15 (subnet management) packets dropped for lack of resources (counters/VL15_dropped)"),
    pc("link_error_recovery", "ibexporter_hca_port_link_error_recoveries", "Times the link recovered from an error state (counters/link_error_recovery)"),
    pc("link_downed", "ibexporter_hca_port_link_downed", "Times the link failed to recover from an error state and went down (counters/link_downed)"),
    pc("port_xmit_wait", "ibexporter_hca_port_transmit_wait_ticks", "Sampling ticks during which the port had data to send but sent none (counters/port_xmit_wait)"),
];

/// One RDMA device as read from sysfs.
///
/// Why it exists: [`read_hcas`] returns plain data, so what was read can be
/// tested apart from how it is encoded.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Hca {
    /// Device name (`mlx5_0`, `rxe0`).
    pub name: String,
    /// `fw_ver`, or empty.
    pub fw_ver: String,
    /// `board_id`, or empty.
    pub board_id: String,
    /// `hca_type`; for devices without one, ibtune's fallback (driver name,
    /// or `software RoCE (rxe)`); else empty.
    pub hca_type: String,
    /// `node_guid`, or empty.
    pub node_guid: String,
    /// `device/numa_node` as the kernel prints it (`-1`: no affinity), or
    /// empty when absent.
    pub numa_node: String,
    /// Device-level `hw_counters/` (not per port), by file name.
    pub hw_counters: BTreeMap<String, u64>,
    /// The PCIe link, when the kernel reports one.
    pub pcie: Option<Pcie>,
    /// Ports, in number order.
    pub ports: Vec<HcaPort>,
}

/// The PCIe link of a device, as ibtune reads it (`ibtune show`).
///
/// Why it exists: a link that trained below its maximum (x8 in an x16
/// slot, Gen3 on a Gen4 card) caps bandwidth and adds latency; the
/// IBPCIeLinkDownTrained alert reads it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Pcie {
    /// Lanes in use (`device/current_link_width`), when readable.
    pub width: Option<u32>,
    /// Lanes supported (`device/max_link_width`), when readable.
    pub max_width: Option<u32>,
    /// Current speed or width below the maximum (unknown values never count).
    pub downtrained: bool,
}

/// One port of a device.
///
/// Why it exists: the per-port half of [`Hca`].
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct HcaPort {
    /// Port number.
    pub port: u32,
    /// The number of `state` (`4: ACTIVE` gives 4).
    pub state: Option<u32>,
    /// The number of `phys_state` (`5: LinkUp` gives 5).
    pub phys_state: Option<u32>,
    /// `rate` in bytes per second (`100 Gb/sec (4X EDR)` gives 12_500_000_000).
    pub rate_bytes_per_second: Option<u64>,
    /// `link_layer` (`InfiniBand`, `Ethernet`), or empty.
    pub link_layer: String,
    /// The port's netdev (`gid_attrs/ndevs/0`, else the device's only
    /// netdev), or empty.
    pub netdev: String,
    /// `counters/` values **as the kernel prints them** (data in 4-byte
    /// words), by file name; only files in [`PORT_COUNTERS`].
    pub counters: BTreeMap<String, u64>,
    /// `hw_counters/` values, by file name.
    pub hw_counters: BTreeMap<String, u64>,
}

/// A file that exists but could not be read or parsed.
///
/// Why it exists: such a file loses only its sample; the failure itself is
/// exported and logged.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub struct ReadFailure {
    /// Device name.
    pub device: String,
    /// Port number, or empty for a device-level file.
    pub port: String,
    /// Path relative to the port directory (or device directory when `port`
    /// is empty), e.g. `counters/symbol_error`.
    pub file: String,
    /// What went wrong, for the log.
    pub reason: String,
}

/// Everything one read of the tree found.
///
/// Why it exists: the result of [`read_hcas`]: data and failures together.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct HcaScan {
    /// Devices, in name order.
    pub hcas: Vec<Hca>,
    /// Files that exist but gave no value, in the order met.
    pub failures: Vec<ReadFailure>,
}

/// Outcome of reading one numeric attribute file.
enum Value<T> {
    /// Parsed.
    Ok(T),
    /// Absent, or `N/A` (no PMA): no sample, not an error.
    Absent,
    /// Present but unreadable or not a number.
    Failed(String),
}

/// What a scrape reads files with: the root, and the files kept open
/// ([`OpenFiles`]).
struct Files<'a> {
    root: &'a HostRoot,
    open: &'a mut OpenFiles,
}

/// Reads one counter file: a decimal u64 (`N/A (no PMA)` counts as absent).
/// `listed`: its inode in this scrape's listing of its directory.
fn read_counter(files: &mut Files, path: &str, listed: Option<u64>) -> Value<u64> {
    match files.open.read(files.root, path, listed) {
        Ok(None) => Value::Absent,
        Err(e) => Value::Failed(e),
        Ok(Some(text)) => {
            let t = text.trim();
            if t.starts_with("N/A") {
                return Value::Absent;
            }
            match t.parse::<u64>() {
                Ok(v) => Value::Ok(v),
                Err(_) => Value::Failed(format!("not a counter value: {:?}", shorten(t))),
            }
        }
    }
}

/// Cuts a garbage value for the log, so a binary file does not flood it.
fn shorten(s: &str) -> String {
    let mut out: String = s.chars().take(40).collect();
    if s.chars().count() > 40 {
        out.push_str("...");
    }
    out
}

/// The leading number of `4: ACTIVE` / `5: LinkUp`.
pub fn parse_state(text: &str) -> Option<u32> {
    text.trim().split(':').next()?.trim().parse().ok()
}

/// Bytes per second of a `rate` file: `100 Gb/sec (4X EDR)` gives
/// 12_500_000_000, `2.5 Gb/sec (1X SDR)` gives 312_500_000, `10 Mb/sec`
/// gives 1_250_000.
///
/// Why it exists: dashboards compare throughput (bytes per second) with the
/// link's rate; the kernel prints bits with a unit prefix.
pub fn parse_rate(text: &str) -> Option<u64> {
    let mut words = text.split_whitespace();
    let value: f64 = words.next()?.parse().ok()?;
    let unit = words.next()?;
    let bits_per_unit = match unit.split('/').next()? {
        "Gb" => 1e9,
        "Mb" => 1e6,
        "Kb" => 1e3,
        "b" => 1.0,
        _ => return None,
    };
    if !value.is_finite() || value < 0.0 {
        return None;
    }
    Some((value * bits_per_unit / 8.0).round() as u64)
}

/// Reads a `state`-like attribute: absent is `None`; unreadable or
/// unparsable is recorded as a failure.
fn read_attr<T>(
    files: &mut Files,
    path: &str,
    parse: impl Fn(&str) -> Option<T>,
    fail: &mut dyn FnMut(String),
) -> Option<T> {
    match files.open.read(files.root, path, None) {
        Ok(None) => None,
        Err(e) => {
            fail(e);
            None
        }
        Ok(Some(text)) => {
            let v = parse(&text);
            if v.is_none() {
                fail(format!("cannot parse {:?}", shorten(text.trim())));
            }
            v
        }
    }
}

/// Lists a directory: the names and inodes of what is not a directory,
/// sorted; `Ok(None)` when it does not exist.
fn list_dir(root: &HostRoot, path: &str) -> Result<Option<Vec<(String, u64)>>, String> {
    // Through the root's listing, so a link in the tree cannot lead the
    // collector outside --root.
    match root.entries(path) {
        Ok(entries) => {
            let mut names: Vec<(String, u64)> = entries
                .into_iter()
                .filter(|e| e.kind != EntryKind::Dir)
                .map(|e| (e.name, e.ino))
                .collect();
            names.sort();
            Ok(Some(names))
        }
        Err(e) if e.source.kind() == io::ErrorKind::NotFound => Ok(None),
        Err(e) => Err(e.source.to_string()),
    }
}

/// Reads every counter of a `hw_counters/` directory (`dir` is relative to
/// `base`, the port or device directory).
fn read_hw_counters(
    files: &mut Files,
    base: &str,
    fail: &mut dyn FnMut(String, String),
) -> BTreeMap<String, u64> {
    let mut out = BTreeMap::new();
    let names = match list_dir(files.root, &format!("{base}/hw_counters")) {
        Ok(Some(n)) => n,
        Ok(None) => return out,
        Err(e) => {
            fail("hw_counters".into(), e);
            return out;
        }
    };
    for (name, ino) in names.into_iter().filter(|(n, _)| n != HW_COUNTERS_LIFESPAN) {
        let file = format!("hw_counters/{name}");
        match read_counter(files, &format!("{base}/{file}"), Some(ino)) {
            Value::Ok(v) => {
                out.insert(name, v);
            }
            Value::Absent => {}
            Value::Failed(e) => fail(file, e),
        }
    }
    out
}

/// The numbers of one port, read at every scrape: states, rate and
/// counters, on top of its identity (`ident`: number, link layer, netdev).
fn read_port(
    files: &mut Files,
    dev: &str,
    ident: &HcaPort,
    failures: &mut Vec<ReadFailure>,
) -> HcaPort {
    let port = ident.port;
    let base = format!("{IB_BASE}/{dev}/ports/{port}");
    let mut fail = |file: String, reason: String| {
        failures.push(ReadFailure {
            device: dev.to_string(),
            port: port.to_string(),
            file,
            reason,
        })
    };
    let state = read_attr(files, &format!("{base}/state"), parse_state, &mut |e| {
        fail("state".into(), e)
    });
    let phys_state = read_attr(
        files,
        &format!("{base}/phys_state"),
        parse_state,
        &mut |e| fail("phys_state".into(), e),
    );
    let rate_bytes_per_second = read_attr(files, &format!("{base}/rate"), parse_rate, &mut |e| {
        fail("rate".into(), e)
    });

    let mut counters = BTreeMap::new();
    match list_dir(files.root, &format!("{base}/counters")) {
        Ok(None) => {}
        Err(e) => fail("counters".into(), e),
        Ok(Some(present)) => {
            for c in PORT_COUNTERS {
                let Some(&(_, ino)) = present.iter().find(|(p, _)| p == c.file) else {
                    continue;
                };
                let file = format!("counters/{}", c.file);
                match read_counter(files, &format!("{base}/{file}"), Some(ino)) {
                    Value::Ok(v) => {
                        counters.insert(c.file.to_string(), v);
                    }
                    Value::Absent => {}
                    Value::Failed(e) => fail(file, e),
                }
            }
        }
    }
    let hw_counters = read_hw_counters(files, &base, &mut fail);
    HcaPort {
        port,
        state,
        phys_state,
        rate_bytes_per_second,
        link_layer: ident.link_layer.clone(),
        netdev: ident.netdev.clone(),
        counters,
        hw_counters,
    }
}

/// Reads what identifies one device and its ports: the [`Hca`] without
/// any number read at scrape time (no counters, states or rates).
///
/// Why it exists: these attributes change only when the device is
/// re-plugged, re-flashed or its links retrain, yet reading them (through
/// ibtune's reader, GID tables included) costs most of the files of a
/// scan; [`HcaCollector`] keeps them for [`IDENTITY_TTL`].
fn read_identity(root: &HostRoot, name: &str) -> Hca {
    let dd = format!("{IB_BASE}/{name}");
    // ibtune's reader gives identity, ports' link layer and netdevs the way
    // `ibtune show` reports them; IRQs are not needed here.
    let dev = read_rdma_device(root, name, &[]);
    let text = |f: &str| root.read_opt(&format!("{dd}/{f}")).unwrap_or_default();
    let only_netdev = match dev.netdevs.as_slice() {
        [one] => Some(one.as_str()),
        _ => None,
    };
    // The ports as ibtune listed them: one listing of `ports/` for both.
    let ports = dev
        .ports
        .iter()
        .map(|p| HcaPort {
            port: p.port,
            link_layer: p.link_layer.clone().unwrap_or_default(),
            netdev: p
                .netdev
                .clone()
                .or_else(|| p.gids.iter().find_map(|g| g.netdev.clone()))
                .or_else(|| only_netdev.map(String::from))
                .unwrap_or_default(),
            ..HcaPort::default()
        })
        .collect();
    Hca {
        name: name.to_string(),
        fw_ver: dev.fw_ver.unwrap_or_default(),
        board_id: text("board_id"),
        hca_type: dev.hca_type.unwrap_or_default(),
        node_guid: dev.node_guid.unwrap_or_default(),
        numa_node: text("device/numa_node"),
        hw_counters: BTreeMap::new(),
        pcie: dev.pcie.as_ref().map(|l| Pcie {
            width: l.current_width,
            max_width: l.max_width,
            downtrained: l.downtrained,
        }),
        ports,
    }
}

/// Reads the numbers of one device (`ident` from [`read_identity`]): its
/// device-level `hw_counters/` and each port's states, rate and counters.
fn read_numbers(files: &mut Files, ident: &Hca, failures: &mut Vec<ReadFailure>) -> Hca {
    let name = ident.name.as_str();
    let ports = ident
        .ports
        .iter()
        .map(|p| read_port(files, name, p, failures))
        .collect();
    let hw_counters = read_hw_counters(files, &format!("{IB_BASE}/{name}"), &mut |file, reason| {
        failures.push(ReadFailure {
            device: name.to_string(),
            port: String::new(),
            file,
            reason,
        })
    });
    Hca {
        name: ident.name.clone(),
        fw_ver: ident.fw_ver.clone(),
        board_id: ident.board_id.clone(),
        hca_type: ident.hca_type.clone(),
        node_guid: ident.node_guid.clone(),
        numa_node: ident.numa_node.clone(),
        hw_counters,
        pcie: ident.pcie,
        ports,
    }
}

/// Reads every RDMA device under `<root>/sys/class/infiniband`.
///
/// Why it exists: the pure half of [`HcaCollector`]: plain data plus the
/// files that failed, with no metrics or logging involved. Never fails: no
/// devices (or no `/sys/class/infiniband`) is an empty scan.
pub fn read_hcas(root: &HostRoot) -> HcaScan {
    let mut failures = Vec::new();
    let mut none_kept = OpenFiles::with_budget(0);
    let mut files = Files {
        root,
        open: &mut none_kept,
    };
    let hcas = device_names(root)
        .into_iter()
        .map(|n| read_numbers(&mut files, &read_identity(root, &n), &mut failures))
        .collect();
    HcaScan { hcas, failures }
}

/// How long [`HcaCollector`] keeps a device's identity (names, GUID,
/// firmware, NUMA node, PCIe link, ports' link layer and netdev) before
/// reading it again. The set of devices is listed at every scrape, and
/// counters, port states and rates are read at every scrape.
pub const IDENTITY_TTL: Duration = Duration::from_secs(30);

/// Identities by device name, with when each was read.
type Identities = BTreeMap<String, (Instant, Hca)>;

/// What [`HcaCollector`] keeps from one scrape to the next.
#[derive(Debug, Default)]
struct Kept {
    identities: Identities,
    files: OpenFiles,
}

/// Like [`read_hcas`], with identities taken from `kept` while younger
/// than [`IDENTITY_TTL`] and files read through those it keeps open;
/// devices gone from the tree leave it, and a device whose identity is
/// read again has its files opened afresh.
fn read_hcas_kept(root: &HostRoot, kept: &mut Kept) -> HcaScan {
    let names = device_names(root);
    kept.identities.retain(|n, _| names.contains(n));
    let now = Instant::now();
    let mut failures = Vec::new();
    let mut files = Files {
        root,
        open: &mut kept.files,
    };
    let hcas = names
        .into_iter()
        .map(|n| {
            let stale = kept
                .identities
                .get(&n)
                .is_none_or(|(at, _)| now.duration_since(*at) >= IDENTITY_TTL);
            if stale {
                let id = read_identity(root, &n);
                files.open.forget_under(&format!("{IB_BASE}/{n}"));
                kept.identities.insert(n.clone(), (now, id));
            }
            let ident = &kept.identities[&n].1;
            read_numbers(&mut files, ident, &mut failures)
        })
        .collect();
    kept.files.sweep();
    HcaScan { hcas, failures }
}

/// Key of a failing file: (device, port, file), as in the labels of
/// `ibexporter_hca_read_errors_total`.
pub type FailKey = (String, String, String);

/// The Prometheus collector for HCA metrics: reads the tree at each scrape
/// and encodes it (see the module docs for the families).
///
/// Why it exists: counters must be current when Prometheus asks, so they
/// are read in [`Collector::encode`], not on a timer. It keeps the only
/// state that must outlive a scrape: the read-error counts and which files
/// are already known to fail (so each is logged once, not at every scrape),
/// the devices' identities (read again after [`IDENTITY_TTL`]) and the
/// files it keeps open ([`OpenFiles`]).
#[derive(Debug)]
pub struct HcaCollector {
    root: HostRoot,
    state: Mutex<ErrorState>,
    kept: Mutex<Kept>,
}

#[derive(Debug, Default)]
struct ErrorState {
    /// Failed reads per file since start.
    counts: BTreeMap<FailKey, u64>,
    /// Files that failed at the last scrape (logged already).
    failing: BTreeSet<FailKey>,
}

impl Default for HcaCollector {
    fn default() -> Self {
        Self::with_root(HostRoot::live())
    }
}

impl HcaCollector {
    /// A collector reading under `root` (`/` for this machine, or a
    /// snapshot directory such as a test fixture).
    ///
    /// Why it exists: the exporter's `--root` option and the tests.
    /// Fails when `root` does not exist.
    pub fn new(root: impl AsRef<Path>) -> io::Result<Self> {
        Ok(Self::with_root(HostRoot::new(root)?))
    }

    /// A collector reading through an existing [`HostRoot`].
    ///
    /// Why it exists: callers that already hold one (shared with the
    /// tuning collector) need not canonicalize the path again.
    pub fn with_root(root: HostRoot) -> Self {
        Self::with_file_budget(root, MAX_KEPT_FILES)
    }

    /// A collector that keeps at most `budget` files open between scrapes
    /// (0: every file is opened and closed at each scrape).
    ///
    /// Why it exists: the tests read a host with more files than the
    /// budget; [`HcaCollector::with_root`] keeps [`MAX_KEPT_FILES`].
    pub fn with_file_budget(root: HostRoot, budget: usize) -> Self {
        HcaCollector {
            root,
            state: Mutex::new(ErrorState::default()),
            kept: Mutex::new(Kept {
                identities: Identities::new(),
                files: OpenFiles::with_budget(budget),
            }),
        }
    }

    /// How many files the collector keeps open now.
    ///
    /// Why it exists: the tests check the budget and that nothing leaks.
    pub fn kept_files(&self) -> usize {
        self.kept
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .files
            .kept()
    }

    /// Reads the tree and updates the error counts and the log; returns
    /// the scan and the error counts to encode.
    ///
    /// Why it exists: [`Collector::encode`] and tests share it.
    pub fn scrape(&self) -> (HcaScan, BTreeMap<FailKey, u64>) {
        let scan = {
            let mut kept = self.kept.lock().unwrap_or_else(|p| p.into_inner());
            read_hcas_kept(&self.root, &mut kept)
        };
        let mut st = self.state.lock().unwrap_or_else(|p| p.into_inner());
        let now: BTreeSet<FailKey> = scan
            .failures
            .iter()
            .map(|f| (f.device.clone(), f.port.clone(), f.file.clone()))
            .collect();
        for f in &scan.failures {
            let key = (f.device.clone(), f.port.clone(), f.file.clone());
            *st.counts.entry(key.clone()).or_default() += 1;
            if !st.failing.contains(&key) {
                tracing::warn!(
                    "HCA {} port {}: cannot read {} under {}/{}{}: {}; that metric is left out \
                     and counted in ibexporter_hca_read_errors_total until it reads again \
                     (check the driver and that the exporter may read sysfs); logged once",
                    f.device,
                    if f.port.is_empty() { "-" } else { &f.port },
                    f.file,
                    self.root.display_path(IB_BASE).display(),
                    f.device,
                    if f.port.is_empty() {
                        String::new()
                    } else {
                        format!("/ports/{}", f.port)
                    },
                    f.reason
                );
            }
        }
        for (dev, port, file) in st.failing.difference(&now) {
            tracing::info!("HCA {dev} port {port}: {file} reads again (or is gone)");
        }
        st.failing = now;
        (scan, st.counts.clone())
    }
}

use super::encode::{counters, gauges, Labels};

fn dev_port(dev: &str, port: u32) -> Labels {
    vec![("device", dev.to_string()), ("port", port.to_string())]
}

/// Encodes one info family (`<name>_info{...} 1`; skipped when empty).
fn infos(
    enc: &mut DescriptorEncoder,
    name: &str,
    help: &str,
    samples: &[Labels],
) -> Result<(), std::fmt::Error> {
    if samples.is_empty() {
        return Ok(());
    }
    let mut m = enc.encode_descriptor(name, help, None, MetricType::Info)?;
    for labels in samples {
        m.encode_info(labels)?;
    }
    Ok(())
}

impl Collector for HcaCollector {
    fn encode(&self, mut enc: DescriptorEncoder) -> Result<(), std::fmt::Error> {
        let (scan, errors) = self.scrape();
        let ports = || {
            scan.hcas
                .iter()
                .flat_map(|h| h.ports.iter().map(move |p| (h, p)))
        };

        let info: Vec<Labels> = scan
            .hcas
            .iter()
            .map(|h| {
                vec![
                    ("device", h.name.clone()),
                    ("fw_ver", h.fw_ver.clone()),
                    ("board_id", h.board_id.clone()),
                    ("hca_type", h.hca_type.clone()),
                    ("node_guid", h.node_guid.clone()),
                    ("numa_node", h.numa_node.clone()),
                ]
            })
            .collect();
        infos(
            &mut enc,
            "ibexporter_hca",
            "RDMA device identity from /sys/class/infiniband/<device>; value is always 1",
            &info,
        )?;
        let port_info: Vec<Labels> = ports()
            .map(|(h, p)| {
                let mut l = dev_port(&h.name, p.port);
                l.push(("link_layer", p.link_layer.clone()));
                l.push(("netdev", p.netdev.clone()));
                l
            })
            .collect();
        infos(
            &mut enc,
            "ibexporter_hca_port",
            "RDMA port link layer and netdev (empty when none); value is always 1",
            &port_info,
        )?;

        let per_device = |f: &dyn Fn(&Pcie) -> Option<u64>| -> Vec<(Labels, u64)> {
            scan.hcas
                .iter()
                .filter_map(|h| {
                    let v = f(h.pcie.as_ref()?)?;
                    Some((vec![("device", h.name.clone())], v))
                })
                .collect()
        };
        gauges(
            &mut enc,
            "ibexporter_hca_pcie_link_downtrained",
            "1 when the device's PCIe link runs below its maximum speed or width (device/current_link_* against max_link_*), else 0",
            None,
            &per_device(&|p| Some(u64::from(p.downtrained))),
        )?;
        gauges(
            &mut enc,
            "ibexporter_hca_pcie_link_width",
            "PCIe lanes the device's link uses (device/current_link_width)",
            None,
            &per_device(&|p| p.width.map(u64::from)),
        )?;
        gauges(
            &mut enc,
            "ibexporter_hca_pcie_link_max_width",
            "PCIe lanes the device's link supports (device/max_link_width)",
            None,
            &per_device(&|p| p.max_width.map(u64::from)),
        )?;

        let per_port = |f: &dyn Fn(&HcaPort) -> Option<u64>| -> Vec<(Labels, u64)> {
            ports()
                .filter_map(|(h, p)| f(p).map(|v| (dev_port(&h.name, p.port), v)))
                .collect()
        };
        gauges(
            &mut enc,
            "ibexporter_hca_port_state_id",
            "Logical port state (0 no change, 1 down, 2 init, 3 armed, 4 active, 5 active defer)",
            None,
            &per_port(&|p| p.state.map(u64::from)),
        )?;
        gauges(
            &mut enc,
            "ibexporter_hca_port_physical_state_id",
            "Physical port state (1 sleep, 2 polling, 3 disabled, 4 training, 5 link up, 6 link error recovery, 7 phy test)",
            None,
            &per_port(&|p| p.phys_state.map(u64::from)),
        )?;
        gauges(
            &mut enc,
            "ibexporter_hca_port_rate",
            "Port signalling rate from ports/<port>/rate, in bytes per second",
            Some(&Unit::Other("bytes_per_second".into())),
            &per_port(&|p| p.rate_bytes_per_second),
        )?;

        for c in PORT_COUNTERS {
            let samples = per_port(&|p| {
                p.counters
                    .get(c.file)
                    .map(|&v| if c.bytes { v.saturating_mul(4) } else { v })
            });
            let unit = c.bytes.then_some(Unit::Bytes);
            counters(&mut enc, c.name, c.help, unit.as_ref(), &samples)?;
        }

        let mut hw: Vec<(Labels, u64)> = Vec::new();
        for h in &scan.hcas {
            for (name, v) in &h.hw_counters {
                hw.push((
                    vec![
                        ("device", h.name.clone()),
                        ("port", String::new()),
                        ("counter", name.clone()),
                    ],
                    *v,
                ));
            }
            for p in &h.ports {
                for (name, v) in &p.hw_counters {
                    let mut l = dev_port(&h.name, p.port);
                    l.push(("counter", name.clone()));
                    hw.push((l, *v));
                }
            }
        }
        counters(
            &mut enc,
            "ibexporter_hca_hw_counter",
            "Driver hardware counters: ports/<port>/hw_counters/<counter>, or <device>/hw_counters/<counter> with port=\"\"",
            None,
            &hw,
        )?;

        let errs: Vec<(Labels, u64)> = errors
            .into_iter()
            .map(|((device, port, file), n)| {
                (vec![("device", device), ("port", port), ("file", file)], n)
            })
            .collect();
        counters(
            &mut enc,
            "ibexporter_hca_read_errors",
            "sysfs files of RDMA devices that existed but could not be read or parsed, per file, since start",
            None,
            &errs,
        )?;
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rates() {
        assert_eq!(parse_rate("100 Gb/sec (4X EDR)\n"), Some(12_500_000_000));
        assert_eq!(parse_rate("2.5 Gb/sec (1X SDR)"), Some(312_500_000));
        assert_eq!(parse_rate("200 Gb/sec (4X HDR)"), Some(25_000_000_000));
        assert_eq!(parse_rate("10 Mb/sec"), Some(1_250_000));
        assert_eq!(parse_rate("fast"), None);
        assert_eq!(parse_rate("100 parsecs"), None);
        assert_eq!(parse_rate(""), None);
    }

    #[test]
    fn states() {
        assert_eq!(parse_state("4: ACTIVE\n"), Some(4));
        assert_eq!(parse_state("5: LinkUp"), Some(5));
        assert_eq!(parse_state("ACTIVE"), None);
    }

    #[test]
    fn data_counters_are_the_bytes_ones() {
        let bytes: Vec<&str> = PORT_COUNTERS
            .iter()
            .filter(|c| c.bytes)
            .map(|c| c.file)
            .collect();
        assert_eq!(bytes, ["port_xmit_data", "port_rcv_data"]);
        let mut names: Vec<&str> = PORT_COUNTERS.iter().map(|c| c.name).collect();
        names.sort_unstable();
        names.dedup();
        assert_eq!(names.len(), PORT_COUNTERS.len(), "duplicate family name");
    }
}
