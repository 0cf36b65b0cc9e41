//! The host root: the one gateway through which every read and write of
//! `/sys`, `/proc`, `/dev` and `/etc` passes.
//!
//! Why it exists: the same discovery and tuning code must run against the
//! live kernel (`--root /`) and against a captured snapshot of one (a fixture
//! tree under `tests/fixtures/`). Code never opens a host path directly; it
//! asks a [`HostRoot`] for it, with the path written as it is on a real host
//! (`/proc/irq/24/smp_affinity_list`).

use std::fs;
use std::io::{self, Write};
use std::path::{Path, PathBuf};

/// A host filesystem root, `/` for the live machine or a snapshot directory.
#[derive(Debug, Clone)]
pub struct HostRoot {
    dir: PathBuf,
    live: bool,
}

/// An I/O error that names the host path and the operation that failed.
#[derive(Debug, thiserror::Error)]
#[error("{op} {path}: {source}")]
pub struct HostIoError {
    /// What was attempted ("read", "write", "create directory", ...).
    pub op: &'static str,
    /// The host path, as written on a real host.
    pub path: String,
    /// The underlying error.
    #[source]
    pub source: io::Error,
}

impl HostIoError {
    /// True when the error is "permission denied", so callers can say
    /// "needs root" instead of printing an errno.
    pub fn is_permission(&self) -> bool {
        self.source.kind() == io::ErrorKind::PermissionDenied
    }
}

/// Result of a host I/O operation.
pub type HostResult<T> = Result<T, HostIoError>;

impl HostRoot {
    /// The live machine.
    pub fn live() -> Self {
        HostRoot {
            dir: PathBuf::from("/"),
            live: true,
        }
    }

    /// A root directory given by the user (`--root DIR`). `/` (or anything
    /// that canonicalizes to it) is the live machine; anything else is a
    /// snapshot, whose files are plain files with no kernel behind them.
    pub fn new(dir: impl AsRef<Path>) -> io::Result<Self> {
        let dir = dir.as_ref();
        let canon = fs::canonicalize(dir).map_err(|e| {
            io::Error::new(
                e.kind(),
                format!(
                    "host root {}: {e} (give --root an existing directory, or / for this machine)",
                    dir.display()
                ),
            )
        })?;
        let live = canon == Path::new("/");
        Ok(HostRoot { dir: canon, live })
    }

    /// True for the live kernel. Snapshot roots get plain-file semantics:
    /// writing a value stores exactly those bytes, and no commands run.
    pub fn is_live(&self) -> bool {
        self.live
    }

    /// The directory this root maps `/` to.
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// Maps a host path such as `/proc/cmdline` to the real path under the root.
    pub fn path(&self, host_path: &str) -> PathBuf {
        let rel = host_path.trim_start_matches('/');
        if rel.is_empty() {
            self.dir.clone()
        } else {
            self.dir.join(rel)
        }
    }

    fn err(op: &'static str, path: &str, source: io::Error) -> HostIoError {
        HostIoError {
            op,
            path: path.to_string(),
            source,
        }
    }

    /// Reads a whole file as bytes.
    pub fn read_bytes(&self, p: &str) -> HostResult<Vec<u8>> {
        fs::read(self.path(p)).map_err(|e| Self::err("read", p, e))
    }

    /// Reads a whole file as text (lossy UTF-8: sysfs is ASCII in practice).
    pub fn read(&self, p: &str) -> HostResult<String> {
        self.read_bytes(p)
            .map(|b| String::from_utf8_lossy(&b).into_owned())
    }

    /// Reads a file and trims surrounding whitespace; `None` when the file is
    /// absent or unreadable. For optional sysfs attributes.
    pub fn read_opt(&self, p: &str) -> Option<String> {
        self.read(p).ok().map(|s| s.trim().to_string())
    }

    /// Reads and parses a trimmed value; `None` if absent or unparsable.
    pub fn read_parse<T: std::str::FromStr>(&self, p: &str) -> Option<T> {
        self.read_opt(p).and_then(|s| s.parse().ok())
    }

    /// True when the path exists (following symlinks).
    pub fn exists(&self, p: &str) -> bool {
        self.path(p).exists()
    }

    /// True when the path is a directory.
    pub fn is_dir(&self, p: &str) -> bool {
        self.path(p).is_dir()
    }

    /// Names of the entries of a directory, sorted; empty if it is absent.
    pub fn list(&self, p: &str) -> Vec<String> {
        let mut names: Vec<String> = match fs::read_dir(self.path(p)) {
            Ok(rd) => rd
                .filter_map(|e| e.ok())
                .map(|e| e.file_name().to_string_lossy().into_owned())
                .collect(),
            Err(_) => Vec::new(),
        };
        names.sort_by(|a, b| natural_cmp(a, b));
        names
    }

