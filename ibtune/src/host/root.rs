//! The host root: the one gateway through which every read and write of
//! `/sys`, `/proc`, `/dev` and `/etc` passes.
//!
//! Why it exists: the same discovery and tuning code must run against the
//! live kernel (`--root /`) and against a captured snapshot of one (a fixture
//! tree under `tests/fixtures/`). Code never opens a host path directly; it
//! asks a [`HostRoot`] for it, with the path written as it is on a real host
//! (`/proc/irq/24/smp_affinity_list`).

use crate::sys::openat2_in_root;
use nix::dir::Dir;
use nix::fcntl::{Flock, FlockArg, OFlag};
use nix::sys::stat::Mode;
use nix::unistd::UnlinkatFlags;
use std::fs::{self, File};
use std::io::{self, Read, Write};
use std::os::fd::{AsFd, AsRawFd, OwnedFd};
use std::os::unix::fs::{FileTypeExt, MetadataExt, OpenOptionsExt};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// The most bytes one read of a host file returns: far above any sysfs,
/// procfs or `/etc` file ibtune reads (the largest, `/proc/interrupts` on a
/// big host, is a few hundred KiB), far below what would hurt the host.
pub const MAX_READ: u64 = 16 * 1024 * 1024;

/// The most names one directory listing returns (a guard against a
/// hostile tree; `/proc` on a busy host has a few thousand).
pub const MAX_LIST: usize = 1 << 20;

/// A host filesystem root, `/` for the live machine or a snapshot directory.
///
/// Every path is resolved by the kernel *inside* the root (`openat2(2)`
/// with `RESOLVE_IN_ROOT`): an absolute symlink, or a `..` that would climb
/// above the root, ends inside it, so nothing outside the root is read or
/// written whatever links a snapshot holds. Only regular files are read or
/// written as files (a FIFO or device is an error naming the path) and no
/// read returns more than [`MAX_READ`] bytes.
#[derive(Debug, Clone)]
pub struct HostRoot {
    dir: PathBuf,
    live: bool,
    /// `O_PATH` descriptor of `dir`: every path is resolved relative to it.
    fd: Arc<OwnedFd>,
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

/// What a directory entry is, as the directory says (links not followed).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum EntryKind {
    /// A directory.
    Dir,
    /// A symbolic link.
    Symlink,
    /// Anything else, or unknown (the file system did not say).
    Other,
}

/// One entry of [`HostRoot::entries`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Entry {
    /// The name.
    pub name: String,
    /// Its type, links not followed.
    pub kind: EntryKind,
    /// Its inode number, as the directory says: a reader that keeps the
    /// file open tells a file replaced under the same name by it.
    pub ino: u64,
}

/// The host lock, held while it lives (see [`HostRoot::lock`]).
#[derive(Debug)]
pub struct HostLock {
    _lock: Flock<File>,
}

/// Why [`HostRoot::lock`] failed.
#[derive(Debug, thiserror::Error)]
pub enum LockError {
    /// Another ibtune held the lock for the whole wait.
    #[error("another ibtune apply or revert is changing host root {root} (it holds a lock on the root folder); waited {waited}, give it more time with --lock-wait or wait for it to finish")]
    Busy {
        /// The root folder.
        root: String,
        /// How long we waited, as written in `--lock-wait`.
        waited: String,
    },
    /// The root folder could not be opened or locked.
    #[error("cannot lock host root {root}: {source}")]
    Io {
        /// The root folder.
        root: String,
        /// Why.
        #[source]
        source: io::Error,
    },
}

fn err(op: &'static str, path: &str, source: io::Error) -> HostIoError {
    HostIoError {
        op,
        path: path.to_string(),
        source,
    }
}

fn invalid(msg: String) -> io::Error {
    io::Error::new(io::ErrorKind::InvalidInput, msg)
}

/// The root-relative form of a host path: components joined by `/`,
/// without empty or `.` parts; `.` for the root itself. A `..` component is
/// refused (the kernel would keep it inside the root anyway, but no host
/// path ibtune builds has one, so it is a bug or hostile input).
fn relative(host_path: &str) -> io::Result<String> {
    if host_path.contains('\0') {
        return Err(invalid("a host path cannot contain a NUL byte".into()));
    }
    let mut parts = Vec::new();
    for c in host_path.split('/') {
        match c {
            "" | "." => {}
            ".." => {
                return Err(invalid(
                    "a host path cannot contain a '..' component".into(),
                ))
            }
            c => parts.push(c),
        }
    }
    Ok(if parts.is_empty() {
        ".".to_string()
    } else {
        parts.join("/")
    })
}

