//! The Soft-RoCE lab from Rust: boot a guest once, run many commands in it.
//!
//! Why it exists: claims about verbs mean nothing until they run on a verbs
//! stack, and this project's machines have none. `tests/lab/lab` boots a
//! Debian kernel under QEMU with `rdma_rxe` and this host's root shared
//! read-only; this module drives that script (`start`, `exec`, `stop`) so a
//! test binary boots one guest for a whole group of tests, and never leaves
//! QEMU behind: [`Lab`] stops it on drop, and the script's watchdog kills it
//! if this process dies first.
//!
//! Lab failures ([`LabError`]) are kept apart from test failures: a guest
//! that cannot boot is reported as "lab unavailable: <reason>", never as an
//! assertion about the code under test.

pub mod harness;
pub mod perftest;

use std::fmt;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

/// Path of the lab's entry point script, `tests/lab/lab`.
pub fn script() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("lab/lab")
}

/// How the guests are wired.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Topology {
    /// One guest, rxe0 over a dummy netdev: sender and receiver on one device.
    Loopback,
    /// Two guests joined by a QEMU stream netdev, rxe0 on each guest's NIC.
    /// Slow (two emulated guests on one host): for correctness only.
    Pair,
}

/// Which Debian kernel the guest boots.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Kernel {
    /// `linux-image-amd64`.
    Standard,
    /// `linux-image-rt-amd64`, the PREEMPT_RT flavour.
    PreemptRt,
}

/// A guest of a lab: `a` always exists, `b` only in the pair topology.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Node {
    /// The first guest (10.77.0.1).
    A,
    /// The second guest of a pair (10.77.0.2).
    B,
}

impl Node {
    fn name(self) -> &'static str {
        match self {
            Node::A => "a",
            Node::B => "b",
        }
    }
}

/// What to boot.
#[derive(Clone, Debug)]
pub struct LabConfig {
    /// Loopback (default) or pair.
    pub topology: Topology,
    /// Standard (default) or PREEMPT_RT.
    pub kernel: Kernel,
    /// vCPUs per guest.
    pub cpus: u32,
    /// Give up (and kill QEMU) if the guest is not ready after this long.
    pub boot_timeout: Duration,
}

impl Default for LabConfig {
    fn default() -> Self {
        LabConfig {
            topology: Topology::Loopback,
            kernel: Kernel::Standard,
            cpus: 2,
            boot_timeout: Duration::from_secs(120),
        }
    }
}

impl LabConfig {
    /// The loopback topology on the standard kernel.
    pub fn loopback() -> Self {
        Self::default()
    }

    /// Two guests on the standard kernel.
    pub fn pair() -> Self {
        LabConfig {
            topology: Topology::Pair,
            ..Self::default()
        }
    }

    /// The same, on the PREEMPT_RT kernel.
    pub fn rt(mut self) -> Self {
        self.kernel = Kernel::PreemptRt;
        self
    }

    /// One line naming the configuration, for reports.
    pub fn describe(&self) -> String {
        format!(
            "{} topology, {} kernel",
            match self.topology {
                Topology::Loopback => "loopback",
                Topology::Pair => "pair",
            },
            match self.kernel {
                Kernel::Standard => "standard",
                Kernel::PreemptRt => "PREEMPT_RT",
            }
        )
    }

    /// The `tests/lab/lab start` options for this configuration.
    pub fn start_args(&self) -> Vec<String> {
        vec![
            "--topology".into(),
            match self.topology {
                Topology::Loopback => "loopback",
                Topology::Pair => "pair",
            }
            .into(),
            "--kernel".into(),
            match self.kernel {
                Kernel::Standard => "std",
                Kernel::PreemptRt => "rt",
            }
            .into(),
            "--cpus".into(),
            self.cpus.to_string(),
            "--boot-timeout".into(),
            self.boot_timeout.as_secs().max(1).to_string(),
        ]
    }
}

/// The lab itself failed (prerequisite, boot, hang), as opposed to a
/// command in the guest failing.
#[derive(Clone, Debug)]
pub struct LabError {
    /// The script's exit status: 2 usage, 3 prerequisite, 4 boot, 5 hang,
    /// 6 a hang while booting.
    pub status: Option<i32>,
    /// The script's one-line reason (its `iblab: error:` line), with any
    /// console lines it printed before it.
    pub message: String,
}

impl fmt::Display for LabError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}", self.message)
    }
}

impl std::error::Error for LabError {}

impl LabError {
    /// The lab script's status for a guest that hung while booting (a
    /// step never ended; QEMU killed): not deterministic, a new boot may do.
    pub const BOOT_HUNG: i32 = 6;

    /// Whether the guest hung while booting ([`LabError::BOOT_HUNG`]), as
    /// opposed to a boot that failed for a reason a retry would meet again
    /// (a module missing, a prerequisite).
    pub fn is_boot_hang(&self) -> bool {
        self.status == Some(Self::BOOT_HUNG)
    }

    fn from_output(what: &str, out: &std::process::Output) -> LabError {
        let stderr = String::from_utf8_lossy(&out.stderr);
        let reason = stderr
            .lines()
            .rfind(|l| l.starts_with("iblab: error:"))
            .map(|l| l.trim_start_matches("iblab: error:").trim().to_string())
            .unwrap_or_else(|| format!("{what} failed with {}: {}", out.status, stderr.trim()));
        let console: Vec<&str> = stderr
            .lines()
            .filter(|l| l.contains(" console: "))
            .collect();
        let message = if console.is_empty() {
            reason
        } else {
            format!("{reason}\n{}", console.join("\n"))
        };
        LabError {
            status: out.status.code(),
            message,
        }
    }
}

