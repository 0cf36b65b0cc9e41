//! Human-readable tables and JSON for `show`, `plan` and `verify`.

use crate::host::warnings::Warning;
use crate::host::{CgroupMode, Host};
use crate::tune::item::Status;
use crate::tune::plan::Plan;
use std::fmt::Write;

/// Prints a value as pretty JSON on stdout.
pub fn json<T: serde::Serialize>(v: &T) -> anyhow::Result<()> {
    println!("{}", serde_json::to_string_pretty(v)?);
    Ok(())
}

fn mode_text(m: CgroupMode) -> &'static str {
    match m {
        CgroupMode::V2 => "cgroup v2 (cpuset partitions)",
        CgroupMode::V1 => "cgroup v1 (cpu_exclusive cpusets)",
        CgroupMode::None => "no cpuset controller",
    }
}

/// The `plan` / `verify` table: one line per setting.
pub fn plan_text(p: &Plan, verb: &str) -> String {
    let mut s = String::new();
    let _ = writeln!(
        s,
        "{verb}: profile {} ({}) on root {}",
        p.profile, p.profile_path, p.root
    );
    let _ = writeln!(s, "cpusets: {}", mode_text(p.cgroup_mode));
    let w = p
        .items
        .iter()
        .map(|i| i.item.what.len())
        .max()
        .unwrap_or(10)
        .clamp(10, 60);
    let cw = p
        .items
        .iter()
        .map(|i| i.observed.current.len())
        .max()
        .unwrap_or(7)
        .clamp(7, 40);
    let _ = writeln!(s, "  {:<w$}  {:<cw$}    WANTED", "SETTING", "CURRENT");
    for i in &p.items {
        let mark = match i.observed.status {
            Status::Ok => "=",
            Status::Change => {
                if verb == "verify" {
                    "!"
                } else {
                    "~"
                }
            }
            Status::Blocked => "x",
            Status::Advice => "?",
            Status::Short => "<",
        };
        let _ = writeln!(
            s,
            "{mark} {:<w$}  {:<cw$} -> {}{}",
            i.item.what,
            i.observed.current,
            i.observed.wanted,
            i.item
                .blocked
                .as_ref()
                .map(|b| format!("   [blocked: {b}]"))
                .unwrap_or_default()
        );
    }
    let sm = &p.summary;
    let _ = writeln!(
        s,
        "{} as wanted, {} {}, {} blocked, {} boot advice{}",
        sm.ok,
        sm.change,
        if verb == "verify" {
            "drifted"
        } else {
            "to change"
        },
        sm.blocked,
        sm.advice,
        if sm.short > 0 {
            format!(", {} short (the kernel granted fewer huge pages)", sm.short)
        } else {
            String::new()
        }
    );
    let advice: Vec<String> = p
        .items
        .iter()
        .filter(|i| {
            i.observed.status == Status::Advice
                || (i.key_is_boot() && i.observed.status == Status::Change)
        })
        .map(|i| i.observed.wanted.clone())
        .collect();
    if !advice.is_empty() {
        let _ = writeln!(
            s,
            "reboot needed: the kernel command line must have: {} (`ibtune plan {} --boot-fragment` prints it as a GRUB line)",
            advice.join(" "),
            p.profile_path
        );
    }
    let _ = writeln!(
        s,
        "legend: = as wanted, {} , x blocked, ? boot advice{}",
        if verb == "verify" {
            "! drifted"
        } else {
            "~ will change"
        },
        if sm.short > 0 { ", < short" } else { "" }
    );
    s
}

impl crate::tune::plan::PlannedItem {
    fn key_is_boot(&self) -> bool {
        self.item.key.starts_with("boot/")
    }
}

