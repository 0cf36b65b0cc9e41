//! Cold setup of a verbs stream: the QP, its registered slot pool and the
//! posted receives, handed to a [`VerbsSlots`] (`slots.rs`).
//!
//! Why it exists: a stream end needs more than a channel (a pool of
//! receive buffers all posted up front, a send ring, a counter word on rc,
//! the peer's pool address for write-imm) and refuses what a stream cannot
//! carry. It reuses `setup.rs`'s QP creation and connection: across hosts
//! [`prepare_slots`] then [`PreparedSlots::connect`] with the peer's
//! [`Endpoint`] (its [`StreamTarget`] says where to write); in one process
//! [`stream_pair`].

use super::config::VerbsConfig;
use super::error::VerbsError;
use super::setup::{
    gid_line, grh, loopback_peer_dev, opcode, open_qp, round_up, same_qp_type, verbs_facts,
    Endpoint, OpenedQp, QpShape, StreamTarget,
};
use super::slots::{SlotLayout, VerbsSlots};
use super::types::ImmCodec;
use crate::spec::{Op, Poll, QpType};
use crate::sys::verbs::{
    Completion, RecvRing, RegisteredBuf, SendOpcode, SendTemplate, POLL_BATCH,
};
use crate::transport::TransportInfo;

/// A stream end's QP in INIT with its registered pool, waiting for the
/// peer's [`Endpoint`]. Field order is drop order.
pub struct PreparedSlots {
    mem: RegisteredBuf,
    o: OpenedQp,
    op: Op,
    qp_type: QpType,
    l: SlotLayout,
    memory: String,
}

/// The one-line refusal of a ud slot above the path MTU (a ud slot is
/// one packet; the 40 B GRH the receiver adds is not part of it).
fn ud_slot_fits(qp_type: QpType, slot_size: usize, mtu: u32) -> Result<(), VerbsError> {
    if qp_type == QpType::Ud && slot_size > mtu as usize {
        return Err(VerbsError::config(format!(
            "--slot-size {slot_size} B with --transport ud: a UD slot is one packet; \
             the path MTU is {mtu} B; use --slot-size <= {mtu}"
        )));
    }
    Ok(())
}

/// The refusals that need no device: plain write (no receive completion,
/// so no arrival to see), event polling (the loops busy-poll), an empty
/// pool, and write-imm pools whose index does not fit the immediate
/// beside the length.
fn stream_checks(cfg: &VerbsConfig, slots: u32, slot_size: usize) -> Result<ImmCodec, VerbsError> {
    if cfg.knobs.op == Op::Write {
        return Err(VerbsError::config(
            "--op write with a stream: a plain RDMA write raises no completion at the receiver, \
             so it could not see a slot arrive; use --op send, send-imm or write-imm",
        ));
    }
    if cfg.poll == Poll::Event {
        return Err(VerbsError::config(
            "--poll event with a stream: both stream loops busy-poll their ends; leave --poll at busy",
        ));
    }
    if slots == 0 || slot_size == 0 || slot_size > u32::MAX as usize {
        return Err(VerbsError::config(format!(
            "a verbs stream of {slots} slots of {slot_size} B: use --slots >= 1 and \
             --slot-size 1..={} B (a 32-bit verbs length)",
            u32::MAX
        )));
    }
    // Only write-imm needs the index in the immediate (send-imm carries
    // it too, for a reader of a capture, but nothing decodes it).
    let indexed = if cfg.knobs.op == Op::WriteImm {
        slots
    } else {
        1
    };
    ImmCodec::new(indexed, slot_size as u32).map_err(|max| {
        VerbsError::config(format!(
            "--slots {slots} with --slot-size {slot_size} B and --op write-imm: the 32-bit \
             immediate carries the slot index beside the length; use --slots <= {max}"
        ))
    })
}

/// Creates one stream end on `cfg.knobs.dev`: a QP whose SQ and RQ hold at
/// least `slots` WRs, a registered pool of `slots` send and `slots`
/// receive buffers of `slot_size` bytes and a counter word, and returns
/// it with the local [`Endpoint`] (carrying a [`StreamTarget`]) to hand
/// to the peer.
pub fn prepare_slots(
    cfg: &VerbsConfig,
    slots: u32,
    slot_size: usize,
) -> Result<(PreparedSlots, Endpoint), VerbsError> {
    prepare_slots_on(cfg, cfg.knobs.dev.as_deref(), slots, slot_size)
}

