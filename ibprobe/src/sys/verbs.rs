//! Raw verbs calls: the data path (post, poll, CQ events), what sideway
//! 0.4 lacks (UD address handles, the UD qkey at INIT) and the registered,
//! pre-faulted buffers the HCA reads and writes.
//!
//! Why it exists: sideway's post guards and pollers allocate per call, and
//! the hot loop must not. So `crate::verbs` builds every resource with
//! sideway's builders, and the work requests here are built once
//! ([`SendTemplate`], [`RecvRing`]) and only patched per message.

use crate::sys::mem::Region;
use std::io;
use std::mem::MaybeUninit;
use std::net::Ipv6Addr;
use std::ptr::{null_mut, NonNull};
use std::sync::Arc;

use rdma_mummy_sys as ffi;
use sideway::ibverbs::completion::{CompletionChannel, CompletionQueue, GenericCompletionQueue};
use sideway::ibverbs::memory_region::MemoryRegion;
use sideway::ibverbs::protection_domain::ProtectionDomain;
use sideway::ibverbs::queue_pair::{BasicQueuePair, QueuePair};
use sideway::ibverbs::AccessFlags;

/// One 8-byte word of a registered send buffer that another thread keeps
/// rewriting (`--stamp-thread`): the [`StampWords`] of one buffer.
pub type StampWord = StampWords;

/// The stamp words of a ring of registered send buffers (`--stamp-thread`):
/// one word of each buffer, all rewritten with one value per pass, so the
/// buffer the HCA reads next carries the time of the last pass before its
/// DMA read. Valid while the buffer lives (the executor joins the writing
/// thread before the end drops); the sending end copies around these
/// words, so they are only ever written atomically, by this handle.
pub struct StampWords {
    first: NonNull<u64>,
    stride: usize,
    n: usize,
}

// SAFETY: only this handle writes the words, with atomic stores, from the
// one thread it was moved to; the buffer outlives it (see the type's doc).
unsafe impl Send for StampWords {}

impl StampWords {
    /// Stores `v` into every word (relaxed atomic stores).
    #[inline(always)]
    pub fn store(&self, v: u64) {
        for i in 0..self.n {
            // SAFETY: word i lies at first + i * stride, inside the live
            // mapping and 8-aligned (checked by `Region::stamp_words`);
            // it is accessed only atomically from Rust while this exists.
            let a = unsafe {
                std::sync::atomic::AtomicU64::from_ptr(self.first.as_ptr().add(i * self.stride))
            };
            a.store(v, std::sync::atomic::Ordering::Relaxed);
        }
    }

    pub fn len(&self) -> usize {
        self.n
    }

    /// Never true: `stamp_words` asks for at least one.
    pub fn is_empty(&self) -> bool {
        self.n == 0
    }
}

impl Region {
    /// The aligned word at `off` as a [`StampWord`] for another thread.
    pub fn stamp_word(&self, off: usize) -> StampWord {
        self.stamp_words(off, 8, 1)
    }

    /// Word `off` of each of `n` (>= 1) buffers `stride` bytes apart from
    /// offset 0, as [`StampWords`] for another thread.
    pub fn stamp_words(&self, off: usize, stride: usize, n: usize) -> StampWords {
        assert!(n >= 1 && off.is_multiple_of(8) && stride.is_multiple_of(8));
        assert!((n - 1) * stride + off + 8 <= self.len);
        // SAFETY: off + 8 <= len: the pointer is inside the mapping, and
        // non-null because the mapping's base is.
        let p = unsafe { self.ptr.as_ptr().add(off) } as *mut u64;
        StampWords {
            first: NonNull::new(p).unwrap_or(NonNull::dangling()),
            stride: stride / 8,
            n,
        }
    }
}

/// A [`Region`] registered as one memory region. The MR is declared
/// first so it is deregistered before the memory is unmapped.
pub struct RegisteredBuf {
    mr: Arc<MemoryRegion>,
    pub buf: Region,
}

impl RegisteredBuf {
    pub fn register(
        pd: &Arc<ProtectionDomain>,
        buf: Region,
        access: AccessFlags,
    ) -> io::Result<RegisteredBuf> {
        // SAFETY: buf is valid for buf.len() bytes and lives in the same
        // struct as the MR, which is dropped (deregistered) before it.
        let mr = unsafe { pd.reg_mr(buf.addr() as usize, buf.len(), access) }
            .map_err(|e| io::Error::other(format!("ibv_reg_mr: {e}: {}", source_chain(&e))))?;
        Ok(RegisteredBuf { mr, buf })
    }

