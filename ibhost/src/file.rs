//! Reading a small file an operator named (a config, a key, a
//! certificate): a regular file of bounded size, or a one-line refusal.
//!
//! Why it exists: a path in a config file may point at a FIFO (opening it
//! waits for a writer for ever), a device (`/dev/zero` never ends) or a
//! huge file. ibexporter's config, web config, TLS files and file_sd
//! pinglists, ibprobe's mesh secret and saved reports are all read through
//! [`read_small`], so each of them is refused the same way, quickly, and
//! without echoing what the file holds; kernel pseudo-files (`/proc`,
//! `/sys`, tracefs) go through [`read_pseudo`], the same checks with the
//! cap on the bytes read; a one-value attribute kept open and read again
//! (ibexporter's HCA counters) goes through [`reread_value`], one `pread`
//! at offset 0 into the caller's fixed buffer. `tests/tests/bounded_reads.rs`
//! fails on a read of a path anywhere else.

use std::fs::OpenOptions;
use std::io::Read;
use std::os::unix::fs::{FileExt, FileTypeExt, OpenOptionsExt};
use std::path::{Path, PathBuf};

/// The largest file [`read_small`] reads by default: 1 MiB, far above any
/// config, key or certificate chain.
pub const MAX_SMALL_FILE: u64 = 1 << 20;

/// Why a small file could not be read. Its text names the path and the
/// kind of problem, never the file's contents.
#[derive(Debug, thiserror::Error)]
pub enum SmallFileError {
    /// Opening or reading failed (missing, no permission, ...).
    #[error("cannot read {}: {source}", path.display())]
    Io {
        /// The file.
        path: PathBuf,
        /// Why.
        source: std::io::Error,
    },
    /// Not a regular file (a FIFO, a device, a socket, a directory).
    #[error("{} is {kind}, not a regular file; give the path of a regular file", path.display())]
    NotRegular {
        /// The file.
        path: PathBuf,
        /// "a FIFO", "a directory", ...
        kind: &'static str,
    },
    /// Larger than the limit.
    #[error("{} is larger than {limit} bytes; this is not the file meant here", path.display())]
    TooLarge {
        /// The file.
        path: PathBuf,
        /// The limit in bytes.
        limit: u64,
    },
}

/// What a file type is called in messages ("a FIFO", "a directory", ...).
/// (ibtune's `host/root.rs` has the same list; it can use this one.)
pub fn type_name(t: std::fs::FileType) -> &'static str {
    if t.is_dir() {
        "a directory"
    } else if t.is_fifo() {
        "a FIFO"
    } else if t.is_char_device() {
        "a character device"
    } else if t.is_block_device() {
        "a block device"
    } else if t.is_socket() {
        "a socket"
    } else if t.is_symlink() {
        "a symbolic link"
    } else {
        "a regular file"
    }
}

/// Reads `path` whole if it is a regular file of at most `limit` bytes.
///
/// The file is opened with `O_NONBLOCK` (a FIFO does not block the open)
/// and its type is checked on the open descriptor, so a path swapped
/// between the check and the read cannot get past it; at most `limit + 1`
/// bytes are read, so a file that grows while read is refused too.
pub fn read_small(path: &Path, limit: u64) -> Result<Vec<u8>, SmallFileError> {
    let (f, len) = open_regular(path)?;
    if len > limit {
        return Err(SmallFileError::TooLarge {
            path: path.to_path_buf(),
            limit,
        });
    }
    read_capped(path, f, len, limit)
}

/// Reads a kernel pseudo-file (`/proc`, `/sys`, tracefs) whole, as text,
/// with the same guarantees as [`read_small`] except the size check:
/// these files say they are 0 (or 4096) bytes long whatever they hold, so
/// only the bytes actually read count against `limit`. It reads 4 KiB at
/// a time: some tracefs files (osnoise/cpus on 6.1) answer EINVAL to a
/// larger first read. Bytes that are not UTF-8 become U+FFFD.
///
/// Why it exists: a probe reads `/proc/interrupts`, `numa_node`, hugepage
/// counts...; a path built from a device name or a test's fake root can
/// still be a FIFO or a huge file, and must be refused like any other.
/// The error is an `io::Error` (what these callers already return) of the
/// same kind as the failure, whose text names the path.
pub fn read_pseudo(path: impl AsRef<Path>, limit: u64) -> std::io::Result<String> {
    let path = path.as_ref();
    let bytes = open_regular(path).and_then(|(f, _)| read_chunked(path, f, limit));
    match bytes {
        Ok(b) => Ok(String::from_utf8_lossy(&b).into_owned()),
        Err(SmallFileError::Io { source, .. }) => Err(std::io::Error::new(
            source.kind(),
            format!("{}: {source}", path.display()),
        )),
        Err(other) => Err(std::io::Error::new(
            std::io::ErrorKind::InvalidData,
            other.to_string(),
        )),
    }
}

