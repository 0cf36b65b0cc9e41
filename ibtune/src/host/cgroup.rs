//! cgroup discovery: which hierarchy (v2 partitions or v1 cpusets) ibtune
//! can use to fence the real-time CPUs off from everything else.
//!
//! Why it exists: the two hierarchies have different files and semantics
//! (`cpuset.cpus.partition` against `cpu_exclusive`, `noprefix` mounts), and
//! hybrid hosts mount both; the choice must be made once, explicitly.

use super::kernel::parse_release;
use super::model::{CgroupInfo, CgroupMode};
use super::root::HostRoot;

/// One line of `/proc/mounts`.
///
/// Why it exists: cgroup discovery needs the mount points and options of
/// the cgroup filesystems, and tests need to feed in sample tables.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Mount {
    /// Source (`cgroup2`, `/dev/sda1`, ...).
    pub device: String,
    /// Mount point, with the kernel's octal escapes (`\040`) decoded.
    pub mount_point: String,
    /// Filesystem type (`cgroup2`, `cgroup`, ...).
    pub fstype: String,
    /// Mount options, split on commas.
    pub options: Vec<String>,
}

impl Mount {
    /// True when the mount has this option (`cpuset`, `noprefix`, ...).
    pub fn has_option(&self, opt: &str) -> bool {
        self.options.iter().any(|o| o == opt)
    }
}

/// Decodes the octal escapes (`\040` space, `\011` tab, `\012` newline,
/// `\134` backslash) the kernel uses in `/proc/mounts` fields.
fn unescape_mount_field(s: &str) -> String {
    let bytes = s.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        if bytes[i] == b'\\' && i + 3 < bytes.len() {
            let oct = &bytes[i + 1..i + 4];
            if oct.iter().all(|b| (b'0'..=b'7').contains(b)) {
                let v = oct
                    .iter()
                    .fold(0u32, |acc, b| acc * 8 + u32::from(b - b'0'));
                if let Ok(b) = u8::try_from(v) {
                    out.push(b);
                    i += 4;
                    continue;
                }
            }
        }
        out.push(bytes[i]);
        i += 1;
    }
    String::from_utf8_lossy(&out).into_owned()
}

/// Parses `/proc/mounts` (or `/proc/self/mounts`). Lines with fewer than
/// three fields are skipped. Never panics.
pub fn parse_mounts(text: &str) -> Vec<Mount> {
    text.lines()
        .filter_map(|line| {
            let mut f = line.split_whitespace();
            let device = unescape_mount_field(f.next()?);
            let mount_point = unescape_mount_field(f.next()?);
            let fstype = f.next()?.to_string();
            let options = f
                .next()
                .map(|o| {
                    o.split(',')
                        .filter(|x| !x.is_empty())
                        .map(str::to_string)
                        .collect()
                })
                .unwrap_or_default();
            Some(Mount {
                device,
                mount_point,
                fstype,
                options,
            })
        })
        .collect()
}

/// True when the kernel release has `cpuset.cpus.exclusive` (Linux 6.7+).
///
/// Why it exists: v2 partitions that do not start at the root need it.
pub fn release_has_cpus_exclusive(release: Option<&str>) -> bool {
    release.and_then(parse_release).is_some_and(|v| v >= (6, 7))
}

/// Works out the cgroup setup from a mount table and the kernel release.
///
/// Mode is V2 when the cgroup2 root lists `cpuset` in `cgroup.controllers`,
/// else V1 when a v1 hierarchy with the `cpuset` option is mounted, else
/// None. The mount points are host paths, read through `root`.
pub fn cgroup_info_from_mounts(
    root: &HostRoot,
    mounts: &[Mount],
    osrelease: Option<&str>,
) -> CgroupInfo {
    let v2: Vec<&Mount> = mounts.iter().filter(|m| m.fstype == "cgroup2").collect();
    // Prefer the canonical location when cgroup2 is mounted more than once.
    let v2_mount = v2
        .iter()
        .find(|m| m.mount_point == "/sys/fs/cgroup")
        .or_else(|| v2.first())
        .map(|m| m.mount_point.clone());
    let v2_controllers: Vec<String> = v2_mount
        .as_deref()
        .and_then(|mp| root.read_opt(&format!("{}/cgroup.controllers", mp.trim_end_matches('/'))))
        .map(|t| t.split_whitespace().map(str::to_string).collect())
        .unwrap_or_default();
    let v1 = mounts
        .iter()
        .find(|m| m.fstype == "cgroup" && m.has_option("cpuset"));
    let mode = if v2_controllers.iter().any(|c| c == "cpuset") {
        CgroupMode::V2
    } else if v1.is_some() {
        CgroupMode::V1
    } else {
        CgroupMode::None
    };
    CgroupInfo {
        mode,
        v2_mount,
        v2_controllers,
        v1_cpuset_mount: v1.map(|m| m.mount_point.clone()),
        v1_noprefix: v1.is_some_and(|m| m.has_option("noprefix")),
        v2_has_exclusive: release_has_cpus_exclusive(osrelease),
    }
}