    /// Target of a symlink, as stored (relative targets stay relative).
    pub fn read_link(&self, p: &str) -> Option<PathBuf> {
        fs::read_link(self.path(p)).ok()
    }

    /// Writes bytes to an existing or new file, then flushes them. On the
    /// live kernel this is one `write(2)` of the whole value, which is what
    /// sysfs, procfs and cgroupfs expect.
    pub fn write(&self, p: &str, data: &[u8]) -> HostResult<()> {
        let path = self.path(p);
        let mut f = fs::OpenOptions::new()
            .write(true)
            .create(!self.live)
            .truncate(true)
            .open(&path)
            .or_else(|e| {
                // A live control file that does not exist yet (e.g. a new
                // config file under /etc) still has to be creatable.
                if self.live && e.kind() == io::ErrorKind::NotFound {
                    fs::OpenOptions::new()
                        .write(true)
                        .create(true)
                        .truncate(true)
                        .open(&path)
                } else {
                    Err(e)
                }
            })
            .map_err(|e| Self::err("write", p, e))?;
        f.write_all(data).map_err(|e| Self::err("write", p, e))?;
        Ok(())
    }

    /// Removes a file.
    pub fn remove_file(&self, p: &str) -> HostResult<()> {
        fs::remove_file(self.path(p)).map_err(|e| Self::err("remove", p, e))
    }

    /// Creates one directory (its parent must exist).
    pub fn mkdir(&self, p: &str) -> HostResult<()> {
        fs::create_dir(self.path(p)).map_err(|e| Self::err("create directory", p, e))
    }

    /// Creates a directory and its missing parents (for `/etc` config trees).
    pub fn mkdir_all(&self, p: &str) -> HostResult<()> {
        fs::create_dir_all(self.path(p)).map_err(|e| Self::err("create directory", p, e))
    }

    /// Removes an empty directory (the only removal cgroupfs allows).
    pub fn rmdir(&self, p: &str) -> HostResult<()> {
        fs::remove_dir(self.path(p)).map_err(|e| Self::err("remove directory", p, e))
    }

    /// Finds an executable by name on the host's usual binary paths (under
    /// the root), e.g. `tuned-adm`. Snapshots may carry a placeholder file to
    /// say "this tool is installed".
    pub fn find_program(&self, name: &str) -> Option<String> {
        [
            "/usr/sbin",
            "/usr/bin",
            "/sbin",
            "/bin",
            "/usr/local/sbin",
            "/usr/local/bin",
        ]
        .iter()
        .map(|d| format!("{d}/{name}"))
        .find(|p| self.path(p).is_file())
    }
}

#[cfg(test)]
impl HostRoot {
    /// Test helper: writes a file under the root, creating its folders.
    pub(crate) fn put(&self, p: &str, v: &str) {
        if let Some((d, _)) = p.rsplit_once('/') {
            self.mkdir_all(d).expect("mkdir in test root");
        }
        self.write(p, v.as_bytes()).expect("write in test root");
    }
}

/// Orders names so that `cpu2` sorts before `cpu10` and `24` before `100`.
pub fn natural_cmp(a: &str, b: &str) -> std::cmp::Ordering {
    fn split(s: &str) -> (&str, Option<u64>) {
        let idx = s
            .char_indices()
            .rev()
            .take_while(|(_, c)| c.is_ascii_digit())
            .last()
            .map(|(i, _)| i);
        match idx {
            Some(i) => (&s[..i], s[i..].parse().ok()),
            None => (s, None),
        }
    }
    let (pa, na) = split(a);
    let (pb, nb) = split(b);
    pa.cmp(pb).then(na.cmp(&nb)).then(a.cmp(b))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn maps_host_paths_under_root() {
        let dir = tempfile::tempdir().unwrap();
        let root = HostRoot::new(dir.path()).unwrap();
        assert!(!root.is_live());
        assert_eq!(root.path("/proc/cmdline"), root.dir().join("proc/cmdline"));
        root.mkdir_all("/proc").unwrap();
        root.write("/proc/cmdline", b"quiet\n").unwrap();
        assert_eq!(root.read_opt("/proc/cmdline").as_deref(), Some("quiet"));
        assert_eq!(root.read_parse::<u32>("/proc/absent"), None);
    }

    #[test]
    fn slash_is_live() {
        assert!(HostRoot::new("/").unwrap().is_live());
    }

    #[test]
    fn natural_order() {
        let mut v = vec!["cpu10", "cpu2", "cpu1", "node", "cpu0"];
        v.sort_by(|a, b| natural_cmp(a, b));
        assert_eq!(v, ["cpu0", "cpu1", "cpu2", "cpu10", "node"]);
    }

    #[test]
    fn missing_root_is_a_clear_error() {
        let e = HostRoot::new("/definitely/not/here").unwrap_err();
        assert!(e.to_string().contains("--root"), "{e}");
    }
}
