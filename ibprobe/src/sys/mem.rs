//! Placed memory for the probe's buffers: aligned, optionally backed by
//! huge pages, optionally bound to one NUMA node, every page pre-faulted.
//!
//! Why it exists: the thesis saw maxima over 700 us from pages touched for
//! the first time inside a measurement; memory on the HCA's NUMA node
//! avoids the inter-socket link, and huge pages cut TLB (and IOMMU, MR)
//! misses. [`Region::new`] does it once, before the first message: map,
//! `mbind(MPOL_BIND)`, then touch every page.

use std::io;
use std::ptr::NonNull;

/// Where the one-line hint about huge pages points the user.
pub const NR_HUGEPAGES: &str = "/proc/sys/vm/nr_hugepages";

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Placement {
    /// Back the region with huge pages (`MAP_HUGETLB`, the default huge
    /// page size from /proc/meminfo); they must be reserved beforehand in
    /// [`NR_HUGEPAGES`].
    pub hugepages: bool,
    /// Bind the region to this NUMA node (`mbind`, `MPOL_BIND`) before it
    /// is faulted in; `None` leaves the kernel's default policy.
    pub node: Option<u32>,
    /// Alignment of the start address in bytes (a power of two). Values up
    /// to the page size (or the huge page size) come for free; larger ones
    /// over-map and trim.
    pub align: usize,
    /// Also `mlock` the region. A failure (no CAP_IPC_LOCK, low
    /// RLIMIT_MEMLOCK) is not an error: [`Region::describe`] says so.
    pub lock: bool,
}

impl Default for Placement {
    fn default() -> Self {
        Placement {
            hugepages: false,
            node: None,
            align: 1,
            lock: false,
        }
    }
}

/// Why a [`Region`] could not be made: one line naming the input and
/// what to do.
#[derive(Debug, thiserror::Error)]
pub enum MemError {
    #[error("huge pages (--hugepages): cannot map {bytes} bytes as {page_kb} kB huge pages (mmap MAP_HUGETLB: {source}); {NR_HUGEPAGES} is {nr}, free {free}: reserve enough as root, e.g. `echo {want} > {NR_HUGEPAGES}`, or drop --hugepages")]
    NoHugePages {
        bytes: usize,
        page_kb: usize,
        /// The content of /proc/sys/vm/nr_hugepages ("?" if unreadable).
        nr: String,
        /// HugePages_Free from /proc/meminfo ("?" if unreadable).
        free: String,
        /// A reservation that would fit this region (current + needed).
        want: usize,
        source: io::Error,
    },
    /// Faulting the region in on that node would SIGBUS.
    #[error("huge pages (--hugepages) on NUMA node {node}: {needed} pages of {page_kb} kB needed, {free} free there ({path}); reserve them on that node, e.g. `echo {needed} > {path_nr}`, or drop --hugepages")]
    NodeHugePages {
        node: u32,
        needed: usize,
        free: usize,
        page_kb: usize,
        path: String,
        path_nr: String,
    },
    #[error(
        "NUMA node {node} does not exist on this host (online nodes: {online}); pick one of those"
    )]
    NoSuchNode {
        node: u32,
        /// /sys/devices/system/node/online ("none" when there is no NUMA support).
        online: String,
    },
    #[error("mbind of {bytes} bytes to NUMA node {node} (MPOL_BIND) failed: {source}; check the node has memory (numactl --hardware) or leave the default placement")]
    Bind {
        node: u32,
        bytes: usize,
        source: io::Error,
    },
    #[error("alignment {0} is not a power of two; use e.g. 64, 4096 or 2097152")]
    BadAlign(usize),
    #[error("mmap of {bytes} bytes failed: {source}; ask for less memory (smaller --size or queue depths)")]
    Map { bytes: usize, source: io::Error },
}

/// An anonymous private mapping placed as a [`Placement`] asked, every
/// page touched (so no first-touch fault lands inside a measurement).
/// Unmapped on drop. Reads and writes of the bytes go through volatile
/// methods: once registered (`sys::verbs::RegisteredBuf`), the HCA
/// changes them behind the compiler's back.
#[derive(Debug)]
pub struct Region {
    // Seen by `sys::verbs`, whose stamp words address the mapping directly.
    pub(super) ptr: NonNull<u8>,
    pub(super) len: usize,
    page: usize,
    huge: bool,
    locked: bool,
    node: Option<u32>,
}

