//! Running a measurement command as a child: stoppable by a signal or a
//! deadline, with its output kept bounded.
//!
//! Why it exists: `ibtune experiment -- COMMAND` and `ibprobe compare --
//! CMD` run a command per round and read its JSON report. Both must stop
//! it when they are stopped (Ctrl-C, SIGTERM, SIGHUP) or when a round runs
//! too long, and neither may hold more of its output than a report needs.
//! So the command runs in its own process group ([`run`]): a stop signal is
//! forwarded to that group, after [`GRACE`] the group is killed, and
//! whatever the command left in its group is killed when it exits. Its
//! stdout is kept up to a limit and its stderr only as a head and a tail;
//! the rest is read and dropped, so the command never blocks on a full
//! pipe and a gigabyte of output costs no memory.
//!
//! The stop signal itself is caught by [`stop_on_signals`] (a handler that
//! records the signal's number), so the caller finishes its own clean-up
//! (ibtune reverts the host) after the child is gone. The same handler,
//! installed by [`stop_signal_flag`], is the flag ibprobe's measurement
//! loops stop on: one stop-signal mechanism for every tool.

use nix::errno::Errno;
use nix::sys::signal::{killpg, sigaction, SaFlags, SigAction, SigHandler, SigSet, Signal};
use nix::sys::wait::{waitid, Id, WaitPidFlag, WaitStatus};
use nix::unistd::Pid;
use std::io::{self, Read};
use std::os::unix::process::CommandExt;
use std::process::{Command, ExitStatus, Stdio};
use std::sync::atomic::{AtomicBool, AtomicI32, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// How long a stopped (or timed-out) command has to exit after the signal
/// before its process group is killed with SIGKILL.
pub const GRACE: Duration = Duration::from_secs(5);

/// How long [`run`] waits for the last bytes of the pipes once the command's
/// group is gone (a process that left the group with `setsid` may hold them
/// open: what was read by then is kept).
const DRAIN: Duration = Duration::from_secs(1);

/// The most characters of a line [`Captured::first_line`] and
/// [`Captured::last_line`] quote.
pub const EXCERPT_CHARS: usize = 200;

/// How often the child's state is checked while it runs.
const POLL: Duration = Duration::from_millis(10);

/// Bounds of one run.
#[derive(Debug, Clone, Copy)]
pub struct Limits {
    /// Bytes of stdout kept; more is read, counted and dropped.
    pub stdout_max: usize,
    /// Bytes of stderr kept at its start and again at its end.
    pub stderr_keep: usize,
    /// Stop the command (SIGTERM to its group, SIGKILL after `grace`)
    /// once it has run this long; `None`: no limit.
    pub timeout: Option<Duration>,
    /// Time between the stop signal and SIGKILL.
    pub grace: Duration,
}

/// Why the command ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Ending {
    /// By itself.
    Exited,
    /// It ran past [`Limits::timeout`] and was stopped.
    TimedOut,
    /// The caller was stopped by this signal, which was forwarded.
    Stopped(Signal),
}

/// Output kept from one stream: its start (up to a limit), optionally its
/// end, and how many bytes there were in all.
#[derive(Debug, Clone, Default)]
pub struct Captured {
    head: Vec<u8>,
    tail: Vec<u8>,
    head_max: usize,
    tail_max: usize,
    total: u64,
}

impl Captured {
    fn new(head_max: usize, tail_max: usize) -> Captured {
        Captured {
            head_max,
            tail_max,
            ..Captured::default()
        }
    }

    fn push(&mut self, mut buf: &[u8]) {
        self.total += buf.len() as u64;
        let room = self.head_max.saturating_sub(self.head.len());
        let n = room.min(buf.len());
        self.head.extend_from_slice(&buf[..n]);
        buf = &buf[n..];
        if self.tail_max == 0 || buf.is_empty() {
            return;
        }
        self.tail.extend_from_slice(buf);
        // Trim in amortised steps: at most twice the kept tail in memory.
        if self.tail.len() > 2 * self.tail_max {
            let cut = self.tail.len() - self.tail_max;
            self.tail.drain(..cut);
        }
    }

