//! The few raw system calls ibtune needs that neither `std` nor `nix` wraps:
//! NUMA memory policy, starting a detached session, and owning the file
//! descriptor `openat2(2)` returns (the host-root jail); plus, re-exported
//! from `ibhost::rt` (shared with ibprobe), CPU affinity, SCHED_FIFO and
//! memory locking.
//!
//! Why it exists: `ibtune run` and `ibtune hold` must put a process exactly
//! where the profile says (CPUs, NUMA nodes, SCHED_FIFO) before it execs or
//! sleeps. This is the crate's only module with `unsafe`; every block says
//! why it is sound, and every failure becomes an [`io::Error`] that says what
//! the caller has to change (root, capabilities, rlimits): the re-exported
//! scheduling and locking calls are ibhost's `_explained` flavours.
//!
//! All settings here apply to the *calling thread* (memory policy, affinity,
//! scheduling policy) except [`mlockall_current_future`], which is
//! process-wide. They survive `execve(2)` (memory locks do not).

use ibhost::cpulist::CpuSet;
pub use ibhost::rt::{
    get_affinity, get_scheduler, lock_memory_explained as mlockall_current_future, set_affinity,
    set_fifo_explained as set_fifo,
};
use nix::fcntl::{OFlag, OpenHow, ResolveFlag};
use nix::sys::stat::Mode;
use serde::{Deserialize, Serialize};
use std::fmt;
use std::io;
use std::os::fd::{AsRawFd, BorrowedFd, FromRawFd, OwnedFd};
use std::path::Path;
use std::str::FromStr;

/// `MPOL_DEFAULT` from `<linux/mempolicy.h>`.
pub const MPOL_DEFAULT: i32 = 0;
/// `MPOL_PREFERRED` from `<linux/mempolicy.h>`.
pub const MPOL_PREFERRED: i32 = 1;
/// `MPOL_BIND` from `<linux/mempolicy.h>`.
pub const MPOL_BIND: i32 = 2;
/// `MPOL_INTERLEAVE` from `<linux/mempolicy.h>`.
pub const MPOL_INTERLEAVE: i32 = 3;
/// `MPOL_LOCAL` from `<linux/mempolicy.h>` (Linux 3.8+).
pub const MPOL_LOCAL: i32 = 4;

/// Bits in one word of a kernel nodemask (`unsigned long`).
const WORD_BITS: usize = libc::c_ulong::BITS as usize;

/// Size of the nodemask buffer [`get_mempolicy`] hands the kernel, in bits.
/// Far above any real `MAX_NUMNODES` (1024 on x86_64 with NODES_SHIFT=10)
/// and below the kernel's limit of one page of bits.
const GET_MASK_BITS: usize = 4096;

/// A NUMA memory policy as set by `set_mempolicy(2)`.
///
/// Why it exists: a real-time process should take its pages from the node
/// its HCA and CPUs sit on; the profile names the policy in words and this
/// type carries it to the syscall.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum MemPolicy {
    /// `MPOL_DEFAULT`: drop any thread policy and fall back to the system
    /// default, which allocates on the node of the CPU that faults the page.
    /// Takes no nodes.
    #[default]
    Default,
    /// `MPOL_BIND`: allocate only from the given nodes; when they are full
    /// the kernel reclaims or OOM-kills rather than spill to another node.
    Bind,
    /// `MPOL_PREFERRED`: try the (first) given node, fall back to others when
    /// it is full. With no nodes it means "local allocation".
    Preferred,
    /// `MPOL_INTERLEAVE`: spread pages round-robin over the given nodes,
    /// trading locality for bandwidth.
    Interleave,
    /// `MPOL_LOCAL`: allocate on the node of the CPU that faults the page,
    /// even if the process policy says otherwise. Takes no nodes.
    Local,
}

