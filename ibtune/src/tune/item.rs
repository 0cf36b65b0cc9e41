//! One setting of a plan: what it is, how to observe it, how to compare.
//!
//! Why it exists: plan, apply, verify and revert all walk the same list of
//! [`Item`]s. Each item knows its current value on the host and whether it
//! matches; [`super::engine`] knows how to change and undo it.

use crate::host::{CpuSet, HostRoot};
use serde::Serialize;

/// How a file's current content is compared with the wanted value.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Cmp {
    /// Trimmed text equality (sysctls, governors, flags).
    Text,
    /// Both sides parsed as CPU lists.
    CpuList,
    /// The bracketed word of `always [madvise] never` is the value.
    Bracket,
    /// cgroup v2 partition: the first word, with no "invalid" reason.
    Partition,
    /// A count the kernel may silently grant only in part (`nr_hugepages`):
    /// equal numbers match; fewer than wanted after an apply is a
    /// shortfall ([`Item::shortfall`]).
    Pages,
}

/// What an item sets.
#[derive(Debug, Clone, Serialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum Action {
    /// A kernel attribute or config file with a wanted value.
    File {
        /// Host path.
        path: String,
        /// Value written (kernel attributes get a trailing newline).
        value: String,
        /// How to compare.
        cmp: Cmp,
    },
    /// A directory that must exist (a cgroup, a tuned profile folder).
    Dir {
        /// Host path.
        path: String,
        /// True when it is a cgroup (removed with rmdir on the live kernel).
        cgroup: bool,
    },
    /// A controller enabled in a cgroup v2 `cgroup.subtree_control`.
    Controller {
        /// Host path of `cgroup.subtree_control`.
        path: String,
        /// Controller name (`cpuset`).
        controller: String,
    },
    /// `IRQBALANCE_BANNED_CPULIST` in irqbalance's config, then a restart.
    IrqbalanceBan {
        /// Config file host path.
        path: String,
        /// CPUs to ban.
        cpus: CpuSet,
        /// Restart irqbalance after the change (live host, running daemon).
        restart: bool,
    },
    /// The active tuned profile.
    TunedProfile {
        /// Profile name.
        name: String,
    },
    /// A process holding `/dev/cpu_dma_latency` at this value.
    Hold {
        /// Microseconds.
        us: i32,
    },
    /// A kernel command line parameter: cannot be set at run time, only advised.
    Boot {
        /// Parameter name.
        name: String,
        /// Wanted value.
        value: String,
        /// Whether its absence is drift.
        required: bool,
    },
}

/// One line of a plan.
#[derive(Debug, Clone, Serialize)]
pub struct Item {
    /// Stable identifier, e.g. `irq/40/affinity`; journal records use it.
    pub key: String,
    /// What it is, for people.
    pub what: String,
    /// What it sets.
    pub action: Action,
    /// Why it cannot be applied here, if so (e.g. tuned not installed).
    pub blocked: Option<String>,
}

/// A knob of a profile: the items one section of a profile sets, which
/// `ibtune experiment --each-knob` turns on and off together (an IRQ's
/// affinity needs irqbalance banned; a cpuset needs its controller).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Knob {
    /// `[[cpuset]]`: the cgroups, their CPUs, memory nodes and partitions.
    Cpusets,
    /// `[[irq]]`: HCA IRQ affinity and the irqbalance ban.
    Irq,
    /// `[sysctl]`.
    Sysctl,
    /// `[cpu]`: governors and C-states.
    Cpu,
    /// Transparent huge pages.
    Thp,
    /// `[tuned]`: the generated tuned profile, active.
    Tuned,
    /// `[dma_latency]`: `/dev/cpu_dma_latency` held.
    DmaLatency,
    /// `[[hugepages]]`: huge pages per NUMA node.
    Hugepages,
}

impl Knob {
    /// Every knob, in plan order.
    pub const ALL: [Knob; 8] = [
        Knob::Cpusets,
        Knob::Irq,
        Knob::Sysctl,
        Knob::Cpu,
        Knob::Thp,
        Knob::Tuned,
        Knob::DmaLatency,
        Knob::Hugepages,
    ];