/// Reads an open one-value file again from its start: one `pread` at
/// offset 0 into `buf`, giving the bytes read. A file that fills `buf`
/// is read one byte further, and refused if it holds more (an
/// `InvalidData` error saying the limit, never the bytes).
///
/// Why it exists: a collector that keeps a sysfs attribute open (a
/// counter read at every scrape) must see the value of now, not bytes
/// left from an earlier read, without an open, a stat and a close each
/// time. Reading at offset 0 has the kernel render the attribute afresh
/// (sysfs renders the whole value, at most a page, at once) and leaves
/// the descriptor's offset alone. The caller opened `f` as a regular
/// file (the checks of [`read_small`]); a failure is the `io::Error` of
/// the read, with its errno (`ENODEV`: the device behind a sysfs file is
/// gone), for the caller to name the path. Only for files whose value
/// one read returns whole: a sysfs attribute, a small regular file (not
/// a multi-record `/proc` table: [`read_pseudo`]).
pub fn reread_value<'b>(f: &std::fs::File, buf: &'b mut [u8]) -> std::io::Result<&'b [u8]> {
    let n = loop {
        match f.read_at(buf, 0) {
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
            r => break r?,
        }
    };
    if n == buf.len() {
        let mut more = [0u8; 1];
        let extra = loop {
            match f.read_at(&mut more, n as u64) {
                Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
                r => break r?,
            }
        };
        if extra > 0 {
            return Err(std::io::Error::new(
                std::io::ErrorKind::InvalidData,
                format!(
                    "holds more than {} bytes; not the one value expected here",
                    buf.len()
                ),
            ));
        }
    }
    Ok(&buf[..n])
}

/// The most a pseudo-file read through [`read_pseudo`] may hold unless
/// its caller says otherwise: 1 MiB (a sysfs value is one line).
pub const MAX_PSEUDO_FILE: u64 = 1 << 20;

/// The most a per-CPU kernel table may hold (`/proc/interrupts`,
/// `/proc/cpuinfo`): 16 MiB. `/proc/interrupts` of a 1,024-CPU host with
/// 1,000 IRQs is about 11 MiB (11 characters per CPU and IRQ).
pub const MAX_PROC_TABLE: u64 = 16 << 20;

/// `path` opened for reading without blocking, if it is a regular file,
/// with its length as the descriptor's metadata gives it.
fn open_regular(path: &Path) -> Result<(std::fs::File, u64), SmallFileError> {
    let io = |source| SmallFileError::Io {
        path: path.to_path_buf(),
        source,
    };
    let f = OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NONBLOCK | libc::O_CLOEXEC)
        .open(path)
        .map_err(io)?;
    let meta = f.metadata().map_err(io)?;
    if !meta.file_type().is_file() {
        return Err(SmallFileError::NotRegular {
            path: path.to_path_buf(),
            kind: type_name(meta.file_type()),
        });
    }
    Ok((f, meta.len()))
}

/// `f` read 4 KiB at a time; more than `limit` bytes is
/// [`SmallFileError::TooLarge`].
fn read_chunked(path: &Path, mut f: std::fs::File, limit: u64) -> Result<Vec<u8>, SmallFileError> {
    let mut out = Vec::new();
    let mut buf = [0u8; 4096];
    loop {
        match f.read(&mut buf) {
            Ok(0) => return Ok(out),
            Ok(n) => out.extend_from_slice(&buf[..n]),
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
            Err(source) => {
                return Err(SmallFileError::Io {
                    path: path.to_path_buf(),
                    source,
                })
            }
        }
        if out.len() as u64 > limit {
            return Err(SmallFileError::TooLarge {
                path: path.to_path_buf(),
                limit,
            });
        }
    }
}