// SAFETY: the region exclusively owns its mapping, and every mutating
// accessor works through that ownership, so moving the owner to another
// thread (e.g. a pinned measurement thread) moves it whole. Not `Sync`:
// the volatile writers take `&self`.
unsafe impl Send for Region {}

impl Region {
    /// Maps at least `len` bytes (rounded up to whole pages of the kind
    /// used), placed as `p` asks, zero-filled, every page faulted in.
    pub fn new(len: usize, p: &Placement) -> Result<Region, MemError> {
        if !p.align.is_power_of_two() {
            return Err(MemError::BadAlign(p.align));
        }
        if let Some(node) = p.node {
            check_node(node)?;
        }
        let page = if p.hugepages {
            huge_page_size()
        } else {
            page_size()
        };
        let len = len.max(1).div_ceil(page) * page;
        if let (true, Some(node)) = (p.hugepages, p.node) {
            check_node_hugepages(node, len / page, page)?;
        }
        // Alignments above the page size: map more, trim both ends.
        let map_len = len + if p.align > page { p.align } else { 0 };
        let huge = if p.hugepages { libc::MAP_HUGETLB } else { 0 };
        let flags = libc::MAP_PRIVATE | libc::MAP_ANONYMOUS | huge;
        // SAFETY: a fresh anonymous mapping with no address hint, so no
        // existing memory is aliased; the result is checked for MAP_FAILED.
        let raw = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                map_len,
                libc::PROT_READ | libc::PROT_WRITE,
                flags,
                -1,
                0,
            )
        };
        if raw == libc::MAP_FAILED {
            let source = io::Error::last_os_error();
            return Err(if p.hugepages {
                no_huge_pages(len, page, source)
            } else {
                MemError::Map { bytes: len, source }
            });
        }
        // The mapping is page-aligned: head and tail are 0 unless over-mapped.
        let start = (raw as usize).next_multiple_of(p.align);
        let head = start - raw as usize;
        let tail = map_len - head - len;
        // SAFETY: both ranges lie inside the mapping just made, are page
        // multiples (base, start, len and align are), and nothing refers to
        // them yet.
        unsafe {
            if head > 0 {
                libc::munmap(raw, head);
            }
            if tail > 0 {
                libc::munmap((start + len) as *mut libc::c_void, tail);
            }
        }
        let ptr = NonNull::new(start as *mut u8).ok_or_else(|| MemError::Map {
            bytes: len,
            source: io::Error::other("mmap returned NULL"),
        })?;
        let mut r = Region {
            ptr,
            len,
            page,
            huge: p.hugepages,
            locked: false,
            node: None,
        };
        if let Some(node) = p.node {
            r.bind(node)?;
        }
        r.prefault();
        if p.lock {
            // SAFETY: mlock takes an address range of our own mapping and
            // touches no memory.
            r.locked = unsafe { libc::mlock(r.ptr.as_ptr().cast(), r.len) } == 0;
        }
        Ok(r)
    }

    fn bind(&mut self, node: u32) -> Result<(), MemError> {
        const BITS: usize = 8 * std::mem::size_of::<libc::c_ulong>();
        let n = node as usize;
        let mut mask: Vec<libc::c_ulong> = vec![0; n / BITS + 1];
        mask[n / BITS] |= 1 << (n % BITS);
        // The kernel reads maxnode - 1 bits (libnuma passes + 1 as well).
        let maxnode = (mask.len() * BITS + 1) as libc::c_ulong;
        // SAFETY: mbind reads `mask.len()` words of the live vector and
        // changes the policy of our own, not yet faulted, mapping only.
        let rc = unsafe {
            libc::syscall(
                libc::SYS_mbind,
                self.ptr.as_ptr(),
                self.len as libc::c_ulong,
                libc::MPOL_BIND as libc::c_ulong,
                mask.as_ptr(),
                maxnode,
                0 as libc::c_ulong,
            )
        };
        if rc != 0 {
            return Err(MemError::Bind {
                node,
                bytes: self.len,
                source: io::Error::last_os_error(),
            });
        }
        self.node = Some(node);
        Ok(())
    }

    /// Writes a zero to every page: the write (not a read, which would map
    /// the shared zero page) makes the kernel allocate each page now, on
    /// the bound node.
    fn prefault(&self) {
        let mut off = 0;
        while off < self.len {
            // SAFETY: off < len, inside the mapping owned by self.
            unsafe { std::ptr::write_volatile(self.ptr.as_ptr().add(off), 0) };
            off += self.page;
        }
    }

    pub fn addr(&self) -> u64 {
        self.ptr.as_ptr() as u64
    }

    /// Length in bytes: the request rounded up to whole pages.
    pub fn len(&self) -> usize {
        self.len
    }

    /// Never true: a region has at least one page.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// The page size backing the region (the huge page size with huge pages).
    pub fn page_size(&self) -> usize {
        self.page
    }

    pub fn is_huge(&self) -> bool {
        self.huge
    }

    pub fn node(&self) -> Option<u32> {
        self.node
    }

    /// One line for reports, e.g. "4096 B, 4 kB pages, node 0, pre-faulted".
    pub fn describe(&self) -> String {
        format!(
            "{} B, {} kB {}pages, {}, pre-faulted{}",
            self.len,
            self.page / 1024,
            if self.huge { "huge " } else { "" },
            self.node
                .map_or("default NUMA policy".to_string(), |n| format!("node {n}")),
            if self.locked { ", locked" } else { "" }
        )
    }

    pub fn as_slice(&self) -> &[u8] {
        // SAFETY: ptr is valid for len bytes until Drop, every byte is
        // initialised (anonymous mappings are zero-filled) and the
        // lifetime is tied to &self.
        unsafe { std::slice::from_raw_parts(self.ptr.as_ptr(), self.len) }
    }

    /// Writes one byte at `off` (volatile: the HCA reads it).
    #[inline(always)]
    pub fn write_u8(&self, off: usize, v: u8) {
        assert!(off < self.len);
        // SAFETY: off < len, inside the mapping owned by self.
        unsafe { std::ptr::write_volatile(self.ptr.as_ptr().add(off), v) }
    }

    /// Reads one byte at `off` (volatile: the HCA writes it, e.g. the last
    /// byte of an RDMA write target).
    #[inline(always)]
    pub fn read_u8(&self, off: usize) -> u8 {
        assert!(off < self.len);
        // SAFETY: off < len, inside the mapping owned by self.
        unsafe { std::ptr::read_volatile(self.ptr.as_ptr().add(off)) }
    }

    /// Writes the low `n` (<= 8) bytes of `v`, little-endian, at `off`.
    #[inline(always)]
    pub fn write_le(&self, off: usize, v: u64, n: usize) {
        assert!(n <= 8 && off + n <= self.len);
        let b = v.to_le_bytes();
        for (i, byte) in b.iter().take(n).enumerate() {
            // SAFETY: off + i < off + n <= len, inside the mapping.
            unsafe { std::ptr::write_volatile(self.ptr.as_ptr().add(off + i), *byte) }
        }
    }

    /// Reads `n` (<= 8) bytes little-endian at `off` into the low bytes of
    /// a u64.
    #[inline(always)]
    pub fn read_le(&self, off: usize, n: usize) -> u64 {
        assert!(n <= 8 && off + n <= self.len);
        let mut b = [0u8; 8];
        for (i, byte) in b.iter_mut().take(n).enumerate() {
            // SAFETY: off + i < off + n <= len, inside the mapping.
            *byte = unsafe { std::ptr::read_volatile(self.ptr.as_ptr().add(off + i)) };
        }
        u64::from_le_bytes(b)
    }

    /// Copies `src` to `off` (a send slot the HCA reads after the post).
    #[inline(always)]
    pub fn write_bytes(&self, off: usize, src: &[u8]) {
        assert!(off <= self.len && src.len() <= self.len - off);
        // SAFETY: [off, off + src.len()) is inside the mapping owned by
        // self; src is a distinct Rust slice, so the ranges do not overlap.
        unsafe {
            std::ptr::copy_nonoverlapping(src.as_ptr(), self.ptr.as_ptr().add(off), src.len())
        }
    }

    /// Copies `into.len()` bytes at `off` into `into` (a receive slot the
    /// HCA wrote before its completion was polled; the caller fences).
    #[inline(always)]
    pub fn read_bytes(&self, off: usize, into: &mut [u8]) {
        assert!(off <= self.len && into.len() <= self.len - off);
        // SAFETY: [off, off + into.len()) is inside the mapping owned by
        // self; into is a distinct, exclusively borrowed Rust slice.
        unsafe {
            std::ptr::copy_nonoverlapping(self.ptr.as_ptr().add(off), into.as_mut_ptr(), into.len())
        }
    }

    /// Writes the aligned u64 at `off` in one store (volatile: the HCA
    /// reads it, e.g. the source of a counter write).
    #[inline(always)]
    pub fn write_u64(&self, off: usize, v: u64) {
        assert!(off.is_multiple_of(8) && off + 8 <= self.len);
        // SAFETY: off is 8-aligned (the mapping is page-aligned) and
        // off + 8 <= len, inside the mapping owned by self.
        unsafe { std::ptr::write_volatile(self.ptr.as_ptr().add(off) as *mut u64, v) }
    }

    /// Reads the aligned u64 at `off` in one load (volatile: the peer's
    /// HCA writes it, e.g. a counter word), never torn.
    #[inline(always)]
    pub fn read_u64(&self, off: usize) -> u64 {
        assert!(off.is_multiple_of(8) && off + 8 <= self.len);
        // SAFETY: off is 8-aligned (the mapping is page-aligned) and
        // off + 8 <= len, inside the mapping owned by self.
        unsafe { std::ptr::read_volatile(self.ptr.as_ptr().add(off) as *const u64) }
    }

    /// How many of the region's small (base) pages are resident, by
    /// mincore: after [`Region::new`], all of them.
    pub fn resident_pages(&self) -> io::Result<usize> {
        resident(self.ptr, self.len)
    }
}

