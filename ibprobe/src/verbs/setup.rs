//! Cold setup: everything that creates or connects verbs resources.
//!
//! Why it exists: turning a [`VerbsConfig`] into connected QPs is long,
//! checked against the device at every step, and runs once per probe
//! (allocation and syscalls are fine here). The result is a
//! [`VerbsChannel`] (round trip: [`prepare`], then [`Prepared::connect`]
//! with the peer's [`Endpoint`]) or a [`LoopbackChannel`] ([`loopback`]).

use std::net::Ipv6Addr;
use std::sync::Arc;

use serde::{Deserialize, Serialize};
use sideway::ibverbs::address::{AddressHandleAttribute, Gid};
use sideway::ibverbs::completion::{
    CompletionChannel, CompletionQueueBuilder, CreateCompletionQueueWorkCompletionFlags,
    GenericCompletionQueue,
};
use sideway::ibverbs::device_context::DeviceContext;
use sideway::ibverbs::protection_domain::ProtectionDomain;
use sideway::ibverbs::queue_pair::{QueuePair, QueuePairAttribute, QueuePairState};
use sideway::ibverbs::AccessFlags;

use super::channel::{LoopbackChannel, VerbsChannel};
use super::config::VerbsConfig;
use super::device::{self, GidInfo};
use super::error::{OrCall, VerbsError};
use super::types::{Setup, Wired};
use crate::clock::hca::HcaClock;
use crate::spec::{InlineMode, Op, Poll, QpType};
use crate::sys::mem::{self, MemError, Placement, Region};
use crate::sys::verbs::{
    AddressHandle, OwnedCq, OwnedQp, RecvRing, RegisteredBuf, SendOpcode, SendTemplate,
};
use crate::transport::TransportInfo;

/// The qkey every UD QP of the probe uses.
pub(super) const QKEY: u32 = 0x1111_1111;
/// Bytes of GRH in front of every UD receive.
pub(super) const GRH: u32 = 40;
/// Cap on the send-slot ring's memory.
const SEND_RING_MAX: usize = 64 << 20;

/// What a peer needs to reach one QP: exchanged out of band (the client
/// and server send theirs over TCP as JSON) before [`Prepared::connect`].
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Endpoint {
    /// QP type (both ends must agree).
    pub qp_type: QpType,
    pub qpn: u32,
    /// Initial packet sequence number of this QP's send queue.
    pub psn: u32,
    /// The GID this QP sends from (:: on InfiniBand without GRH).
    pub gid: Ipv6Addr,
    /// Whether the peer must route by GID (RoCE: always).
    pub global: bool,
    /// Port LID (InfiniBand; 0 on RoCE).
    pub lid: u16,
    /// The RDMA write target: rkey, address, length.
    pub rkey: u32,
    pub addr: u64,
    pub len: u32,
    pub qkey: u32,
    /// This side's path MTU in bytes (the connection uses the smaller).
    pub mtu: u32,
    /// A stream end's slot pool and counter word (`prepare_slots`); absent
    /// for a channel, so a channel's JSON is what it always was.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub stream: Option<StreamTarget>,
}

/// Where a stream end's peer writes: its receive pool (write-imm puts
/// slot i at `recv_addr + i * recv_stride`) and its counter word (rc
/// `--credit-return write`), both under the [`Endpoint`]'s `rkey`.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct StreamTarget {
    /// Receive slots in the pool (both ends must agree).
    pub slots: u32,
    /// Bytes per slot (both ends must agree).
    pub slot_size: u32,
    pub recv_addr: u64,
    pub recv_stride: u32,
    /// The 8-byte counter word.
    pub counter_addr: u64,
}

/// A QP in INIT with its CQs and registered buffers, waiting for the
/// peer's [`Endpoint`]. Field order is drop order.
pub struct Prepared {
    mem: RegisteredBuf,
    o: OpenedQp,
    s: Setup,
    /// How the buffers were placed (`Region::describe`).
    memory: String,
}

/// Creates one QP on `cfg.knobs.dev` (checked against the device: port active,
/// MTU, max inline, queue depths, GID) and returns it with the local
/// [`Endpoint`] to hand to the peer.
pub fn prepare(cfg: &VerbsConfig) -> Result<(Prepared, Endpoint), VerbsError> {
    prepare_on(cfg, cfg.knobs.dev.as_deref())
}