fn prepare_slots_on(
    cfg: &VerbsConfig,
    dev: Option<&str>,
    slots: u32,
    slot_size: usize,
) -> Result<(PreparedSlots, Endpoint), VerbsError> {
    let imm = stream_checks(cfg, slots, slot_size)?;
    let sq_depth = cfg.knobs.sq_depth.max(slots);
    let o = open_qp(
        cfg,
        dev,
        &QpShape {
            sq_depth,
            rq_depth: cfg.knobs.rq_depth.max(slots),
            inline_upto: slot_size as u32,
            inline_partial: true,
        },
    )?;
    ud_slot_fits(cfg.qp_type, slot_size, o.mtu)?;
    let payload_off = grh(cfg.qp_type) as usize;
    let send_stride = round_up(slot_size.max(8) as u64, 64) as usize;
    let recv_stride = round_up((slot_size + payload_off) as u64, 64) as usize;
    let recv_off = slots as usize * send_stride;
    let counter_off = recv_off + slots as usize * recv_stride;
    let (mem, memory) = o.buffers(counter_off + 128, cfg.knobs.hugepages)?;
    let recv_addr = mem.buf.addr() + recv_off as u64;
    let mut ep = o.endpoint(cfg.qp_type, mem.rkey(), recv_addr, slot_size as u32);
    ep.stream = Some(StreamTarget {
        slots,
        slot_size: slot_size as u32,
        recv_addr,
        recv_stride: recv_stride as u32,
        counter_addr: mem.buf.addr() + counter_off as u64,
    });
    let l = SlotLayout {
        slots,
        slot_size,
        send_stride,
        recv_off,
        recv_stride,
        payload_off,
        counter_off,
        counter_src_off: counter_off + 64,
        peer_recv: None,
        imm,
        sq_depth,
        period: cfg.stream_signal_period().clamp(1, slots),
        lossy: cfg.qp_type != QpType::Rc,
    };
    Ok((
        PreparedSlots {
            mem,
            o,
            op: cfg.knobs.op,
            qp_type: cfg.qp_type,
            l,
            memory,
        },
        ep,
    ))
}

impl PreparedSlots {
    /// Connects to the peer's stream end (`peer` from its
    /// [`prepare_slots`]: same QP type, slot count and slot size), posts
    /// every receive of the pool and returns the ready end.
    pub fn connect(self, peer: &Endpoint) -> Result<VerbsSlots, VerbsError> {
        let PreparedSlots {
            mem,
            o,
            op,
            qp_type,
            mut l,
            memory,
        } = self;
        same_qp_type(peer, qp_type)?;
        let Some(st) = &peer.stream else {
            return Err(VerbsError::config(
                "the peer's endpoint has no stream pool; run `ibprobe stream` against the same ibprobe version",
            ));
        };
        if st.slots != l.slots || st.slot_size as usize != l.slot_size {
            return Err(VerbsError::config(format!(
                "peer stream pool is {} slots of {} B, this one {} of {} B; pass the same --slots and --slot-size on both ends",
                st.slots, st.slot_size, l.slots, l.slot_size
            )));
        }
        let mtu = o.mtu.min(peer.mtu);
        ud_slot_fits(qp_type, l.slot_size, mtu)?;
        let rdma = (op == Op::WriteImm).then_some((peer.rkey, st.recv_addr));
        l.peer_recv = rdma.map(|(_, a)| (a, u64::from(st.recv_stride)));
        let recv = RecvRing::new(
            l.slots as usize,
            mem.buf.addr() + l.recv_off as u64,
            l.recv_stride as u32,
            (l.slot_size + l.payload_off) as u32,
            mem.lkey(),
        );
        let OpenedQp {
            ref dev,
            port,
            lid,
            ref gid,
            max_inline,
            inline_cap,
            ..
        } = o;
        let counter = qp_type == QpType::Rc;
        let detail = format!(
            "{dev} port {port} {}, {} {} stream, {} slots of {} B, inline <= {inline_cap} B (max {max_inline}), signal every {}, mtu {mtu}",
            gid_line(gid.as_ref(), lid),
            qp_type.upper(),
            op.name(),
            l.slots,
            l.slot_size,
            l.period,
        );
        let mut facts = verbs_facts(dev, port, gid.as_ref(), qp_type, op);
        let f = |k: &str, v: String| (k.to_string(), v);
        facts.extend([
            f("slots", l.slots.to_string()),
            f("slot_bytes", l.slot_size.to_string()),
            f("inline_cap", inline_cap.to_string()),
            f("max_inline", max_inline.to_string()),
            f("signal_period", l.period.to_string()),
            f("memory", memory),
            f("sq_depth", l.sq_depth.to_string()),
            f("mtu", mtu.to_string()),
            f("qpn", o.qp.qpn().to_string()),
            f("peer_qpn", peer.qpn.to_string()),
            f("counter", counter.to_string()),
        ]);
        let w = o.wire(mem, peer, mtu, recv, true)?;
        let ud = w._ah.as_ref().map(|a| (a, peer.qpn, peer.qkey));
        let tpl = SendTemplate::new(opcode(op), w.mem.lkey(), rdma, ud, inline_cap);
        let counter_tpl = counter.then(|| {
            let inline = if inline_cap >= 8 { 8 } else { 0 };
            let target = Some((peer.rkey, st.counter_addr));
            SendTemplate::new(SendOpcode::Write, w.mem.lkey(), target, None, inline)
        });
        Ok(VerbsSlots {
            tpl,
            counter_tpl,
            w,
            l,
            arrived: [Completion::default(); POLL_BATCH],
            arrived_at: 0,
            arrived_n: 0,
            posted: 0,
            freed: 0,
            sq_out: 0,
            unsignaled: 0,
            inline_cap,
            stamp_at: None,
            info: TransportInfo {
                name: "verbs".to_string(),
                detail,
                facts,
            },
        })
    }
}