    pub fn lkey(&self) -> u32 {
        self.mr.lkey()
    }

    pub fn rkey(&self) -> u32 {
        self.mr.rkey()
    }
}

/// Joins an error's source chain for one-line messages.
pub fn source_chain(e: &dyn std::error::Error) -> String {
    let chain = std::iter::successors(e.source(), |c| c.source());
    chain.map(|c| c.to_string()).collect::<Vec<_>>().join(": ")
}

/// A sideway queue pair plus its raw pointer, for the data path.
pub struct OwnedQp {
    ptr: NonNull<ffi::ibv_qp>,
    /// The sideway QP (state transitions use its typed attributes).
    pub qp: BasicQueuePair,
}

impl OwnedQp {
    pub fn new(qp: BasicQueuePair) -> OwnedQp {
        // SAFETY: the pointer is only used while `qp` (owned by self) lives.
        let ptr = unsafe { qp.qp() };
        OwnedQp { ptr, qp }
    }

    pub fn qpn(&self) -> u32 {
        self.qp.qp_number()
    }

    /// RESET -> INIT for a UD QP (sideway's attribute type has no qkey).
    pub fn modify_ud_init(&mut self, port: u8, qkey: u32) -> io::Result<()> {
        // SAFETY: ibv_qp_attr is plain data; all-zero is a valid value.
        let mut attr: ffi::ibv_qp_attr = unsafe { MaybeUninit::zeroed().assume_init() };
        attr.qp_state = ffi::ibv_qp_state::IBV_QPS_INIT;
        attr.port_num = port;
        attr.qkey = qkey;
        let mask = ffi::ibv_qp_attr_mask::IBV_QP_STATE.0
            | ffi::ibv_qp_attr_mask::IBV_QP_PKEY_INDEX.0
            | ffi::ibv_qp_attr_mask::IBV_QP_PORT.0
            | ffi::ibv_qp_attr_mask::IBV_QP_QKEY.0;
        // SAFETY: ptr is a live QP (owned by self); attr is a valid
        // ibv_qp_attr on the stack for the duration of the call.
        let rc = unsafe { ffi::ibv_modify_qp(self.ptr.as_ptr(), &mut attr, mask as i32) };
        io_result(rc)
    }
}

/// A sideway CQ plus its raw pointer and optional completion channel.
/// An extended CQ (`ibv_create_cq_ex`, `--hw-timestamps`) is polled with
/// `ibv_start_poll`/`ibv_next_poll`/`ibv_end_poll` and yields each
/// completion's HCA timestamp; a basic one with `ibv_poll_cq`.
pub struct OwnedCq {
    ptr: NonNull<ffi::ibv_cq>,
    /// The same CQ as an `ibv_cq_ex` when it was created extended with
    /// IBV_WC_EX_WITH_COMPLETION_TIMESTAMP.
    ex: Option<NonNull<ffi::ibv_cq_ex>>,
    channel: Option<Arc<CompletionChannel>>,
    pub cq: GenericCompletionQueue,
}

#[derive(Clone, Copy, Debug, Default)]
pub struct Completion {
    pub wr_id: u64,
    /// ibv_wc_status (0 = success).
    pub status: u32,
    pub opcode: u32,
    /// Bytes received (receives only; includes the 40 B GRH on UD).
    pub byte_len: u32,
    /// Immediate data (host order) when the completion carries one.
    pub imm: Option<u32>,
    /// The HCA's completion timestamp (raw ticks), from an extended CQ
    /// created with IBV_WC_EX_WITH_COMPLETION_TIMESTAMP; None otherwise.
    pub hw_ts: Option<u64>,
}

/// Most completions [`OwnedCq::poll_many`] takes in one call.
pub const POLL_BATCH: usize = 16;

#[inline(always)]
fn completion_of(wc: &ffi::ibv_wc) -> Completion {
    Completion {
        wr_id: wc.wr_id,
        status: wc.status,
        opcode: wc.opcode,
        byte_len: wc.byte_len,
        imm: if wc.wc_flags & ffi::ibv_wc_flags::IBV_WC_WITH_IMM.0 != 0 {
            // SAFETY: IBV_WC_WITH_IMM says the union holds imm_data.
            Some(u32::from_be(unsafe {
                wc.imm_data_invalidated_rkey_union.imm_data
            }))
        } else {
            None
        },
        hw_ts: None,
    }
}