fn resident(ptr: NonNull<u8>, len: usize) -> io::Result<usize> {
    let mut vec = vec![0u8; len.div_ceil(page_size())];
    // SAFETY: the caller passes a mapped, page-aligned range, and `vec`
    // has one byte per small page of it, as mincore requires.
    let rc = unsafe { libc::mincore(ptr.as_ptr().cast(), len, vec.as_mut_ptr()) };
    if rc != 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(vec.iter().filter(|&&b| b & 1 == 1).count())
}

impl Drop for Region {
    fn drop(&mut self) {
        // SAFETY: ptr/len are exactly the (trimmed) range we own; no slice
        // from as_slice outlives self.
        unsafe { libc::munmap(self.ptr.as_ptr().cast(), self.len) };
    }
}

/// The base page size (sysconf), 4096 if it cannot be read.
pub fn page_size() -> usize {
    // SAFETY: sysconf has no memory-safety preconditions.
    let p = unsafe { libc::sysconf(libc::_SC_PAGESIZE) };
    if p > 0 {
        p as usize
    } else {
        4096
    }
}

/// The default huge page size from /proc/meminfo (`Hugepagesize:`), 2 MiB
/// if it cannot be read.
pub fn huge_page_size() -> usize {
    meminfo_kb("Hugepagesize:").map_or(2 << 20, |kb| kb * 1024)
}