/// Refuses anything but a regular file.
fn regular(meta: &fs::Metadata) -> io::Result<()> {
    if meta.file_type().is_file() {
        Ok(())
    } else {
        Err(invalid(format!(
            "is {}, not a regular file; ibtune reads and writes only regular files under --root",
            ibhost::file::type_name(meta.file_type())
        )))
    }
}

impl HostRoot {
    /// The live machine.
    pub fn live() -> Self {
        Self::new("/").expect("/ can be opened")
    }

    /// A root directory given by the user (`--root DIR`). `/` (or anything
    /// that canonicalizes to it) is the live machine; anything else is a
    /// snapshot, whose files are plain files with no kernel behind them.
    pub fn new(dir: impl AsRef<Path>) -> io::Result<Self> {
        let dir = dir.as_ref();
        let explain = |e: io::Error| {
            io::Error::new(
                e.kind(),
                format!(
                    "host root {}: {e} (give --root an existing directory, or / for this machine)",
                    dir.display()
                ),
            )
        };
        let canon = fs::canonicalize(dir).map_err(explain)?;
        let fd: OwnedFd = fs::OpenOptions::new()
            .read(true)
            .custom_flags(libc::O_PATH | libc::O_DIRECTORY | libc::O_CLOEXEC)
            .open(&canon)
            .map_err(explain)?
            .into();
        let live = canon == Path::new("/");
        Ok(HostRoot {
            dir: canon,
            live,
            fd: Arc::new(fd),
        })
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

    /// Where a host path such as `/proc/cmdline` lies under the root, for
    /// messages only: opening this path would not be confined to the root
    /// (every access goes through the methods of [`HostRoot`]).
    pub fn display_path(&self, host_path: &str) -> PathBuf {
        let rel = host_path.trim_start_matches('/');
        if rel.is_empty() {
            self.dir.clone()
        } else {
            self.dir.join(rel)
        }
    }

    /// Opens a host path inside the root with `flags` (symlinks followed,
    /// inside the root).
    fn open(&self, op: &'static str, p: &str, flags: OFlag, mode: u32) -> HostResult<OwnedFd> {
        let rel = relative(p).map_err(|e| err(op, p, e))?;
        openat2_in_root(
            self.fd.as_fd(),
            Path::new(&rel),
            flags,
            Mode::from_bits_truncate(mode),
        )
        .map_err(|e| err(op, p, e))
    }

    /// Opens the parent folder of a host path, and gives the last name.
    fn parent(&self, op: &'static str, p: &str) -> HostResult<(OwnedFd, String)> {
        let rel = relative(p).map_err(|e| err(op, p, e))?;
        let (dir, name) = match rel.rsplit_once('/') {
            Some((d, n)) => (d.to_string(), n.to_string()),
            None if rel == "." => {
                return Err(err(
                    op,
                    p,
                    invalid("not possible on the root itself".into()),
                ))
            }
            None => (".".to_string(), rel),
        };
        let fd = openat2_in_root(
            self.fd.as_fd(),
            Path::new(&dir),
            OFlag::O_PATH | OFlag::O_DIRECTORY,
            Mode::empty(),
        )
        .map_err(|e| err(op, p, e))?;
        Ok((fd, name))
    }

    /// Metadata of a host path, links followed inside the root.
    fn stat(&self, p: &str) -> HostResult<fs::Metadata> {
        let fd = self.open("stat", p, OFlag::O_PATH, 0)?;
        File::from(fd).metadata().map_err(|e| err("stat", p, e))
    }

    /// Opens a regular file for reading, with its metadata (a FIFO, a
    /// device or a directory is an error naming the path).
    ///
    /// Why it exists: [`HostRoot::read_bytes`] reads through it, and a
    /// reader that keeps a file open to read it again (ibexporter's HCA
    /// counters, through `ibhost::file::reread_value`) opens it here, inside
    /// the root, with the same checks.
    pub fn open_regular(&self, p: &str) -> HostResult<(File, fs::Metadata)> {
        // O_NONBLOCK: opening a FIFO must not wait for a writer.
        let fd = self.open(
            "read",
            p,
            OFlag::O_RDONLY | OFlag::O_NONBLOCK | OFlag::O_NOCTTY,
            0,
        )?;
        let f = File::from(fd);
        let meta = f.metadata().map_err(|e| err("read", p, e))?;
        regular(&meta).map_err(|e| err("read", p, e))?;
        Ok((f, meta))
    }

    /// Reads a whole file as bytes: a regular file of at most [`MAX_READ`]
    /// bytes (a FIFO, a device or a larger file is an error naming it).
    pub fn read_bytes(&self, p: &str) -> HostResult<Vec<u8>> {
        let (f, meta) = self.open_regular(p)?;
        let too_big = || {
            err(
                "read",
                p,
                invalid(format!(
                    "is larger than {} MiB, far more than any host file ibtune reads; refusing to read it",
                    MAX_READ >> 20
                )),
            )
        };
        if meta.len() > MAX_READ {
            return Err(too_big());
        }
        let mut buf = Vec::new();
        // procfs and sysfs report size 0 or 4096 whatever they hold: cap the
        // read itself too.
        (&f).take(MAX_READ + 1)
            .read_to_end(&mut buf)
            .map_err(|e| err("read", p, e))?;
        if buf.len() as u64 > MAX_READ {
            return Err(too_big());
        }
        Ok(buf)
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

    /// True when the path exists (following symlinks inside the root).
    pub fn exists(&self, p: &str) -> bool {
        self.stat(p).is_ok()
    }

    /// True when the path is a directory.
    pub fn is_dir(&self, p: &str) -> bool {
        self.stat(p).is_ok_and(|m| m.is_dir())
    }

    /// True when the path is a regular file.
    pub fn is_file(&self, p: &str) -> bool {
        self.stat(p).is_ok_and(|m| m.is_file())
    }

    /// The entries of a directory (not `.` and `..`), sorted by name in
    /// natural order, at most [`MAX_LIST`].
    pub fn entries(&self, p: &str) -> HostResult<Vec<Entry>> {
        let fd = self.open(
            "list",
            p,
            OFlag::O_RDONLY | OFlag::O_DIRECTORY | OFlag::O_NONBLOCK,
            0,
        )?;
        let mut dir = Dir::from(fd).map_err(|e| err("list", p, e.into()))?;
        let mut out = Vec::new();
        for e in dir.iter() {
            let e = e.map_err(|e| err("list", p, e.into()))?;
            let name = e.file_name().to_string_lossy().into_owned();
            if name == "." || name == ".." {
                continue;
            }
            use nix::dir::Type;
            let kind = match e.file_type() {
                Some(Type::Directory) => EntryKind::Dir,
                Some(Type::Symlink) => EntryKind::Symlink,
                _ => EntryKind::Other,
            };
            out.push(Entry {
                name,
                kind,
                ino: e.ino(),
            });
            if out.len() >= MAX_LIST {
                break;
            }
        }
        out.sort_by(|a, b| natural_cmp(&a.name, &b.name));
        Ok(out)
    }

    /// Names of the entries of a directory, sorted; empty if it is absent
    /// or unreadable.
    pub fn list(&self, p: &str) -> Vec<String> {
        self.entries(p)
            .map(|v| v.into_iter().map(|e| e.name).collect())
            .unwrap_or_default()
    }

    /// Target of a symlink, as stored (relative targets stay relative).
    /// Only text: following it is up to the caller, through this root.
    pub fn read_link(&self, p: &str) -> Option<PathBuf> {
        let (dir, name) = self.parent("read link", p).ok()?;
        nix::fcntl::readlinkat(Some(dir.as_raw_fd()), name.as_str())
            .ok()
            .map(PathBuf::from)
    }

    /// Writes bytes to an existing or new regular file, then flushes them.
    /// On the live kernel this is one `write(2)` of the whole value, which
    /// is what sysfs, procfs and cgroupfs expect. In a snapshot, a file with
    /// more than one hard link is refused (it may be a file outside the
    /// root).
    pub fn write(&self, p: &str, data: &[u8]) -> HostResult<()> {
        // O_NONBLOCK: opening a FIFO must not wait for a reader. O_TRUNC
        // only on the live host: a snapshot file is truncated once it is
        // known to be a regular file with one link.
        let base = OFlag::O_WRONLY | OFlag::O_NONBLOCK | OFlag::O_NOCTTY;
        let base = if self.live {
            base | OFlag::O_TRUNC
        } else {
            base
        };
        let fd = self.open("write", p, base, 0).or_else(|e| {
            // A new file (e.g. a config file under /etc) is created.
            if e.source.kind() == io::ErrorKind::NotFound {
                self.open("write", p, base | OFlag::O_CREAT, 0o644)
            } else {
                Err(e)
            }
        })?;
        let mut f = File::from(fd);
        let meta = f.metadata().map_err(|e| err("write", p, e))?;
        regular(&meta).map_err(|e| err("write", p, e))?;
        if !self.live {
            if meta.nlink() > 1 {
                return Err(err(
                    "write",
                    p,
                    invalid(format!(
                        "has {} hard links; refusing to write through a hard link in a snapshot root (it may be a file outside --root)",
                        meta.nlink()
                    )),
                ));
            }
            f.set_len(0).map_err(|e| err("write", p, e))?;
        }
        f.write_all(data).map_err(|e| err("write", p, e))?;
        Ok(())
    }

    /// Opens a character device, for writing or reading: only
    /// `/dev/cpu_dma_latency` on the live host needs one (its request lives
    /// as long as the fd; reading it gives the current limit). Anything that
    /// is not a character device is refused, and so is any snapshot root
    /// (there the device is a plain file, read with [`HostRoot::read_bytes`]).
    pub fn open_char_device(&self, p: &str, write: bool) -> HostResult<File> {
        if !self.live {
            return Err(err(
                "open device",
                p,
                invalid("devices are opened only on the live host (--root /)".into()),
            ));
        }
        let access = if write {
            OFlag::O_WRONLY
        } else {
            OFlag::O_RDONLY
        };
        let fd = self.open("open device", p, access | OFlag::O_NOCTTY, 0)?;
        let f = File::from(fd);
        let meta = f.metadata().map_err(|e| err("open device", p, e))?;
        if !meta.file_type().is_char_device() {
            return Err(err(
                "open device",
                p,
                invalid(format!(
                    "is {}, not a character device",
                    ibhost::file::type_name(meta.file_type())
                )),
            ));
        }
        Ok(f)
    }

    /// Removes a file.
    pub fn remove_file(&self, p: &str) -> HostResult<()> {
        let (dir, name) = self.parent("remove", p)?;
        nix::unistd::unlinkat(
            Some(dir.as_raw_fd()),
            name.as_str(),
            UnlinkatFlags::NoRemoveDir,
        )
        .map_err(|e| err("remove", p, e.into()))
    }

    /// Creates one directory (its parent must exist).
    pub fn mkdir(&self, p: &str) -> HostResult<()> {
        let (dir, name) = self.parent("create directory", p)?;
        nix::sys::stat::mkdirat(
            Some(dir.as_raw_fd()),
            name.as_str(),
            Mode::from_bits_truncate(0o755),
        )
        .map_err(|e| err("create directory", p, e.into()))
    }

    /// Creates a directory and its missing parents (for `/etc` config trees).
    pub fn mkdir_all(&self, p: &str) -> HostResult<()> {
        let rel = relative(p).map_err(|e| err("create directory", p, e))?;
        if rel == "." {
            return Ok(());
        }
        let mut cur = String::new();
        for part in rel.split('/') {
            cur.push('/');
            cur.push_str(part);
            match self.mkdir(&cur) {
                Ok(()) => {}
                Err(e) if e.source.raw_os_error() == Some(libc::EEXIST) => {
                    if !self.is_dir(&cur) {
                        return Err(err(
                            "create directory",
                            p,
                            invalid(format!("{cur} exists and is not a directory")),
                        ));
                    }
                }
                Err(e) => return Err(err("create directory", p, e.source)),
            }
        }
        Ok(())
    }

    /// Removes an empty directory (the only removal cgroupfs allows).
    pub fn rmdir(&self, p: &str) -> HostResult<()> {
        let (dir, name) = self.parent("remove directory", p)?;
        nix::unistd::unlinkat(
            Some(dir.as_raw_fd()),
            name.as_str(),
            UnlinkatFlags::RemoveDir,
        )
        .map_err(|e| err("remove directory", p, e.into()))
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
        .find(|p| self.is_file(p))
    }

    /// Takes the host lock: an exclusive `flock(2)` on the root folder
    /// itself, so two ibtune processes changing one host (or one snapshot)
    /// cannot interleave, whatever their `--state-dir`. Waits up to `wait`
    /// for another holder, then gives [`LockError::Busy`].
    pub fn lock(&self, wait: Duration) -> Result<HostLock, LockError> {
        let root = self.dir.display().to_string();
        let f = fs::OpenOptions::new()
            .read(true)
            .custom_flags(libc::O_DIRECTORY | libc::O_CLOEXEC)
            .open(&self.dir)
            .map_err(|source| LockError::Io {
                root: root.clone(),
                source,
            })?;
        let start = Instant::now();
        let mut f = f;
        loop {
            match Flock::lock(f, FlockArg::LockExclusiveNonblock) {
                Ok(l) => return Ok(HostLock { _lock: l }),
                Err((back, nix::errno::Errno::EWOULDBLOCK)) => {
                    if start.elapsed() >= wait {
                        return Err(LockError::Busy {
                            root,
                            waited: ibhost::duration::format(wait),
                        });
                    }
                    f = back;
                    std::thread::sleep(Duration::from_millis(20));
                }
                Err((_, e)) => {
                    return Err(LockError::Io {
                        root,
                        source: e.into(),
                    })
                }
            }
        }
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
        assert_eq!(
            root.display_path("/proc/cmdline"),
            root.dir().join("proc/cmdline")
        );
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
