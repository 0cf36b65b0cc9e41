//! Services that fight a latency profile: irqbalance (moves IRQs back) and
//! tuned (its own `force_latency` and governors).
//!
//! Why it exists: ibtune's IRQ pinning is undone within seconds by an
//! irqbalance that is not told to keep off the pinned CPUs, and tuned's
//! `force_latency` changed the thesis measurements; both must be detected,
//! and irqbalance's ban list edited without disturbing the rest of its file.

use super::cpulist::CpuSet;
use super::model::{IrqBalance, Tuned};
use super::root::HostRoot;

/// The irqbalance variable ibtune reads and sets.
pub const BANNED_VAR: &str = "IRQBALANCE_BANNED_CPULIST";

/// Where distributions keep the irqbalance environment file, in search order.
pub const IRQBALANCE_CONFIG_FILES: &[&str] =
    &["/etc/default/irqbalance", "/etc/sysconfig/irqbalance"];

/// True when a process named `name` runs (any `/proc/<pid>/comm` equal to it).
///
/// Why it exists: irqbalance and tuned are detected by process, since a
/// unit file says nothing about whether they are running.
pub fn process_running(root: &HostRoot, name: &str) -> bool {
    root.list("/proc")
        .iter()
        .filter(|e| !e.is_empty() && e.bytes().all(|b| b.is_ascii_digit()))
        .any(|pid| root.read_opt(&format!("/proc/{pid}/comm")).as_deref() == Some(name))
}

/// If `line` is an uncommented assignment of `var` (optionally after
/// `export `), returns (prefix up to and including `=`, value text after it).
fn assignment<'a>(line: &'a str, var: &str) -> Option<(&'a str, &'a str)> {
    let body = line.trim_end_matches(['\n', '\r']);
    let lead = body.len() - body.trim_start().len();
    let mut rest = &body[lead..];
    if let Some(r) = rest.strip_prefix("export") {
        if r.starts_with([' ', '\t']) {
            rest = r.trim_start();
        }
    }
    let after = rest.strip_prefix(var)?.strip_prefix('=')?;
    let prefix_len = body.len() - after.len();
    Some((&body[..prefix_len], after))
}

/// The value of a shell assignment's right-hand side: quotes stripped,
/// a trailing comment dropped.
fn shell_value(v: &str) -> String {
    let v = v.trim();
    for q in ['"', '\''] {
        if let Some(inner) = v.strip_prefix(q) {
            return match inner.find(q) {
                Some(end) => inner[..end].to_string(),
                None => inner.to_string(),
            };
        }
    }
    v.split(|c: char| c.is_whitespace() || c == '#')
        .next()
        .unwrap_or_default()
        .to_string()
}

/// The value of an uncommented `var=` line in a shell-style environment
/// file (the last one wins, as when the shell sources it), quotes stripped.
///
/// Why it exists: irqbalance's config is a shell fragment, and commented
/// examples (`#IRQBALANCE_BANNED_CPULIST=`) must not count.
pub fn env_file_value(text: &str, var: &str) -> Option<String> {
    text.lines()
        .rev()
        .find_map(|l| assignment(l, var))
        .map(|(_, v)| shell_value(v))
}

/// `IRQBALANCE_BANNED_CPULIST` from an irqbalance config text; `None` when
/// unset, empty or not a CPU list.
pub fn banned_cpulist_in(text: &str) -> Option<CpuSet> {
    let v = env_file_value(text, BANNED_VAR)?;
    if v.trim().is_empty() {
        return None;
    }
    CpuSet::parse_list(&v).ok()
}

