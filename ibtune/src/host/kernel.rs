//! Kernel-level settings: the command line, sysctls, transparent huge
//! pages, `/dev/cpu_dma_latency` and the release.
//!
//! Why it exists: a latency profile is only as good as the boot parameters
//! under it (isolcpus, nohz_full, rcu_nocbs) and the runtime knobs it sets;
//! these readers give discovery, verify and drift checks one view of them.

use super::model::KernelCmdline;
use super::root::HostRoot;

/// The sysctls latency profiles may set, so discovery reports their current
/// values (and verify can diff them) without scanning all of `/proc/sys`.
pub const PROFILE_SYSCTLS: &[&str] = &[
    "kernel.sched_rt_runtime_us",
    "kernel.numa_balancing",
    "kernel.timer_migration",
    "kernel.watchdog",
    "vm.swappiness",
    "vm.stat_interval",
    "net.core.busy_read",
    "net.core.busy_poll",
];

/// Splits a command line into parameters the way the kernel does: on
/// whitespace, except inside double quotes.
fn split_params(text: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut cur = String::new();
    let mut in_quote = false;
    let mut has_token = false;
    for c in text.chars() {
        if c == '"' {
            in_quote = !in_quote;
            has_token = true;
            cur.push(c);
        } else if c.is_whitespace() && !in_quote {
            if has_token {
                out.push(std::mem::take(&mut cur));
                has_token = false;
            }
        } else {
            cur.push(c);
            has_token = true;
        }
    }
    if has_token {
        out.push(cur);
    }
    out
}

/// Parses `/proc/cmdline`, picking out the latency-relevant parameters.
///
/// The last occurrence of a parameter wins (as in the kernel); quoted values
/// (`isolcpus="domain,2-7"`, `"isolcpus=2-7"`) are unquoted. Never panics.
pub fn parse_cmdline(text: &str) -> KernelCmdline {
    let mut c = KernelCmdline {
        raw: text.trim().to_string(),
        ..Default::default()
    };
    for param in split_params(text) {
        let unq: String = param.chars().filter(|&ch| ch != '"').collect();
        let Some((key, value)) = unq.split_once('=') else {
            continue;
        };
        let value = value.to_string();
        match key {
            "isolcpus" => c.isolcpus = Some(value),
            "nohz_full" => c.nohz_full = Some(value),
            "rcu_nocbs" => c.rcu_nocbs = Some(value),
            "irqaffinity" => c.irqaffinity = Some(value),
            _ => {}
        }
    }
    c
}

/// The value of kernel parameter `name` on a command line (the last
/// occurrence wins, as in the kernel; quotes removed); `Some("")` for a
/// bare flag; `None` when absent. Words after a lone `--` go to init and
/// are not kernel parameters.
///
/// Why it exists: `verify` compares every boot parameter a profile asks
/// for, not only the ones discovery reports.
pub fn cmdline_param(text: &str, name: &str) -> Option<String> {
    let mut found = None;
    for param in split_params(text) {
        if param == "--" {
            break;
        }
        let unq: String = param.chars().filter(|&ch| ch != '"').collect();
        let (key, value) = unq.split_once('=').unwrap_or((unq.as_str(), ""));
        if key == name {
            found = Some(value.to_string());
        }
    }
    found
}

/// Reads and parses `/proc/cmdline`; an empty line when it is unreadable.
///
/// Why it exists: discovery's entry point for the boot parameters.
pub fn read_cmdline(root: &HostRoot) -> KernelCmdline {
    parse_cmdline(&root.read("/proc/cmdline").unwrap_or_default())
}

/// A sysctl name that cannot be mapped safely to a `/proc/sys` path.
///
/// Why it exists: sysctl names come from profile files; a name with `..` or
/// `/` would let a profile read or write outside `/proc/sys`.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("invalid sysctl name {name:?}: {reason} (expected dotted form such as \"vm.swappiness\")")]
pub struct SysctlNameError {
    /// The name given.
    pub name: String,
    /// Why it was rejected.
    pub reason: &'static str,
}

/// Maps a dotted sysctl name to its file: `vm.swappiness` ->
/// `/proc/sys/vm/swappiness`. Names that are empty, contain `/` or `..`,
/// have empty components or whitespace are rejected.
pub fn sysctl_path(name: &str) -> Result<String, SysctlNameError> {
    let err = |reason| SysctlNameError {
        name: name.to_string(),
        reason,
    };
    if name.is_empty() {
        return Err(err("empty name"));
    }
    if name.contains('/') {
        return Err(err("contains '/'"));
    }
    if name.contains("..") {
        return Err(err("contains '..'"));
    }
    if name.chars().any(|c| c.is_whitespace() || c.is_control()) {
        return Err(err("contains whitespace or control characters"));
    }
    if name.split('.').any(|p| p.is_empty()) {
        return Err(err("has an empty component"));
    }
    Ok(format!("/proc/sys/{}", name.replace('.', "/")))
}