pub(super) fn round_up(n: u64, a: u64) -> u64 {
    n.div_ceil(a) * a
}

/// A QP in INIT with its CQs, on an opened port: what every verbs end
/// (channel or stream) starts from. Field order is drop order.
pub(super) struct OpenedQp {
    pub(super) qp: OwnedQp,
    pub(super) send_cq: GenericCompletionQueue,
    pub(super) recv_cq: GenericCompletionQueue,
    /// `--hw-timestamps`: the device's completion clock (both CQs stamp).
    pub(super) hca: Option<HcaClock>,
    pub(super) channel: Option<Arc<CompletionChannel>>,
    pub(super) pd: Arc<ProtectionDomain>,
    pub(super) ctx: Arc<DeviceContext>,
    pub(super) dev: String,
    pub(super) port: u8,
    pub(super) lid: u16,
    pub(super) gid: Option<GidInfo>,
    /// The path MTU this side asks for (bytes).
    pub(super) mtu: u32,
    pub(super) max_inline: u32,
    /// The QP's max_inline_data.
    pub(super) inline_cap: u32,
}

/// How big a QP [`open_qp`] creates, and which messages go inline.
pub(super) struct QpShape {
    pub(super) sq_depth: u32,
    pub(super) rq_depth: u32,
    /// `--inline auto`: the QP's inline capacity is this many bytes when
    /// the device allows that much (0: inline off). A channel passes its
    /// message size; a stream, whose slots vary in length, passes the slot
    /// size (capped at the device's maximum).
    pub(super) inline_upto: u32,
    /// Whether `--inline auto` may cap `inline_upto` at the device maximum
    /// (streams) instead of turning inline off (a channel's one size).
    pub(super) inline_partial: bool,
}

/// Opens `dev`'s port, checks the depths and the MTU against it, creates
/// the PD, CQs (a completion channel for event polling) and the QP, and
/// moves the QP to INIT.
pub(super) fn open_qp(
    cfg: &VerbsConfig,
    dev: Option<&str>,
    shape: &QpShape,
) -> Result<OpenedQp, VerbsError> {
    let p = device::open_port(dev, cfg.knobs.port)?;
    for (what, d) in [("SQ", shape.sq_depth), ("RQ", shape.rq_depth)] {
        if d > p.max_qp_wr {
            return Err(VerbsError::config(format!(
                "{what} depth {d} > {} max_qp_wr {}",
                p.name, p.max_qp_wr
            )));
        }
    }
    let mtu = cfg.knobs.mtu.unwrap_or(p.active_mtu);
    if mtu > p.active_mtu {
        return Err(VerbsError::config(format!(
            "mtu {mtu} > {} port {} active MTU {}",
            p.name, p.port, p.active_mtu
        )));
    }
    if cfg.qp_type == QpType::Ud && cfg.size > mtu {
        return Err(VerbsError::config(format!(
            "UD message {} B > path MTU {mtu} B (UD sends one packet; the receiver adds the 40 B GRH)",
            cfg.size
        )));
    }
    let gid = device::pick_gid(&p, cfg.knobs.gid_index)?;
    let ctx = Arc::clone(&p.ctx);
    let pd = ctx.alloc_pd().or_call("ibv_alloc_pd")?;
    let max_inline = device::probe_max_inline(&ctx, &pd, cfg.qp_type);
    let upto = shape.inline_upto;
    let inline_cap = match cfg.knobs.inline {
        InlineMode::Off => 0,
        InlineMode::Auto if upto > 0 && upto <= max_inline => upto,
        InlineMode::Auto if shape.inline_partial => max_inline,
        InlineMode::Auto => 0,
        InlineMode::Bytes(n) if n > max_inline => {
            return Err(VerbsError::config(format!(
                "inline {n} > {} max inline {max_inline} ({})",
                p.name,
                cfg.qp_type.upper()
            )))
        }
        InlineMode::Bytes(n) => n,
    };

    let channel = (cfg.poll == Poll::Event)
        .then(|| ctx.create_comp_channel())
        .transpose()
        .or_call("ibv_create_comp_channel")?;
    // --hw-timestamps: refused on a device that stamps nothing (rxe),
    // before any CQ exists.
    let hca = cfg
        .knobs
        .hw_timestamps
        .then(|| HcaClock::new(&p.name, p.ts_mask, p.hca_khz))
        .transpose()
        .map_err(|e| VerbsError::config(e.to_string()))?;
    let mut sb = ctx.create_cq_builder();
    sb.setup_cqe(shape.sq_depth);
    let send_cq = build_cq(&mut sb, hca.is_some(), "ibv_create_cq (send)")?;
    let mut rb = ctx.create_cq_builder();
    rb.setup_cqe(shape.rq_depth);
    if let Some(ch) = &channel {
        rb.setup_comp_channel(ch, 0);
    }
    let recv_cq = build_cq(&mut rb, hca.is_some(), "ibv_create_cq (recv)")?;
    let qp = pd
        .create_qp_builder()
        .setup_qp_type(device::to_sideway(cfg.qp_type))
        .setup_max_send_wr(shape.sq_depth)
        .setup_max_recv_wr(shape.rq_depth)
        .setup_max_send_sge(1)
        .setup_max_recv_sge(1)
        .setup_max_inline_data(inline_cap)
        .setup_send_cq(send_cq.clone())
        .setup_recv_cq(recv_cq.clone())
        .build()
        .or_call("ibv_create_qp")?;
    let mut qp = OwnedQp::new(qp);
    match cfg.qp_type {
        QpType::Ud => qp
            .modify_ud_init(p.port, QKEY)
            .or_call("ibv_modify_qp INIT")?,
        QpType::Rc | QpType::Uc => {
            let mut a = QueuePairAttribute::new();
            a.setup_state(QueuePairState::Init)
                .setup_pkey_index(0)
                .setup_port(p.port)
                .setup_access_flags(AccessFlags::LocalWrite | AccessFlags::RemoteWrite);
            qp.qp.modify(&a).or_call("ibv_modify_qp INIT")?;
        }
    }
    Ok(OpenedQp {
        qp,
        send_cq,
        recv_cq,
        hca,
        channel,
        pd,
        ctx,
        dev: p.name.clone(),
        port: p.port,
        lid: p.lid,
        gid,
        mtu,
        max_inline,
        inline_cap,
    })
}