/// Returns `file_text` with `IRQBALANCE_BANNED_CPULIST` set to `cpus`
/// (every uncommented assignment rewritten in place, keeping its quoting;
/// else `IRQBALANCE_BANNED_CPULIST=<list>\n` appended) or, for `None`, with
/// every uncommented assignment removed. Every other byte is kept.
///
/// Why it exists: apply and revert edit the distribution's file rather than
/// replacing it, so the admin's other settings survive both.
pub fn set_banned_cpulist(file_text: &str, cpus: Option<&CpuSet>) -> String {
    let mut out = String::with_capacity(file_text.len() + 48);
    let mut replaced = false;
    for line in file_text.split_inclusive('\n') {
        let Some((prefix, old)) = assignment(line, BANNED_VAR) else {
            out.push_str(line);
            continue;
        };
        let ending = &line[line.trim_end_matches(['\n', '\r']).len()..];
        if let Some(set) = cpus {
            let old = old.trim_start();
            let q = if old.starts_with('"') {
                "\""
            } else if old.starts_with('\'') {
                "'"
            } else {
                ""
            };
            out.push_str(prefix);
            out.push_str(q);
            out.push_str(&set.to_list());
            out.push_str(q);
            out.push_str(ending);
            replaced = true;
        }
    }
    if let (Some(set), false) = (cpus, replaced) {
        if !out.is_empty() && !out.ends_with('\n') {
            out.push('\n');
        }
        out.push_str(&format!("{BANNED_VAR}={}\n", set.to_list()));
    }
    out
}

/// irqbalance state: running, config file, banned CPU list.
///
/// Why it exists: discovery's entry point for irqbalance.
pub fn discover_irqbalance(root: &HostRoot) -> IrqBalance {
    let config_file = IRQBALANCE_CONFIG_FILES
        .iter()
        .find(|p| root.is_file(p))
        .map(|p| p.to_string());
    let banned_cpus = config_file
        .as_deref()
        .and_then(|p| root.read(p).ok())
        .and_then(|t| banned_cpulist_in(&t));
    IrqBalance {
        running: process_running(root, "irqbalance"),
        config_file,
        banned_cpus,
    }
}

/// True for a profile name that is safe to join into a path.
fn safe_profile_name(name: &str) -> bool {
    !name.is_empty() && !name.contains('/') && name != "." && name != ".." && !name.contains('\0')
}

/// The `tuned.conf` of a tuned profile: `/etc/tuned/<p>/tuned.conf`, then
/// `/usr/lib/tuned/<p>/tuned.conf` (then the `profiles/` subdirectories
/// newer tuned uses). `None` when not found or the name is unsafe.
///
/// Why it exists: the `force_latency` check, and messages telling the user
/// which file to edit.
pub fn tuned_profile_conf_path(root: &HostRoot, name: &str) -> Option<String> {
    if !safe_profile_name(name) {
        return None;
    }
    [
        format!("/etc/tuned/{name}/tuned.conf"),
        format!("/usr/lib/tuned/{name}/tuned.conf"),
        format!("/etc/tuned/profiles/{name}/tuned.conf"),
        format!("/usr/lib/tuned/profiles/{name}/tuned.conf"),
    ]
    .into_iter()
    .find(|p| root.is_file(p))
}

/// One `tuned.conf`: sections of key/value pairs, in file order.
type Ini = Vec<(String, Vec<(String, String)>)>;

/// Parses an INI file the way tuned reads it (`#`/`;` comments, `key=value`).
fn parse_ini(text: &str) -> Ini {
    let mut out: Ini = Vec::new();
    for line in text.lines() {
        let l = line.trim();
        if l.is_empty() || l.starts_with('#') || l.starts_with(';') {
            continue;
        }
        if let Some(name) = l.strip_prefix('[').and_then(|r| r.strip_suffix(']')) {
            out.push((name.trim().to_string(), Vec::new()));
            continue;
        }
        if let Some((k, v)) = l.split_once('=') {
            if out.is_empty() {
                out.push((String::new(), Vec::new()));
            }
            if let Some(last) = out.last_mut() {
                last.1.push((k.trim().to_string(), v.trim().to_string()));
            }
        }
    }
    out
}

/// Effective settings of a profile after its includes: section name to
/// key/value map.
type Merged = std::collections::BTreeMap<String, std::collections::BTreeMap<String, String>>;

