//! The HCA collector's sysfs files kept open between scrapes, each read
//! again with one `pread` at offset 0.
//!
//! Why it exists: a scrape reads every port counter, state and rate file;
//! opening each (a path walk inside `--root`), checking it and closing it
//! again cost more than the rest of the scrape together. A kept file costs
//! one system call per scrape, and reading at offset 0 has the kernel render
//! the value afresh, so nothing stale comes back from the descriptor.
//!
//! When a kept file is let go (closed, and opened again by path at its next
//! read):
//! - its read fails: `ENODEV` (the device behind a sysfs file was
//!   unplugged) or `ENOENT` are read once more by path (the file is back, or
//!   absent: no sample); any other failure is the file's failure for this
//!   scrape;
//! - the directory listing of this scrape shows another inode under its
//!   name (a file replaced, in a snapshot tree);
//! - a scrape did not read it ([`OpenFiles::sweep`]: its device, port or
//!   file is gone from the listings);
//! - its device's identity is read again ([`OpenFiles::forget_under`]).
//!
//! At most a budget of files is kept (default [`MAX_KEPT_FILES`]); the
//! files past it are opened, read and closed at each scrape, as all were
//! before, so a host with more counters than the budget is still read
//! whole and correctly, only slower.

use crate::limits::{MAX_KEPT_FILES, VALUE_BYTES};
use ibtune::host::HostRoot;
use std::borrow::Cow;
use std::collections::HashMap;
use std::fs::File;
use std::io;
use std::os::unix::fs::MetadataExt;

/// One kept file.
#[derive(Debug)]
struct Kept {
    file: File,
    /// Its inode when opened, against the one a listing shows.
    ino: u64,
    /// The scrape that read it last.
    seen: u64,
}

/// Files kept open by path, with the buffer their values are read into.
///
/// Why it exists: the one place that decides whether a file is read
/// through a kept descriptor or opened afresh (module docs).
#[derive(Debug)]
pub struct OpenFiles {
    files: HashMap<String, Kept>,
    budget: usize,
    /// The scrape under way (see [`OpenFiles::sweep`]).
    scrape: u64,
    buf: Box<[u8; VALUE_BYTES]>,
}

impl Default for OpenFiles {
    fn default() -> Self {
        Self::with_budget(MAX_KEPT_FILES)
    }
}

/// A read that failed because the file (or its device) is gone, not
/// because it could not be read: worth one more open by path.
fn gone(e: &io::Error) -> bool {
    e.raw_os_error() == Some(libc::ENODEV) || e.kind() == io::ErrorKind::NotFound
}

impl OpenFiles {
    /// Keeps at most `budget` files open (0: every read opens and closes).
    pub fn with_budget(budget: usize) -> Self {
        OpenFiles {
            files: HashMap::new(),
            budget,
            scrape: 0,
            buf: Box::new([0; VALUE_BYTES]),
        }
    }

    /// How many files are kept open now.
    pub fn kept(&self) -> usize {
        self.files.len()
    }

    /// Reads the host file `path` under `root` as text (lossy UTF-8):
    /// `Ok(None)` when it does not exist, `Err` (the reason, for the log)
    /// when it exists but cannot be read. `listed`: the inode this
    /// scrape's listing of its directory gave, when there was one.
    pub fn read(
        &mut self,
        root: &HostRoot,
        path: &str,
        listed: Option<u64>,
    ) -> Result<Option<Cow<'_, str>>, String> {
        if let Some(k) = self.files.get_mut(path) {
            if listed.is_none_or(|ino| ino == k.ino) {
                k.seen = self.scrape;
                match ibhost::file::reread_value(&k.file, &mut self.buf[..]) {
                    Ok(v) => {
                        let n = v.len();
                        return Ok(Some(String::from_utf8_lossy(&self.buf[..n])));
                    }
                    Err(e) if gone(&e) => {}
                    Err(e) => {
                        self.files.remove(path);
                        return Err(e.to_string());
                    }
                }
            }
            self.files.remove(path);
        }
        let (file, meta) = match root.open_regular(path) {
            Ok(f) => f,
            Err(e) if e.source.kind() == io::ErrorKind::NotFound => return Ok(None),
            Err(e) => return Err(e.source.to_string()),
        };
        let n = match ibhost::file::reread_value(&file, &mut self.buf[..]) {
            Ok(v) => v.len(),
            Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(None),
            Err(e) => return Err(e.to_string()),
        };
        if self.files.len() < self.budget {
            let kept = Kept {
                file,
                ino: meta.ino(),
                seen: self.scrape,
            };
            self.files.insert(path.to_string(), kept);
        }
        Ok(Some(String::from_utf8_lossy(&self.buf[..n])))
    }

    /// Closes every file under the host directory `dir` (a device whose
    /// identity is read again: its files are opened afresh).
    pub fn forget_under(&mut self, dir: &str) {
        self.files
            .retain(|p, _| !(p.starts_with(dir) && p.as_bytes().get(dir.len()) == Some(&b'/')));
    }

    /// Ends a scrape: closes every file it did not read (gone from the
    /// listings, or its device gone), and starts the next.
    pub fn sweep(&mut self) {
        let now = self.scrape;
        self.files.retain(|_, k| k.seen == now);
        self.scrape += 1;
    }
}