/// A CQ from `b`: basic, or with `stamps` extended with the HCA's
/// completion timestamp.
fn build_cq(
    b: &mut CompletionQueueBuilder,
    stamps: bool,
    what: &str,
) -> Result<GenericCompletionQueue, VerbsError> {
    if !stamps {
        return Ok(b.build().or_call(what)?.into());
    }
    b.setup_wc_flags(
        CreateCompletionQueueWorkCompletionFlags::StandardFlags
            | CreateCompletionQueueWorkCompletionFlags::CompletionTimestamp,
    );
    Ok(b.build_ex()
        .or_call(&format!("{what} with completion timestamps"))?
        .into())
}

/// Bytes in front of a receive's payload: the GRH on UD.
pub(super) fn grh(t: QpType) -> u32 {
    if t == QpType::Ud {
        GRH
    } else {
        0
    }
}

/// The initial PSN of a QP's send queue (any 24-bit value; derived from
/// the QPN so both ends differ).
fn initial_psn(qpn: u32) -> u32 {
    qpn.wrapping_mul(2_654_435_761) & 0x00ff_ffff
}

fn prepare_on(cfg: &VerbsConfig, dev: Option<&str>) -> Result<(Prepared, Endpoint), VerbsError> {
    let o = open_qp(
        cfg,
        dev,
        &QpShape {
            sq_depth: cfg.knobs.sq_depth,
            rq_depth: cfg.knobs.rq_depth,
            inline_upto: cfg.size,
            inline_partial: false,
        },
    )?;
    let inline_used = cfg.size > 0 && cfg.size <= o.inline_cap;

    let size = cfg.size as u64;
    let send_stride = round_up(size.max(8), 64);
    let send_slots = (cfg.knobs.sq_depth as u64).min(((SEND_RING_MAX as u64) / send_stride).max(1));
    let recv_len = size + u64::from(grh(cfg.qp_type));
    let recv_stride = round_up(recv_len.max(8), 64);
    let recv_off = send_slots * send_stride;
    let target_off = recv_off + cfg.rq_prepost as u64 * recv_stride;
    let total = target_off + round_up(size.max(8), 64);
    let (mem, memory) = o.buffers(total as usize, cfg.knobs.hugepages)?;
    let ep = o.endpoint(
        cfg.qp_type,
        mem.rkey(),
        mem.buf.addr() + target_off,
        cfg.size,
    );
    let s = Setup {
        qp_type: cfg.qp_type,
        op: cfg.knobs.op,
        size: cfg.size,
        mtu: o.mtu,
        inline_used,
        period: cfg.signal_period(),
        poll: cfg.poll,
        sq_depth: cfg.knobs.sq_depth,
        rq_depth: cfg.knobs.rq_depth,
        prepost: cfg.rq_prepost,
        send_slots: send_slots as u32,
        send_stride: send_stride as u32,
        recv_off,
        recv_stride: recv_stride as u32,
        target_off,
        hca: o.hca,
    };
    Ok((Prepared { mem, o, s, memory }, ep))
}