/// Loads a profile and merges its `include=` chain (depth-limited), tuned
/// style: included profiles first, the profile's own sections over them;
/// `replace=1` in a section discards inherited options, `drop=a,b` removes
/// the named inherited ones.
fn merged_profile(root: &HostRoot, name: &str, depth: u32, merged: &mut Merged) {
    if depth > 5 {
        return;
    }
    let Some(path) = tuned_profile_conf_path(root, name) else {
        return;
    };
    let Ok(text) = root.read(&path) else {
        return;
    };
    let ini = parse_ini(&text);
    let includes: Vec<String> = ini
        .iter()
        .filter(|(s, _)| s == "main")
        .flat_map(|(_, kv)| kv.iter())
        .filter(|(k, _)| k == "include")
        .flat_map(|(_, v)| {
            v.split([',', ';'])
                .map(|x| x.trim().to_string())
                .collect::<Vec<_>>()
        })
        .filter(|x| !x.is_empty() && !x.contains("${"))
        .collect();
    for inc in includes {
        merged_profile(root, &inc, depth + 1, merged);
    }
    for (section, kv) in ini {
        if section == "main" || section.is_empty() {
            continue;
        }
        let entry = merged.entry(section).or_default();
        let replace = kv
            .iter()
            .any(|(k, v)| k == "replace" && matches!(v.as_str(), "1" | "true" | "True" | "yes"));
        if replace {
            entry.clear();
        }
        for (k, v) in kv {
            if k == "drop" {
                for d in v.split(',').map(str::trim) {
                    entry.remove(d);
                }
            } else if k != "replace" {
                entry.insert(k, v);
            }
        }
    }
}

/// True when the named tuned profile(s) (space- or comma-separated, as
/// `active_profile` may hold several) end up with a non-empty
/// `force_latency` in an enabled cpu plugin section.
///
/// Why it exists: tuned's `force_latency` keeps `/dev/cpu_dma_latency` open
/// and changed the thesis's median latency; ibtune warns about it.
pub fn profile_sets_force_latency(root: &HostRoot, profiles: &str) -> bool {
    let mut merged = Merged::new();
    for p in profiles.split([' ', ',', '\t']).filter(|p| !p.is_empty()) {
        merged_profile(root, p, 1, &mut merged);
    }
    merged.iter().any(|(section, kv)| {
        let is_cpu = section == "cpu" || kv.get("type").is_some_and(|t| t == "cpu");
        let enabled = !kv
            .get("enabled")
            .is_some_and(|e| matches!(e.as_str(), "0" | "false" | "False" | "no"));
        is_cpu && enabled && kv.get("force_latency").is_some_and(|v| !v.is_empty())
    })
}