/// The fields of the completion an extended CQ's poll is on, with its
/// HCA timestamp.
///
/// # Safety
/// `ex` is a live extended CQ created with IBV_WC_EX_WITH_COMPLETION_TIMESTAMP
/// (and the standard flags: byte length, immediate), between a successful
/// `ibv_start_poll`/`ibv_next_poll` and `ibv_end_poll`.
#[inline(always)]
unsafe fn completion_of_ex(ex: NonNull<ffi::ibv_cq_ex>) -> Completion {
    let p = ex.as_ptr();
    // SAFETY (every read below): the caller's contract: the CQ is live and
    // positioned on a completion, and the read functions asked for exist
    // because the CQ was created with their flags.
    unsafe {
        let flags = ffi::ibv_wc_read_wc_flags(p);
        Completion {
            wr_id: (*p).wr_id,
            status: (*p).status,
            opcode: ffi::ibv_wc_read_opcode(p),
            byte_len: ffi::ibv_wc_read_byte_len(p),
            imm: (flags & ffi::ibv_wc_flags::IBV_WC_WITH_IMM.0 != 0)
                .then(|| u32::from_be(ffi::ibv_wc_read_imm_data(p))),
            hw_ts: Some(ffi::ibv_wc_read_completion_ts(p)),
        }
    }
}

impl OwnedCq {
    /// `channel`: the completion channel `cq` was built with, if any.
    pub fn new(cq: GenericCompletionQueue, channel: Option<Arc<CompletionChannel>>) -> OwnedCq {
        // SAFETY: the pointer is only used while `cq` (owned by self) lives.
        let ptr = unsafe { cq.cq() };
        // An extended CQ's ibv_cq is the start of its ibv_cq_ex (libibverbs'
        // ibv_cq_ex_to_cq is this cast; sideway's cq() returns it).
        let ex = matches!(cq, GenericCompletionQueue::Extended(_)).then(|| ptr.cast());
        OwnedCq {
            ptr,
            ex,
            channel,
            cq,
        }
    }

    /// One extended poll: up to `out.len()` completions (start, next...,
    /// end). Ok(n): `out[..n]` are filled.
    #[inline(always)]
    fn poll_ex(ex: NonNull<ffi::ibv_cq_ex>, out: &mut [Completion]) -> Result<usize, i32> {
        if out.is_empty() {
            return Ok(0);
        }
        // SAFETY: ibv_poll_cq_attr is plain data; comp_mask 0 is required.
        let mut attr: ffi::ibv_poll_cq_attr = unsafe { MaybeUninit::zeroed().assume_init() };
        // SAFETY: ex is a live extended CQ owned by the caller's OwnedCq;
        // attr is valid for the call.
        let rc = unsafe { ffi::ibv_start_poll(ex.as_ptr(), &mut attr) };
        if rc == libc::ENOENT {
            return Ok(0);
        }
        if rc != 0 {
            return Err(-rc);
        }
        let mut n = 0;
        loop {
            // SAFETY: start_poll/next_poll returned 0: positioned on a
            // completion of a CQ created with the timestamp flag.
            out[n] = unsafe { completion_of_ex(ex) };
            n += 1;
            if n == out.len() {
                break;
            }
            // SAFETY: a poll is in progress on this live CQ.
            let rc = unsafe { ffi::ibv_next_poll(ex.as_ptr()) };
            if rc != 0 {
                break; // ENOENT: no more; an error shows on the next poll
            }
        }
        // SAFETY: a poll started with ibv_start_poll returning 0 must be ended.
        unsafe { ffi::ibv_end_poll(ex.as_ptr()) };
        Ok(n)
    }

    /// Polls at most one completion (ibv_poll_cq with one entry).
    /// Ok(false): the CQ was empty. Err: the provider's negative status.
    #[inline(always)]
    pub fn poll_one(&self, out: &mut Completion) -> Result<bool, i32> {
        if let Some(ex) = self.ex {
            return Self::poll_ex(ex, std::slice::from_mut(out)).map(|n| n == 1);
        }
        let mut wc = MaybeUninit::<ffi::ibv_wc>::uninit();
        // SAFETY: ptr is a live CQ owned by self; wc has room for one entry.
        let n = unsafe { ffi::ibv_poll_cq(self.ptr.as_ptr(), 1, wc.as_mut_ptr()) };
        if n == 0 {
            return Ok(false);
        }
        if n < 0 {
            return Err(n);
        }
        // SAFETY: ibv_poll_cq returned 1, so it filled the entry.
        let wc = unsafe { wc.assume_init() };
        *out = completion_of(&wc);
        Ok(true)
    }

