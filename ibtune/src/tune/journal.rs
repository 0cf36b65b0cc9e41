//! The journal: every original value, written durably before it is changed.
//!
//! Why it exists: `ibtune revert` must restore the host exactly, even after
//! a crash (power loss, SIGKILL) in the middle of `apply`. So each record is
//! appended as one JSON line and `fsync`ed (file and, on creation, folder)
//! BEFORE the change it describes is made. A record whose change never
//! happened is harmless to undo: it writes back the value that is already
//! there.
//!
//! A state folder holds the journal of one host root only: the `begin`
//! record names the root it was written for, and [`Journal::records_for`]
//! refuses a journal of another root before anything is undone from it.
//! So the default folder is per root ([`default_state_dir`]):
//! `/var/lib/ibtune` for the live host, a folder under
//! `/var/lib/ibtune/roots/` named after the canonical path for `--root DIR`.
//!
//! Layout under `--state-dir`:
//! - `journal.jsonl`: the open journal, one [`Record`] per line;
//! - `journal-<unix time>.reverted.jsonl`: journals already reverted;
//! - `lock`: held with `flock` while apply or revert runs;
//! - `hold.pid`, `hold.pid.log`: the cpu_dma_latency holder.

use crate::host::HostRoot;
use anyhow::{bail, Context, Result};
use nix::fcntl::{Flock, FlockArg};
use serde::{Deserialize, Serialize};
use std::fs::{self, File, OpenOptions};
use std::io::Write;
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

    /// The keys journalled in `dir` for `root`, read without creating,
    /// locking or changing anything (for `verify`, which needs no root);
    /// empty when there is no journal, or it is of another root or damaged.
    pub fn applied_keys(dir: &Path, root: &HostRoot) -> std::collections::BTreeSet<String> {
        let path = dir.join("journal.jsonl");
        let Ok(records) = read_checked(&path, Some(dir)) else {
            return Default::default();
        };
        match records.first() {
            Some(Record::Begin { root: theirs, .. })
                if *theirs == root.dir().display().to_string() =>
            {
                records
                    .iter()
                    .filter_map(|r| r.key().map(String::from))
                    .collect()
            }
            _ => Default::default(),
        }
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
        read_checked(&self.path(), Some(&self.dir))
    }

    /// [`Journal::records`], refused unless the journal was written for
    /// `root`: undoing a journal on another root would write one tree's
    /// originals into another and leave the first changed with no journal.
    pub fn records_for(&self, root: &HostRoot) -> Result<Vec<Record>> {
        let records = self.records()?;
        if let Some(Record::Begin { root: theirs, .. }) = records.first() {
            let ours = root.dir().display().to_string();
            if *theirs != ours {
                bail!(
                    "journal {} was written for host root {theirs}, not for this run's root {ours}: nothing was changed and the journal is kept. Revert it on its own root with `{}`; give each root its own --state-dir (the default is one per root)",
                    self.path().display(),
                    revert_command(Path::new(theirs), &self.dir)
                );
            }
        }
        Ok(records)
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

/// The live host's state folder.
pub const LIVE_STATE_DIR: &str = "/var/lib/ibtune";

/// The state folder of `root` when `--state-dir` is not given:
/// [`LIVE_STATE_DIR`] for the live host; for a snapshot a folder of its
/// own under `LIVE_STATE_DIR/roots/`, named after the root's canonical path
/// (`/srv/fx-1` -> `srv-fx\x2d1`, as `systemd-escape --path` writes it),
/// so no two roots ever share a journal and nothing is written into the
/// tree itself.
pub fn default_state_dir(root: &HostRoot) -> PathBuf {
    state_dir_of(root.dir())
}

/// [`default_state_dir`] of a canonical root path.
fn state_dir_of(root: &Path) -> PathBuf {
    if root == Path::new("/") {
        return PathBuf::from(LIVE_STATE_DIR);
    }
    Path::new(LIVE_STATE_DIR)
        .join("roots")
        .join(escape_path(&root.display().to_string()))
}

/// `systemd-escape --path`: `/` between names becomes `-`, anything but
/// ASCII letters, digits, `_` and a non-leading `.` becomes `\xNN`. A name
/// longer than a file name may be is cut, with a hash of the whole path.
fn escape_path(path: &str) -> String {
    let trimmed = path.trim_matches('/');
    let mut out = String::new();
    for (i, b) in trimmed.bytes().enumerate() {
        match b {
            b'/' => out.push('-'),
            b'.' if i > 0 => out.push('.'),
            b if b.is_ascii_alphanumeric() || b == b'_' => out.push(b as char),
            b => out.push_str(&format!("\\x{b:02x}")),
        }
    }
    if out.is_empty() {
        out.push('-');
    }
    const MAX: usize = 200;
    if out.len() > MAX {
        // FNV-1a: stable across releases, unlike the std hasher.
        let h = path.bytes().fold(0xcbf2_9ce4_8422_2325_u64, |h, b| {
            (h ^ u64::from(b)).wrapping_mul(0x0100_0000_01b3)
        });
        let mut cut = MAX - 17;
        while !out.is_char_boundary(cut) {
            cut -= 1;
        }
        out = format!("{}-{h:016x}", &out[..cut]);
    }
    out
}

/// The command that reverts the journal of `root` kept in `state`, as a
/// user types it: `ibtune [--root DIR] [--state-dir DIR] revert`, the
/// options left out where they are the defaults.
pub fn revert_command(root: &Path, state: &Path) -> String {
    let mut cmd = String::from("ibtune");
    if root != Path::new("/") {
        cmd += &format!(" --root {}", shell_word(&root.display().to_string()));
    }
    if state != state_dir_of(root) {
        cmd += &format!(" --state-dir {}", shell_word(&state.display().to_string()));
    }
    cmd + " revert"
}

/// `s` quoted for a shell when it needs it.
fn shell_word(s: &str) -> String {
    if !s.is_empty()
        && s.bytes()
            .all(|b| b.is_ascii_alphanumeric() || b"/._-+=:@,".contains(&b))
    {
        s.to_string()
    } else {
        format!("'{}'", s.replace('\'', "'\\''"))
    }
}

/// Why a host path in a journal record is refused, if it is.
///
/// A journal is read back by `revert`, which writes to every path it
/// names: each must be an absolute, normalised host path (`/a/b`: no empty,
/// `.` or `..` component, no trailing `/`) without control characters, so
/// it names a place inside `--root` and nothing else.
pub fn host_path_problem(p: &str) -> Option<&'static str> {
    if !p.starts_with('/') {
        return Some("it is not absolute");
    }
    if p.chars().any(char::is_control) {
        return Some("it contains a control character (NUL, newline, ...)");
    }
    if p == "/" {
        return Some("it is the root itself");
    }
    for c in p[1..].split('/') {
        match c {
            "" => return Some("it is not normalised (empty component or trailing '/')"),
            "." => return Some("it is not normalised (a '.' component)"),
            ".." => return Some("it has a '..' component"),
            _ => {}
        }
    }
    None
}