/// A /proc or /sys file's content, trimmed; None when unreadable.
fn pseudo(path: impl AsRef<std::path::Path>) -> Option<String> {
    let s = ibhost::file::read_pseudo(path, ibhost::file::MAX_PSEUDO_FILE).ok()?;
    Some(s.trim().to_string())
}

fn meminfo_kb(key: &str) -> Option<usize> {
    pseudo("/proc/meminfo")?
        .lines()
        .find_map(|l| l.strip_prefix(key))?
        .split_whitespace()
        .next()?
        .parse()
        .ok()
}

/// The error of a failed `MAP_HUGETLB` mmap, with the reservation state.
fn no_huge_pages(bytes: usize, page: usize, source: io::Error) -> MemError {
    let nr = pseudo(NR_HUGEPAGES).unwrap_or_else(|| "?".into());
    let free = meminfo_kb("HugePages_Free:").map_or("?".to_string(), |n| n.to_string());
    let want = nr.parse::<usize>().unwrap_or(0) + bytes / page;
    MemError::NoHugePages {
        bytes,
        page_kb: page / 1024,
        nr,
        free,
        want,
        source,
    }
}

fn check_node(node: u32) -> Result<(), MemError> {
    if std::path::Path::new(&format!("/sys/devices/system/node/node{node}")).exists() {
        return Ok(());
    }
    let online = pseudo("/sys/devices/system/node/online").unwrap_or_else(|| "none".into());
    Err(MemError::NoSuchNode { node, online })
}