    /// Every byte, if all of them were kept.
    pub fn all(&self) -> Option<&[u8]> {
        (!self.overflowed()).then_some(&self.head[..])
    }

    /// True when more was written than kept.
    pub fn overflowed(&self) -> bool {
        self.total > self.head.len() as u64
    }

    /// Bytes written in all.
    pub fn total(&self) -> u64 {
        self.total
    }

    /// The first non-empty line, as an excerpt ([`excerpt`]).
    pub fn first_line(&self) -> String {
        let h = &self.head[..];
        let line = h
            .split(|&b| b == b'\n')
            .find(|l| !l.iter().all(u8::is_ascii_whitespace))
            .unwrap_or(&h[..0]);
        // Cut when the line runs into the end of what was kept.
        let ends_at_cut = self.overflowed() && end_of(h, line) == h.len();
        excerpt(line, ends_at_cut)
    }

    /// The last non-empty line, as an excerpt ([`excerpt`]).
    pub fn last_line(&self) -> String {
        let (kept, dropped) = if self.tail.is_empty() {
            (&self.head[..], false)
        } else {
            let from = self.tail.len().saturating_sub(self.tail_max);
            let kept = &self.tail[from..];
            (kept, self.total > (self.head.len() + kept.len()) as u64)
        };
        let line = kept
            .split(|&b| b == b'\n')
            .rev()
            .find(|l| !l.iter().all(u8::is_ascii_whitespace))
            .unwrap_or(&kept[..0]);
        // Cut when the line starts where the kept tail starts.
        let starts_at_cut = dropped && end_of(kept, line) == line.len();
        excerpt(line, starts_at_cut)
    }
}

/// Where `part`, a slice of `whole`, ends in it.
fn end_of(whole: &[u8], part: &[u8]) -> usize {
    part.as_ptr() as usize - whole.as_ptr() as usize + part.len()
}

/// A line quoted in a message: valid UTF-8 (lossy), control characters
/// escaped, at most [`EXCERPT_CHARS`] characters, with `...` when cut.
pub fn excerpt(line: &[u8], cut: bool) -> String {
    let text = String::from_utf8_lossy(line);
    let mut out: String = text
        .trim_end()
        .chars()
        .take(EXCERPT_CHARS)
        .flat_map(|c| {
            if c.is_control() {
                c.escape_default().collect::<Vec<_>>()
            } else {
                vec![c]
            }
        })
        .collect();
    if cut || text.chars().count() > EXCERPT_CHARS {
        out.push_str("...");
    }
    out
}

/// How a run ended, with what it printed.
#[derive(Debug)]
pub struct Finished {
    /// Why it ended.
    pub ending: Ending,
    /// Its exit status.
    pub status: ExitStatus,
    /// Its stdout, up to [`Limits::stdout_max`].
    pub stdout: Captured,
    /// The start and end of its stderr.
    pub stderr: Captured,
}

/// Starts a thread that reads `src` to its end into a [`Captured`].
fn reader(
    src: Option<impl Read + Send + 'static>,
    keep: Captured,
) -> (Arc<Mutex<Captured>>, std::sync::mpsc::Receiver<()>) {
    let shared = Arc::new(Mutex::new(keep));
    let (done, wait) = std::sync::mpsc::channel();
    let into = Arc::clone(&shared);
    if let Some(mut src) = src {
        std::thread::spawn(move || {
            let mut buf = vec![0u8; 64 * 1024];
            loop {
                match src.read(&mut buf) {
                    Ok(0) => break,
                    Ok(n) => into
                        .lock()
                        .unwrap_or_else(|e| e.into_inner())
                        .push(&buf[..n]),
                    Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                    Err(_) => break,
                }
            }
            let _ = done.send(());
        });
    }
    (shared, wait)
}