/// The current value of a sysctl (trimmed), `None` when the name is invalid
/// or the file is absent or unreadable.
///
/// Why it exists: discovery records the profile sysctls' values; verify
/// compares them against the profile.
pub fn read_sysctl(root: &HostRoot, name: &str) -> Option<String> {
    let p = sysctl_path(name).ok()?;
    root.read_opt(&p)
}

/// The bracketed word of a kernel "choice" file: `always [madvise] never`
/// gives `madvise`.
///
/// Why it exists: THP and similar sysfs knobs print every choice and mark
/// the active one with brackets.
pub fn bracketed_choice(text: &str) -> Option<String> {
    let start = text.find('[')?;
    let rest = &text[start + 1..];
    let end = rest.find(']')?;
    let w = rest[..end].trim();
    (!w.is_empty()).then(|| w.to_string())
}

/// The transparent huge pages mode (`always`, `madvise`, `never`) from
/// `/sys/kernel/mm/transparent_hugepage/enabled`.
///
/// Why it exists: THP compaction and khugepaged cause latency spikes;
/// profiles may want `never` or `madvise`.
pub fn read_thp_mode(root: &HostRoot) -> Option<String> {
    root.read_opt("/sys/kernel/mm/transparent_hugepage/enabled")
        .and_then(|t| bracketed_choice(&t))
}

/// Decodes the contents of `/dev/cpu_dma_latency`: the live kernel gives
/// exactly 4 bytes, a little-endian s32; snapshots hold a text decimal.
///
/// A 4-byte text such as `100\n` is ambiguous, so `live` decides: on the
/// live kernel 4 bytes are always binary, in a snapshot text is tried first
/// and 4 non-text bytes still decode as binary (a raw capture).
///
/// Why it exists: the same reader must handle the live device and fixtures.
pub fn decode_cpu_dma_latency(bytes: &[u8], live: bool) -> Option<i64> {
    let binary = <[u8; 4]>::try_from(bytes)
        .ok()
        .map(|b| i64::from(i32::from_le_bytes(b)));
    if live && binary.is_some() {
        return binary;
    }
    std::str::from_utf8(bytes)
        .ok()
        .and_then(|t| t.trim().parse::<i64>().ok())
        .or(binary)
}

/// The current CPU DMA latency limit in microseconds, if readable (the live
/// device needs root).
///
/// Why it exists: tuned's `force_latency` and ibtune's own hold both work
/// through this device; it shows whether deep C-states are blocked.
pub fn read_cpu_dma_latency(root: &HostRoot) -> Option<i64> {
    const DEV: &str = "/dev/cpu_dma_latency";
    let bytes = if root.is_live() {
        // The live device is a character device: read its 4 bytes only.
        use std::io::Read;
        let mut b = Vec::new();
        root.open_char_device(DEV, false)
            .ok()?
            .take(64)
            .read_to_end(&mut b)
            .ok()?;
        b
    } else {
        root.read_bytes(DEV).ok()?
    };
    decode_cpu_dma_latency(&bytes, root.is_live())
}

/// The kernel release (`/proc/sys/kernel/osrelease`), if readable.
///
/// Why it exists: features such as `cpuset.cpus.exclusive` depend on it.
pub fn read_osrelease(root: &HostRoot) -> Option<String> {
    root.read_opt("/proc/sys/kernel/osrelease")
        .filter(|s| !s.is_empty())
}