/// Both ends of a stream in this process (sender end, receiver end): one
/// on `cfg.knobs.dev`, one on `cfg.knobs.peer_dev` (default: the same device), each
/// connected to the other. Both are `Send`: each loop takes its end to
/// its own thread.
pub fn stream_pair(
    cfg: &VerbsConfig,
    slots: u32,
    slot_size: usize,
) -> Result<(VerbsSlots, VerbsSlots), VerbsError> {
    let (pa, ea) = prepare_slots_on(cfg, cfg.knobs.dev.as_deref(), slots, slot_size)?;
    let dev = pa.o.dev.clone();
    let peer_dev = loopback_peer_dev(cfg, &dev);
    let (pb, eb) = prepare_slots_on(cfg, Some(&peer_dev), slots, slot_size)?;
    let b = pb.connect(&ea)?;
    let mut a = pa.connect(&eb)?;
    a.info.detail = format!("loopback {dev} -> {peer_dev}: {}", a.info.detail);
    a.info.facts.push(("peer_device".to_string(), peer_dev));
    Ok((a, b))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::spec::{ChannelSpec, Transport};
    use crate::verbs::VerbsErrorKind;

    fn cfg(t: Transport, f: impl FnOnce(&mut ChannelSpec)) -> VerbsConfig {
        let mut s = ChannelSpec::new(t, 32);
        f(&mut s);
        VerbsConfig::new(&s).unwrap()
    }

    #[test]
    fn a_ud_slot_is_one_packet() {
        assert!(ud_slot_fits(QpType::Ud, 1024, 1024).is_ok());
        assert!(ud_slot_fits(QpType::Rc, 4096, 1024).is_ok());
        let e = ud_slot_fits(QpType::Ud, 4096, 1024).unwrap_err();
        assert_eq!((e.kind, e.exit_code()), (VerbsErrorKind::Config, 2));
        assert_eq!(
            e.message,
            "--slot-size 4096 B with --transport ud: a UD slot is one packet; \
             the path MTU is 1024 B; use --slot-size <= 1024"
        );
    }

    #[test]
    fn device_free_refusals() {
        let refused = |c: &VerbsConfig, slots, size| stream_checks(c, slots, size).unwrap_err();
        let e = refused(&cfg(Transport::Rc, |s| s.verbs.op = Op::Write), 64, 4096);
        assert!(e.message.starts_with("--op write with a stream"), "{e}");
        assert_eq!(e.exit_code(), 2);
        let e = refused(&cfg(Transport::Uc, |s| s.poll = Poll::Event), 64, 4096);
        assert!(e.message.starts_with("--poll event with a stream"), "{e}");
        let rc = cfg(Transport::Rc, |_| {});
        assert!(refused(&rc, 0, 4096).message.contains("--slots >= 1"));
        assert!(refused(&rc, 4, 0).message.contains("--slot-size 1..="));
        let wi = cfg(Transport::Rc, |s| s.verbs.op = Op::WriteImm);
        let e = refused(&wi, (1 << 19) + 1, 4096);
        assert!(e.message.ends_with("use --slots <= 524288"), "{e}");
        // Only write-imm puts the index in the immediate.
        assert!(stream_checks(&rc, (1 << 19) + 1, 4096).is_ok());
        assert!(stream_checks(&wi, 1 << 19, 4096).is_ok());
    }
}