/// Runs `cmd` (stdin from /dev/null) in its own process group and waits
/// for it within `limits`. `stop` is asked every few milliseconds; once it
/// names a signal, that signal goes to the command's group, and SIGKILL
/// [`Limits::grace`] later. A timeout sends SIGTERM, then SIGKILL after the
/// grace. When the command exits, whatever it left in its group is killed.
pub fn run(
    cmd: &mut Command,
    limits: &Limits,
    stop: &dyn Fn() -> Option<Signal>,
) -> io::Result<Finished> {
    let mut child = cmd
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .process_group(0)
        .spawn()?;
    let group = Pid::from_raw(child.id() as i32);
    let out = reader(child.stdout.take(), Captured::new(limits.stdout_max, 0));
    let err = reader(
        child.stderr.take(),
        Captured::new(limits.stderr_keep, limits.stderr_keep),
    );
    let start = Instant::now();
    let mut ending = Ending::Exited;
    let mut kill_at: Option<Instant> = None;
    loop {
        // WNOWAIT: the leader stays a zombie, so its group id cannot be
        // reused before the group is killed below.
        match waitid(
            Id::Pid(group),
            WaitPidFlag::WEXITED | WaitPidFlag::WNOHANG | WaitPidFlag::WNOWAIT,
        ) {
            Ok(WaitStatus::StillAlive) | Err(Errno::EINTR) => {}
            Ok(_) => break,
            Err(e) => {
                let _ = killpg(group, Signal::SIGKILL);
                let _ = child.wait();
                return Err(e.into());
            }
        }
        match kill_at {
            None => {
                let signal = if let Some(sig) = stop() {
                    ending = Ending::Stopped(sig);
                    Some(sig)
                } else if limits.timeout.is_some_and(|t| start.elapsed() >= t) {
                    ending = Ending::TimedOut;
                    Some(Signal::SIGTERM)
                } else {
                    None
                };
                if let Some(sig) = signal {
                    let _ = killpg(group, sig);
                    kill_at = Some(Instant::now() + limits.grace);
                }
            }
            Some(at) if Instant::now() >= at => {
                let _ = killpg(group, Signal::SIGKILL);
            }
            Some(_) => {}
        }
        std::thread::sleep(POLL);
    }
    // A straggler in the group would hold the pipes open and keep running
    // after the round: the group goes with its leader.
    let _ = killpg(group, Signal::SIGKILL);
    let status = child.wait()?;
    let take = |(kept, done): (Arc<Mutex<Captured>>, std::sync::mpsc::Receiver<()>)| {
        let _ = done.recv_timeout(DRAIN);
        let c = kept.lock().unwrap_or_else(|e| e.into_inner()).clone();
        c
    };
    Ok(Finished {
        ending,
        status,
        stdout: take(out),
        stderr: take(err),
    })
}

/// The signal that stopped this process, once a stop handler caught one
/// (0: none yet).
static STOP_SIGNAL: AtomicI32 = AtomicI32::new(0);

/// Set with [`STOP_SIGNAL`]: the flag a measurement loop reads between
/// messages ([`stop_signal_flag`]).
static STOPPED: AtomicBool = AtomicBool::new(false);

extern "C" fn on_stop(sig: libc::c_int) {
    STOP_SIGNAL.store(sig, Ordering::SeqCst);
    STOPPED.store(true, Ordering::SeqCst);
}

/// The signal [`stop_on_signals`] caught, if any.
pub fn stop_signal() -> Option<Signal> {
    match STOP_SIGNAL.load(Ordering::SeqCst) {
        0 => None,
        n => Signal::try_from(n).ok(),
    }
}

/// The one stop handler: `signals` record themselves ([`stop_signal`],
/// [`stop_signal_flag`]'s flag) instead of killing the process, with
/// `flags` saying how the handler behaves (restarted calls, reset after
/// the first signal).
fn catch_stop(signals: &[Signal], flags: SaFlags) -> io::Result<()> {
    let action = SigAction::new(SigHandler::Handler(on_stop), flags, SigSet::empty());
    for &sig in signals {
        // SAFETY: the handler only stores to static atomics, which is
        // async-signal-safe; the callers install no other handler for
        // these signals.
        unsafe { sigaction(sig, &action) }.map_err(io::Error::from)?;
    }
    Ok(())
}

