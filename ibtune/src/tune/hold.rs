//! Holding a CPU latency request on `/dev/cpu_dma_latency` (PM QoS).
//!
//! Why it exists: the kernel honours a `cpu_dma_latency` request only while
//! the file descriptor that made it stays open; closing it (or the process
//! dying) drops the request. So "keep C-states shallow" cannot be a file
//! write that `apply` does and forgets: some process has to sit on the open
//! descriptor. [`hold`] is that process (`ibtune hold`, or the
//! `ibtune-hold@.service` unit); [`spawn_holder`], [`stop_holder`] and
//! [`holder_alive`] let `apply` / `revert` / `verify` manage it through a
//! pidfile.
//!
//! On a snapshot root the device is a plain file: [`hold`] writes the value
//! as text and puts the original bytes back on release, which mimics the
//! kernel dropping the request.

use crate::host::HostRoot;
use anyhow::{bail, Context};
use nix::sys::signal::{kill, SigSet, SigmaskHow, Signal};
use nix::unistd::Pid;
use std::fs;
use std::io::{self, Write};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

/// The PM QoS device, as a host path.
pub const CPU_DMA_LATENCY: &str = "/dev/cpu_dma_latency";

/// How long [`spawn_holder`] waits for the pidfile and [`stop_holder`] for
/// the exit.
const WAIT: Duration = Duration::from_secs(5);
/// Poll interval for those waits.
const POLL: Duration = Duration::from_millis(10);

/// A latency request that is in place, and how to drop it.
enum Held {
    /// The live device: the request lives exactly as long as this fd.
    Live(fs::File),
    /// A snapshot file: the bytes to put back.
    Snapshot { root: HostRoot, original: Vec<u8> },
}

impl Held {
    /// Puts the request in place.
    fn acquire(root: &HostRoot, us: i32) -> anyhow::Result<Held> {
        if root.is_live() {
            let mut f = root
                .open_char_device(CPU_DMA_LATENCY, true)
                .map_err(|e| open_error(e, root))?;
            // The kernel takes either a 4-byte native-endian s32 or ASCII;
            // ASCII is parsed as *hex* (kstrtos32(buf, 16)), so "7" would
            // be 7 but "100" would be 256 µs. Always write the binary form.
            f.write_all(&us.to_ne_bytes())
                .with_context(|| format!("writing {us} to {CPU_DMA_LATENCY}"))?;
            Ok(Held::Live(f))
        } else {
            let original = root.read_bytes(CPU_DMA_LATENCY).map_err(|e| {
                if e.source.kind() == io::ErrorKind::NotFound {
                    anyhow::anyhow!(
                        "this snapshot has no {CPU_DMA_LATENCY} (its kernel lacks CONFIG_CPU_IDLE / PM QoS)"
                    )
                } else {
                    anyhow::Error::new(e)
                }
            })?;
            root.write(CPU_DMA_LATENCY, format!("{us}\n").as_bytes())?;
            Ok(Held::Snapshot {
                root: root.clone(),
                original,
            })
        }
    }

    /// Drops the request: closes the fd (the kernel restores its default)
    /// or writes the snapshot file's original bytes back.
    fn release(self) -> anyhow::Result<()> {
        match self {
            Held::Live(f) => {
                drop(f);
                Ok(())
            }
            Held::Snapshot { root, original } => root
                .write(CPU_DMA_LATENCY, &original)
                .context("restoring the snapshot's original cpu_dma_latency"),
        }
    }
}

/// Turns an open(2) error on the live device into advice.
fn open_error(e: crate::host::HostIoError, root: &HostRoot) -> anyhow::Error {
    let path = root.display_path(CPU_DMA_LATENCY);
    let e = e.source;
    match e.kind() {
        io::ErrorKind::PermissionDenied => {
            anyhow::anyhow!(
                "opening {CPU_DMA_LATENCY} needs root ({}: {e})",
                path.display()
            )
        }
        io::ErrorKind::NotFound => {
            anyhow::anyhow!("this kernel has no {CPU_DMA_LATENCY} (CONFIG_CPU_IDLE / PM QoS)")
        }
        _ => anyhow::anyhow!("opening {}: {e}", path.display()),
    }
}