impl MemPolicy {
    /// The kernel's `MPOL_*` mode number.
    pub fn mode(self) -> i32 {
        match self {
            MemPolicy::Default => MPOL_DEFAULT,
            MemPolicy::Preferred => MPOL_PREFERRED,
            MemPolicy::Bind => MPOL_BIND,
            MemPolicy::Interleave => MPOL_INTERLEAVE,
            MemPolicy::Local => MPOL_LOCAL,
        }
    }

    /// The policy for a kernel `MPOL_*` mode number (mode flags such as
    /// `MPOL_F_STATIC_NODES` masked off); `None` for modes we do not use.
    pub fn from_mode(mode: i32) -> Option<Self> {
        // MPOL_F_STATIC_NODES (1 << 15) | MPOL_F_RELATIVE_NODES (1 << 14)
        // | MPOL_F_NUMA_BALANCING (1 << 13).
        match mode & !(0b111 << 13) {
            MPOL_DEFAULT => Some(MemPolicy::Default),
            MPOL_PREFERRED => Some(MemPolicy::Preferred),
            MPOL_BIND => Some(MemPolicy::Bind),
            MPOL_INTERLEAVE => Some(MemPolicy::Interleave),
            MPOL_LOCAL => Some(MemPolicy::Local),
            _ => None,
        }
    }

    /// The lowercase name used in profiles and messages.
    pub fn name(self) -> &'static str {
        match self {
            MemPolicy::Default => "default",
            MemPolicy::Bind => "bind",
            MemPolicy::Preferred => "preferred",
            MemPolicy::Interleave => "interleave",
            MemPolicy::Local => "local",
        }
    }
}

impl fmt::Display for MemPolicy {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

impl FromStr for MemPolicy {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        [
            MemPolicy::Default,
            MemPolicy::Bind,
            MemPolicy::Preferred,
            MemPolicy::Interleave,
            MemPolicy::Local,
        ]
        .into_iter()
        .find(|p| p.name() == s)
        .ok_or_else(|| {
            format!("unknown memory policy {s:?} (expected default, bind, preferred, interleave or local)")
        })
    }
}

/// Packs a node set into kernel nodemask words; empty set gives no words.
fn nodemask_words(nodes: &CpuSet) -> Vec<libc::c_ulong> {
    let Some(max) = nodes.iter().next_back() else {
        return Vec::new();
    };
    let mut words: Vec<libc::c_ulong> = vec![0; max as usize / WORD_BITS + 1];
    for n in nodes.iter() {
        let n = n as usize;
        words[n / WORD_BITS] |= 1 << (n % WORD_BITS);
    }
    words
}

/// Sets the calling thread's NUMA memory policy.
///
/// Why it exists: `ibtune run` binds the real-time process's memory to the
/// HCA-local node before it execs; the policy is inherited across
/// `fork(2)` and `execve(2)`.
///
/// `Default` and `Local` take no nodes; `Bind` and `Interleave` need at least
/// one; `Preferred` uses the lowest node given (none = local allocation).
pub fn set_mempolicy(policy: MemPolicy, nodes: &CpuSet) -> io::Result<()> {
    match policy {
        MemPolicy::Default | MemPolicy::Local if !nodes.is_empty() => {
            return Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                format!("memory policy {policy} takes no nodes (got {nodes})"),
            ));
        }
        MemPolicy::Bind | MemPolicy::Interleave if nodes.is_empty() => {
            return Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                format!("memory policy {policy} needs at least one NUMA node"),
            ));
        }
        _ => {}
    }
    let words = nodemask_words(nodes);
    // The kernel reads `maxnode - 1` bits (a historical off-by-one that is
    // now ABI), so pass the number of bits in the buffer plus one. An empty
    // set passes a NULL mask and maxnode 0.
    let (mask_ptr, maxnode): (*const libc::c_ulong, libc::c_ulong) = if words.is_empty() {
        (std::ptr::null(), 0)
    } else {
        (
            words.as_ptr(),
            (words.len() * WORD_BITS + 1) as libc::c_ulong,
        )
    };
    // SAFETY: set_mempolicy(int mode, const unsigned long *nodemask,
    // unsigned long maxnode) only reads `maxnode - 1` bits from `nodemask`;
    // `words` is alive for the call and holds exactly `words.len() *
    // WORD_BITS` bits, or the pointer is NULL with maxnode 0. No memory is
    // written.
    let rc = unsafe {
        libc::syscall(
            libc::SYS_set_mempolicy,
            policy.mode() as libc::c_long,
            mask_ptr,
            maxnode,
        )
    };
    if rc != 0 {
        let e = io::Error::last_os_error();
        return Err(io::Error::new(
            e.kind(),
            format!("set_mempolicy({policy}, nodes {nodes}): {e}"),
        ));
    }
    Ok(())
}

