//! `/proc/thread-self/sched`: the scheduler's own count of the measuring
//! thread's CPU migrations (`se.nr_migrations`).
//!
//! Why it exists: the kernel counts them anyway; reading that costs one
//! `pread` per interval, no privilege and nothing per context switch,
//! unlike a perf event (`perf.rs`). The file exists on kernels built with
//! `CONFIG_SCHED_DEBUG` (Debian's, Ubuntu's, RHEL's); elsewhere migrations
//! are missing unless perf events count them (a PMU, `--perf-counters`).

use std::fs::File;
use std::io;

/// The line that carries the count.
const KEY: &str = "se.nr_migrations";

/// `se.nr_migrations` in the text of a `/proc/<pid>/sched` file.
pub fn nr_migrations(text: &str) -> Option<u64> {
    text.lines().find_map(|l| {
        let (k, v) = l.split_once(':')?;
        (k.trim() == KEY).then(|| v.trim().parse().ok())?
    })
}

/// The calling thread's sched file, kept open, with a buffer sized at open.
pub struct SchedFile {
    file: File,
    buf: Vec<u8>,
}

impl SchedFile {
    /// Opens `/proc/thread-self/sched` for the calling thread (the file
    /// stays bound to it) and checks that it carries the count.
    pub fn open() -> io::Result<SchedFile> {
        let path = "/proc/thread-self/sched";
        let text = ibhost::file::read_pseudo(path, ibhost::file::MAX_PSEUDO_FILE)?;
        if nr_migrations(&text).is_none() {
            return Err(io::Error::new(
                io::ErrorKind::InvalidData,
                format!("{path} has no {KEY} line"),
            ));
        }
        Ok(SchedFile {
            file: File::open(path)?,
            buf: vec![0u8; text.len() * 2 + 4096],
        })
    }

    /// The thread's migrations so far; no allocation.
    pub fn migrations(&mut self) -> Option<u64> {
        let n = super::counts::read_proc(&self.file, &mut self.buf)?;
        nr_migrations(std::str::from_utf8(&self.buf[..n]).ok()?)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn this_threads_migrations_are_counted_when_it_moves() {
        let cpus = ibhost::rt::allowed_cpus();
        if cpus.len() < 2 {
            eprintln!("one CPU allowed: nothing to migrate to");
            return;
        }
        // On a thread of its own: the pinning stays there.
        let (before, after) = std::thread::spawn(move || {
            let Ok(mut f) = SchedFile::open() else {
                eprintln!("no /proc/thread-self/sched with {KEY} here (CONFIG_SCHED_DEBUG off)");
                return None;
            };
            let before = f.migrations().expect("a second read works as the first");
            // Hop between two CPUs: each pinning moves the thread.
            for i in 0..4 {
                ibhost::rt::pin_to_cpu(cpus[i % 2]).expect("pin");
                std::thread::yield_now();
            }
            Some((before, f.migrations().expect("read")))
        })
        .join()
        .unwrap()
        .unzip();
        let (Some(before), Some(after)) = (before, after) else {
            return;
        };
        assert!(after >= before + 2, "before {before}, after {after}");
    }
}