/// At most `limit` bytes of `f` (`len`: the size it claims, a capacity
/// hint); more is [`SmallFileError::TooLarge`].
fn read_capped(
    path: &Path,
    f: std::fs::File,
    len: u64,
    limit: u64,
) -> Result<Vec<u8>, SmallFileError> {
    let mut buf = Vec::with_capacity(usize::try_from(len.min(limit)).unwrap_or(0));
    f.take(limit + 1)
        .read_to_end(&mut buf)
        .map_err(|source| SmallFileError::Io {
            path: path.to_path_buf(),
            source,
        })?;
    if buf.len() as u64 > limit {
        return Err(SmallFileError::TooLarge {
            path: path.to_path_buf(),
            limit,
        });
    }
    Ok(buf)
}

/// `bytes` as UTF-8 text; invalid UTF-8 is an error that does not quote
/// the bytes.
fn utf8(path: &Path, bytes: Vec<u8>) -> Result<String, SmallFileError> {
    String::from_utf8(bytes).map_err(|e| SmallFileError::Io {
        path: path.to_path_buf(),
        source: std::io::Error::new(
            std::io::ErrorKind::InvalidData,
            format!(
                "not UTF-8 text (invalid byte at offset {})",
                e.utf8_error().valid_up_to()
            ),
        ),
    })
}

/// [`read_small`] as UTF-8 text; invalid UTF-8 is an error that does not
/// quote the bytes.
pub fn read_small_text(path: &Path, limit: u64) -> Result<String, SmallFileError> {
    utf8(path, read_small(path, limit)?)
}

/// `message` (a parser's error about a file's text) without the parts it
/// quotes from the file: every `"..."` and every `` `...` `` becomes `(…)`,
/// except key names (after `field ` or `key `, and only if they look like
/// one, see [`looks_like_key`]) and the parser's own list of what it
/// expected (after `expected`).
///
/// Why it exists: serde's messages quote the value they choke on
/// (`invalid type: string "root:$6$...", expected a mapping`); when the
/// file named is not the one meant (`/etc/shadow`), that value is a secret.
pub fn without_quoted(message: &str) -> String {
    let mut out = String::with_capacity(message.len());
    let mut rest = message;
    while let Some(i) = rest.find(['"', '`']) {
        let (before, from) = rest.split_at(i);
        out.push_str(before);
        let q = from.as_bytes()[0] as char;
        let Some(len) = from[1..].find(q) else {
            out.push_str("(…)");
            return out;
        };
        let quoted = &from[..len + 2];
        let keep = q == '`'
            && (((out.ends_with("field ") || out.ends_with("key "))
                && looks_like_key(&quoted[1..quoted.len() - 1]))
                || out.contains("expected"));
        out.push_str(if keep { quoted } else { "(…)" });
        rest = &from[len + 2..];
    }
    out.push_str(rest);
    out
}

