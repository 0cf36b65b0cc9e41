//! `ibprobe devices`: what RDMA hardware this host has.
//!
//! Why it exists: the first question before any verbs run is which device,
//! port and GID to use; with no device the user is pointed to the lab and
//! the reference transports instead of a bare error.

use super::error::CliError;
use crate::verbs::NO_DEVICE_ELSE;
use crate::verbs::{self, VerbsErrorKind};

/// Prints the devices (table or JSON). No device is not an error: it is
/// said plainly (JSON: an empty list), with where to go next.
pub fn run(json: bool) -> Result<u8, CliError> {
    let list = match verbs::devices() {
        Ok(l) => l,
        Err(e) if e.kind == VerbsErrorKind::NoDevice => {
            if json {
                println!("[]");
            }
            eprintln!("ibprobe: {}; {NO_DEVICE_ELSE}", e.message);
            return Ok(0);
        }
        Err(e) => return Err(CliError::run(e.message)),
    };
    if json {
        println!(
            "{}",
            serde_json::to_string_pretty(&list).expect("device info serializes")
        );
        return Ok(0);
    }
    if list.is_empty() {
        println!("no RDMA device on this host; {NO_DEVICE_ELSE}");
        return Ok(0);
    }
    for d in &list {
        let numa = d.numa_node.map_or("-".into(), |n| n.to_string());
        let cpus = d.local_cpus.as_deref().unwrap_or("-");
        println!(
            "{}  guid {}  numa {}  cpus {}  max_inline_rc {}  max_qp_wr {}  cqe_timestamps {}",
            d.name,
            d.node_guid,
            numa,
            cpus,
            d.caps.max_inline_rc,
            d.caps.max_qp_wr,
            d.caps.completion_timestamps
        );
        for p in &d.ports {
            println!(
                "  port {}  {}  {}  mtu {}/{}  lid {}",
                p.port, p.state, p.link_layer, p.active_mtu, p.max_mtu, p.lid
            );
            for g in &p.gids {
                println!(
                    "    gid {:>3}  {}  {}{}{}",
                    g.index,
                    g.gid,
                    g.gid_type,
                    if g.ipv4_mapped { "  ipv4-mapped" } else { "" },
                    g.netdev
                        .as_deref()
                        .map(|n| format!("  {n}"))
                        .unwrap_or_default()
                );
            }
        }
    }
    Ok(0)
}
