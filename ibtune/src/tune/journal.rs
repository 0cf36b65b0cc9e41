//! The journal: every original value, written durably before it is changed.
//!
//! Why it exists: `ibtune revert` must restore the host exactly, even after
//! a crash (power loss, SIGKILL) in the middle of `apply`. So each record is
//! appended as one JSON line and `fsync`ed (file and, on creation, folder)
//! BEFORE the change it describes is made. A record whose change never
//! happened is harmless to undo: it writes back the value that is already
//! there.
//!
//! Layout under `--state-dir` (default `/var/lib/ibtune`):
//! - `journal.jsonl`: the open journal, one [`Record`] per line;
//! - `journal-<unix time>.reverted.jsonl`: journals already reverted;
//! - `lock`: held with `flock` while apply or revert runs;
//! - `hold.pid`, `hold.pid.log`: the cpu_dma_latency holder.

use anyhow::{bail, Context, Result};
use nix::fcntl::{Flock, FlockArg};
use serde::{Deserialize, Serialize};
use std::fs::{self, File, OpenOptions};
use std::io::{BufRead, BufReader, Write};
use std::path::{Path, PathBuf};

/// How a journalled file value is written back.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Restore {
    /// Write the original bytes back.
    Raw,
    /// Live kernel: write only the bracketed word of the original
    /// (`always [madvise] never` -> `madvise`); snapshots get the raw bytes.
    Bracket,
}

/// One journal line.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "record", rename_all = "snake_case")]
pub enum Record {
    /// Start of an apply.
    Begin {
        /// Profile name.
        profile: String,
        /// Profile file.
        profile_path: String,
        /// Host root applied to.
        root: String,
        /// Seconds since the epoch.
        time: u64,
    },
    /// A file about to be written.
    File {
        /// Item key.
        key: String,
        /// Host path.
        path: String,
        /// Its content before, or `None` when it did not exist.
        original: Option<String>,
        /// How to write it back.
        restore: Restore,
        /// Service to restart after writing it back (irqbalance).
        restart: Option<String>,
    },
    /// A directory about to be created.
    Dir {
        /// Item key.
        key: String,
        /// Host path.
        path: String,
        /// A cgroup (files inside belong to the kernel).
        cgroup: bool,
    },
    /// A cgroup controller about to be enabled.
    Controller {
        /// Item key.
        key: String,
        /// `cgroup.subtree_control` host path.
        path: String,
        /// Controller name.
        controller: String,
        /// The file's content before.
        original: String,
    },
    /// The tuned profile about to be switched.
    Tuned {
        /// Item key.
        key: String,
        /// `/etc/tuned/active_profile` before (`None`: absent).
        active_profile: Option<String>,
        /// `/etc/tuned/profile_mode` before.
        profile_mode: Option<String>,
    },
    /// A cpu_dma_latency holder about to be started.
    Hold {
        /// Item key.
        key: String,
        /// Its pidfile.
        pidfile: String,
    },
    /// Apply finished.
    Commit {
        /// Seconds since the epoch.
        time: u64,
    },
}

impl Record {
    /// The item key, for records that change something.
    pub fn key(&self) -> Option<&str> {
        match self {
            Record::File { key, .. }
            | Record::Dir { key, .. }
            | Record::Controller { key, .. }
            | Record::Tuned { key, .. }
            | Record::Hold { key, .. } => Some(key),
            _ => None,
        }
    }
}

/// The state directory and its open journal.
pub struct Journal {
    dir: PathBuf,
    _lock: Flock<File>,
}

/// Seconds since the epoch.
pub fn now() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_secs())
        .unwrap_or(0)
}

impl Journal {
    /// Opens the state directory, creating it, and takes its lock so no
    /// other apply or revert runs at the same time.
    pub fn open(dir: &Path) -> Result<Journal> {
        fs::create_dir_all(dir).with_context(|| {
            format!(
                "cannot create state directory {} (needs root, or pass --state-dir)",
                dir.display()
            )
        })?;
        let f = OpenOptions::new()
            .create(true)
            .truncate(false)
            .write(true)
            .open(dir.join("lock"))
            .with_context(|| format!("cannot open {}/lock", dir.display()))?;
        let lock = Flock::lock(f, FlockArg::LockExclusiveNonblock).map_err(|(_, e)| {
            anyhow::anyhow!(
                "another ibtune apply or revert holds {}/lock ({e}); wait for it to finish",
                dir.display()
            )
        })?;
        Ok(Journal {
            dir: dir.to_path_buf(),
            _lock: lock,
        })
    }