/// Whether `s` looks like a key name (or a dotted path of them): at most
/// 64 letters, digits, `_`, `-`, `.`, `[`, `]`. A line of some other file
/// read as a key (`root:$6$...` in `/etc/shadow`) does not.
pub fn looks_like_key(s: &str) -> bool {
    !s.is_empty()
        && s.len() <= 64
        && s.chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '_' | '-' | '.' | '[' | ']'))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn quoted_values_are_cut_and_key_names_kept() {
        assert_eq!(
            without_quoted("invalid type: string \"root:$6$abc\", expected web config mapping"),
            "invalid type: string (…), expected web config mapping"
        );
        assert_eq!(
            without_quoted("unknown field `password`, expected `a` or `b`"),
            "unknown field `password`, expected `a` or `b`"
        );
        assert_eq!(
            without_quoted("invalid type: integer `12345`, expected a string"),
            "invalid type: integer (…), expected a string"
        );
        assert_eq!(without_quoted("unterminated \"secret"), "unterminated (…)");
        assert_eq!(
            without_quoted("unknown field `root:$6$x:1::`, expected `a`"),
            "unknown field (…), expected `a`"
        );
    }

    #[test]
    fn regular_files_fifos_and_limits() {
        let d = std::env::temp_dir().join(format!("ibhost-file-{}", std::process::id()));
        std::fs::create_dir_all(&d).unwrap();
        let f = d.join("ok");
        std::fs::write(&f, "abc").unwrap();
        assert_eq!(read_small(&f, 3).unwrap(), b"abc");
        let e = read_small(&f, 2).unwrap_err();
        assert!(matches!(e, SmallFileError::TooLarge { .. }), "{e}");
        assert!(!e.to_string().contains("abc"), "{e}");
        let fifo = d.join("fifo");
        let made = std::process::Command::new("mkfifo").arg(&fifo).status();
        assert!(made.unwrap().success());
        let e = read_small(&fifo, 10).unwrap_err();
        assert!(e.to_string().contains("a FIFO"), "{e}");
        let e = read_small(&d, 10).unwrap_err();
        assert!(e.to_string().contains("a directory"), "{e}");
        let e = read_small(Path::new("/dev/zero"), 10).unwrap_err();
        assert!(e.to_string().contains("character device"), "{e}");
        std::fs::write(&f, [0xffu8, 0xfe]).unwrap();
        let e = read_small_text(&f, 10).unwrap_err();
        assert!(e.to_string().contains("not UTF-8"), "{e}");
        std::fs::remove_dir_all(&d).unwrap();
    }

    #[test]
    fn a_value_read_again_is_the_value_of_now_and_bounded() {
        let d = tempfile_dir("reread");
        let p = d.join("counter");
        std::fs::write(&p, "12345\n").unwrap();
        let (f, _) = open_regular(&p).unwrap();
        let mut buf = [0u8; 16];
        assert_eq!(reread_value(&f, &mut buf).unwrap(), b"12345\n");
        // Rewritten shorter in place: no bytes of the longer value remain.
        std::fs::write(&p, "7\n").unwrap();
        assert_eq!(reread_value(&f, &mut buf).unwrap(), b"7\n");
        // Exactly the buffer: accepted; one byte more: refused, unquoted.
        std::fs::write(&p, "0123456789abcdef").unwrap();
        assert_eq!(reread_value(&f, &mut buf).unwrap(), b"0123456789abcdef");
        std::fs::write(&p, "0123456789abcdefSECRET").unwrap();
        let e = reread_value(&f, &mut buf).unwrap_err();
        assert_eq!(e.kind(), std::io::ErrorKind::InvalidData);
        assert!(e.to_string().contains("more than 16 bytes"), "{e}");
        assert!(!e.to_string().contains("SECRET"), "{e}");
        // A device that never ends (what a swapped path could lead to)
        // costs one buffer and one byte, not memory without end.
        let zero = std::fs::File::open("/dev/zero").unwrap();
        let e = reread_value(&zero, &mut buf).unwrap_err();
        assert_eq!(e.kind(), std::io::ErrorKind::InvalidData);
        // A pipe cannot be read at an offset: an error, not a wait.
        let fifo = d.join("fifo");
        assert!(std::process::Command::new("mkfifo")
            .arg(&fifo)
            .status()
            .unwrap()
            .success());
        let pipe = OpenOptions::new()
            .read(true)
            .custom_flags(libc::O_NONBLOCK)
            .open(&fifo)
            .unwrap();
        let e = reread_value(&pipe, &mut buf).unwrap_err();
        assert_eq!(e.raw_os_error(), Some(libc::ESPIPE), "{e}");
        std::fs::remove_dir_all(&d).unwrap();
    }

    /// A fresh directory for one test of this module.
    fn tempfile_dir(name: &str) -> PathBuf {
        let d = std::env::temp_dir().join(format!("ibhost-file-{name}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&d);
        std::fs::create_dir_all(&d).unwrap();
        d
    }

    #[test]
    fn pseudo_files_count_the_bytes_read_not_the_size_they_claim() {
        // procfs says 0 bytes; the text is read anyway.
        let version = read_pseudo("/proc/self/status", MAX_PSEUDO_FILE).unwrap();
        assert!(
            version.contains("VmHWM") || version.contains("Name:"),
            "{version}"
        );
        let e = read_pseudo("/proc/self/status", 8).unwrap_err();
        assert!(e.to_string().contains("larger than 8 bytes"), "{e}");
        let e = read_pseudo("/dev/zero", 8).unwrap_err();
        assert!(e.to_string().contains("character device"), "{e}");
        let e = read_pseudo("/proc/absent-file", 8).unwrap_err();
        assert_eq!(e.kind(), std::io::ErrorKind::NotFound);
        assert!(e.to_string().contains("/proc/absent-file"), "{e}");
    }
}
