//! A mesh of hosts on one machine: network namespaces joined by veth pairs
//! to a bridge that lives in a namespace of its own, so no address, link
//! or route is added outside the namespaces this module makes.
//!
//! Why it exists: a mesh of exporters needs one address per host (each
//! exporter's responder, its self-detection, its peers' view of it), which
//! loopback cannot give. Needs root (`ip netns`, iproute2, installed by
//! scripts/setup); a test that cannot make one fails, it never skips.
//!
//! Cleanup: every name starts with `ibxn<pid>-<n>-` (n counts the meshes
//! of the process); [`NetnsMesh`] deletes
//! its namespaces on drop (also when the test panics; deleting a namespace
//! deletes its veth ends and bridge), and [`NetnsMesh::new`] first deletes
//! the namespaces of earlier runs whose process is gone (a crashed run).

use std::process::{Command, Output};

/// The subnet of every mesh (one /24, hosts `.1` upward).
pub const SUBNET: &str = "10.213.0";

/// A set of namespaces on one bridge; deleted on drop.
pub struct NetnsMesh {
    prefix: String,
    hosts: usize,
    made: Vec<String>,
}

fn ip(args: &[&str]) -> Result<Output, String> {
    let out = Command::new("ip").args(args).output().map_err(|e| {
        format!(
            "running `ip {}`: {e} (install iproute2: scripts/setup)",
            args.join(" ")
        )
    })?;
    if out.status.success() {
        Ok(out)
    } else {
        Err(format!(
            "`ip {}` failed: {} (these tests need root for ip netns)",
            args.join(" "),
            String::from_utf8_lossy(&out.stderr).trim()
        ))
    }
}

/// Deletes namespaces left by earlier runs whose process is gone.
fn clean_stale() {
    let Ok(out) = ip(&["netns", "list"]) else {
        return;
    };
    for line in String::from_utf8_lossy(&out.stdout).lines() {
        let name = line.split_whitespace().next().unwrap_or("");
        let Some(rest) = name.strip_prefix("ibxn") else {
            continue;
        };
        let pid = rest.split('-').next().unwrap_or("");
        if pid.parse::<u32>().is_ok() && !std::path::Path::new(&format!("/proc/{pid}")).exists() {
            let _ = ip(&["netns", "delete", name]);
        }
    }
}

impl NetnsMesh {
    /// `hosts` namespaces with addresses `10.213.0.1`… on one bridge.
    pub fn new(hosts: usize) -> Result<NetnsMesh, String> {
        assert!((1..=250).contains(&hosts), "1..=250 hosts");
        clean_stale();
        static MESHES: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);
        let n = MESHES.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let mut m = NetnsMesh {
            prefix: format!("ibxn{}-{n}-", std::process::id()),
            hosts,
            made: Vec::new(),
        };
        let br = m.bridge_ns();
        m.add_ns(&br)?;
        ip(&["-n", &br, "link", "add", "br0", "type", "bridge"])?;
        ip(&["-n", &br, "link", "set", "br0", "up"])?;
        for i in 0..hosts {
            let ns = m.ns(i);
            m.add_ns(&ns)?;
            let v = format!("v{i}");
            ip(&[
                "-n", &br, "link", "add", &v, "type", "veth", "peer", "name", "eth0", "netns", &ns,
            ])?;
            ip(&["-n", &br, "link", "set", &v, "master", "br0", "up"])?;
            ip(&[
                "-n",
                &ns,
                "addr",
                "add",
                &format!("{}/24", m.ip(i)),
                "dev",
                "eth0",
            ])?;
            ip(&["-n", &ns, "link", "set", "eth0", "up"])?;
        }
        Ok(m)
    }

    fn add_ns(&mut self, name: &str) -> Result<(), String> {
        ip(&["netns", "add", name])?;
        self.made.push(name.to_string());
        ip(&["-n", name, "link", "set", "lo", "up"])?;
        Ok(())
    }

    fn bridge_ns(&self) -> String {
        format!("{}br", self.prefix)
    }

    /// Host `i`'s namespace.
    pub fn ns(&self, i: usize) -> String {
        assert!(i < self.hosts);
        format!("{}h{i}", self.prefix)
    }

    /// Host `i`'s address.
    pub fn ip(&self, i: usize) -> String {
        format!("{SUBNET}.{}", i + 1)
    }

    /// Hosts.
    pub fn len(&self) -> usize {
        self.hosts
    }

    /// Whether it has no host.
    pub fn is_empty(&self) -> bool {
        self.hosts == 0
    }

    /// `program` to run in host `i`'s namespace (`ip netns exec` execs it:
    /// the child's pid is the program's).
    pub fn command(&self, i: usize, program: impl AsRef<std::ffi::OsStr>) -> Command {
        let mut c = Command::new("ip");
        c.args(["netns", "exec", &self.ns(i)]).arg(program);
        c
    }

    /// The namespaces it made (for a leak check).
    pub fn namespaces(&self) -> Vec<String> {
        self.made.clone()
    }
}

impl Drop for NetnsMesh {
    fn drop(&mut self) {
        for ns in self.made.iter().rev() {
            let _ = ip(&["netns", "delete", ns]);
        }
    }
}

/// Whether a namespace of that name exists now.
pub fn exists(name: &str) -> bool {
    ip(&["netns", "list"])
        .map(|o| {
            String::from_utf8_lossy(&o.stdout)
                .lines()
                .any(|l| l.split_whitespace().next() == Some(name))
        })
        .unwrap_or(false)
}