/// The name of a record's kind, as written in the journal.
fn kind(r: &Record) -> &'static str {
    match r {
        Record::Begin { .. } => "begin",
        Record::File { .. } => "file",
        Record::Dir { .. } => "dir",
        Record::Controller { .. } => "controller",
        Record::Tuned { .. } => "tuned",
        Record::Hold { .. } => "hold",
        Record::Commit { .. } => "commit",
    }
}

/// Checks one record read back from `path` at line `line`; `state` is the
/// state folder, where a hold record's pidfile must be.
fn check_record(r: &Record, path: &Path, line: usize, state: Option<&Path>) -> Result<()> {
    let host_path = match r {
        Record::File { path, .. } | Record::Dir { path, .. } | Record::Controller { path, .. } => {
            Some(path)
        }
        _ => None,
    };
    if let Some(p) = host_path {
        if let Some(why) = host_path_problem(p) {
            bail!(
                "journal {} line {line}: {} record path {p:?} is refused: {why}; a journal names absolute, normalised host paths only. The journal was damaged or edited: nothing was changed, inspect it by hand",
                path.display(),
                kind(r)
            );
        }
    }
    if let (Record::Hold { pidfile, .. }, Some(state)) = (r, state) {
        let want = state.join("hold.pid");
        if Path::new(pidfile) != want {
            bail!(
                "journal {} line {line}: hold record pidfile {pidfile:?} is refused: it must be {} (the state folder's); the journal was damaged or edited: nothing was changed, inspect it by hand",
                path.display(),
                want.display()
            );
        }
    }
    Ok(())
}

/// Reads a journal file; a missing file is an empty journal. Every record
/// is checked ([`host_path_problem`]) and the first must be `begin`: a bad
/// record is an error naming its line, and nothing is undone.
pub fn read_records(path: &Path) -> Result<Vec<Record>> {
    read_checked(path, None)
}