fn check_node_hugepages(node: u32, needed: usize, page: usize) -> Result<(), MemError> {
    let dir = format!(
        "/sys/devices/system/node/node{node}/hugepages/hugepages-{}kB",
        page / 1024
    );
    let path = format!("{dir}/free_hugepages");
    // Unreadable: let mmap decide (and name nr_hugepages if it fails).
    let free = match pseudo(&path).and_then(|s| s.parse::<usize>().ok()) {
        Some(free) if free < needed => free,
        _ => return Ok(()),
    };
    Err(MemError::NodeHugePages {
        node,
        needed,
        free,
        page_kb: page / 1024,
        path,
        path_nr: format!("{dir}/nr_hugepages"),
    })
}

/// Size and free space of a filesystem, from statvfs: what a file of
/// ours may still take there.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct FsSpace {
    /// Bytes of the filesystem (0: no limit, a tmpfs mounted with size=0).
    pub total: u64,
    /// Bytes an unprivileged writer may still allocate (f_bavail).
    pub free: u64,
}

pub fn fs_space(dir: &std::path::Path) -> io::Result<FsSpace> {
    let s = nix::sys::statvfs::statvfs(dir).map_err(io::Error::from)?;
    let unit = s.fragment_size() as u64;
    Ok(FsSpace {
        total: (s.blocks() as u64).saturating_mul(unit),
        free: (s.blocks_available() as u64).saturating_mul(unit),
    })
}

/// Creates `path` for this process's user alone and allocates `len`
/// bytes of it: created exclusively (never an existing file, never
/// through a symlink), mode exactly 0600 whatever the umask, and every
/// block allocated now (posix_fallocate), so a filesystem that fills up
/// fails here with ENOSPC rather than with a SIGBUS at the first touch
/// of a mapping (tmpfs hands out pages on demand). On any failure after
/// the create the file is removed again: an error leaves nothing behind.
pub fn create_private_file(path: &std::path::Path, len: u64) -> io::Result<std::fs::File> {
    use std::os::fd::AsRawFd;
    use std::os::unix::fs::{OpenOptionsExt, PermissionsExt};
    let f = std::fs::File::options()
        .read(true)
        .write(true)
        .create_new(true)
        .mode(0o600)
        .open(path)?;
    let sized = f
        .set_permissions(std::fs::Permissions::from_mode(0o600))
        .and_then(|()| {
            let len = libc::off_t::try_from(len)
                .map_err(|_| io::Error::new(io::ErrorKind::InvalidInput, format!("{len} bytes")))?;
            nix::fcntl::posix_fallocate(f.as_raw_fd(), 0, len).map_err(io::Error::from)
        });
    sized.map(|()| f).inspect_err(|_| {
        let _ = std::fs::remove_file(path);
    })
}