/// What one command in the guest did.
#[derive(Clone, Debug)]
pub struct GuestOutput {
    /// The command line, as given.
    pub command: String,
    /// Its exit status in the guest (124 when the guest-side timeout killed it).
    pub status: i32,
    /// Its standard output.
    pub stdout: String,
    /// Its standard error.
    pub stderr: String,
}

impl GuestOutput {
    /// Panics with the whole output unless the command exited 0.
    #[track_caller]
    pub fn success(self) -> Self {
        assert_eq!(self.status, 0, "guest command failed: {self}");
        self
    }
}

impl fmt::Display for GuestOutput {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "`{}` exited {}\n--- stdout\n{}--- stderr\n{}",
            self.command, self.status, self.stdout, self.stderr
        )
    }
}

/// A running lab: one or two guests, ready for commands. Stopped on drop.
pub struct Lab {
    dir: PathBuf,
    config: LabConfig,
    stopped: bool,
}

impl Lab {
    /// Installs what is missing, boots the guest(s) and waits until rxe0 is
    /// ACTIVE in each. The lab dies with this process (watchdog).
    pub fn start(config: &LabConfig) -> Result<Lab, LabError> {
        let out = run_script(
            Command::new(script())
                .arg("start")
                .args(config.start_args())
                .arg("--owner")
                .arg(std::process::id().to_string()),
            "lab start",
        )?;
        let dir = String::from_utf8_lossy(&out.stdout).trim().to_string();
        if dir.is_empty() {
            return Err(LabError {
                status: None,
                message: "lab start printed no lab folder".into(),
            });
        }
        Ok(Lab {
            dir: PathBuf::from(dir),
            config: config.clone(),
            stopped: false,
        })
    }

    /// The lab folder on the host (one sub-folder per guest).
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// What was booted.
    pub fn config(&self) -> &LabConfig {
        &self.config
    }

    /// The guest's writable results folder, as seen from the host
    /// (`$LAB_RESULTS` in the guest).
    pub fn results(&self, node: Node) -> PathBuf {
        self.dir.join(node.name()).join("results")
    }

    /// Runs a bash snippet on a guest. The guest kills it after `timeout`
    /// (status 124); if the guest stops answering altogether the lab is
    /// killed and a [`LabError`] says so.
    pub fn exec(
        &self,
        node: Node,
        snippet: &str,
        timeout: Duration,
    ) -> Result<GuestOutput, LabError> {
        let capture = tempfile::tempdir().map_err(|e| LabError {
            status: None,
            message: format!("cannot make a capture folder: {e}"),
        })?;
        run_script(
            Command::new(script())
                .arg("exec")
                .arg(&self.dir)
                .args(["--node", node.name()])
                .args(["--timeout", &timeout.as_secs().max(1).to_string()])
                .arg("--capture")
                .arg(capture.path())
                .args(["--", "bash", "-c", snippet]),
            "lab exec",
        )?;
        let read =
            |name: &str| std::fs::read_to_string(capture.path().join(name)).unwrap_or_default();
        let status = read("rc").trim().parse().map_err(|_| LabError {
            status: None,
            message: format!("lab exec left no exit status for `{snippet}`"),
        })?;
        Ok(GuestOutput {
            command: snippet.to_string(),
            status,
            stdout: read("stdout"),
            stderr: read("stderr"),
        })
    }

    /// [`Lab::exec`] on guest `a` with a 120 s limit; a lab failure panics
    /// (the harness reports it as the lab's, not the test's).
    #[track_caller]
    pub fn sh(&self, snippet: &str) -> GuestOutput {
        self.sh_on(Node::A, snippet)
    }

    /// [`Lab::sh`] on a given guest.
    #[track_caller]
    pub fn sh_on(&self, node: Node, snippet: &str) -> GuestOutput {
        match self.exec(node, snippet, Duration::from_secs(120)) {
            Ok(o) => o,
            Err(e) => std::panic::panic_any(e),
        }
    }

    /// Powers the guests off, kills QEMU and removes the lab folder.
    pub fn stop(mut self) -> Result<(), LabError> {
        self.stop_inner()
    }

    fn stop_inner(&mut self) -> Result<(), LabError> {
        if self.stopped {
            return Ok(());
        }
        self.stopped = true;
        run_script(
            Command::new(script()).arg("stop").arg(&self.dir),
            "lab stop",
        )
        .map(|_| ())
    }
}

/// Runs the lab script; a failure to spawn it or a non-zero exit is a [`LabError`].
fn run_script(cmd: &mut Command, what: &str) -> Result<std::process::Output, LabError> {
    let out = cmd.output().map_err(|e| LabError {
        status: None,
        message: format!("cannot run {}: {e}", script().display()),
    })?;
    if out.status.success() {
        Ok(out)
    } else {
        Err(LabError::from_output(what, &out))
    }
}

impl Drop for Lab {
    fn drop(&mut self) {
        if let Err(e) = self.stop_inner() {
            eprintln!("iblab: stopping {} failed: {e}", self.dir.display());
        }
    }
}

/// The PIDs of QEMU processes whose command line mentions `needle` (a lab
/// folder, say): how tests check that nothing was left running.
pub fn qemu_processes(needle: &str) -> Vec<u32> {
    let mut pids = Vec::new();
    let Ok(entries) = std::fs::read_dir("/proc") else {
        return pids;
    };
    for e in entries.flatten() {
        let Some(pid) = e.file_name().to_str().and_then(|s| s.parse::<u32>().ok()) else {
            continue;
        };
        let Ok(cmdline) = std::fs::read(e.path().join("cmdline")) else {
            continue;
        };
        let cmdline = String::from_utf8_lossy(&cmdline).replace('\0', " ");
        if cmdline.starts_with("qemu-system") && cmdline.contains(needle) {
            pids.push(pid);
        }
    }
    pids
}
