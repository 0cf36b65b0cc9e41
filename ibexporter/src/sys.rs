//! The crate's only `unsafe`: process-wide settings that have no safe
//! wrapper.
//!
//! Why it exists: one place to audit every call into libc that Rust
//! cannot check.

/// Allocations at or above this size get their own mapping, returned to
/// the kernel when freed.
pub const MMAP_THRESHOLD: usize = 256 * 1024;

/// Makes glibc serve allocations of [`MMAP_THRESHOLD`] or more from their
/// own mappings, always, so a freed `/metrics` body (2.4 MB with 100
/// targets x 4 sizes) goes back to the kernel at once.
///
/// Why it exists: by default glibc raises its mmap threshold to the size
/// of the largest block freed so far (up to 32 MB). After the first body
/// is freed, every later one comes from the heap and freed bodies stay
/// in the process: under 200 concurrent scrapes RSS went from 20 MB to
/// 41 MB (43 MB peak); with the threshold fixed it stayed at 26 MB (28 MB
/// peak), `ibexporter/benches/load --targets 100`. A user who sets
/// `MALLOC_MMAP_THRESHOLD_` keeps theirs. Returns false where it is not
/// applied (that variable is set, or not glibc).
pub fn return_large_buffers_to_the_os() -> bool {
    if std::env::var_os("MALLOC_MMAP_THRESHOLD_").is_some() {
        return false;
    }
    #[cfg(target_env = "gnu")]
    {
        let threshold = libc::c_int::try_from(MMAP_THRESHOLD).unwrap_or(libc::c_int::MAX);
        // SAFETY: mallopt only sets a tuning parameter of glibc's
        // allocator; it takes plain integers, touches no Rust-owned
        // memory, and is called once at start, before any thread.
        unsafe { libc::mallopt(libc::M_MMAP_THRESHOLD, threshold) == 1 }
    }
    #[cfg(not(target_env = "gnu"))]
    {
        false
    }
}

/// Raises this process's soft limit on open files (RLIMIT_NOFILE) to its
/// hard limit; returns the soft limit in force afterwards (None: it could
/// not be read).
///
/// Why it exists: the HTTP server keeps up to 4,096 connections and the
/// responder up to 64 sessions; the usual soft limit of 1,024 would make
/// accept fail long before the caps, and a failing accept cannot close
/// the oldest idle connection to make room.
pub fn raise_open_files_limit() -> Option<u64> {
    let mut lim = libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    // SAFETY: getrlimit writes one rlimit struct we own and pass by
    // exclusive reference; RLIMIT_NOFILE is a valid resource.
    if unsafe { libc::getrlimit(libc::RLIMIT_NOFILE, &mut lim) } != 0 {
        return None;
    }
    if lim.rlim_cur < lim.rlim_max {
        let raised = libc::rlimit {
            rlim_cur: lim.rlim_max,
            rlim_max: lim.rlim_max,
        };
        // SAFETY: setrlimit reads one rlimit struct we own; raising the
        // soft limit up to the hard limit needs no privilege.
        if unsafe { libc::setrlimit(libc::RLIMIT_NOFILE, &raised) } == 0 {
            lim = raised;
        }
    }
    Some(lim.rlim_cur)
}

/// Sets the backlog of a listening socket to `backlog` (the kernel caps
/// it at `net.core.somaxconn`); `listen(2)` on a listening socket only
/// changes its backlog.
///
/// Why it exists: std's `TcpListener::bind` listens with a backlog of 128.
/// A burst of connections past it (a flood of garbage) has the kernel drop
/// SYNs, and a real peer's connect then waits for a retransmission (1 s,
/// then 3 s) although the responder accepts at once.
pub fn set_listen_backlog(listener: &std::net::TcpListener, backlog: i32) -> std::io::Result<()> {
    use std::os::fd::AsRawFd;
    // SAFETY: the fd is a listening socket owned by `listener`, borrowed
    // for the duration of the call; listen takes plain integers.
    if unsafe { libc::listen(listener.as_raw_fd(), backlog) } == 0 {
        Ok(())
    } else {
        Err(std::io::Error::last_os_error())
    }
}

#[cfg(test)]
mod tests {
    /// glibc accepts the setting (mallopt returns 1) unless the user's
    /// variable takes precedence.
    #[test]
    #[cfg(target_env = "gnu")]
    fn glibc_takes_the_threshold() {
        let user = std::env::var_os("MALLOC_MMAP_THRESHOLD_").is_some();
        assert_eq!(super::return_large_buffers_to_the_os(), !user);
    }

    #[test]
    fn the_open_files_limit_reaches_the_hard_limit() {
        let soft = super::raise_open_files_limit().unwrap();
        let mut lim = libc::rlimit {
            rlim_cur: 0,
            rlim_max: 0,
        };
        // SAFETY: as in raise_open_files_limit.
        assert_eq!(unsafe { libc::getrlimit(libc::RLIMIT_NOFILE, &mut lim) }, 0);
        assert_eq!(soft, lim.rlim_cur);
        assert_eq!(lim.rlim_cur, lim.rlim_max);
    }
}
