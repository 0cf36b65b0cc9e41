//! `ibprobe compare -- CMD` stopped by a signal: the round it runs goes
//! with it (forwarded to the round's process group, SIGKILL after a
//! grace), and compare exits 130 with the rounds done.

use nix::sys::signal::{kill, Signal};
use nix::unistd::Pid;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

const IBPROBE: &str = env!("CARGO_BIN_EXE_ibprobe");

/// The pids whose parent is `parent`, from /proc.
fn children_of(parent: u32) -> Vec<i32> {
    let mut out = Vec::new();
    for e in std::fs::read_dir("/proc").unwrap().flatten() {
        let Ok(pid) = e.file_name().to_string_lossy().parse::<i32>() else {
            continue;
        };
        let Ok(stat) = std::fs::read_to_string(format!("/proc/{pid}/stat")) else {
            continue;
        };
        // pid (comm) state ppid ...
        let after = stat.rsplit(')').next().unwrap_or("");
        let ppid = after.split_whitespace().nth(1).and_then(|p| p.parse().ok());
        if ppid == Some(parent) {
            out.push(pid);
        }
    }
    out
}

/// Whether `pid` still runs (a zombie counts as gone).
fn alive(pid: i32) -> bool {
    std::fs::read_to_string(format!("/proc/{pid}/stat"))
        .map(|s| {
            !s.rsplit(')')
                .next()
                .unwrap_or("")
                .trim_start()
                .starts_with('Z')
        })
        .unwrap_or(false)
}

#[test]
fn a_stop_signal_to_compare_stops_its_round_too() {
    for sig in [Signal::SIGTERM, Signal::SIGINT] {
        // A round that would run for 1000 s.
        let mut c = Command::new(IBPROBE)
            .args([
                "compare",
                "--rounds",
                "2",
                "--quiet",
                "--vary",
                "transport=shm,udp",
                "--json",
                "--",
                "loopback",
                "--rate",
                "1",
                "--duration",
                "1000s",
            ])
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        let t = Instant::now();
        let round = loop {
            if let Some(&p) = children_of(c.id()).first() {
                break p;
            }
            if t.elapsed() > Duration::from_secs(20) || c.try_wait().unwrap().is_some() {
                let _ = c.kill();
                let _ = c.wait();
                panic!("{sig}: compare started no round");
            }
            std::thread::sleep(Duration::from_millis(20));
        };
        std::thread::sleep(Duration::from_millis(300));
        kill(Pid::from_raw(c.id() as i32), sig).unwrap();
        let t = Instant::now();
        let status = loop {
            if let Some(s) = c.try_wait().unwrap() {
                break Some(s);
            }
            if t.elapsed() > Duration::from_secs(15) {
                let _ = c.kill();
                let _ = c.wait();
                break None;
            }
            std::thread::sleep(Duration::from_millis(20));
        };
        // Give a round left behind a moment to show it is still there.
        std::thread::sleep(Duration::from_millis(100));
        let left = alive(round);
        if left {
            let _ = kill(Pid::from_raw(round), Signal::SIGKILL);
        }
        let status = status.unwrap_or_else(|| panic!("{sig}: compare still ran 15 s later"));
        assert!(
            !left,
            "{sig}: compare's round (pid {round}) was left running"
        );
        assert_eq!(status.code(), Some(130), "{sig}: {status:?}");
    }
}