/// Reads the calling thread's memory policy: the raw `MPOL_*` mode (with any
/// mode flags) and its node set.
///
/// Why it exists: tests and `ibtune verify`-style checks need to see what
/// [`set_mempolicy`] left behind.
pub fn get_mempolicy() -> io::Result<(i32, CpuSet)> {
    let mut mode: libc::c_int = 0;
    let mut words: Vec<libc::c_ulong> = vec![0; GET_MASK_BITS / WORD_BITS];
    // SAFETY: get_mempolicy(int *mode, unsigned long *nodemask, unsigned
    // long maxnode, void *addr, unsigned long flags) with flags 0 and addr
    // NULL writes one int to `mode` and at most `maxnode - 1` bits
    // (GET_MASK_BITS, exactly the size of `words`) to `nodemask`. Both
    // buffers are live and exclusively borrowed for the call.
    let rc = unsafe {
        libc::syscall(
            libc::SYS_get_mempolicy,
            &mut mode as *mut libc::c_int,
            words.as_mut_ptr(),
            (GET_MASK_BITS + 1) as libc::c_ulong,
            std::ptr::null_mut::<libc::c_void>(),
            0 as libc::c_ulong,
        )
    };
    if rc != 0 {
        let e = io::Error::last_os_error();
        return Err(io::Error::new(e.kind(), format!("get_mempolicy: {e}")));
    }
    let mut nodes = CpuSet::new();
    for (i, w) in words.iter().enumerate() {
        for b in 0..WORD_BITS {
            if w & (1 << b) != 0 {
                nodes.insert((i * WORD_BITS + b) as u32);
            }
        }
    }
    Ok((mode, nodes))
}

/// Makes `cmd` start in a new session (`setsid(2)` in the child), detached
/// from the caller's terminal and process group.
///
/// Why it exists: the `cpu_dma_latency` holder must outlive the shell that
/// started it and must not get the terminal's SIGINT/SIGHUP.
pub fn detach_session(cmd: &mut std::process::Command) {
    use std::os::unix::process::CommandExt;
    // SAFETY: the closure runs in the forked child before exec and only
    // calls setsid(2), which is async-signal-safe, allocates nothing and
    // takes no locks.
    unsafe {
        cmd.pre_exec(|| {
            if libc::setsid() < 0 {
                return Err(io::Error::last_os_error());
            }
            Ok(())
        });
    }
}

