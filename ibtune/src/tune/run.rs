//! Starting a program inside the profile: its cgroup, CPUs, NUMA memory
//! policy and real-time priority.
//!
//! Why it exists: `ibtune run -- CMD` is how a user launches the RDMA
//! real-time process so that it lands exactly where the profile reserved
//! room for it. Everything is set on the current process and then
//! `execve(2)` replaces it with the command, which inherits all of it;
//! there is no wrapper process left in between.

use crate::host::{CpuSet, HostRoot};
use crate::sys::{self, MemPolicy};
use anyhow::{anyhow, Context};
use serde::{Deserialize, Serialize};
use std::io;

/// Where and how the program should run.
///
/// Why it exists: the resolved profile turns into one of these, and both
/// `ibtune run` and tests apply it with [`prepare_self`].
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct RunSpec {
    /// Host path of the cgroup file to join: `cgroup.procs` (v2, moves the
    /// whole process) or `tasks` (v1, moves the calling thread). `None`
    /// leaves the cgroup alone.
    pub cgroup_procs: Option<String>,
    /// CPUs to pin to; empty leaves the affinity alone.
    pub cpus: CpuSet,
    /// NUMA nodes for `mem_policy` (must be empty for `default`/`local`).
    pub mems: CpuSet,
    /// The NUMA memory policy to set; `default` resets to the kernel default.
    pub mem_policy: MemPolicy,
    /// `SCHED_FIFO` priority (1..=99); `None` keeps the current policy.
    pub fifo: Option<i32>,
}

/// Applies `spec` to the calling thread (and, for cgroup v2, its process):
/// joins the cgroup, sets the CPU affinity, the memory policy, then
/// `SCHED_FIFO`, in that order. Each error names the step that failed.
///
/// Why it exists: it is everything [`exec`] does short of replacing the
/// process, so it can be tested in a thread.
///
/// The order matters: joining a cpuset cgroup resets the affinity to the
/// cgroup's CPUs, so affinity comes after; the memory policy is checked
/// against the cgroup's mems; FIFO comes last so the steps before it run
/// at normal priority.
pub fn prepare_self(root: &HostRoot, spec: &RunSpec) -> anyhow::Result<()> {
    if let Some(procs) = &spec.cgroup_procs {
        let pid = std::process::id();
        root.write(procs, format!("{pid}\n").as_bytes())
            .map_err(|e| {
                let hint = if e.is_permission() {
                    " (needs root)"
                } else {
                    ""
                };
                anyhow!("joining cgroup: {e}{hint}")
            })?;
    }
    if !spec.cpus.is_empty() {
        sys::set_affinity(&spec.cpus)
            .with_context(|| format!("setting CPU affinity to {}", spec.cpus))?;
    }
    sys::set_mempolicy(spec.mem_policy, &spec.mems).with_context(|| {
        format!(
            "setting memory policy {} on nodes {:?}",
            spec.mem_policy,
            spec.mems.to_list()
        )
    })?;
    if let Some(prio) = spec.fifo {
        sys::set_fifo(prio).with_context(|| format!("setting SCHED_FIFO priority {prio}"))?;
    }
    Ok(())
}

/// Applies `spec` with [`prepare_self`] and then execs `cmd` (looked up on
/// `PATH` unless it contains a `/`). Only returns on failure, with the
/// error; a command that is not on `PATH` gives "command not found: CMD"
/// before anything is changed.
///
/// Why it exists: the body of `ibtune run -- CMD`; exec leaves no ibtune
/// process between the user and their program.
pub fn exec(root: &HostRoot, spec: &RunSpec, cmd: &[String]) -> anyhow::Error {
    use std::os::unix::process::CommandExt;
    let Some((prog, args)) = cmd.split_first() else {
        return anyhow!(
            "no command given to run (usage: ibtune run [OPTIONS] -- COMMAND [ARGS...])"
        );
    };
    // Resolve PATH ourselves: execvp(3) reports EACCES, not ENOENT, for a
    // missing command when some PATH directory is unreadable, which would
    // turn "not found" into a misleading "permission denied".
    let path = if prog.contains('/') {
        std::path::PathBuf::from(prog)
    } else {
        match find_in_path(prog) {
            Some(p) => p,
            None => return anyhow!("command not found: {prog}"),
        }
    };
    if let Err(e) = prepare_self(root, spec) {
        return e.context(format!("preparing to run {prog}"));
    }
    let e = std::process::Command::new(&path)
        .arg0(prog)
        .args(args)
        .exec();
    match e.kind() {
        io::ErrorKind::NotFound => anyhow!("command not found: {prog}"),
        io::ErrorKind::PermissionDenied => anyhow!("{prog}: permission denied (not executable?)"),
        _ => anyhow!("executing {prog}: {e}"),
    }
}