/// The NUMA node of an RDMA device, from
/// /sys/class/infiniband/NAME/device/numa_node; `None` when the device
/// does not say (-1, e.g. Soft-RoCE, or a single-node machine).
pub fn rdma_device_numa_node(dev: &str) -> Option<u32> {
    let n = pseudo(format!("/sys/class/infiniband/{dev}/device/numa_node"))?;
    u32::try_from(n.parse::<i64>().ok()?).ok()
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Mutex;

    const HUGE_PAGES: Placement = Placement {
        hugepages: true,
        node: None,
        align: 1,
        lock: false,
    };

    /// Tests that read or change the huge page reservation run one at a time.
    static HUGE: Mutex<()> = Mutex::new(());

    /// Restores /proc/sys/vm/nr_hugepages to what it was, even on panic.
    struct NrHugepages(String);
    impl NrHugepages {
        /// Sets the reservation; `None` when this host does not let us.
        fn set(n: usize) -> Option<NrHugepages> {
            let old = pseudo(NR_HUGEPAGES)?;
            std::fs::write(NR_HUGEPAGES, n.to_string()).ok()?;
            Some(NrHugepages(old))
        }
    }
    impl Drop for NrHugepages {
        fn drop(&mut self) {
            std::fs::write(NR_HUGEPAGES, &self.0).expect("restoring /proc/sys/vm/nr_hugepages");
        }
    }

    #[test]
    fn every_page_is_resident_after_new() {
        let len = 64 * page_size() + 1;
        let r = Region::new(len, &Placement::default()).unwrap();
        assert_eq!(r.len(), 65 * page_size());
        assert_eq!(r.resident_pages().unwrap(), 65);
        // The check means something: an untouched mapping is not resident.
        let len = 16 * page_size();
        // SAFETY: a fresh anonymous mapping, unmapped below, never read.
        let raw = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                len,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_PRIVATE | libc::MAP_ANONYMOUS,
                -1,
                0,
            )
        };
        assert_ne!(raw, libc::MAP_FAILED);
        let untouched = resident(NonNull::new(raw.cast()).unwrap(), len).unwrap();
        // SAFETY: exactly the mapping made above.
        unsafe { libc::munmap(raw, len) };
        assert_eq!(untouched, 0);
    }

    #[test]
    #[ignore = "needs root where huge pages are reserved: sets /proc/sys/vm/nr_hugepages of this host to 0 and restores it"]
    fn hugepages_without_a_reservation_name_nr_hugepages() {
        const TEST: &str = "hugepages_without_a_reservation_name_nr_hugepages";
        let _g = HUGE.lock().unwrap_or_else(|e| e.into_inner());
        let now = pseudo(NR_HUGEPAGES).unwrap_or_default();
        // Make sure none is reserved (restored afterwards), or skip if we
        // may not change it and some are.
        let _restore = if now == "0" {
            None
        } else {
            match NrHugepages::set(0) {
                Some(r) => Some(r),
                None => {
                    let why = format!("{now} huge pages are reserved and {NR_HUGEPAGES} may not be written here (needs root, a writable /proc/sys)");
                    ibtools_tests::skip(TEST, &why);
                    return;
                }
            }
        };
        if meminfo_kb("HugePages_Free:") != Some(0)
            || pseudo("/proc/sys/vm/nr_overcommit_hugepages").is_none_or(|s| s != "0")
        {
            let why = "huge pages are still free (held elsewhere) or overcommit is on: mmap could succeed";
            ibtools_tests::skip(TEST, why);
            return;
        }
        let e = Region::new(1 << 20, &HUGE_PAGES).unwrap_err();
        let m = e.to_string();
        eprintln!("without a reservation: {m}");
        assert!(matches!(e, MemError::NoHugePages { .. }), "{m}");
        assert!(m.contains("/proc/sys/vm/nr_hugepages is 0"), "{m}");
        assert!(m.contains("echo 1 > /proc/sys/vm/nr_hugepages"), "{m}");
        assert!(!m.contains('\n'), "{m}");
    }

    #[test]
    #[ignore = "needs root: reserves 2 more huge pages on this host (/proc/sys/vm/nr_hugepages), restored after"]
    fn hugepages_when_reserved() {
        const TEST: &str = "hugepages_when_reserved";
        let _g = HUGE.lock().unwrap_or_else(|e| e.into_inner());
        let before = pseudo(NR_HUGEPAGES).unwrap_or_default();
        let want = before.parse::<usize>().unwrap_or(0) + 2;
        let Some(_restore) = NrHugepages::set(want) else {
            let why = format!(
                "{NR_HUGEPAGES} may not be written here (needs root, a writable /proc/sys)"
            );
            ibtools_tests::skip(TEST, &why);
            return;
        };
        let huge = huge_page_size();
        let r = match Region::new(huge + 1, &HUGE_PAGES) {
            Ok(r) => r,
            Err(MemError::NoHugePages { .. }) => {
                let why = "the kernel found no two free contiguous huge pages to reserve";
                ibtools_tests::skip(TEST, why);
                return;
            }
            Err(e) => panic!("{e}"),
        };
        eprintln!("huge page region: {r:?}");
        assert!(r.is_huge());
        assert_eq!(r.len(), 2 * huge);
        assert_eq!(r.addr() % huge as u64, 0);
        assert_eq!(r.resident_pages().unwrap(), 2 * huge / page_size());
        drop(r);
    }

    #[test]
    fn the_error_message_is_one_line_with_the_numbers() {
        let e = no_huge_pages(4 << 20, 2 << 20, io::Error::from_raw_os_error(libc::ENOMEM));
        let m = e.to_string();
        assert!(m.contains("4194304 bytes as 2048 kB huge pages"), "{m}");
        assert!(m.contains(NR_HUGEPAGES), "{m}");
        assert!(!m.contains('\n'));
    }
}