    /// Polls up to `out.len()` completions (at most [`POLL_BATCH`]) in
    /// one ibv_poll_cq: one provider call (and, on rxe, one lock of the
    /// CQ) for a burst of arrivals. Ok(n): `out[..n]` are filled.
    #[inline(always)]
    pub fn poll_many(&self, out: &mut [Completion]) -> Result<usize, i32> {
        if let Some(ex) = self.ex {
            let want = out.len().min(POLL_BATCH);
            return Self::poll_ex(ex, &mut out[..want]);
        }
        let mut wcs = [MaybeUninit::<ffi::ibv_wc>::uninit(); POLL_BATCH];
        let want = out.len().min(POLL_BATCH);
        // SAFETY: ptr is a live CQ owned by self; wcs has room for `want`
        // entries (want <= POLL_BATCH), and ibv_wc is plain data.
        let n = unsafe { ffi::ibv_poll_cq(self.ptr.as_ptr(), want as i32, wcs[0].as_mut_ptr()) };
        if n < 0 {
            return Err(n);
        }
        let n = n as usize;
        for (o, wc) in out.iter_mut().zip(&wcs[..n]) {
            // SAFETY: ibv_poll_cq returned n, so it filled the first n entries.
            let wc = unsafe { wc.assume_init_ref() };
            *o = completion_of(wc);
        }
        Ok(n)
    }

    /// Arms the CQ: the next completion raises an event on its channel.
    pub fn req_notify(&self) -> io::Result<()> {
        // SAFETY: ptr is a live CQ owned by self.
        let rc = unsafe { ffi::ibv_req_notify_cq(self.ptr.as_ptr(), 0) };
        io_result(rc)
    }

    /// Waits up to `timeout_ns` for a completion event on this CQ's
    /// channel (poll(2) on the channel fd, then ibv_get_cq_event and
    /// ibv_ack_cq_events). Ok(false) on timeout. The caller re-arms with
    /// [`OwnedCq::req_notify`] and then polls the CQ.
    pub fn wait_event(&self, timeout_ns: u64) -> io::Result<bool> {
        let Some(ch) = &self.channel else {
            return Err(io::Error::other("CQ has no completion channel"));
        };
        // SAFETY: the channel is alive (Arc held by self).
        let chp = unsafe { ch.comp_channel() };
        let fd = std::os::fd::AsRawFd::as_raw_fd(&**ch);
        let ms = timeout_ns.div_ceil(1_000_000).min(i32::MAX as u64) as i32;
        let mut pfd = libc::pollfd {
            fd,
            events: libc::POLLIN,
            revents: 0,
        };
        // SAFETY: one valid pollfd on the stack.
        let r = unsafe { libc::poll(&mut pfd, 1, ms) };
        if r < 0 {
            let e = io::Error::last_os_error();
            if e.kind() == io::ErrorKind::Interrupted {
                return Ok(false);
            }
            return Err(e);
        }
        if r == 0 {
            return Ok(false);
        }
        let mut ev_cq: *mut ffi::ibv_cq = null_mut();
        let mut ctx: *mut libc::c_void = null_mut();
        // SAFETY: chp is a live channel; the out pointers are valid locals.
        let rc = unsafe { ffi::ibv_get_cq_event(chp.as_ptr(), &mut ev_cq, &mut ctx) };
        if rc != 0 {
            return Err(io::Error::last_os_error());
        }
        // SAFETY: ev_cq was returned by ibv_get_cq_event for a CQ on this
        // channel (only this CQ uses it); acking one event is required
        // before the CQ can be destroyed.
        unsafe { ffi::ibv_ack_cq_events(ev_cq, 1) };
        Ok(true)
    }
}

/// An address handle (UD: where a send goes). Holds the PD so the AH is
/// destroyed before the PD.
pub struct AddressHandle {
    ptr: NonNull<ffi::ibv_ah>,
    _pd: Arc<ProtectionDomain>,
}