/// Major and minor numbers of a kernel release string (`6.8.0-45-generic`
/// gives `(6, 8)`), `None` if it does not start with them.
///
/// Why it exists: kernel feature checks compare versions numerically.
pub fn parse_release(release: &str) -> Option<(u32, u32)> {
    let mut parts = release.trim().split('.');
    let lead_num = |s: &str| -> Option<u32> {
        let d: String = s.chars().take_while(|c| c.is_ascii_digit()).collect();
        d.parse().ok()
    };
    let major = lead_num(parts.next()?)?;
    let minor = parts.next().and_then(lead_num).unwrap_or(0);
    Some((major, minor))
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn one_parameter_of_a_command_line() {
        let line = "BOOT_IMAGE=/vmlinuz quiet isolcpus=1 \"nohz_full=2-3\" isolcpus=domain,4 nosmt -- isolcpus=9";
        assert_eq!(cmdline_param(line, "isolcpus").as_deref(), Some("domain,4"));
        assert_eq!(cmdline_param(line, "nohz_full").as_deref(), Some("2-3"));
        assert_eq!(cmdline_param(line, "nosmt").as_deref(), Some(""));
        assert_eq!(cmdline_param(line, "rcu_nocbs"), None);
        assert_eq!(cmdline_param("", "isolcpus"), None);
    }

    #[test]
    fn cmdline_params() {
        let c = parse_cmdline(
            "BOOT_IMAGE=/vmlinuz root=UUID=x ro isolcpus=domain,managed_irq,2-7 \
             nohz_full=2-7 rcu_nocbs=2-7 irqaffinity=0-1 quiet\n",
        );
        assert_eq!(c.isolcpus.as_deref(), Some("domain,managed_irq,2-7"));
        assert_eq!(c.nohz_full.as_deref(), Some("2-7"));
        assert_eq!(c.rcu_nocbs.as_deref(), Some("2-7"));
        assert_eq!(c.irqaffinity.as_deref(), Some("0-1"));
        assert!(c.raw.ends_with("quiet"));
    }

    #[test]
    fn cmdline_last_wins_and_quotes() {
        let c = parse_cmdline("isolcpus=1 isolcpus=\"3-5\" \"nohz_full=4 5\" rcu_nocbs= x=\"a b\"");
        assert_eq!(c.isolcpus.as_deref(), Some("3-5"));
        assert_eq!(c.nohz_full.as_deref(), Some("4 5"));
        assert_eq!(c.rcu_nocbs.as_deref(), Some(""));
        assert_eq!(c.irqaffinity, None);
        let e = parse_cmdline("");
        assert_eq!(e.raw, "");
        assert_eq!(e.isolcpus, None);
        // Unbalanced quote: no panic, best effort.
        let u = parse_cmdline("isolcpus=\"2-3 quiet");
        assert_eq!(u.isolcpus.as_deref(), Some("2-3 quiet"));
    }

    #[test]
    fn sysctl_paths() {
        assert_eq!(
            sysctl_path("vm.swappiness").unwrap(),
            "/proc/sys/vm/swappiness"
        );
        assert_eq!(
            sysctl_path("net.core.busy_poll").unwrap(),
            "/proc/sys/net/core/busy_poll"
        );
        for bad in [
            "",
            "vm/swappiness",
            "..",
            "vm..x",
            "vm.",
            ".vm",
            "vm swap",
            "../etc",
        ] {
            assert!(sysctl_path(bad).is_err(), "{bad:?}");
        }
    }

    #[test]
    fn choices_and_latency_and_release() {
        assert_eq!(
            bracketed_choice("always [madvise] never\n").as_deref(),
            Some("madvise")
        );
        assert_eq!(bracketed_choice("always madvise never"), None);
        assert_eq!(bracketed_choice("[] x"), None);
        let bin = |v: i32| v.to_le_bytes();
        assert_eq!(decode_cpu_dma_latency(&bin(0), true), Some(0));
        assert_eq!(
            decode_cpu_dma_latency(&bin(2_000_000_000), true),
            Some(2_000_000_000)
        );
        assert_eq!(
            decode_cpu_dma_latency(&bin(2_000_000_000), false),
            Some(2_000_000_000)
        );
        assert_eq!(decode_cpu_dma_latency(&bin(-1), true), Some(-1));
        assert_eq!(decode_cpu_dma_latency(b"3\n", false), Some(3));
        assert_eq!(decode_cpu_dma_latency(b"100\n", false), Some(100));
        assert_eq!(decode_cpu_dma_latency(b"100\n", true), Some(0x0a30_3031));
        assert_eq!(
            decode_cpu_dma_latency(b"2000000000\n", false),
            Some(2_000_000_000)
        );
        assert_eq!(decode_cpu_dma_latency(b"", false), None);
        assert_eq!(decode_cpu_dma_latency(b"abc\n\n", false), None);
        assert_eq!(parse_release("6.8.0-45-generic"), Some((6, 8)));
        assert_eq!(parse_release("6.18.44-fc-v445"), Some((6, 18)));
        assert_eq!(parse_release("5.14.0-427.el9.x86_64"), Some((5, 14)));
        assert_eq!(parse_release("7"), Some((7, 0)));
        assert_eq!(parse_release("x"), None);
    }

    #[test]
    fn reads_through_root() {
        let dir = tempfile::tempdir().unwrap();
        let root = HostRoot::new(dir.path()).unwrap();
        root.mkdir_all("/proc/sys/vm").unwrap();
        root.write("/proc/sys/vm/swappiness", b"60\n").unwrap();
        assert_eq!(read_sysctl(&root, "vm.swappiness").as_deref(), Some("60"));
        assert_eq!(read_sysctl(&root, "vm.stat_interval"), None);
        assert_eq!(read_sysctl(&root, "../x"), None);
        root.mkdir_all("/dev").unwrap();
        root.write("/dev/cpu_dma_latency", b"0\n").unwrap();
        assert_eq!(read_cpu_dma_latency(&root), Some(0));
        assert_eq!(read_thp_mode(&root), None);
        assert_eq!(read_cmdline(&root).raw, "");
    }

    proptest! {
        #[test]
        fn parse_cmdline_never_panics(s in "\\PC{0,200}") {
            let _ = parse_cmdline(&s);
        }

        #[test]
        fn parse_cmdline_never_panics_on_likely_text(s in "([a-z_]{0,9}=?[\"0-9,\\- ]{0,12} ?){0,10}") {
            let _ = parse_cmdline(&s);
        }

        #[test]
        fn sysctl_path_never_panics(s in "\\PC{0,40}") {
            if let Ok(p) = sysctl_path(&s) {
                prop_assert!(!p[1..].contains(".."));
            }
        }
    }
}
