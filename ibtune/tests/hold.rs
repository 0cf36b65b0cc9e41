//! The cpu_dma_latency holder as a real process: signals are process-wide,
//! so `hold()` is exercised in a child, never in the test harness.
//!
//! The child is the real CLI, `ibtune --root DIR hold --us N --pidfile P`.

use ibtools_tests::wait_until;
use ibtune::host::HostRoot;
use ibtune::tune::hold::{holder_alive, holder_log_path, spawn_holder, stop_holder};
use nix::sys::signal::{kill, Signal};
use nix::unistd::Pid;
use std::fs;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};

const ORIGINAL: &[u8] = b"2000000000\n";

/// The program to run as the holder: the real CLI.
fn holder_exe() -> PathBuf {
    PathBuf::from(env!("CARGO_BIN_EXE_ibtune"))
}

/// A snapshot root holding only dev/cpu_dma_latency with the kernel default.
fn snapshot() -> (tempfile::TempDir, HostRoot) {
    let dir = tempfile::tempdir().unwrap();
    fs::create_dir(dir.path().join("dev")).unwrap();
    fs::write(dir.path().join("dev/cpu_dma_latency"), ORIGINAL).unwrap();
    let root = HostRoot::new(dir.path()).unwrap();
    (dir, root)
}

fn start_hold(root: &HostRoot, us: &str, pidfile: &Path) -> Child {
    Command::new(holder_exe())
        .arg("--root")
        .arg(root.dir())
        .args(["hold", "--us", us, "--pidfile"])
        .arg(pidfile)
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .expect("starting the holder")
}

fn held_by_signal(sig: Signal) {
    let (dir, root) = snapshot();
    let pidfile = dir.path().join("hold.pid");
    let child = start_hold(&root, "7", &pidfile);
    wait_until("the pidfile", || pidfile.exists());
    // The pidfile appears only once the value is in place.
    assert_eq!(root.read_bytes("/dev/cpu_dma_latency").unwrap(), b"7\n");
    assert_eq!(
        fs::read_to_string(&pidfile).unwrap(),
        format!("{}\n", child.id())
    );
    assert!(holder_alive(&pidfile));

    kill(Pid::from_raw(child.id() as i32), sig).unwrap();
    let out = child.wait_with_output().unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "holder failed: {stderr}");
    assert!(
        stderr.contains("holding cpu_dma_latency at 7 us")
            && stderr.contains("SIGTERM or Ctrl-C releases it"),
        "{stderr}"
    );
    assert_eq!(
        root.read_bytes("/dev/cpu_dma_latency").unwrap(),
        ORIGINAL,
        "original bytes restored exactly"
    );
    assert!(!pidfile.exists(), "pidfile removed on exit");
}

#[test]
fn snapshot_value_is_restored_after_sigterm() {
    held_by_signal(Signal::SIGTERM);
}

#[test]
fn snapshot_value_is_restored_after_sigint() {
    held_by_signal(Signal::SIGINT);
}

#[test]
fn snapshot_without_the_device_fails_and_writes_no_pidfile() {
    let dir = tempfile::tempdir().unwrap();
    let root = HostRoot::new(dir.path()).unwrap();
    let pidfile = dir.path().join("hold.pid");
    let out = start_hold(&root, "7", &pidfile).wait_with_output().unwrap();
    assert!(!out.status.success());
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("PM QoS"),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(!pidfile.exists());
}

#[test]
fn spawn_and_stop_round_trip() {
    let (dir, root) = snapshot();
    let pidfile = dir.path().join("hold.pid");
    let exe = holder_exe();

    let pid = spawn_holder(&exe, &root, 7, &pidfile).unwrap();
    assert_eq!(fs::read_to_string(&pidfile).unwrap(), format!("{pid}\n"));
    assert!(holder_alive(&pidfile));
    assert_eq!(root.read_bytes("/dev/cpu_dma_latency").unwrap(), b"7\n");
    // Detached: its own session.
    let sid = nix::unistd::getsid(Some(Pid::from_raw(pid as i32))).unwrap();
    assert_eq!(sid.as_raw(), pid as i32);

    // A second holder on the same pidfile is refused.
    let e = spawn_holder(&exe, &root, 3, &pidfile).unwrap_err();
    assert!(e.to_string().contains("already running"), "{e}");

    assert!(stop_holder(&pidfile).unwrap());
    assert!(!holder_alive(&pidfile));
    assert!(!pidfile.exists());
    assert_eq!(root.read_bytes("/dev/cpu_dma_latency").unwrap(), ORIGINAL);
    let log = fs::read_to_string(holder_log_path(&pidfile)).unwrap();
    assert!(log.contains("holding cpu_dma_latency at 7 us"), "{log}");

    // Nothing left to stop.
    assert!(!stop_holder(&pidfile).unwrap());
}