impl AddressHandle {
    /// Creates an AH on `port` to `dgid` (global route from `sgid_index`)
    /// or, when `global` is false (InfiniBand without GRH), to `dlid`.
    pub fn new(
        pd: &Arc<ProtectionDomain>,
        port: u8,
        dgid: Ipv6Addr,
        sgid_index: u8,
        dlid: u16,
        global: bool,
    ) -> io::Result<AddressHandle> {
        // SAFETY: ibv_ah_attr is plain data; all-zero is valid.
        let mut attr: ffi::ibv_ah_attr = unsafe { MaybeUninit::zeroed().assume_init() };
        attr.port_num = port;
        attr.dlid = dlid;
        if global {
            attr.is_global = 1;
            attr.grh.dgid = ffi::ibv_gid { raw: dgid.octets() };
            attr.grh.sgid_index = sgid_index;
            attr.grh.hop_limit = 64;
        }
        // SAFETY: the PD is alive (Arc); attr is valid for the call.
        let ah = unsafe { ffi::ibv_create_ah(pd.pd().as_ptr(), &mut attr) };
        let ptr = NonNull::new(ah).ok_or_else(io::Error::last_os_error)?;
        Ok(AddressHandle {
            ptr,
            _pd: Arc::clone(pd),
        })
    }
}

impl Drop for AddressHandle {
    fn drop(&mut self) {
        // SAFETY: ptr came from ibv_create_ah and is destroyed once; the
        // send template using it is dropped first (field order).
        unsafe { ffi::ibv_destroy_ah(self.ptr.as_ptr()) };
    }
}

/// The send opcodes the probe uses, as libibverbs numbers them.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[repr(u32)]
pub enum SendOpcode {
    Send = ffi::ibv_wr_opcode::IBV_WR_SEND,
    SendImm = ffi::ibv_wr_opcode::IBV_WR_SEND_WITH_IMM,
    Write = ffi::ibv_wr_opcode::IBV_WR_RDMA_WRITE,
    WriteImm = ffi::ibv_wr_opcode::IBV_WR_RDMA_WRITE_WITH_IMM,
}

/// A send work request built once and patched per message (wr_id, SGE
/// address and length, immediate, flags). Both parts are boxed so the
/// `sg_list` pointer stays valid when the template moves.
pub struct SendTemplate {
    wr: Box<ffi::ibv_send_wr>,
    sge: Box<ffi::ibv_sge>,
    inline_upto: u32,
}

impl SendTemplate {
    /// Builds the template. `rdma` is (rkey, remote address) for writes;
    /// `ud` is (address handle, remote QPN, qkey) for UD sends; a
    /// non-empty message of at most `inline_upto` bytes is posted with
    /// IBV_SEND_INLINE (0: never; at most the QP's max_inline_data). The AH
    /// must outlive the template (keep both in one struct, template first).
    pub fn new(
        opcode: SendOpcode,
        lkey: u32,
        rdma: Option<(u32, u64)>,
        ud: Option<(&AddressHandle, u32, u32)>,
        inline_upto: u32,
    ) -> SendTemplate {
        // SAFETY: ibv_send_wr is plain data (pointers may be null); zeroed is valid.
        let mut wr: Box<ffi::ibv_send_wr> =
            Box::new(unsafe { MaybeUninit::zeroed().assume_init() });
        let mut sge = Box::new(ffi::ibv_sge {
            addr: 0,
            length: 0,
            lkey,
        });
        wr.opcode = opcode as ffi::ibv_wr_opcode::Type;
        wr.sg_list = &mut *sge;
        wr.num_sge = 1;
        if let Some((rkey, addr)) = rdma {
            wr.wr.rdma = ffi::rdma_t {
                remote_addr: addr,
                rkey,
            };
        }
        if let Some((ah, qpn, qkey)) = ud {
            wr.wr.ud = ffi::ud_t {
                ah: ah.ptr.as_ptr(),
                remote_qpn: qpn,
                remote_qkey: qkey,
            };
        }
        SendTemplate {
            wr,
            sge,
            inline_upto,
        }
    }

    /// Points the next RDMA writes at `addr` in the peer's memory (same
    /// rkey): a stream's write-imm targets the peer's receive slot i.
    #[inline(always)]
    pub fn set_remote_addr(&mut self, addr: u64) {
        // A plain write into the union's `rdma` member (safe: no read); the
        // template was built with an rdma target for the write opcodes.
        self.wr.wr.rdma.remote_addr = addr;
    }