/// Turns SIGINT, SIGTERM and SIGHUP into a recorded signal ([`stop_signal`])
/// instead of death, for as long as the process runs.
///
/// Why it exists: a tool that runs a command per round must stop that
/// command and then clean up (ibtune reverts the host) before it exits.
/// A child gets the default actions back at exec (handlers do not survive
/// execve(2)).
pub fn stop_on_signals() -> io::Result<()> {
    catch_stop(
        &[Signal::SIGINT, Signal::SIGTERM, Signal::SIGHUP],
        SaFlags::SA_RESTART,
    )
}

/// Turns the first SIGINT or SIGTERM into a flag, and returns that flag.
///
/// Why it exists: a measurement loop (ibprobe's) checks it between
/// messages and stops, so Ctrl-C prints the statistics collected so far;
/// and a SIGTERM (what systemd, `kill` and test harnesses send) leaves
/// through the same orderly path, so every owner's Drop runs (a server's
/// shm ring file is unlinked). Blocking calls are not restarted, so a
/// loop waiting in one sees the flag at once. The handler resets itself
/// (SA_RESETHAND): a second signal kills the process as usual.
pub fn stop_signal_flag() -> io::Result<&'static AtomicBool> {
    catch_stop(&[Signal::SIGINT, Signal::SIGTERM], SaFlags::SA_RESETHAND)?;
    Ok(&STOPPED)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn limits() -> Limits {
        Limits {
            stdout_max: 1024,
            stderr_keep: 64,
            timeout: Some(Duration::from_secs(20)),
            grace: Duration::from_millis(300),
        }
    }

    fn sh(script: &str) -> Command {
        let mut c = Command::new("sh");
        c.args(["-c", script]);
        c
    }

    #[test]
    fn keeps_small_output_whole() {
        let f = run(&mut sh("echo hello; echo oops >&2"), &limits(), &|| None).unwrap();
        assert_eq!(f.ending, Ending::Exited);
        assert!(f.status.success());
        assert_eq!(f.stdout.all(), Some(&b"hello\n"[..]));
        assert_eq!(f.stderr.first_line(), "oops");
        assert_eq!(f.stderr.last_line(), "oops");
    }

    #[test]
    fn large_output_is_counted_not_kept() {
        let f = run(
            &mut sh("head -c 3000000 /dev/zero; (echo first; head -c 100000 /dev/zero | tr '\\0' x; echo; echo last) >&2"),
            &limits(),
            &|| None,
        )
        .unwrap();
        assert_eq!(f.stdout.total(), 3_000_000);
        assert!(f.stdout.overflowed() && f.stdout.all().is_none());
        assert_eq!(f.stderr.first_line(), "first");
        assert_eq!(f.stderr.last_line(), "last");
        let long = run(
            &mut sh("head -c 100000 /dev/zero | tr '\\0' x >&2"),
            &limits(),
            &|| None,
        )
        .unwrap();
        let e = long.stderr.first_line();
        assert!(e.len() <= EXCERPT_CHARS + 3 && e.ends_with("..."), "{e}");
    }

    #[test]
    fn a_timeout_stops_the_whole_group() {
        let mut l = limits();
        l.timeout = Some(Duration::from_millis(200));
        let t = Instant::now();
        // The inner sleep ignores nothing, but the shell waits for it: only
        // a signal to the group ends both.
        let f = run(&mut sh("sleep 30 & wait"), &l, &|| None).unwrap();
        assert_eq!(f.ending, Ending::TimedOut);
        assert!(t.elapsed() < Duration::from_secs(5), "{:?}", t.elapsed());
    }

    #[test]
    fn a_stop_is_forwarded_and_a_deaf_command_is_killed_after_the_grace() {
        let t = Instant::now();
        let f = run(
            &mut sh("trap '' INT; sleep 30; sleep 30"),
            &limits(),
            &|| (t.elapsed() > Duration::from_millis(100)).then_some(Signal::SIGINT),
        )
        .unwrap();
        assert_eq!(f.ending, Ending::Stopped(Signal::SIGINT));
        assert!(t.elapsed() < Duration::from_secs(5), "{:?}", t.elapsed());
    }

    #[test]
    fn excerpts_escape_control_characters() {
        assert_eq!(excerpt(b"a\x1b[2Jb", false), "a\\u{1b}[2Jb");
        assert_eq!(excerpt(b"abc", true), "abc...");
    }
}