impl OpenedQp {
    /// The [`Endpoint`] a peer needs to reach this QP; `rkey`, `addr`
    /// and `len` name the RDMA write target (a stream adds its
    /// [`StreamTarget`]).
    pub(super) fn endpoint(&self, qp_type: QpType, rkey: u32, addr: u64, len: u32) -> Endpoint {
        Endpoint {
            qp_type,
            qpn: self.qp.qpn(),
            psn: initial_psn(self.qp.qpn()),
            gid: self
                .gid
                .as_ref()
                .and_then(|g| g.gid.parse().ok())
                .unwrap_or(Ipv6Addr::UNSPECIFIED),
            global: self.gid.is_some(),
            lid: self.lid,
            rkey,
            addr,
            len,
            qkey: QKEY,
            mtu: self.mtu,
            stream: None,
        }
    }

    /// `len` bytes of registered buffers, with how they were placed: on
    /// the device's NUMA node when sysfs names one (a failed bind falls
    /// back to the default policy: the user did not ask for it), in huge
    /// pages with `--hugepages` (whose refusals are input errors).
    pub(super) fn buffers(
        &self,
        len: usize,
        hugepages: bool,
    ) -> Result<(RegisteredBuf, String), VerbsError> {
        let mut placement = Placement {
            hugepages,
            node: mem::rdma_device_numa_node(&self.dev),
            ..Placement::default()
        };
        let mut r = Region::new(len, &placement);
        if let Err(MemError::Bind { .. } | MemError::NoSuchNode { .. }) = r {
            placement.node = None;
            r = Region::new(len, &placement);
        }
        let region = r.map_err(|e| match e {
            MemError::NoHugePages { .. } | MemError::NodeHugePages { .. } => {
                VerbsError::config(e.to_string())
            }
            other => VerbsError::verbs("allocate buffers", other),
        })?;
        let memory = region.describe();
        let access = AccessFlags::LocalWrite | AccessFlags::RemoteWrite;
        let mem = RegisteredBuf::register(&self.pd, region, access).or_call("register buffers")?;
        Ok((mem, memory))
    }

    /// Moves the QP (in INIT) to RTR/RTS towards `peer` at `mtu_bytes`
    /// (routed by GID when either end has one), posts every receive of
    /// `recv` when `post`, and hands the end's verbs objects over.
    pub(super) fn wire(
        self,
        mem: RegisteredBuf,
        peer: &Endpoint,
        mtu_bytes: u32,
        mut recv: RecvRing,
        post: bool,
    ) -> Result<Wired, VerbsError> {
        let OpenedQp {
            mut qp,
            send_cq,
            recv_cq,
            channel,
            pd,
            ctx,
            port,
            gid,
            ..
        } = self;
        let psn = initial_psn(qp.qpn());
        let sgid = gid.as_ref().map(|g| g.index as u8).unwrap_or(0);
        let global = peer.global || gid.is_some();
        let mut rtr = QueuePairAttribute::new();
        rtr.setup_state(QueuePairState::ReadyToReceive);
        let mut rts = QueuePairAttribute::new();
        rts.setup_state(QueuePairState::ReadyToSend)
            .setup_sq_psn(psn);
        if peer.qp_type != QpType::Ud {
            let mut av = AddressHandleAttribute::new();
            av.setup_port(port)
                .setup_dest_lid(peer.lid)
                .setup_service_level(0);
            if global {
                av.setup_grh_dest_gid(&Gid::from(peer.gid))
                    .setup_grh_src_gid_index(sgid)
                    .setup_grh_hop_limit(64);
            }
            let mtu =
                device::mtu_from_bytes(mtu_bytes).ok_or_else(|| VerbsError::config("bad mtu"))?;
            rtr.setup_path_mtu(mtu)
                .setup_dest_qp_num(peer.qpn)
                .setup_rq_psn(peer.psn)
                .setup_address_vector(&av);
        }
        if peer.qp_type == QpType::Rc {
            rtr.setup_max_dest_read_atomic(1).setup_min_rnr_timer(12);
            rts.setup_timeout(14)
                .setup_retry_cnt(7)
                .setup_rnr_retry(7)
                .setup_max_read_atomic(1);
        }
        for (a, what) in [(&rtr, "ibv_modify_qp RTR"), (&rts, "ibv_modify_qp RTS")] {
            qp.qp.modify(a).or_call(what)?;
        }
        let ah = match peer.qp_type {
            QpType::Ud => Some(
                AddressHandle::new(&pd, port, peer.gid, sgid, peer.lid, global)
                    .or_call("ibv_create_ah")?,
            ),
            QpType::Rc | QpType::Uc => None,
        };
        if post {
            for i in 0..recv.len() {
                recv.post(&qp, i).map_err(|e| {
                    VerbsError::verbs("ibv_post_recv", std::io::Error::from_raw_os_error(e))
                })?;
            }
        }
        Ok(Wired {
            _ah: ah,
            recv,
            qp,
            send_cq: OwnedCq::new(send_cq, None),
            recv_cq: OwnedCq::new(recv_cq, channel),
            mem,
            _pd: pd,
            _ctx: ctx,
        })
    }
}

