//! Latency profiles: the TOML files under `profiles/`.
//!
//! Why it exists: a profile is the user's statement of what the host should
//! look like during a run. This module parses it strictly (unknown keys are
//! errors) keeping the position of every value, so that [`resolve`] can
//! reject "CPU 99 does not exist" at `file:line:column` with a fix.
//!
//! The schema, section by section (see `profiles/*.toml` for full examples):
//!
//! ```toml
//! [profile]
//! name = "busy-poll"
//! description = "one HCA, busy polling"
//!
//! [[cpuset]]                        # zero or more
//! name = "rt0"
//! cpus = "4 cores local to mlx5_0"  # or "16,18,20,22" or [16, 18, 20, 22]
//! mems = "local"                    # or "0" or [0]; default "local"
//! exclusive = true                  # no other cpuset may use these CPUs
//! isolated = true                   # v2: partition "isolated"; v1: no load balancing
//!
//! [[irq]]                           # IRQ placement, per device
//! device = "mlx5_0"
//! cpus = "cpuset:rt0"               # or "local" or a CPU list
//! mode = "spread"                   # one CPU per IRQ, round robin; or "single"
//! ban_irqbalance = true             # keep irqbalance off these CPUs
//!
//! [numa]
//! policy = "bind"                   # memory policy for `ibtune run`
//!
//! [tuned]
//! base = "latency-performance"
//! drop = ["force_latency"]
//! [tuned.settings]
//! "sysctl.kernel.timer_migration" = "0"
//!
//! [dma_latency]
//! us = 0                            # or "off"
//!
//! [sysctl]
//! "kernel.sched_rt_runtime_us" = "-1"
//!
//! [cpu]
//! governor = "performance"
//! max_cstate_latency_us = 10        # disable deeper idle states on cpuset CPUs
//! thp = "never"
//!
//! [[hugepages]]                     # per NUMA node, through nodeN/.../nr_hugepages
//! size = "2M"                       # or "1G"
//! count = 512                       # pages on each node
//! nodes = "local"                   # the cpusets' memory nodes (default), or [0] or "0-1"
//!
//! [boot]
//! isolcpus = true                   # isolcpus/nohz_full/rcu_nocbs for isolated cpusets
//! nohz_full = true
//! rcu_nocbs = true
//! irqaffinity = true                # irqaffinity=<the other online CPUs>
//! max_cstate = true                 # [cpu] max_cstate_latency_us at boot, every CPU
//! required = false                  # true: a missing parameter counts as drift
//! ```

mod error;
pub mod resolve;
pub mod rules;
mod schema;
pub mod suggest;

pub use error::{ProfileError, SourcePos};
pub use resolve::{resolve, Resolved, ResolvedCpuset, ResolvedHugepages, ResolvedIrq};
pub use schema::*;

use std::path::{Path, PathBuf};

impl Profile {
    /// Reads and parses a profile file. A bare name (`thesis-2hca`) is
    /// looked up as `profiles/<name>.toml`, `/etc/ibtune/profiles/<name>.toml` and
    /// `/usr/share/ibtune/profiles/<name>.toml` (the package's).
    pub fn load(path: &Path) -> Result<Profile, ProfileError> {
        let path = locate(path);
        // A regular file of at most 1 MiB: a FIFO or /dev/zero named as a
        // profile is refused at once instead of hanging or filling memory.
        let text =
            ibhost::file::read_small_text(&path, ibhost::file::MAX_SMALL_FILE).map_err(|e| {
                ProfileError::Io {
                    path: path.clone(),
                    message: match e {
                        ibhost::file::SmallFileError::Io { source, .. } => source.to_string(),
                        other => other.to_string(),
                    },
                }
            })?;
        Profile::parse(&path, &text)
    }

