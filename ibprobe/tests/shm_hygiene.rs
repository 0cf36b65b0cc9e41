//! The shm ring file's hygiene: a server's `/dev/shm/ibprobe-<pid>-<n>`
//! is private (0600), checked against the free space before it exists,
//! and gone after every way a session can end: a refusal, an error,
//! SIGTERM, a panic, and (once the client has sent its first message)
//! even SIGKILL.
//!
//! The servers are spawned `ibprobe server -t shm` processes (killed on
//! drop); the "client" that must not touch the ring speaks the handshake
//! through the library's [`Oob`], so the test holds the ring's path.

mod common;

use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use assert_cmd::cargo::cargo_bin;
use common::Server;
use ibprobe::probe::session::oob::{Hello, Oob, OobError};
use ibprobe::probe::session::StreamHello;
use ibprobe::spec::{StreamSpec, SLOT_FORMAT};
use ibprobe::transport::shm::{self, ShmSlots, Side};
use serde_json::{json, Value};

const SHM: &str = "/dev/shm";

/// The ring files of process `pid` in /dev/shm.
fn rings_of(pid: u32) -> Vec<PathBuf> {
    let prefix = format!("ibprobe-{pid}-");
    std::fs::read_dir(SHM)
        .map(|d| {
            d.filter_map(Result::ok)
                .filter(|e| e.file_name().to_string_lossy().starts_with(&prefix))
                .map(|e| e.path())
                .collect()
        })
        .unwrap_or_default()
}

/// Connects to `server` and sends a Hello for a `size` B shm round trip
/// with `params`: the server's reply (Welcome's endpoint or the refusal).
fn hello(server: &Server, size: usize, params: Value) -> (Oob, Result<Value, OobError>) {
    let mut oob = Oob::connect(&server.addr, 0, Duration::from_secs(10)).expect("connects");
    let r = oob.handshake(&Hello {
        transport: "shm".into(),
        size,
        params,
        endpoint: Value::Null,
    });
    (oob, r)
}

/// The ring path in a Welcome's endpoint.
fn ring_path(endpoint: &Value) -> PathBuf {
    PathBuf::from(endpoint["path"].as_str().expect("a path in the Welcome"))
}

/// Waits up to `limit` for `child` to exit: its exit code (-1: a signal).
fn exits_within(child: &mut Child, limit: Duration) -> i32 {
    let t = Instant::now();
    loop {
        if let Some(s) = child.try_wait().unwrap() {
            return s.code().unwrap_or(-1);
        }
        assert!(t.elapsed() < limit, "did not exit within {limit:?}");
        std::thread::sleep(Duration::from_millis(20));
    }
}

fn signal(child: &Child, sig: nix::sys::signal::Signal) {
    nix::sys::signal::kill(nix::unistd::Pid::from_raw(child.id() as i32), sig).unwrap();
}

#[test]
fn the_ring_is_0600_and_a_sigterm_mid_session_unlinks_it() {
    let mut server = Server::start("shm", &[]);
    let pid = server.child.id();
    let (_oob, welcome) = hello(&server, 64, json!({}));
    let path = ring_path(&welcome.expect("welcomed"));
    assert!(
        path.starts_with(SHM) && path.to_string_lossy().contains(&format!("ibprobe-{pid}-")),
        "{path:?}"
    );
    let meta = std::fs::metadata(&path).expect("the ring exists while the client may map it");
    assert_eq!(
        meta.permissions().mode() & 0o777,
        0o600,
        "{path:?}: the ring is this user's alone"
    );
    // The session waits for a first message that never comes: SIGTERM
    // must end it through the orderly path (exit 130, the ring unlinked).
    signal(&server.child, nix::sys::signal::Signal::SIGTERM);
    ends_leaving_nothing(
        &mut server,
        &path,
        Some(130),
        "SIGTERM ends the server as Ctrl-C does",
    );
}

