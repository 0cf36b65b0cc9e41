//! Helpers shared by the integration tests that drive the `ibprobe`
//! binary: run it, and check the one-line refusal contract; the report
//! tests' fixed inputs (`report`).
//!
//! Each test file that says `mod common;` compiles its own copy and uses
//! only some of these, hence the `dead_code` allowance.
#![allow(dead_code)]

pub mod report;

use std::io::{BufRead, BufReader};
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use assert_cmd::cargo::cargo_bin;

/// Runs `cmd` (with a 60 s limit): exit code (-1 when killed), stdout, stderr.
pub fn run(cmd: &mut Command) -> (i32, String, String) {
    run_within(cmd, Duration::from_secs(60))
}

/// Runs `cmd`, killed after `limit`, as [`run`].
pub fn run_within(cmd: &mut Command, limit: Duration) -> (i32, String, String) {
    let out = assert_cmd::Command::from_std(std::mem::replace(cmd, Command::new("true")))
        .timeout(limit)
        .output()
        .expect("runs");
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

/// Runs the built `ibprobe` with `args`, as [`run`].
pub fn ibprobe(args: &[&str]) -> (i32, String, String) {
    let mut c = Command::new(cargo_bin("ibprobe"));
    c.args(args);
    run(&mut c)
}

/// Asserts the refusal contract: exit 2, nothing on stdout, one line on
/// stderr starting with "ibprobe: " and containing every `parts`.
pub fn one_line_exit_2(code: i32, out: &str, err: &str, parts: &[&str]) {
    assert_eq!(code, 2, "stderr: {err}");
    assert_eq!(out, "", "nothing on stdout");
    assert_eq!(err.lines().count(), 1, "not one line: {err:?}");
    assert!(err.starts_with("ibprobe: "), "{err}");
    for p in parts {
        assert!(err.contains(p), "{err:?} lacks {p:?}");
    }
}

/// Starts `ibprobe server` of `transport` (with `extra`) on a free local
/// port: the process, the address it listens on (its first line on
/// stderr) and the rest of its stderr.
pub fn spawn_server(
    transport: &str,
    extra: &[&str],
) -> (Child, String, BufReader<std::process::ChildStderr>) {
    let mut child = Command::new(cargo_bin("ibprobe"))
        .args(["server", "--transport", transport, "--bind", "127.0.0.1:0"])
        .args(extra)
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .expect("server starts");
    let mut stderr = BufReader::new(child.stderr.take().unwrap());
    let mut line = String::new();
    stderr.read_line(&mut line).unwrap();
    let addr = line
        .split("listening on ")
        .nth(1)
        .and_then(|r| r.split_whitespace().next())
        .unwrap_or_else(|| panic!("no address in {line:?}"))
        .to_string();
    (child, addr, stderr)
}

/// A server process killed on drop, with the address it listens on.
pub struct Server {
    pub child: Child,
    pub addr: String,
    pub stderr: BufReader<std::process::ChildStderr>,
}

impl Server {
    pub fn start(transport: &str, extra: &[&str]) -> Server {
        let (child, addr, stderr) = spawn_server(transport, extra);
        Server {
            child,
            addr,
            stderr,
        }
    }

    pub fn wait(mut self) -> (i32, String) {
        let t = std::time::Instant::now();
        loop {
            if let Some(s) = self.child.try_wait().unwrap() {
                let mut rest = String::new();
                let _ = std::io::Read::read_to_string(&mut self.stderr, &mut rest);
                return (s.code().unwrap_or(-1), rest);
            }
            assert!(
                t.elapsed() < Duration::from_secs(20),
                "server did not exit after its client"
            );
            std::thread::sleep(Duration::from_millis(20));
        }
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}