fn read_checked(path: &Path, state: Option<&Path>) -> Result<Vec<Record>> {
    // O_NONBLOCK, regular files only, at most 16 MiB: a FIFO or a device
    // in the journal's place is refused at once. A journal holds a few
    // hundred short lines; 16 MiB is far beyond any.
    let text = match ibhost::file::read_small(path, crate::host::root::MAX_READ) {
        Ok(t) => t,
        Err(ibhost::file::SmallFileError::Io { source, .. })
            if source.kind() == std::io::ErrorKind::NotFound =>
        {
            return Ok(Vec::new())
        }
        Err(ibhost::file::SmallFileError::TooLarge { .. }) => bail!(
            "journal {} is larger than 16 MiB: it was not written by ibtune; inspect it by hand",
            path.display()
        ),
        Err(e) => bail!("cannot read journal: {e}"),
    };
    let text = String::from_utf8(text).map_err(|_| {
        anyhow::anyhow!(
            "journal {} is not UTF-8 text; inspect it by hand",
            path.display()
        )
    })?;
    let lines: Vec<&str> = text.lines().collect();
    let mut out = Vec::new();
    for (i, line) in lines.iter().enumerate() {
        if line.trim().is_empty() {
            continue;
        }
        match serde_json::from_str::<Record>(line) {
            Ok(r) => {
                check_record(&r, path, i + 1, state)?;
                if out.is_empty() && !matches!(r, Record::Begin { .. }) {
                    bail!(
                        "journal {} has no begin record (line {} is a {} record): it was not started by `ibtune apply`, or its first line was lost; nothing was restored. Inspect it by hand; move it aside to start over",
                        path.display(),
                        i + 1,
                        kind(&r)
                    );
                }
                out.push(r)
            }
            // Only the last line can be torn by a crash mid-append.
            Err(_) if i + 1 == lines.len() && !text.ends_with('\n') => break,
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
        j.append(&begin()).unwrap();
        j.append(&r).unwrap();
        assert_eq!(j.records().unwrap(), vec![begin(), r]);
        // A torn last line is ignored.
        fs::OpenOptions::new()
            .append(true)
            .open(j.path())
            .unwrap()
            .write_all(b"{\"record\":\"fi")
            .unwrap();
        assert_eq!(j.records().unwrap().len(), 2);
        let to = j.archive().unwrap().unwrap();
        assert!(to.exists() && !j.path().exists());
        assert!(j.records().unwrap().is_empty());
    }

    fn begin() -> Record {
        Record::Begin {
            profile: "p".into(),
            profile_path: "p.toml".into(),
            root: "/".into(),
            time: 1,
        }
    }

    #[test]
    fn host_paths_are_checked() {
        assert_eq!(host_path_problem("/proc/irq/24/smp_affinity_list"), None);
        for bad in [
            "/../../x", "proc/x", "", "/", "/a/../b", "/a//b", "/a/./b", "/a/", "/a\0b", "/a\nb",
        ] {
            assert!(host_path_problem(bad).is_some(), "{bad:?}");
        }
    }

    #[test]
    fn bad_records_name_their_line() {
        let d = tempfile::tempdir().unwrap();
        let j = Journal::open(d.path()).unwrap();
        let file = |p: &str| Record::File {
            key: "k".into(),
            path: p.into(),
            original: None,
            restore: Restore::Raw,
            restart: None,
        };
        j.append(&begin()).unwrap();
        j.append(&file("/proc/x")).unwrap();
        j.append(&file("/../../../x")).unwrap();
        j.append(&Record::Commit { time: 2 }).unwrap();
        let e = j.records().unwrap_err().to_string();
        assert!(e.contains("line 3") && e.contains("'..'"), "{e}");
        // Without its begin line.
        fs::write(
            j.path(),
            serde_json::to_string(&file("/proc/x")).unwrap() + "\n",
        )
        .unwrap();
        let e = j.records().unwrap_err().to_string();
        assert!(e.contains("no begin record"), "{e}");
        // A hold pidfile outside the state folder.
        let hold = Record::Hold {
            key: "h".into(),
            pidfile: "/run/other.pid".into(),
        };
        let text = [begin(), hold]
            .iter()
            .map(|r| serde_json::to_string(r).unwrap() + "\n")
            .collect::<String>();
        fs::write(j.path(), text).unwrap();
        let e = j.records().unwrap_err().to_string();
        assert!(e.contains("line 2") && e.contains("pidfile"), "{e}");
    }

    #[test]
    fn state_dirs_are_one_per_root() {
        assert_eq!(escape_path("/srv/fx-1/a.b"), "srv-fx\\x2d1-a.b");
        assert_eq!(escape_path("/.x"), "\\x2ex");
        let long = format!("/{}", "é".repeat(300));
        let e = escape_path(&long);
        assert!(
            e.len() <= 200 && e != escape_path(&format!("{long}x")),
            "{e}"
        );
        assert_eq!(state_dir_of(Path::new("/")), Path::new(LIVE_STATE_DIR));
        // A snapshot's default is its own, never the live host's.
        let tree = tempfile::tempdir().unwrap();
        let root = HostRoot::new(tree.path()).unwrap();
        let own = default_state_dir(&root);
        assert!(
            own.starts_with("/var/lib/ibtune/roots/"),
            "{}",
            own.display()
        );
        assert_ne!(own, default_state_dir(&HostRoot::live()));
        let other = tempfile::tempdir().unwrap();
        assert_ne!(
            own,
            default_state_dir(&HostRoot::new(other.path()).unwrap())
        );
        assert_eq!(
            revert_command(Path::new("/srv/a b"), Path::new("/tmp/st")),
            "ibtune --root '/srv/a b' --state-dir /tmp/st revert"
        );
        assert_eq!(
            revert_command(Path::new("/srv/fx"), &state_dir_of(Path::new("/srv/fx"))),
            "ibtune --root /srv/fx revert"
        );
        assert_eq!(
            revert_command(Path::new("/"), Path::new(LIVE_STATE_DIR)),
            "ibtune revert"
        );
    }

    #[test]
    fn second_opener_is_refused() {
        let d = tempfile::tempdir().unwrap();
        let _a = Journal::open(d.path()).unwrap();
        let e = Journal::open(d.path()).err().unwrap();
        assert!(e.to_string().contains("another ibtune"), "{e}");
    }
}