/// The `show` report.
pub fn show_text(h: &Host, warnings: &[Warning]) -> String {
    let mut s = String::new();
    let _ = writeln!(
        s,
        "host root {}  kernel {}  topology from {}",
        h.root,
        h.kernel_release.as_deref().unwrap_or("?"),
        h.topology_source
    );
    let _ = writeln!(
        s,
        "CPUs: {} online{}",
        h.cpus.online,
        if h.cpus.isolated.is_empty() {
            String::new()
        } else {
            format!(", isolated {}", h.cpus.isolated)
        }
    );
    for n in &h.numa_nodes {
        let _ = writeln!(
            s,
            "  node {}: CPUs {}  memory {}",
            n.id,
            n.cpus,
            n.mem_total_kb
                .map(|k| format!("{} MiB", k / 1024))
                .unwrap_or_else(|| "?".into())
        );
    }
    let govs: std::collections::BTreeSet<&str> = h
        .cpus
        .list
        .iter()
        .filter_map(|c| c.governor.as_deref())
        .collect();
    let _ = writeln!(
        s,
        "  governor: {}  idle states: {}",
        if govs.is_empty() {
            "(no cpufreq)".to_string()
        } else {
            govs.into_iter().collect::<Vec<_>>().join(",")
        },
        h.cpus
            .list
            .first()
            .map(|c| c
                .cstates
                .iter()
                .map(|st| format!(
                    "{}({}us{})",
                    st.name,
                    st.latency_us,
                    if st.disabled { ",off" } else { "" }
                ))
                .collect::<Vec<_>>()
                .join(" "))
            .unwrap_or_default()
    );
    if h.rdma_devices.is_empty() {
        let _ = writeln!(s, "RDMA devices: none (no /sys/class/infiniband entries)");
    }
    for d in &h.rdma_devices {
        let _ = writeln!(
            s,
            "RDMA {}: {}  PCI {}  NUMA node {}  local CPUs {}",
            d.name,
            d.hca_type.as_deref().unwrap_or("?"),
            d.pci_addr.as_deref().unwrap_or("-"),
            d.numa_node
                .map(|n| n.to_string())
                .unwrap_or_else(|| "?".into()),
            h.local_cpus_of(d)
        );
        if let Some(p) = &d.pcie {
            let _ = writeln!(
                s,
                "  PCIe {} x{} (max {} x{}){}",
                p.current_speed.as_deref().unwrap_or("?"),
                p.current_width.unwrap_or(0),
                p.max_speed.as_deref().unwrap_or("?"),
                p.max_width.unwrap_or(0),
                if p.downtrained { "  DOWN-TRAINED" } else { "" }
            );
        }
        for p in &d.ports {
            let _ = writeln!(
                s,
                "  port {}: {} {} {} {}{}",
                p.port,
                p.state.as_deref().unwrap_or("?"),
                p.link_layer.as_deref().unwrap_or("?"),
                p.rate.as_deref().unwrap_or("?"),
                p.netdev
                    .as_deref()
                    .map(|n| format!("netdev {n}"))
                    .unwrap_or_default(),
                if p.gids.is_empty() {
                    String::new()
                } else {
                    format!(" gids {}", p.gids.len())
                }
            );
        }
        if !d.irqs.is_empty() {
            let list: Vec<String> = d
                .irqs
                .iter()
                .map(|i| {
                    format!(
                        "{}->{}",
                        i.irq,
                        i.affinity
                            .as_ref()
                            .map(|a| a.to_list())
                            .unwrap_or_else(|| "?".into())
                    )
                })
                .collect();
            let _ = writeln!(
                s,
                "  IRQs ({} from {}): {}",
                d.irqs.len(),
                d.irqs[0].source,
                list.join(" ")
            );
        }
    }
    let c = &h.cmdline;
    let _ = writeln!(
        s,
        "cmdline: isolcpus={} nohz_full={} rcu_nocbs={} irqaffinity={}",
        c.isolcpus.as_deref().unwrap_or("-"),
        c.nohz_full.as_deref().unwrap_or("-"),
        c.rcu_nocbs.as_deref().unwrap_or("-"),
        c.irqaffinity.as_deref().unwrap_or("-")
    );
    let _ = writeln!(
        s,
        "cgroups: {}  v2 {}  v1 cpuset {}",
        mode_text(h.cgroup.mode),
        h.cgroup.v2_mount.as_deref().unwrap_or("-"),
        h.cgroup.v1_cpuset_mount.as_deref().unwrap_or("-")
    );
    let _ = writeln!(
        s,
        "irqbalance: {}  banned CPUs {}",
        if h.irqbalance.running {
            "running"
        } else {
            "not running"
        },
        h.irqbalance
            .banned_cpus
            .as_ref()
            .map(|c| c.to_list())
            .unwrap_or_else(|| "(none)".into())
    );
    let _ = writeln!(
        s,
        "tuned: {}  active profile {}{}",
        if h.tuned.installed {
            "installed"
        } else {
            "not installed"
        },
        h.tuned.active_profile.as_deref().unwrap_or("(none)"),
        if h.tuned.force_latency_active {
            "  force_latency ACTIVE"
        } else {
            ""
        }
    );
    let _ = writeln!(
        s,
        "cpu_dma_latency: {}  THP: {}",
        h.cpu_dma_latency_us
            .map(|v| format!("{v} us"))
            .unwrap_or_else(|| "?".into()),
        h.thp.as_deref().unwrap_or("?")
    );
    if !h.sysctls.is_empty() {
        let v: Vec<String> = h.sysctls.iter().map(|(k, v)| format!("{k}={v}")).collect();
        let _ = writeln!(s, "sysctls: {}", v.join(" "));
    }
    if warnings.is_empty() {
        let _ = writeln!(s, "warnings: none");
    } else {
        let _ = writeln!(s, "warnings:");
        for w in warnings {
            let _ = writeln!(s, "  [{}] {}", w.code, w.message);
        }
    }
    s
}