    /// The word used in reports and on the command line.
    pub fn name(self) -> &'static str {
        match self {
            Knob::Cpusets => "cpusets",
            Knob::Irq => "irq",
            Knob::Sysctl => "sysctl",
            Knob::Cpu => "cpu",
            Knob::Thp => "thp",
            Knob::Tuned => "tuned",
            Knob::DmaLatency => "dma_latency",
            Knob::Hugepages => "hugepages",
        }
    }
}

impl Item {
    /// The knob this item belongs to, from its key's first segment
    /// (`plan::build` names every key); `None` for boot advice, which is
    /// never applied at run time.
    pub fn knob(&self) -> Option<Knob> {
        Some(match self.key.split('/').next().unwrap_or("") {
            "cgroup" | "cpuset" => Knob::Cpusets,
            "irq" | "irqbalance" => Knob::Irq,
            "sysctl" => Knob::Sysctl,
            "cpu" => Knob::Cpu,
            "thp" => Knob::Thp,
            "tuned" => Knob::Tuned,
            "dma_latency" => Knob::DmaLatency,
            "hugepages" => Knob::Hugepages,
            _ => return None,
        })
    }
}

/// An item's state on the host.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Status {
    /// The host already matches.
    Ok,
    /// Apply would change it (verify: drift).
    Change,
    /// Cannot be applied here; `blocked` says why.
    Blocked,
    /// Boot parameter advice: not applied at run time.
    Advice,
    /// Applied, but the kernel granted less than asked (huge pages on a
    /// node with too little free contiguous memory): drift in `verify`.
    Short,
}

/// What was observed for one item.
#[derive(Debug, Clone, Serialize)]
pub struct Observed {
    /// The current value, for display.
    pub current: String,
    /// The wanted value, for display.
    pub wanted: String,
    /// The state.
    pub status: Status,
}

/// Shown for a file or directory that does not exist.
pub const ABSENT: &str = "(absent)";

impl Item {
    /// Reads the item's current state on `root`.
    pub fn observe(&self, root: &HostRoot) -> Observed {
        let (current, wanted, matches) = match &self.action {
            Action::File { path, value, cmp } => {
                let cur = root.read(path);
                let ok = cur.as_deref().is_ok_and(|c| compare(*cmp, c, value));
                (
                    match cur {
                        Ok(c) => display(*cmp, &c),
                        Err(e) if e.source.kind() == std::io::ErrorKind::NotFound => ABSENT.into(),
                        // Oversized, not a regular file, not text: say so
                        // rather than pass it off as absent.
                        Err(e) => format!("(unreadable: {e})"),
                    },
                    display(*cmp, value),
                    ok,
                )
            }
            Action::Dir { path, .. } => {
                let ok = root.is_dir(path);
                (
                    if ok { "exists".into() } else { ABSENT.into() },
                    "exists".into(),
                    ok,
                )
            }
            Action::Controller { path, controller } => {
                let cur = root.read(path).unwrap_or_default();
                let ok = cur.split_whitespace().any(|c| c == controller);
                (cur.trim().to_string(), format!("+{controller}"), ok)
            }
            Action::IrqbalanceBan { path, cpus, .. } => {
                let text = root.read(path).unwrap_or_default();
                let cur = crate::host::services::banned_cpulist_in(&text);
                let ok = cur.as_ref() == Some(cpus);
                (
                    cur.map(|c| c.to_list()).unwrap_or_else(|| "(none)".into()),
                    cpus.to_list(),
                    ok,
                )
            }
            Action::TunedProfile { name } => {
                let cur = root
                    .read_opt("/etc/tuned/active_profile")
                    .unwrap_or_default();
                let ok = cur == *name;
                (
                    if cur.is_empty() { "(none)".into() } else { cur },
                    name.clone(),
                    ok,
                )
            }
            Action::Hold { us } => {
                let cur = crate::host::kernel::read_cpu_dma_latency(root);
                let ok = cur.is_some_and(|c| c <= *us as i64);
                (
                    cur.map(|c| format!("{c} us"))
                        .unwrap_or_else(|| ABSENT.into()),
                    format!("<= {us} us, held"),
                    ok,
                )
            }
            Action::Boot { name, value, .. } => {
                let line = root.read("/proc/cmdline");
                let have = line
                    .as_deref()
                    .ok()
                    .and_then(|l| crate::host::kernel::cmdline_param(l, name));
                let ok = have
                    .as_deref()
                    .is_some_and(|h| boot_matches(name, h, value));
                let current = match (&line, have) {
                    (Err(e), _) => format!("(unreadable: {e})"),
                    (_, Some(h)) => format!("{name}={h}"),
                    (_, None) => "(not on the kernel command line)".into(),
                };
                let wanted = format!("{name}={value}");
                let status = if ok {
                    Status::Ok
                } else if matches!(self.action, Action::Boot { required: true, .. }) {
                    Status::Change
                } else {
                    Status::Advice
                };
                return Observed {
                    current,
                    wanted,
                    status,
                };
            }
        };
        let status = if matches {
            Status::Ok
        } else if self.blocked.is_some() {
            Status::Blocked
        } else {
            Status::Change
        };
        Observed {
            current,
            wanted,
            status,
        }
    }
}