/// Opens `rel` (a path relative to `root`, without a leading `/`) with
/// `openat2(2)` and `RESOLVE_IN_ROOT | RESOLVE_NO_MAGICLINKS`: the kernel
/// resolves the path as if `root` were `/`, so an absolute symlink or a
/// `..` that would climb above `root` stays inside it, and `/proc/<pid>/fd`
/// style magic links are refused. `O_CLOEXEC` is always added.
///
/// Why it exists: `ibtune --root DIR` must never read or write outside DIR,
/// whatever links the tree holds; a path walk in user space would race
/// with changes to the tree, the kernel's walk does not. Needs Linux 5.6+.
pub fn openat2_in_root(
    root: BorrowedFd<'_>,
    rel: &Path,
    flags: OFlag,
    mode: Mode,
) -> io::Result<OwnedFd> {
    let how = OpenHow::new()
        .flags(flags | OFlag::O_CLOEXEC)
        .mode(mode)
        .resolve(ResolveFlag::RESOLVE_IN_ROOT | ResolveFlag::RESOLVE_NO_MAGICLINKS);
    // RESOLVE_IN_ROOT fails with EAGAIN when a rename elsewhere in the
    // tree raced with the walk; the kernel asks us to try again.
    let mut tries = 0;
    let fd = loop {
        match nix::fcntl::openat2(root.as_raw_fd(), rel, how) {
            Err(nix::errno::Errno::EAGAIN) if tries < 16 => tries += 1,
            Err(nix::errno::Errno::ENOSYS) => {
                return Err(io::Error::new(
                    io::ErrorKind::Unsupported,
                    "this kernel has no openat2(2) (Linux 5.6 or newer is needed to confine paths to --root)",
                ))
            }
            Err(e) => return Err(io::Error::from(e)),
            Ok(fd) => break fd,
        }
    };
    // SAFETY: openat2 returned a new descriptor that nothing else owns or
    // will close (it was created by this call and not shared), so handing
    // sole ownership to an OwnedFd, which closes it once on drop, is sound.
    Ok(unsafe { OwnedFd::from_raw_fd(fd) })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn set(s: &str) -> CpuSet {
        CpuSet::parse_list(s).unwrap()
    }

    #[test]
    fn policy_names_roundtrip() {
        for p in [
            MemPolicy::Default,
            MemPolicy::Bind,
            MemPolicy::Preferred,
            MemPolicy::Interleave,
            MemPolicy::Local,
        ] {
            assert_eq!(p.name().parse::<MemPolicy>().unwrap(), p);
            assert_eq!(MemPolicy::from_mode(p.mode()), Some(p));
            let json = serde_json::to_string(&p).unwrap();
            assert_eq!(json, format!("\"{p}\""));
            assert_eq!(serde_json::from_str::<MemPolicy>(&json).unwrap(), p);
        }
        assert!("Bind".parse::<MemPolicy>().is_err());
    }

    #[test]
    fn nodemask_packing() {
        assert!(nodemask_words(&CpuSet::new()).is_empty());
        assert_eq!(nodemask_words(&set("0")), vec![1]);
        let w = nodemask_words(&set("1,64"));
        assert_eq!(w.len(), 64 / WORD_BITS + 1);
        assert_eq!(w[0], 2);
        assert_eq!(w[64 / WORD_BITS], 1 << (64 % WORD_BITS));
    }

    #[test]
    fn bind_to_node0_is_visible() {
        // Memory policy is per thread: change a scratch thread, not the
        // test harness's.
        std::thread::spawn(|| {
            set_mempolicy(MemPolicy::Bind, &set("0")).unwrap();
            let (mode, nodes) = get_mempolicy().unwrap();
            assert_eq!(mode, MPOL_BIND);
            assert_eq!(nodes, set("0"));
            set_mempolicy(MemPolicy::Default, &CpuSet::new()).unwrap();
            assert_eq!(get_mempolicy().unwrap().0, MPOL_DEFAULT);
        })
        .join()
        .unwrap();
    }

    #[test]
    fn mempolicy_argument_errors() {
        let e = set_mempolicy(MemPolicy::Bind, &CpuSet::new()).unwrap_err();
        assert!(e.to_string().contains("at least one"), "{e}");
        let e = set_mempolicy(MemPolicy::Local, &set("0")).unwrap_err();
        assert!(e.to_string().contains("takes no nodes"), "{e}");
    }

    #[test]
    fn scheduling_errors_are_explained() {
        // The re-exported set_fifo is ibhost's explaining flavour.
        assert!(set_fifo(0).unwrap_err().to_string().contains("outside"));
        assert!(set_affinity(&CpuSet::new()).is_err());
    }
}