/// Reads `/proc/mounts` (falling back to `/proc/self/mounts`) and works out
/// the cgroup setup.
///
/// Why it exists: discovery's entry point for cgroups.
pub fn discover_cgroup(root: &HostRoot, osrelease: Option<&str>) -> CgroupInfo {
    let text = root
        .read("/proc/mounts")
        .or_else(|_| root.read("/proc/self/mounts"))
        .unwrap_or_default();
    cgroup_info_from_mounts(root, &parse_mounts(&text), osrelease)
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    const HYBRID: &str = "sysfs /sys sysfs rw,nosuid,nodev,noexec,relatime 0 0\n\
tmpfs /sys/fs/cgroup tmpfs rw,relatime,mode=755 0 0\n\
cgroup /sys/fs/cgroup/cpu cgroup rw,relatime,cpu 0 0\n\
cgroup /sys/fs/cgroup/cpuset cgroup rw,relatime,cpuset,noprefix 0 0\n\
cgroup2 /sys/fs/cgroup/unified cgroup2 rw,relatime 0 0\n\
/dev/sda1 /mnt/my\\040disk ext4 rw 0 0\n\
broken\n\
\n";

    #[test]
    fn parses_mounts() {
        let m = parse_mounts(HYBRID);
        assert_eq!(m.len(), 6);
        assert_eq!(m[3].fstype, "cgroup");
        assert!(m[3].has_option("cpuset"));
        assert!(m[3].has_option("noprefix"));
        assert_eq!(m[5].mount_point, "/mnt/my disk");
        assert_eq!(unescape_mount_field("a\\134b\\"), "a\\b\\");
        assert_eq!(unescape_mount_field("x\\09"), "x\\09");
    }

    #[test]
    fn hybrid_host_is_v1() {
        let dir = tempfile::tempdir().unwrap();
        let root = HostRoot::new(dir.path()).unwrap();
        root.mkdir_all("/sys/fs/cgroup/unified").unwrap();
        root.write("/sys/fs/cgroup/unified/cgroup.controllers", b"\n")
            .unwrap();
        let c = cgroup_info_from_mounts(&root, &parse_mounts(HYBRID), Some("5.15.0-1"));
        assert_eq!(c.mode, CgroupMode::V1);
        assert_eq!(c.v2_mount.as_deref(), Some("/sys/fs/cgroup/unified"));
        assert!(c.v2_controllers.is_empty());
        assert_eq!(c.v1_cpuset_mount.as_deref(), Some("/sys/fs/cgroup/cpuset"));
        assert!(c.v1_noprefix);
        assert!(!c.v2_has_exclusive);
    }

    #[test]
    fn unified_host_is_v2() {
        let dir = tempfile::tempdir().unwrap();
        let root = HostRoot::new(dir.path()).unwrap();
        root.mkdir_all("/sys/fs/cgroup").unwrap();
        root.write(
            "/sys/fs/cgroup/cgroup.controllers",
            b"cpuset cpu io memory pids\n",
        )
        .unwrap();
        let mounts = parse_mounts("cgroup2 /sys/fs/cgroup cgroup2 rw,nsdelegate 0 0\n");
        let c = cgroup_info_from_mounts(&root, &mounts, Some("6.8.0-45-generic"));
        assert_eq!(c.mode, CgroupMode::V2);
        assert_eq!(c.v2_controllers, ["cpuset", "cpu", "io", "memory", "pids"]);
        assert_eq!(c.v1_cpuset_mount, None);
        assert!(c.v2_has_exclusive);
        // Without cpuset delegated to the root, and no v1 cpuset: None.
        root.write("/sys/fs/cgroup/cgroup.controllers", b"cpu io\n")
            .unwrap();
        let c = cgroup_info_from_mounts(&root, &mounts, Some("6.6.1"));
        assert_eq!(c.mode, CgroupMode::None);
        assert!(!c.v2_has_exclusive);
    }

    proptest! {
        #[test]
        fn parse_mounts_never_panics(s in "\\PC{0,200}") {
            let _ = parse_mounts(&s);
        }

        #[test]
        fn parse_mounts_never_panics_on_escapes(s in "([a-z\\\\0-9 ,]{0,20}\n){0,6}") {
            let _ = parse_mounts(&s);
        }
    }
}