#[test]
fn spawn_reports_the_holders_error() {
    let dir = tempfile::tempdir().unwrap();
    let root = HostRoot::new(dir.path()).unwrap();
    let pidfile = dir.path().join("hold.pid");
    let e = spawn_holder(&holder_exe(), &root, 7, &pidfile).unwrap_err();
    let msg = format!("{e:#}");
    assert!(
        msg.contains("before taking hold") && msg.contains("PM QoS"),
        "{msg}"
    );
}

/// The live request through the product's own reader (the device is a
/// character device, which `read_bytes` refuses by design).
fn read_live(root: &HostRoot) -> i64 {
    ibtune::host::kernel::read_cpu_dma_latency(root).expect("reading /dev/cpu_dma_latency as root")
}

#[test]
#[ignore = "needs root: holds the real /dev/cpu_dma_latency"]
fn live_kernel_request_is_held_and_dropped() {
    let root = HostRoot::new("/").unwrap();
    assert!(root.is_live());
    let before = read_live(&root);
    let dir = tempfile::tempdir().unwrap();
    let pidfile = dir.path().join("hold.pid");

    spawn_holder(&holder_exe(), &root, 7, &pidfile).unwrap();
    assert_eq!(
        read_live(&root),
        7.min(before),
        "request in force while held"
    );
    assert!(stop_holder(&pidfile).unwrap());
    assert_eq!(
        read_live(&root),
        before,
        "kernel restores the value on close"
    );
}

/// The shipped unit `ibtune/systemd/ibtune-hold@.service` passes
/// `systemd-analyze verify` as `ibtune-hold@0` with this build's binary,
/// and its command line (`ibtune hold --us %i`, %i = 0) is one the CLI
/// accepts.
#[test]
fn the_systemd_unit_verifies_and_its_command_parses() {
    let unit = Path::new(env!("CARGO_MANIFEST_DIR")).join("systemd/ibtune-hold@.service");
    ibtools_tests::systemd::verify_unit(&unit, &[("ibtune", &holder_exe())], "0")
        .unwrap_or_else(|e| panic!("{e}"));
    // Parsed up to --help: an unknown subcommand or flag would fail first.
    let args = ibtools_tests::systemd::exec_start_args(&unit, "ibtune", "0")
        .unwrap_or_else(|e| panic!("{e}"));
    let out = Command::new(holder_exe())
        .args(&args)
        .arg("--help")
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "ibtune {args:?} --help: {}",
        String::from_utf8_lossy(&out.stderr)
    );
}

/// The shipped unit `ibtune/systemd/ibtune-profile@.service` does what it
/// says, run as `ibtune-profile@thesis-2hca` on a copy of the thesis
/// fixture: its ExecStart applies the profile (found by bare name, as
/// systemd passes it) and its ExecStop reverts the copy byte for byte.
/// (`systemd-analyze verify` of this unit runs on the installed package,
/// tests/tests/package.rs, where its man pages exist.)
#[test]
fn the_profile_unit_applies_at_start_and_reverts_at_stop() {
    let unit = Path::new(env!("CARGO_MANIFEST_DIR")).join("systemd/ibtune-profile@.service");
    let copy = ibtools_tests::fixture_copy("thesis-2s-mlx5");
    let pristine = ibtools_tests::snapshot(&copy.root);
    let on_copy = |key: &str| {
        let args = ibtools_tests::systemd::exec_args(&unit, key, "ibtune", "thesis-2hca")
            .unwrap_or_else(|e| panic!("{e}"));
        let mut cmd = Command::new(holder_exe());
        cmd.arg("--root")
            .arg(&copy.root)
            .arg("--state-dir")
            .arg(&copy.state)
            .args(&args)
            .current_dir(Path::new(env!("CARGO_MANIFEST_DIR")).join(".."));
        String::from_utf8_lossy(&ibtools_tests::run_ok(&format!("{key} {args:?}"), &mut cmd).stdout)
            .into_owned()
    };
    let applied = on_copy("ExecStart");
    assert!(applied.contains("applied profile thesis-2hca"), "{applied}");
    assert_ne!(
        ibtools_tests::snapshot(&copy.root),
        pristine,
        "apply changed nothing"
    );
    let reverted = on_copy("ExecStop");
    assert!(
        reverted.contains("reverted profile thesis-2hca"),
        "{reverted}"
    );
    ibtools_tests::assert_same_tree(
        &pristine,
        &ibtools_tests::snapshot(&copy.root),
        "after ExecStop",
    );
}