/// `server` exits within 10 s by itself (not killed by a signal), with
/// `code` when given, and neither `path` nor any other ring of its pid
/// is left.
fn ends_leaving_nothing(server: &mut Server, path: &Path, code: Option<i32>, why: &str) {
    let pid = server.child.id();
    let exit = exits_within(&mut server.child, Duration::from_secs(10));
    assert_ne!(exit, -1, "killed by a signal: {why}");
    if let Some(code) = code {
        assert_eq!(exit, code, "{why}");
    }
    assert!(!path.exists(), "{path:?} left behind: {why}");
    assert_eq!(rings_of(pid), Vec::<PathBuf>::new(), "{why}");
}

#[test]
fn a_sigterm_mid_stream_unlinks_the_stream_ring() {
    let mut server = Server::start("shm", &[]);
    let (_oob, welcome) = hello(
        &server,
        32,
        json!({ "stream": stream_hello(StreamSpec::default()), "slot_format": SLOT_FORMAT }),
    );
    let path = ring_path(&welcome.expect("welcomed"));
    let mode = std::fs::metadata(&path).unwrap().permissions().mode();
    assert_eq!(mode & 0o777, 0o600, "{path:?}");
    signal(&server.child, nix::sys::signal::Signal::SIGTERM);
    // The exit code of an interrupted stream session is the server's
    // business (cli/server.rs); here: it leaves by itself, ring unlinked.
    ends_leaving_nothing(&mut server, &path, None, "SIGTERM ends a stream session");
}

/// A stream client's settings for `spec`, no warm-up, a 10 s timeout.
fn stream_hello(spec: StreamSpec) -> StreamHello {
    StreamHello {
        spec,
        warmup: 0,
        consume_delay: Duration::ZERO,
        timeout: Duration::from_secs(10),
        workload: None,
    }
}

#[test]
fn a_client_that_leaves_before_mapping_the_ring_leaves_no_file() {
    let mut server = Server::start("shm", &[]);
    let (oob, welcome) = hello(&server, 64, json!({}));
    let path = ring_path(&welcome.expect("welcomed"));
    assert!(path.exists());
    drop(oob);
    ends_leaving_nothing(&mut server, &path, Some(3), "a lost client is an error");
}

#[test]
fn a_refused_ring_leaves_no_file_and_the_server_serves_on() {
    let mut server = Server::start("shm", &["--forever"]);
    let pid = server.child.id();
    // 2^31 slots of 1 MiB per direction: 4 PiB, more than any /dev/shm.
    let huge = stream_hello(StreamSpec {
        slots: 1 << 31,
        window: 1 << 31,
        slot_size: 1 << 20,
        ..StreamSpec::default()
    });
    for _ in 0..3 {
        let (_oob, r) = hello(
            &server,
            32,
            json!({ "stream": huge, "slot_format": SLOT_FORMAT }),
        );
        match r {
            Err(OobError::Refused(reason)) => eprintln!("refused: {reason}"),
            other => panic!("a 4 PiB ring must be refused: {other:?}"),
        }
    }
    assert_eq!(rings_of(pid), Vec::<PathBuf>::new(), "one file per refusal");
    // Still serving: a real client's run over shm.
    let (code, _, err) = common::ibprobe(&["client", &server.addr, "-t", "shm", "-n", "200"]);
    assert_eq!(code, 0, "{err}");
    assert_eq!(rings_of(pid), Vec::<PathBuf>::new());
    signal(&server.child, nix::sys::signal::Signal::SIGTERM);
    exits_within(&mut server.child, Duration::from_secs(5));
}

/// Once the client has sent, the name is gone: even a SIGKILL of the
/// server (no Drop runs) leaves nothing in /dev/shm.
#[test]
fn a_sigkilled_server_leaves_no_ring_once_the_client_has_sent() {
    let mut server = Server::start("shm", &[]);
    let pid = server.child.id();
    let mut client = Command::new(cargo_bin("ibprobe"))
        .args(["client", &server.addr, "-t", "shm", "--duration", "60s"])
        .args(["--timeout", "500ms", "--no-mlock"])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    std::thread::sleep(Duration::from_millis(800));
    signal(&server.child, nix::sys::signal::Signal::SIGKILL);
    exits_within(&mut server.child, Duration::from_secs(5));
    let left = rings_of(pid);
    let _ = client.kill();
    let _ = client.wait();
    for p in &left {
        let _ = std::fs::remove_file(p);
    }
    assert_eq!(left, Vec::<PathBuf>::new(), "left behind by a SIGKILL");
}