/// True when `current` satisfies `wanted` under `cmp`.
pub fn compare(cmp: Cmp, current: &str, wanted: &str) -> bool {
    match cmp {
        Cmp::Text => current.trim() == wanted.trim(),
        Cmp::CpuList => match (CpuSet::parse_list(current), CpuSet::parse_list(wanted)) {
            (Ok(a), Ok(b)) => a == b,
            _ => false,
        },
        Cmp::Bracket => bracketed(current) == wanted.trim(),
        Cmp::Partition => {
            let c = current.trim();
            c.split_whitespace().next() == Some(wanted.trim()) && !c.contains("invalid")
        }
        Cmp::Pages => matches!(
            (current.trim().parse::<u64>(), wanted.trim().parse::<u64>()),
            (Ok(a), Ok(b)) if a == b
        ),
    }
}

impl Item {
    /// For a count the kernel may grant in part (`Cmp::Pages`): the
    /// message when `current` holds fewer than wanted, saying what to do.
    /// `None` when it is not such an item, or nothing is missing.
    ///
    /// Why it exists: writing `nr_hugepages` succeeds even when the kernel
    /// allocates fewer pages (it finds too little free contiguous memory on
    /// the node); only reading the file back tells.
    pub fn shortfall(&self, current: &str) -> Option<String> {
        let Action::File {
            value,
            cmp: Cmp::Pages,
            ..
        } = &self.action
        else {
            return None;
        };
        let want: u64 = value.trim().parse().ok()?;
        let have: u64 = current.trim().parse().ok()?;
        (have < want).then(|| {
            format!(
                "{}: {have} of {want} allocated: the kernel found too little free contiguous memory on that node (fragmented or in use); free or compact memory (echo 1 > /proc/sys/vm/compact_memory) and apply again, or reserve the pages at boot (hugepagesz=SIZE hugepages=NODE:COUNT)",
                self.what
            )
        })
    }
}

/// The bracketed word of `always [madvise] never`, or the trimmed text.
pub fn bracketed(s: &str) -> String {
    crate::host::kernel::bracketed_choice(s).unwrap_or_else(|| s.trim().to_string())
}

fn display(cmp: Cmp, v: &str) -> String {
    match cmp {
        Cmp::Bracket => bracketed(v),
        Cmp::CpuList => CpuSet::parse_list(v)
            .map(|s| {
                if s.is_empty() {
                    "(empty)".into()
                } else {
                    s.to_list()
                }
            })
            .unwrap_or_else(|_| v.trim().to_string()),
        _ => {
            let t = v.trim();
            if t.lines().count() > 1 {
                format!("({} lines)", t.lines().count())
            } else {
                t.to_string()
            }
        }
    }
}