/// The first `PATH` entry holding an executable regular file named `prog`.
/// This is the calling process's own `PATH`, not a host setting, so it is
/// looked up directly rather than through a [`HostRoot`].
fn find_in_path(prog: &str) -> Option<std::path::PathBuf> {
    use std::os::unix::fs::PermissionsExt;
    let path = std::env::var_os("PATH")?;
    std::env::split_paths(&path)
        .map(|dir| {
            // An empty entry means the current directory.
            if dir.as_os_str().is_empty() {
                std::path::PathBuf::from(".").join(prog)
            } else {
                dir.join(prog)
            }
        })
        .find(|p| {
            std::fs::metadata(p)
                .map(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
                .unwrap_or(false)
        })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn set(s: &str) -> CpuSet {
        CpuSet::parse_list(s).unwrap()
    }

    fn scratch_root() -> (tempfile::TempDir, HostRoot) {
        let dir = tempfile::tempdir().unwrap();
        let root = HostRoot::new(dir.path()).unwrap();
        (dir, root)
    }

    #[test]
    fn prepare_sets_affinity_and_policy_of_the_thread() {
        let (_dir, root) = scratch_root();
        let spec = RunSpec {
            cgroup_procs: None,
            cpus: set("0"),
            mems: set("0"),
            mem_policy: MemPolicy::Bind,
            fifo: None,
        };
        std::thread::spawn(move || {
            prepare_self(&root, &spec).unwrap();
            assert_eq!(sys::get_affinity().unwrap(), set("0"));
            assert_eq!(sys::get_mempolicy().unwrap(), (sys::MPOL_BIND, set("0")));
        })
        .join()
        .unwrap();
    }

    #[test]
    fn cgroup_join_writes_our_pid_on_a_snapshot() {
        let (_dir, root) = scratch_root();
        root.mkdir_all("/sys/fs/cgroup/rt").unwrap();
        let spec = RunSpec {
            cgroup_procs: Some("/sys/fs/cgroup/rt/cgroup.procs".into()),
            ..RunSpec::default()
        };
        std::thread::spawn(move || {
            prepare_self(&root, &spec).unwrap();
            assert_eq!(
                root.read("/sys/fs/cgroup/rt/cgroup.procs").unwrap(),
                format!("{}\n", std::process::id())
            );
        })
        .join()
        .unwrap();
    }

    #[test]
    fn errors_name_the_step() {
        let (_dir, root) = scratch_root();
        let spec = RunSpec {
            cgroup_procs: Some("/sys/fs/cgroup/missing/cgroup.procs".into()),
            ..RunSpec::default()
        };
        let e = prepare_self(&root, &spec).unwrap_err();
        assert!(format!("{e:#}").contains("joining cgroup"), "{e:#}");

        let spec = RunSpec {
            mem_policy: MemPolicy::Bind,
            ..RunSpec::default()
        };
        let e = std::thread::spawn(move || prepare_self(&root, &spec).unwrap_err())
            .join()
            .unwrap();
        assert!(
            format!("{e:#}").contains("setting memory policy bind"),
            "{e:#}"
        );
    }

    #[test]
    fn path_lookup_finds_executables_only() {
        assert!(find_in_path("sh").is_some());
        assert!(find_in_path("ibtune-no-such-command-xyz").is_none());
    }

    #[test]
    fn exec_reports_missing_command() {
        let (_dir, root) = scratch_root();
        let e = std::thread::spawn(move || {
            exec(
                &root,
                &RunSpec::default(),
                &["ibtune-no-such-command-xyz".to_string()],
            )
        })
        .join()
        .unwrap();
        assert_eq!(
            e.to_string(),
            "command not found: ibtune-no-such-command-xyz"
        );
        let (_dir, root) = scratch_root();
        assert!(exec(&root, &RunSpec::default(), &[])
            .to_string()
            .contains("no command"));
    }
}