    /// The state directory.
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// Path of the open journal.
    pub fn path(&self) -> PathBuf {
        self.dir.join("journal.jsonl")
    }

    /// The records of the open journal (empty if none). A torn last line
    /// (crash while appending) is ignored: its change was never started.
    pub fn records(&self) -> Result<Vec<Record>> {
        read_records(&self.path())
    }

    /// Appends a record and makes it durable before returning.
    pub fn append(&self, r: &Record) -> Result<()> {
        let path = self.path();
        let created = !path.exists();
        let mut f = OpenOptions::new()
            .create(true)
            .append(true)
            .open(&path)
            .with_context(|| format!("cannot open journal {}", path.display()))?;
        let mut line = serde_json::to_string(r)?;
        line.push('\n');
        f.write_all(line.as_bytes())
            .and_then(|_| f.sync_all())
            .with_context(|| format!("cannot write journal {}", path.display()))?;
        if created {
            File::open(&self.dir)
                .and_then(|d| d.sync_all())
                .with_context(|| format!("cannot sync {}", self.dir.display()))?;
        }
        Ok(())
    }

    /// Moves the open journal aside once it has been reverted; returns the new path.
    pub fn archive(&self) -> Result<Option<PathBuf>> {
        let path = self.path();
        if !path.exists() {
            return Ok(None);
        }
        let mut n = 0;
        let to = loop {
            let cand = self.dir.join(if n == 0 {
                format!("journal-{}.reverted.jsonl", now())
            } else {
                format!("journal-{}-{n}.reverted.jsonl", now())
            });
            if !cand.exists() {
                break cand;
            }
            n += 1;
        };
        fs::rename(&path, &to)?;
        File::open(&self.dir).and_then(|d| d.sync_all())?;
        Ok(Some(to))
    }

    /// Removes the open journal (an apply that rolled itself back completely).
    pub fn discard(&self) -> Result<()> {
        let p = self.path();
        if p.exists() {
            fs::remove_file(&p)?;
            File::open(&self.dir).and_then(|d| d.sync_all())?;
        }
        Ok(())
    }
}

/// Reads a journal file; a missing file is an empty journal.
pub fn read_records(path: &Path) -> Result<Vec<Record>> {
    let f = match File::open(path) {
        Ok(f) => f,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Vec::new()),
        Err(e) => return Err(e).with_context(|| format!("cannot read journal {}", path.display())),
    };
    let lines: Vec<String> = BufReader::new(f).lines().collect::<Result<_, _>>()?;
    let mut out = Vec::new();
    for (i, line) in lines.iter().enumerate() {
        if line.trim().is_empty() {
            continue;
        }
        match serde_json::from_str(line) {
            Ok(r) => out.push(r),
            // Only the last line can be torn by a crash mid-append.
            Err(_) if i + 1 == lines.len() => break,
            Err(e) => bail!(
                "journal {} line {}: {e}; the journal is damaged, inspect it by hand",
                path.display(),
                i + 1
            ),
        }
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn append_read_archive() {
        let d = tempfile::tempdir().unwrap();
        let j = Journal::open(d.path()).unwrap();
        let r = Record::File {
            key: "k".into(),
            path: "/proc/x".into(),
            original: Some("1\n".into()),
            restore: Restore::Raw,
            restart: None,
        };
        j.append(&r).unwrap();
        assert_eq!(j.records().unwrap(), vec![r]);
        // A torn last line is ignored.
        fs::OpenOptions::new()
            .append(true)
            .open(j.path())
            .unwrap()
            .write_all(b"{\"record\":\"fi")
            .unwrap();
        assert_eq!(j.records().unwrap().len(), 1);
        let to = j.archive().unwrap().unwrap();
        assert!(to.exists() && !j.path().exists());
        assert!(j.records().unwrap().is_empty());
    }

    #[test]
    fn second_opener_is_refused() {
        let d = tempfile::tempdir().unwrap();
        let _a = Journal::open(d.path()).unwrap();
        let e = Journal::open(d.path()).err().unwrap();
        assert!(e.to_string().contains("another ibtune"), "{e}");
    }
}