#[test]
fn a_panic_unwinding_through_the_server_end_unlinks_the_ring() {
    let path = shm::default_path();
    let seen = path.clone();
    let r = std::panic::catch_unwind(move || {
        let _end = ShmSlots::create(&path, 8, 4096, Side::Server).unwrap();
        assert!(path.exists());
        panic!("a bug mid-session");
    });
    assert!(r.is_err());
    assert!(!seen.exists(), "{seen:?} left behind by a panic");
}

/// A tmpfs of `size` mounted on a fresh temporary directory, unmounted
/// on drop; `None` (said on stderr) when this process may not mount.
struct SmallTmpfs {
    dir: tempfile::TempDir,
}

impl SmallTmpfs {
    fn mount(size: &str) -> Option<SmallTmpfs> {
        let dir = tempfile::tempdir().unwrap();
        let ok = ibtools_tests::is_root()
            && Command::new("mount")
                .args(["-t", "tmpfs", "-o", &format!("size={size},mode=0700")])
                .arg("tmpfs")
                .arg(dir.path())
                .status()
                .is_ok_and(|s| s.success());
        if ok {
            return Some(SmallTmpfs { dir });
        }
        let why = "skipped: mounting a small tmpfs needs root (CAP_SYS_ADMIN)";
        assert!(
            std::env::var("CI").as_deref() != Ok("true"),
            "{why}, and CI=true"
        );
        eprintln!("{why}");
        None
    }

    fn path(&self) -> &Path {
        self.dir.path()
    }

    fn entries(&self) -> Vec<PathBuf> {
        std::fs::read_dir(self.path())
            .unwrap()
            .map(|e| e.unwrap().path())
            .collect()
    }
}

impl Drop for SmallTmpfs {
    fn drop(&mut self) {
        let _ = Command::new("umount").arg(self.dir.path()).status();
    }
}

#[test]
fn a_ring_larger_than_the_free_space_is_refused_before_any_file_exists() {
    let Some(fs) = SmallTmpfs::mount("1m") else {
        return;
    };
    let ring = fs.path().join("ring");
    // 64 slots of 64 KiB per direction: 8 MiB on a 1 MiB tmpfs. Without
    // the check it would be created sparse and SIGBUS at the first touch.
    let e = match ShmSlots::create(&ring, 64, 64 << 10, Side::Server) {
        Err(e) => e.to_string(),
        Ok(_) => panic!("an 8 MiB ring fits a 1 MiB tmpfs?"),
    };
    eprintln!("{e}");
    for part in [
        "shm ring of 8392704 B does not fit",
        &fs.path().display().to_string(),
        "1048576 B free",
        "smaller ring",
    ] {
        assert!(e.contains(part), "{e:?} lacks {part:?}");
    }
    assert_eq!(fs.entries(), Vec::<PathBuf>::new(), "nothing was created");
    // One that fits is made, private, and gone with its end.
    let end = ShmSlots::create(&ring, 8, 4096, Side::Server).unwrap();
    let mode = std::fs::metadata(&ring).unwrap().permissions().mode();
    assert_eq!(mode & 0o777, 0o600);
    drop(end);
    assert_eq!(fs.entries(), Vec::<PathBuf>::new());
}

/// Space that is gone by the time the file is made (another writer came
/// first) fails the allocation with an error, not a SIGBUS at the first
/// touch, and leaves no file.
#[test]
fn a_tmpfs_that_fills_anyway_is_an_error_and_leaves_no_file() {
    let Some(fs) = SmallTmpfs::mount("1m") else {
        return;
    };
    let ring = fs.path().join("ring");
    let e = ibprobe::sys::mem::create_private_file(&ring, 2 << 20).unwrap_err();
    assert_eq!(e.raw_os_error(), Some(libc::ENOSPC), "{e}");
    assert_eq!(fs.entries(), Vec::<PathBuf>::new());
}
