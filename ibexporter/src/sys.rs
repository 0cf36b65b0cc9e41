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
}