/// Writes `pid\n` to the pidfile atomically (temp file + rename), so a
/// reader never sees a half-written pid.
fn write_pidfile(pidfile: &Path) -> anyhow::Result<()> {
    let mut tmp = pidfile.as_os_str().to_owned();
    tmp.push(".tmp");
    let tmp = PathBuf::from(tmp);
    fs::write(&tmp, format!("{}\n", std::process::id()))
        .with_context(|| format!("writing pidfile {}", tmp.display()))?;
    fs::rename(&tmp, pidfile).with_context(|| format!("writing pidfile {}", pidfile.display()))
}

/// Holds `/dev/cpu_dma_latency` at `us` microseconds until SIGTERM or
/// SIGINT, then releases it.
///
/// Why it exists: it is the body of `ibtune hold`, the long-lived process
/// that keeps the PM QoS request alive (see the module docs).
///
/// SIGTERM and SIGINT are blocked on the calling thread *before* the value
/// is written and consumed with `sigwait(2)`, so a signal can never kill the
/// process with a snapshot value left in place. Other threads of the process
/// must block them too (the CLI is single-threaded when it gets here). The
/// pidfile, if given, is written only once the value is in place and removed
/// before returning. The caller's signal mask is restored on return.
pub fn hold(root: &HostRoot, us: i32, pidfile: Option<&Path>) -> anyhow::Result<()> {
    if us < 0 {
        bail!("cpu_dma_latency must be 0 or more microseconds (got {us})");
    }
    let mut signals = SigSet::empty();
    signals.add(Signal::SIGTERM);
    signals.add(Signal::SIGINT);
    let old_mask = signals
        .thread_swap_mask(SigmaskHow::SIG_BLOCK)
        .context("blocking SIGTERM/SIGINT")?;
    let result = hold_blocked(root, us, pidfile, &signals);
    let restored = old_mask
        .thread_set_mask()
        .context("restoring the signal mask");
    result.and(restored)
}

/// [`hold`] with the signals already blocked.
fn hold_blocked(
    root: &HostRoot,
    us: i32,
    pidfile: Option<&Path>,
    signals: &SigSet,
) -> anyhow::Result<()> {
    let held = Held::acquire(root, us)?;
    if let Some(p) = pidfile {
        if let Err(e) = write_pidfile(p) {
            return Err(match held.release() {
                Ok(()) => e,
                Err(r) => e.context(format!("and releasing the request failed too: {r:#}")),
            });
        }
    }
    eprintln!(
        "holding cpu_dma_latency at {us} us (pid {}); SIGTERM or Ctrl-C releases it",
        std::process::id()
    );
    let waited = signals.wait().context("waiting for SIGTERM/SIGINT");
    if let Some(p) = pidfile {
        // Gone already is fine: someone cleaned up after us.
        let _ = fs::remove_file(p);
    }
    let released = held.release();
    match &waited {
        Ok(sig) => eprintln!("{sig}: released cpu_dma_latency"),
        Err(_) => eprintln!("released cpu_dma_latency"),
    }
    waited.map(|_| ()).and(released)
}

/// The log file of a holder started by [`spawn_holder`]: the pidfile path
/// with `.log` appended (`/run/ibtune/hold.pid.log`).
///
/// Why it exists: the detached holder has no terminal; its stderr goes
/// here so a failure can be shown to the user.
pub fn holder_log_path(pidfile: &Path) -> PathBuf {
    let mut s = pidfile.as_os_str().to_owned();
    s.push(".log");
    PathBuf::from(s)
}