/// tuned state: installed, active profile, whether it forces a latency.
///
/// Why it exists: discovery's entry point for tuned.
pub fn discover_tuned(root: &HostRoot) -> Tuned {
    let installed = root.find_program("tuned-adm").is_some() || root.exists("/etc/tuned");
    let active_profile = root
        .read_opt("/etc/tuned/active_profile")
        .filter(|p| !p.is_empty());
    let force_latency_active = active_profile
        .as_deref()
        .is_some_and(|p| profile_sets_force_latency(root, p));
    Tuned {
        installed,
        active_profile,
        force_latency_active,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const DEBIAN: &str = "# irqbalance defaults\n\
#IRQBALANCE_BANNED_CPULIST=\"0-1\"\n\
ENABLED=\"1\"\n\
ONESHOT=\"0\"\n";

    #[test]
    fn reads_banned_list_ignoring_comments() {
        assert_eq!(banned_cpulist_in(DEBIAN), None);
        let t = "IRQBALANCE_BANNED_CPULIST=\"16,18\"  # rt\n";
        assert_eq!(
            banned_cpulist_in(t).map(|s| s.to_list()).as_deref(),
            Some("16,18")
        );
        let t = "  export IRQBALANCE_BANNED_CPULIST='2-3'\nIRQBALANCE_BANNED_CPULIST=4 # x\n";
        assert_eq!(
            banned_cpulist_in(t).map(|s| s.to_list()).as_deref(),
            Some("4")
        );
        assert_eq!(banned_cpulist_in("IRQBALANCE_BANNED_CPULIST=\n"), None);
        assert_eq!(banned_cpulist_in("IRQBALANCE_BANNED_CPULIST=zz\n"), None);
        assert_eq!(banned_cpulist_in("IRQBALANCE_BANNED_CPULISTX=1\n"), None);
    }

    #[test]
    fn edits_keep_every_other_byte() {
        let set = CpuSet::parse_list("2,4,6").unwrap();
        // Append to a file without the variable (and without a final newline).
        let t = "ENABLED=1\r\n#IRQBALANCE_BANNED_CPULIST=\"0\"\nONESHOT=0";
        let e = set_banned_cpulist(t, Some(&set));
        assert_eq!(e, format!("{t}\nIRQBALANCE_BANNED_CPULIST=2,4,6\n"));
        // Replace in place, keeping quotes and the CRLF ending.
        let t = "A=1\r\nIRQBALANCE_BANNED_CPULIST=\"0-1\"\r\nB=2\n";
        let e = set_banned_cpulist(t, Some(&set));
        assert_eq!(e, "A=1\r\nIRQBALANCE_BANNED_CPULIST=\"2,4,6\"\r\nB=2\n");
        // Remove, keeping the commented example.
        let t = "#IRQBALANCE_BANNED_CPULIST=\"0\"\nIRQBALANCE_BANNED_CPULIST=1\nB=2";
        assert_eq!(
            set_banned_cpulist(t, None),
            "#IRQBALANCE_BANNED_CPULIST=\"0\"\nB=2"
        );
        // Round trip.
        let edited = set_banned_cpulist(DEBIAN, Some(&set));
        assert_eq!(banned_cpulist_in(&edited), Some(set));
        assert_eq!(set_banned_cpulist(&edited, None), DEBIAN);
        assert_eq!(set_banned_cpulist("", None), "");
        assert_eq!(
            set_banned_cpulist("", Some(&CpuSet::new())),
            "IRQBALANCE_BANNED_CPULIST=\n"
        );
    }

    #[test]
    fn irqbalance_discovery() {
        let dir = tempfile::tempdir().unwrap();
        let root = HostRoot::new(dir.path()).unwrap();
        root.put("/proc/1/comm", "systemd\n");
        root.put("/proc/self/comm", "irqbalance\n");
        let s = discover_irqbalance(&root);
        assert!(!s.running);
        assert_eq!(s.config_file, None);
        root.put("/proc/812/comm", "irqbalance\n");
        root.put(
            "/etc/sysconfig/irqbalance",
            "IRQBALANCE_BANNED_CPULIST=0,2\n",
        );
        let s = discover_irqbalance(&root);
        assert!(s.running);
        assert_eq!(s.config_file.as_deref(), Some("/etc/sysconfig/irqbalance"));
        assert_eq!(s.banned_cpus.map(|c| c.to_list()).as_deref(), Some("0,2"));
    }

    #[test]
    fn tuned_force_latency_follows_includes() {
        let dir = tempfile::tempdir().unwrap();
        let root = HostRoot::new(dir.path()).unwrap();
        let t = discover_tuned(&root);
        assert!(!t.installed);
        assert_eq!(t.active_profile, None);
        root.put(
            "/usr/lib/tuned/latency-performance/tuned.conf",
            "[main]\nsummary=x\n[cpu]\nforce_latency=cstate.id_no_zero:1|3\ngovernor=performance\n",
        );
        root.put(
            "/etc/tuned/mine/tuned.conf",
            "[main]\ninclude=latency-performance\n[sysctl]\nvm.swappiness=10\n",
        );
        root.put(
            "/etc/tuned/mine-dropped/tuned.conf",
            "[main]\ninclude=mine\n[cpu]\ndrop=force_latency\n",
        );
        root.put("/etc/tuned/loop/tuned.conf", "[main]\ninclude=loop\n");
        root.put("/etc/tuned/active_profile", "mine\n");
        let t = discover_tuned(&root);
        assert!(t.installed);
        assert_eq!(t.active_profile.as_deref(), Some("mine"));
        assert!(t.force_latency_active);
        assert!(profile_sets_force_latency(&root, "latency-performance"));
        assert!(!profile_sets_force_latency(&root, "mine-dropped"));
        assert!(!profile_sets_force_latency(&root, "loop"));
        assert!(!profile_sets_force_latency(&root, "../etc"));
        assert_eq!(
            tuned_profile_conf_path(&root, "latency-performance").as_deref(),
            Some("/usr/lib/tuned/latency-performance/tuned.conf")
        );
        assert_eq!(tuned_profile_conf_path(&root, ".."), None);
        root.put("/etc/tuned/active_profile", "\n");
        assert_eq!(discover_tuned(&root).active_profile, None);
    }
}