impl Prepared {
    /// Moves the QP to RTR/RTS towards `peer` (RC/UC: the peer's QPN, PSN
    /// and GID/LID; UD: an address handle to the peer's GID + qkey), posts
    /// the receives and, for event polling, arms the receive CQ.
    pub fn connect(self, peer: &Endpoint) -> Result<VerbsChannel, VerbsError> {
        let Prepared {
            mem,
            o,
            mut s,
            memory,
        } = self;
        same_qp_type(peer, s.qp_type)?;
        if s.op.is_write() && peer.len < s.size {
            return Err(VerbsError::config(format!(
                "peer write target {} B < message {} B",
                peer.len, s.size
            )));
        }
        s.mtu = s.mtu.min(peer.mtu);
        if s.qp_type == QpType::Ud && s.size > s.mtu {
            return Err(VerbsError::config(format!(
                "UD message {} B > path MTU {} B",
                s.size, s.mtu
            )));
        }
        let recv_len = s.size + grh(s.qp_type);
        let recv = RecvRing::new(
            s.prepost as usize,
            mem.buf.addr() + s.recv_off,
            s.recv_stride,
            recv_len.min(s.recv_stride),
            mem.lkey(),
        );
        let info = make_info(&s, &o, memory, peer);
        let w = o.wire(mem, peer, s.mtu, recv, s.op.needs_recv())?;
        let rdma = s.op.is_write().then_some((peer.rkey, peer.addr));
        let ud = w._ah.as_ref().map(|a| (a, peer.qpn, peer.qkey));
        let inline_upto = if s.inline_used { s.size } else { 0 };
        let tpl = SendTemplate::new(opcode(s.op), w.mem.lkey(), rdma, ud, inline_upto);
        if s.poll == Poll::Event {
            w.recv_cq.req_notify().or_call("ibv_req_notify_cq")?;
        }
        Ok(VerbsChannel {
            tpl,
            w,
            outstanding: 0,
            unsignaled: 0,
            stash: vec![(0, None); s.sq_depth as usize + 1].into_boxed_slice(),
            stash_head: 0,
            stash_len: 0,
            expected: 0,
            last_marker: 0,
            payload_off: grh(s.qp_type) as usize,
            stamp: false,
            last_recv_off: 0,
            last_recv_ts: None,
            repost: None,
            last_send_ts: None,
            info,
            s,
        })
    }
}

/// The send opcode of `op` (a stream refuses plain write before this).
pub(super) fn opcode(op: Op) -> SendOpcode {
    match op {
        Op::Send => SendOpcode::Send,
        Op::SendImm => SendOpcode::SendImm,
        Op::Write => SendOpcode::Write,
        Op::WriteImm => SendOpcode::WriteImm,
    }
}