/// Starts `EXE --root ROOTDIR hold --us N --pidfile PIDFILE` in its own
/// session and returns its pid once it has written the pidfile (that is,
/// once the request is in place).
///
/// Why it exists: `ibtune apply` needs the latency request to outlive
/// itself without requiring a systemd unit.
///
/// Stdin and stdout are `/dev/null`, stderr goes to [`holder_log_path`].
/// Fails if a live holder already owns the pidfile, if the holder exits
/// before writing the pidfile (the error carries its log) or after 5 s.
pub fn spawn_holder(exe: &Path, root: &HostRoot, us: i32, pidfile: &Path) -> anyhow::Result<u32> {
    if us < 0 {
        bail!("cpu_dma_latency must be 0 or more microseconds (got {us})");
    }
    if let Some(pid) = live_holder_pid(pidfile) {
        bail!(
            "a cpu_dma_latency holder is already running (pid {pid}, pidfile {}); stop it first",
            pidfile.display()
        );
    }
    // A stale pidfile would make the wait below return at once.
    match fs::remove_file(pidfile) {
        Ok(()) => {}
        Err(e) if e.kind() == io::ErrorKind::NotFound => {}
        Err(e) => {
            return Err(e).with_context(|| format!("removing stale pidfile {}", pidfile.display()))
        }
    }
    let log_path = holder_log_path(pidfile);
    let log = fs::File::create(&log_path)
        .with_context(|| format!("creating holder log {}", log_path.display()))?;
    let mut cmd = Command::new(exe);
    cmd.arg("--root")
        .arg(root.dir())
        .arg("hold")
        .arg("--us")
        .arg(us.to_string())
        .arg("--pidfile")
        .arg(pidfile)
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(log);
    crate::sys::detach_session(&mut cmd);
    let mut child = cmd
        .spawn()
        .with_context(|| format!("starting holder {}", exe.display()))?;
    let read_log = || fs::read_to_string(&log_path).unwrap_or_default();
    let deadline = Instant::now() + WAIT;
    loop {
        if let Some(pid) = read_pid(pidfile) {
            // Reap the child when it exits so it does not linger as a
            // zombie of a long-lived caller (the thread dies with us).
            std::thread::spawn(move || child.wait());
            return Ok(pid);
        }
        if let Some(status) = child.try_wait().context("checking the holder process")? {
            bail!(
                "the cpu_dma_latency holder exited ({status}) before taking hold:\n{}",
                read_log().trim_end()
            );
        }
        if Instant::now() >= deadline {
            let _ = child.kill();
            let _ = child.wait();
            bail!(
                "the cpu_dma_latency holder did not write {} within {} s:\n{}",
                pidfile.display(),
                WAIT.as_secs(),
                read_log().trim_end()
            );
        }
        std::thread::sleep(POLL);
    }
}

/// Stops the holder named by the pidfile: SIGTERM, then wait up to 5 s for
/// it to exit. `Ok(false)` when there was nothing to stop (no pidfile, no
/// such process, or a process that is not an `ibtune ... hold`); a stale
/// pidfile is removed.
///
/// Why it exists: `ibtune revert` must drop the latency request, and must
/// never signal an unrelated process that reused the pid.
pub fn stop_holder(pidfile: &Path) -> anyhow::Result<bool> {
    let text = match read_pidfile(pidfile) {
        Ok(t) => t,
        Err(ibhost::file::SmallFileError::Io { source, .. })
            if source.kind() == io::ErrorKind::NotFound =>
        {
            return Ok(false)
        }
        Err(e) => bail!("reading pidfile: {e}"),
    };
    let Some(pid) = parse_pid(&text) else {
        bail!(
            "pidfile {} does not hold a pid ({:?}); remove it by hand",
            pidfile.display(),
            text.trim()
        );
    };
    if !is_holder(pid) {
        let _ = fs::remove_file(pidfile);
        return Ok(false);
    }
    match kill(Pid::from_raw(pid), Signal::SIGTERM) {
        Ok(()) => {}
        Err(nix::errno::Errno::ESRCH) => {
            let _ = fs::remove_file(pidfile);
            return Ok(false);
        }
        Err(nix::errno::Errno::EPERM) => {
            bail!("stopping the cpu_dma_latency holder (pid {pid}) needs root")
        }
        Err(e) => bail!("sending SIGTERM to the cpu_dma_latency holder (pid {pid}): {e}"),
    }
    let deadline = Instant::now() + WAIT;
    while process_running(pid) {
        if Instant::now() >= deadline {
            bail!(
                "the cpu_dma_latency holder (pid {pid}) did not exit within {} s of SIGTERM",
                WAIT.as_secs()
            );
        }
        std::thread::sleep(POLL);
    }
    // The holder removes its pidfile; this covers one that was killed hard.
    let _ = fs::remove_file(pidfile);
    Ok(true)
}

/// True when the pidfile names a running `ibtune ... hold` process.
///
/// Why it exists: `ibtune verify` reports a dropped latency request, and
/// [`spawn_holder`] refuses to start a second holder.
pub fn holder_alive(pidfile: &Path) -> bool {
    live_holder_pid(pidfile).is_some()
}

/// The pid in the pidfile if it is a running holder.
fn live_holder_pid(pidfile: &Path) -> Option<i32> {
    let pid = parse_pid(&read_pidfile(pidfile).ok()?)?;
    is_holder(pid).then_some(pid)
}

/// A pidfile's text: a regular file of at most 64 bytes (a FIFO or a
/// device put in its place is refused, never waited on or read without end).
fn read_pidfile(pidfile: &Path) -> Result<String, ibhost::file::SmallFileError> {
    ibhost::file::read_small_text(pidfile, 64)
}