/// True when the command line's value of `name` gives what the profile
/// wants: the CPU lists of isolcpus, nohz_full and rcu_nocbs cover the
/// wanted CPUs (with the wanted isolcpus flags); irqaffinity is exactly
/// the housekeeping CPUs (more would let IRQs onto isolated ones); any
/// other parameter is the same text.
fn boot_matches(name: &str, have: &str, want: &str) -> bool {
    let split = |s: &str| -> (Vec<String>, Option<CpuSet>) {
        let mut flags = Vec::new();
        let mut list = Vec::new();
        for part in s.split(',') {
            if part.chars().next().is_some_and(|c| c.is_ascii_alphabetic()) {
                flags.push(part.to_string());
            } else {
                list.push(part);
            }
        }
        (flags, CpuSet::parse_list(&list.join(",")).ok())
    };
    match name {
        "isolcpus" | "nohz_full" | "rcu_nocbs" => {
            let (hf, hl) = split(have);
            let (wf, wl) = split(want);
            wf.iter().all(|f| hf.contains(f))
                && hl.is_some()
                && wl.is_some_and(|w| hl.is_some_and(|h| w.is_subset(&h)))
        }
        "irqaffinity" => matches!(
            (CpuSet::parse_list(have), CpuSet::parse_list(want)),
            (Ok(h), Ok(w)) if h == w
        ),
        _ => have.trim() == want.trim(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn comparisons() {
        assert!(compare(
            Cmp::CpuList,
            "16,18,20,22\n",
            "16,18,20-22".replace("20-22", "20,22").as_str()
        ));
        assert!(compare(Cmp::CpuList, "0-3\n", "0,1,2,3"));
        assert!(!compare(Cmp::CpuList, "0-3\n", "0-4"));
        assert!(compare(Cmp::Bracket, "always madvise [never]\n", "never"));
        assert!(!compare(Cmp::Bracket, "always [madvise] never\n", "never"));
        assert!(compare(Cmp::Partition, "isolated\n", "isolated"));
        assert!(!compare(
            Cmp::Partition,
            "isolated invalid (Cpu list in cpuset.cpus not exclusive)\n",
            "isolated"
        ));
        assert!(compare(Cmp::Text, " 10\n", "10"));
    }

    #[test]
    fn boot_values() {
        let iso = |h, w| boot_matches("isolcpus", h, w);
        assert!(iso("managed_irq,domain,12-15", "managed_irq,domain,12,13"));
        assert!(!iso("12-15", "managed_irq,domain,12"));
        assert!(iso("12-15", "12-15"));
        assert!(!iso("12-13", "12-15"));
        assert!(boot_matches("irqaffinity", "0-3", "0,1,2,3"));
        assert!(!boot_matches("irqaffinity", "0-7", "0-3"));
        assert!(boot_matches("intel_idle.max_cstate", "1", "1"));
        assert!(!boot_matches("intel_idle.max_cstate", "2", "1"));
    }

    #[test]
    fn a_short_page_count_says_how_many_and_what_to_do() {
        let item = Item {
            key: "hugepages/node0/2M".into(),
            what: "node 0: 2M hugepages".into(),
            action: Action::File {
                path: "/sys/devices/system/node/node0/hugepages/hugepages-2048kB/nr_hugepages"
                    .into(),
                value: "512\n".into(),
                cmp: Cmp::Pages,
            },
            blocked: None,
        };
        let m = item.shortfall("300\n").expect("300 < 512 is a shortfall");
        assert!(
            m.starts_with("node 0: 2M hugepages: 300 of 512 allocated:"),
            "{m}"
        );
        assert!(m.contains("compact_memory"), "{m}");
        assert_eq!(item.shortfall("512\n"), None);
        assert_eq!(item.shortfall("garbage"), None);
        assert!(compare(Cmp::Pages, "512\n", "512\n"));
        assert!(!compare(Cmp::Pages, "300\n", "512\n"));
        assert!(!compare(Cmp::Pages, "x\n", "x\n"));
    }
}
