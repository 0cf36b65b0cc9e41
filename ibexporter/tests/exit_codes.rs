//! ibexporter's exit codes, each from its cause: 0 after SIGTERM, 2 for
//! bad options, 3 when it cannot start (its listen address is taken). The
//! table they belong to is `ibhost::exit` (`docs/exit-codes.md`).

use std::net::TcpListener;
use std::process::{Command, Stdio};
use std::time::Duration;

use ibhost::exit::Exit;

mod common;

fn ibexporter() -> Command {
    let mut c = Command::new(env!("CARGO_BIN_EXE_ibexporter"));
    c.stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    c
}

/// A listen address another process holds: exit 3 ("failed, host as
/// found") with a line naming the address, within seconds.
#[test]
fn a_taken_listen_address_exits_3() {
    let held = TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = held.local_addr().unwrap().to_string();
    let child = ibexporter()
        .args([
            "--listen",
            &addr,
            "--responder",
            "127.0.0.1:0",
            "--no-probe",
            "hca,shm,udp,wakeup",
        ])
        .spawn()
        .unwrap();
    let out = wait_bounded(child, Duration::from_secs(30));
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(Exit::Failed.status()), "{err}");
    assert!(err.contains(&addr), "{err}");
}

/// Bad options: exit 2, nothing started.
#[test]
fn a_bad_option_exits_2() {
    let out = ibexporter().args(["--interval", "10"]).output().unwrap();
    assert_eq!(out.status.code(), Some(Exit::Input.status()), "{out:?}");
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("10 what?"),
        "{out:?}"
    );
}

/// SIGTERM once it serves: a clean stop, exit 0.
#[test]
fn sigterm_stops_it_with_exit_0() {
    let mut server = common::start(&["--no-probe", "hca,shm,udp,wakeup"]);
    let pid = server.child.id().to_string();
    assert!(Command::new("kill")
        .args(["-TERM", &pid])
        .status()
        .unwrap()
        .success());
    let deadline = std::time::Instant::now() + Duration::from_secs(30);
    let status = loop {
        if let Some(s) = server.child.try_wait().unwrap() {
            break Some(s);
        }
        if std::time::Instant::now() > deadline {
            break None;
        }
        std::thread::sleep(Duration::from_millis(50));
    };
    assert_eq!(
        status.and_then(|s| s.code()),
        Some(Exit::Ok.status()),
        "{status:?}"
    );
}

/// Waits for `child` at most `limit`, killing it past that.
fn wait_bounded(mut child: std::process::Child, limit: Duration) -> std::process::Output {
    let deadline = std::time::Instant::now() + limit;
    while child.try_wait().unwrap().is_none() {
        if std::time::Instant::now() > deadline {
            let _ = child.kill();
            break;
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    child.wait_with_output().unwrap()
}

/// `--sizes` reads ranges as ibprobe's `--sizes` does (one parser,
/// `ibhost::list`): a bad range is refused with the same words.
#[test]
fn sizes_take_ranges_as_ibprobe_does() {
    let out = ibexporter().args(["--sizes", "3..100"]).output().unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(Exit::Input.status()), "{err}");
    assert!(
        err.contains(&ibhost::list::parse_sizes("3..100").unwrap_err()),
        "{err}"
    );
    assert_eq!(ibhost::list::parse_sizes("8..32").unwrap(), [8, 16, 32]);
}