/// Reads a pid from a pidfile, if present and valid.
fn read_pid(pidfile: &Path) -> Option<u32> {
    parse_pid(&read_pidfile(pidfile).ok()?).map(|p| p as u32)
}

/// Parses `pid\n`. Rejects 0 and negatives: `kill(0)` and `kill(-1)`
/// would signal whole process groups.
fn parse_pid(text: &str) -> Option<i32> {
    text.trim().parse::<i32>().ok().filter(|&p| p > 0)
}

/// True when `pid` is running (not a zombie) and its command line contains
/// both "ibtune" and "hold".
fn is_holder(pid: i32) -> bool {
    if !process_running(pid) {
        return false;
    }
    // Our own processes are on the live machine whatever --root says.
    let Ok(cmdline) = HostRoot::live().read_bytes(&format!("/proc/{pid}/cmdline")) else {
        return false;
    };
    let cmdline = String::from_utf8_lossy(&cmdline);
    cmdline.contains("ibtune") && cmdline.split('\0').any(|a| a == "hold")
}

/// True when `pid` exists and has not exited. A zombie (exited, not yet
/// reaped by its parent) counts as exited.
fn process_running(pid: i32) -> bool {
    match kill(Pid::from_raw(pid), None) {
        Ok(()) | Err(nix::errno::Errno::EPERM) => {}
        Err(_) => return false,
    }
    // /proc/PID/stat is "pid (comm) S ...": the state follows the last ')'.
    match HostRoot::live().read(&format!("/proc/{pid}/stat")) {
        Ok(stat) => !matches!(
            stat.rsplit_once(')')
                .and_then(|(_, rest)| rest.trim_start().chars().next()),
            Some('Z') | Some('X')
        ),
        Err(_) => false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pid_parsing_rejects_group_pids() {
        assert_eq!(parse_pid("123\n"), Some(123));
        assert_eq!(parse_pid("0\n"), None);
        assert_eq!(parse_pid("-1"), None);
        assert_eq!(parse_pid(""), None);
        assert_eq!(parse_pid("12a"), None);
    }

    /// A running process that is not a holder. (Not the test process
    /// itself: `cargo test hold` would put "hold" on its command line.)
    fn bystander() -> std::process::Child {
        Command::new("sleep").arg("30").spawn().unwrap()
    }

    #[test]
    fn other_processes_are_not_holders() {
        let mut b = bystander();
        let pid = b.id() as i32;
        assert!(process_running(pid));
        assert!(!is_holder(pid));
        b.kill().unwrap();
        // Killed but not reaped: a zombie counts as exited.
        let deadline = Instant::now() + WAIT;
        while process_running(pid) && Instant::now() < deadline {
            std::thread::sleep(POLL);
        }
        assert!(!process_running(pid));
        b.wait().unwrap();
        assert!(!process_running(pid));
    }

    #[test]
    fn stale_and_missing_pidfiles() {
        let dir = tempfile::tempdir().unwrap();
        let pf = dir.path().join("hold.pid");
        assert!(!stop_holder(&pf).unwrap());
        assert!(!holder_alive(&pf));
        // Alive, but not a holder, so it must not be signalled.
        let mut b = bystander();
        fs::write(&pf, format!("{}\n", b.id())).unwrap();
        assert!(!holder_alive(&pf));
        assert!(!stop_holder(&pf).unwrap());
        assert!(!pf.exists(), "stale pidfile is removed");
        assert!(b.try_wait().unwrap().is_none(), "bystander untouched");
        b.kill().unwrap();
        b.wait().unwrap();
        fs::write(&pf, "garbage\n").unwrap();
        assert!(stop_holder(&pf).is_err());
    }

    #[test]
    fn negative_latency_is_refused() {
        let dir = tempfile::tempdir().unwrap();
        let root = HostRoot::new(dir.path()).unwrap();
        let e = hold(&root, -1, None).unwrap_err();
        assert!(e.to_string().contains("0 or more"), "{e}");
    }

    #[test]
    fn snapshot_without_device_is_explained() {
        let dir = tempfile::tempdir().unwrap();
        let root = HostRoot::new(dir.path()).unwrap();
        let e = hold(&root, 5, None).unwrap_err();
        assert!(e.to_string().contains("PM QoS"), "{e}");
    }

    #[test]
    fn log_path_appends() {
        assert_eq!(
            holder_log_path(Path::new("/run/ibtune/hold.pid")),
            PathBuf::from("/run/ibtune/hold.pid.log")
        );
    }
}