/// Refuses a peer whose QP is not of this end's type.
pub(super) fn same_qp_type(peer: &Endpoint, qp_type: QpType) -> Result<(), VerbsError> {
    if peer.qp_type == qp_type {
        return Ok(());
    }
    Err(VerbsError::config(format!(
        "peer QP is {}, this one {}",
        peer.qp_type.upper(),
        qp_type.upper()
    )))
}

fn make_info(s: &Setup, o: &OpenedQp, memory: String, peer: &Endpoint) -> TransportInfo {
    let gid = gid_line(o.gid.as_ref(), o.lid);
    let inline_bytes = if s.inline_used { s.size } else { 0 };
    let inline = match inline_bytes {
        0 => "inline off".to_string(),
        n => format!("inline {n}"),
    };
    let detail = format!(
        "{} port {} {gid}, {} {}, {} B, {inline} (max {}), signal every {}, poll {}, mtu {}",
        o.dev,
        o.port,
        s.qp_type.upper(),
        s.op.name(),
        s.size,
        o.max_inline,
        s.period,
        s.poll.name(),
        s.mtu
    );
    let f = |k: &str, v: String| (k.to_string(), v);
    let mut facts = verbs_facts(&o.dev, o.port, o.gid.as_ref(), s.qp_type, s.op);
    facts.extend([
        f("size", s.size.to_string()),
        f("inline", inline_bytes.to_string()),
        f("inline_cap", o.inline_cap.to_string()),
        f("max_inline", o.max_inline.to_string()),
        f("signal_period", s.period.to_string()),
        f("memory", memory),
        f("poll", s.poll.name().to_string()),
        f("sq_depth", s.sq_depth.to_string()),
        f("rq_depth", s.rq_depth.to_string()),
        f("rq_prepost", s.prepost.to_string()),
        f("mtu", s.mtu.to_string()),
        f("qpn", o.qp.qpn().to_string()),
        f("peer_qpn", peer.qpn.to_string()),
    ]);
    TransportInfo {
        name: "verbs".to_string(),
        detail,
        facts,
    }
}

/// How a verbs end's report line names its source: its GID, or its LID.
pub(super) fn gid_line(gid: Option<&GidInfo>, lid: u16) -> String {
    match gid {
        Some(g) => format!("gid {} ({}, {})", g.index, g.gid_type, g.gid),
        None => format!("lid {lid}"),
    }
}

/// The report facts every verbs end starts with (channel or stream),
/// in this order: device, port, gid_index, gid, gid_type, qp_type, op.
pub(super) fn verbs_facts(
    dev: &str,
    port: u8,
    gid: Option<&GidInfo>,
    qp_type: QpType,
    op: Op,
) -> Vec<(String, String)> {
    let f = |k: &str, v: String| (k.to_string(), v);
    let g = |field: fn(&GidInfo) -> String| gid.map(field).unwrap_or_default();
    vec![
        f("device", dev.to_string()),
        f("port", port.to_string()),
        f("gid_index", g(|g| g.index.to_string())),
        f("gid", g(|g| g.gid.clone())),
        f("gid_type", g(|g| g.gid_type.clone())),
        f("qp_type", qp_type.upper().to_string()),
        f("op", op.name().to_string()),
    ]
}

/// The receiver's device in one-way loopback: `--peer-dev`, else
/// `--dev`, else the device the first end opened (`first`).
pub(super) fn loopback_peer_dev(cfg: &VerbsConfig, first: &str) -> String {
    cfg.knobs
        .peer_dev
        .as_deref()
        .or(cfg.knobs.dev.as_deref())
        .unwrap_or(first)
        .to_string()
}

/// Builds a [`LoopbackChannel`]: prepares A on `cfg.knobs.dev` and B on
/// `cfg.knobs.peer_dev` (default: the same device), connects each to the other.
pub fn loopback(cfg: &VerbsConfig) -> Result<LoopbackChannel, VerbsError> {
    let (pa, ea) = prepare_on(cfg, cfg.knobs.dev.as_deref())?;
    let dev = pa.o.dev.clone();
    let peer_dev = loopback_peer_dev(cfg, &dev);
    let (pb, eb) = prepare_on(cfg, Some(&peer_dev))?;
    let b = pb.connect(&ea)?;
    let a = pa.connect(&eb)?;
    let mut info = a.info.clone();
    info.detail = format!("loopback {dev} -> {peer_dev}: {}", info.detail);
    info.facts.push(("peer_device".to_string(), peer_dev));
    Ok(LoopbackChannel { a, b, info })
}