    /// Parses profile text; `path` is only used in messages.
    pub fn parse(path: &Path, text: &str) -> Result<Profile, ProfileError> {
        let mut p: Profile = toml::from_str(text).map_err(|e| {
            let span = e.span().unwrap_or(0..0);
            let message = if e.message().contains("untagged enum CpuField") {
                "not a CPU or node list".to_string()
            } else if e.message().contains("untagged enum ScalarValue") {
                "not a number, boolean or string".to_string()
            } else {
                e.message().trim().to_string()
            };
            ProfileError::at(path, text, span, message, toml_fix(e.message()))
        })?;
        p.source = Source {
            path: path.to_path_buf(),
            text: text.to_string(),
        };
        rules::check(&p)?;
        Ok(p)
    }

    /// An error at a span of this profile's text.
    pub fn err(
        &self,
        span: std::ops::Range<usize>,
        message: impl Into<String>,
        fix: impl Into<String>,
    ) -> ProfileError {
        ProfileError::at(
            &self.source.path,
            &self.source.text,
            span,
            message.into(),
            fix.into(),
        )
    }

    /// The profile's name.
    pub fn name(&self) -> &str {
        self.profile.name.get_ref()
    }
}

/// Finds a profile by path, or by bare name in the usual folders.
fn locate(p: &Path) -> PathBuf {
    if p.exists() || p.components().count() > 1 || p.extension().is_some() {
        return p.to_path_buf();
    }
    let name = format!("{}.toml", p.display());
    let mut dirs = vec![
        PathBuf::from("profiles"),
        PathBuf::from("/etc/ibtune/profiles"),
        // The Debian package's copies (scripts/package).
        PathBuf::from("/usr/share/ibtune/profiles"),
    ];
    if let Ok(exe) = std::env::current_exe() {
        // Running from a checkout: target/<profile>/ibtune -> ../../profiles.
        if let Some(top) = exe
            .parent()
            .and_then(|d| d.parent())
            .and_then(|d| d.parent())
        {
            dirs.push(top.join("profiles"));
        }
    }
    dirs.push(PathBuf::from(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../profiles"
    )));
    dirs.into_iter()
        .map(|d| d.join(&name))
        .find(|c| c.exists())
        .unwrap_or_else(|| p.to_path_buf())
}

fn toml_fix(msg: &str) -> String {
    if msg.contains("unknown field") {
        "remove or rename the key; the schema is in profiles/README.md".into()
    } else if msg.contains("missing field") {
        "add the missing key".into()
    } else if msg.contains("untagged enum CpuField") {
        "write a CPU list as an array ([16, 18]), a string (\"16,18,20-22\"), or \"N cores local to <device>\"".into()
    } else if msg.contains("untagged enum ScalarValue") {
        "write a number, true/false, or a string".into()
    } else if msg.contains("unknown variant") {
        "use one of the values the message lists (they are lower case)".into()
    } else if msg.contains("invalid type") || msg.contains("invalid value") {
        "give a value of the type the message names; the schema is in profiles/README.md".into()
    } else {
        "fix the TOML syntax at this position".into()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(t: &str) -> Result<Profile, ProfileError> {
        Profile::parse(Path::new("t.toml"), t)
    }

    #[test]
    fn minimal_profile() {
        let p = parse("[profile]\nname = \"x\"\n").unwrap();
        assert_eq!(p.name(), "x");
        assert!(p.cpuset.is_empty());
    }

    #[test]
    fn unknown_key_has_position() {
        let e =
            parse("[profile]\nname = \"x\"\n\n[[cpuset]]\nname = \"a\"\ncpus = [1]\nbogus = 1\n")
                .unwrap_err();
        let s = e.to_string();
        assert!(s.starts_with("t.toml:7:1:"), "{s}");
        assert!(s.contains("bogus"), "{s}");
    }

    #[test]
    fn bad_name_rejected() {
        let e = parse("[profile]\nname = \"a b\"\n").unwrap_err();
        assert!(e.to_string().contains("t.toml:2:8"), "{e}");
    }

    #[test]
    fn scalar_values() {
        let p = parse("[profile]\nname=\"x\"\n[sysctl]\n\"vm.swappiness\" = 10\n\"a.b\" = \"-1\"\n\"c.d\" = true\n")
            .unwrap();
        let v: Vec<String> = p
            .sysctl
            .values()
            .map(|v| v.get_ref().as_setting())
            .collect();
        assert_eq!(v, ["-1", "1", "10"]);
    }
}