    /// Posts one message of `len` bytes at `addr` (inside the registered
    /// buffer whose lkey the template carries). `imm` is sent (network
    /// order) for the *-imm opcodes. Err: the provider's errno.
    #[inline(always)]
    pub fn post(
        &mut self,
        qp: &OwnedQp,
        wr_id: u64,
        addr: u64,
        len: u32,
        imm: u32,
        signaled: bool,
    ) -> Result<(), i32> {
        self.wr.wr_id = wr_id;
        self.wr.next = null_mut();
        self.sge.addr = addr;
        self.sge.length = len;
        self.wr.num_sge = if len == 0 { 0 } else { 1 };
        self.wr.imm_data_invalidated_rkey_union.imm_data = imm.to_be();
        let mut flags = 0;
        if signaled {
            flags |= ffi::ibv_send_flags::IBV_SEND_SIGNALED.0;
        }
        if len > 0 && len <= self.inline_upto {
            flags |= ffi::ibv_send_flags::IBV_SEND_INLINE.0;
        }
        self.wr.send_flags = flags;
        let mut bad: *mut ffi::ibv_send_wr = null_mut();
        // SAFETY: qp is live; wr and its sg_list (self.sge) are valid boxed
        // structs; the SGE points into a registered buffer the caller owns
        // (and inline data is copied during the call); the UD AH, if any,
        // outlives the template (documented contract of `new`).
        let rc = unsafe { ffi::ibv_post_send(qp.ptr.as_ptr(), &mut *self.wr, &mut bad) };
        if rc == 0 {
            Ok(())
        } else {
            Err(rc)
        }
    }
}

/// Receive work requests built once, one per slot of a receive ring
/// (wr_id = slot index), re-posted one at a time.
pub struct RecvRing {
    wrs: Box<[ffi::ibv_recv_wr]>,
    /// Never read from Rust: it owns the SGEs the `wrs` point into.
    _sges: Box<[ffi::ibv_sge]>,
}

impl RecvRing {
    /// `n` slots of `slot_len` bytes, `stride` bytes apart, starting at
    /// `base` in a registered buffer with `lkey`.
    pub fn new(n: usize, base: u64, stride: u32, slot_len: u32, lkey: u32) -> RecvRing {
        let mut sges: Box<[ffi::ibv_sge]> = (0..n)
            .map(|i| ffi::ibv_sge {
                addr: base + i as u64 * stride as u64,
                length: slot_len,
                lkey,
            })
            .collect();
        let wrs: Box<[ffi::ibv_recv_wr]> = sges
            .iter_mut()
            .enumerate()
            .map(|(i, s)| ffi::ibv_recv_wr {
                wr_id: i as u64,
                next: null_mut(),
                sg_list: s,
                num_sge: if slot_len == 0 { 0 } else { 1 },
            })
            .collect();
        RecvRing { wrs, _sges: sges }
    }

    pub fn len(&self) -> usize {
        self.wrs.len()
    }

    pub fn is_empty(&self) -> bool {
        self.wrs.is_empty()
    }

    /// Posts slot `i`'s receive. Err: the provider's errno.
    #[inline(always)]
    pub fn post(&mut self, qp: &OwnedQp, i: usize) -> Result<(), i32> {
        let wr = &mut self.wrs[i];
        wr.next = null_mut();
        let mut bad: *mut ffi::ibv_recv_wr = null_mut();
        // SAFETY: qp is live; wr and its SGE (in self._sges, boxed, never
        // moved) point into a registered buffer the caller owns.
        let rc = unsafe { ffi::ibv_post_recv(qp.ptr.as_ptr(), wr, &mut bad) };
        if rc == 0 {
            Ok(())
        } else {
            Err(rc)
        }
    }
}

// SAFETY (all five impls): each type exclusively owns its verbs object or
// mapping (no aliasing handle escapes), libibverbs objects may be used
// from any thread, and every mutating call takes `&mut self`, so moving
// one to another thread (e.g. a pinned measurement thread) is sound.
unsafe impl Send for OwnedQp {}
unsafe impl Send for OwnedCq {}
unsafe impl Send for AddressHandle {}
unsafe impl Send for SendTemplate {}
unsafe impl Send for RecvRing {}

/// A verbs call's return code (0, or an errno) as an `io::Result`.
fn io_result(rc: i32) -> io::Result<()> {
    match rc {
        0 => Ok(()),
        e => Err(io::Error::from_raw_os_error(e)),
    }
}

/// ibv_wc_status_str: the library's name for a completion status.
pub fn wc_status_str(status: u32) -> String {
    // SAFETY: ibv_wc_status_str returns a static string or NULL.
    let p = unsafe { ffi::ibv_wc_status_str(status) };
    if p.is_null() {
        return format!("status {status}");
    }
    // SAFETY: non-null, NUL-terminated static string.
    unsafe { std::ffi::CStr::from_ptr(p) }
        .to_string_lossy()
        .into_owned()
}
