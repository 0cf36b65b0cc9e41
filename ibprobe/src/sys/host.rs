//! Host placement and shared memory for the probe: CPU pinning, mlockall
//! (both from `ibhost`), pre-faulting, the stop flag (SIGINT, SIGTERM,
//! also from `ibhost`) and shared mappings for the shm transport.
//!
//! Why it exists: the thesis measured maxima over 700 us from untouched
//! pages and saw migrations between cores in the tail, so the runner pins,
//! locks and pre-faults before the first message; and the shm transport
//! needs memory shared between two threads or two processes.

use std::fs::File;
use std::io;
use std::os::fd::AsRawFd;
use std::path::Path;
use std::sync::atomic::{AtomicU64, Ordering};

/// `lock_memory` needs CAP_IPC_LOCK or a large enough RLIMIT_MEMLOCK; the
/// runner reports a failure and carries on.
pub use ibhost::rt::{allowed_cpus, lock_memory, pin_to_cpu, prefault_stack, set_affinity};

/// The measurement loop checks the stop flag between messages and leaves
/// through the orderly path: Ctrl-C prints what was collected and every
/// owner's Drop runs.
pub use ibhost::child::stop_signal_flag;

/// A memory mapping shared between threads or processes, seen as 64-bit
/// atomic words (two processes write the same bytes, so every access is
/// an atomic): the shm transport's rings live in one.
pub struct SharedMap {
    ptr: *mut AtomicU64,
    words: usize,
}

// SAFETY: the mapping is only accessed through atomic operations, which
// are safe from any thread; the pointer stays valid until Drop.
unsafe impl Send for SharedMap {}
// SAFETY: as above: shared references only hand out atomics.
unsafe impl Sync for SharedMap {}

impl SharedMap {
    /// An anonymous shared mapping of at least `bytes` (for two threads of
    /// one process), zero-filled and pre-faulted.
    pub fn anonymous(bytes: usize) -> io::Result<SharedMap> {
        Self::map(round_to_page(bytes), libc::MAP_ANONYMOUS, -1)
    }

    /// Maps the file at `path` (created with `bytes` when `create`, as
    /// [`super::mem::create_private_file`] does: 0600, allocated, removed
    /// again if mapping fails; otherwise it must already be at least that
    /// long): the mapping two processes share, e.g. under /dev/shm.
    pub fn file(path: &Path, bytes: usize, create: bool) -> io::Result<SharedMap> {
        let len = round_to_page(bytes);
        let f = if create {
            super::mem::create_private_file(path, len as u64)?
        } else {
            let f = File::options().read(true).write(true).open(path)?;
            let have = f.metadata()?.len();
            if have < len as u64 {
                let m = format!("{}: {have} bytes, expected at least {len}", path.display());
                return Err(io::Error::new(io::ErrorKind::InvalidData, m));
            }
            f
        };
        let map = Self::map(len, 0, f.as_raw_fd());
        if create && map.is_err() {
            // Created above: an error leaves nothing behind.
            let _ = std::fs::remove_file(path);
        }
        map
    }

    /// A shared mapping of `len` bytes: anonymous, or of the open file
    /// `fd`, which the kernel keeps mapped after the file is closed.
    fn map(len: usize, flags: libc::c_int, fd: libc::c_int) -> io::Result<SharedMap> {
        let prot = libc::PROT_READ | libc::PROT_WRITE;
        // SAFETY: a fresh mapping with no address hint (of an open file we
        // own for reading and writing, or anonymous): nothing is aliased.
        let p = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                len,
                prot,
                libc::MAP_SHARED | flags,
                fd,
                0,
            )
        };
        if p == libc::MAP_FAILED {
            return Err(io::Error::last_os_error());
        }
        let m = SharedMap {
            ptr: p.cast::<AtomicU64>(),
            words: len / 8,
        };
        // Pre-fault: read every page, so the first message faults nothing.
        for w in m.words().iter().step_by(512) {
            w.load(Ordering::Relaxed);
        }
        Ok(m)
    }

    #[inline(always)]
    pub fn words(&self) -> &[AtomicU64] {
        // SAFETY: ptr is page-aligned (so aligned for AtomicU64), valid for
        // `words` words until Drop, and every bit pattern is a valid u64;
        // all access goes through atomics, so sharing with another thread
        // or process is not a data race.
        unsafe { std::slice::from_raw_parts(self.ptr, self.words) }
    }
}

impl Drop for SharedMap {
    fn drop(&mut self) {
        // SAFETY: unmaps exactly the region mapped in `map`; no
        // reference from words() outlives self.
        unsafe { libc::munmap(self.ptr.cast(), self.words * 8) };
    }
}

/// `bytes` rounded up to whole 4 KiB pages: what a [`SharedMap`] maps.
pub fn round_to_page(bytes: usize) -> usize {
    bytes.max(1).div_ceil(4096) * 4096
}

/// Asks for `bytes` of send and receive buffer on a socket (the kernel
/// caps them at net.core.wmem_max / rmem_max; the caller treats a failure
/// as best effort).
pub fn set_socket_buffers(fd: &impl std::os::fd::AsFd, bytes: usize) -> io::Result<()> {
    use nix::sys::socket::{setsockopt, sockopt};
    setsockopt(fd, sockopt::SndBuf, &bytes).map_err(io::Error::from)?;
    setsockopt(fd, sockopt::RcvBuf, &bytes).map_err(io::Error::from)?;
    Ok(())
}

/// Blocks until `fd` is readable or `timeout_ms` passes; true if readable.
/// `--poll event` on UDP sleeps here, so a one-core host or VM can run
/// the timers a netem qdisc needs.
pub fn wait_readable(fd: &impl AsRawFd, timeout_ms: i32) -> io::Result<bool> {
    let mut p = libc::pollfd {
        fd: fd.as_raw_fd(),
        events: libc::POLLIN,
        revents: 0,
    };
    loop {
        // SAFETY: `p` is one valid pollfd that outlives the call; nfds is 1.
        let r = unsafe { libc::poll(&mut p, 1, timeout_ms) };
        if r >= 0 {
            // POLLERR (e.g. a queued ICMP error) also means "look now":
            // the next recv reports it.
            return Ok(r > 0);
        }
        let e = io::Error::last_os_error();
        if e.kind() != io::ErrorKind::Interrupted {
            return Err(e);
        }
    }
}
