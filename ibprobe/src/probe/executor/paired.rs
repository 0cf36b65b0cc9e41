//! Running a [`Paired`] workload (the stream, loggp's PRTT) in loopback,
//! both sides at once in this process on one clock ([`run_pair`]: a
//! stream's per-message latency is exact), or as a client
//! ([`stream_client`]: hand-over to credit back, on its own clock).

use std::sync::atomic::AtomicBool;

use super::peer::{run_pair, PeerThread};
use super::place::{place, span};
use super::stamp::{stamp_cpus, StampCpus, Stamper};
use crate::clock::Clock;
use crate::probe::config::ProbeConfig;
use crate::probe::outcome::{StampRun, StreamError, StreamOutcome};
use crate::probe::workload::loggp::{Loggp, LoggpPlan, Samples};
use crate::probe::workload::seam::Paired;
use crate::probe::workload::slot;
use crate::probe::workload::stream::{RecvTally, Stream};
use crate::spec::StreamSpec;
use crate::transport::stream::SlotEnd;
use crate::transport::TransportError;
use ibnoise::counters::Span;

const STREAM_RX: PeerThread = PeerThread {
    name: "ibprobe-stream-rx",
    pin: "pin the receiving thread to --rx-cpu (sched_setaffinity)",
    panicked: "the receiving thread panicked",
};

const LOGGP_PEER: PeerThread = PeerThread {
    name: "ibprobe-loggp-peer",
    pin: "pin the answering thread (sched_setaffinity)",
    panicked: "the answering thread panicked",
};

/// Runs a loopback stream: `tx` sends on this thread, `rx` receives on a
/// thread pinned to `rx_cpu`; `spec` checked by the caller.
pub fn stream_loopback(
    cfg: &ProbeConfig,
    spec: &StreamSpec,
    tx: &mut dyn SlotEnd,
    rx: &mut dyn SlotEnd,
    clock: &Clock,
    stop: &AtomicBool,
    rx_cpu: Option<usize>,
) -> Result<StreamOutcome, StreamError> {
    let mut out = StreamOutcome {
        rx_cpu,
        ..StreamOutcome::default()
    };
    // Before this thread is pinned (the allowed CPUs are read from it).
    let stamp_cpus = cfg.stamp_thread.then(|| stamp_cpus(&[cfg.cpu, rx_cpu]));
    out.notes = place(cfg).map_err(|e| fail(e, &mut out))?;
    let mut work = Stream::planned(cfg, spec, clock, false);
    // `--stamp-thread`: the stamping thread runs beside both loops, on a
    // CPU neither is on when there is one (the CLI warned if not).
    let words = cfg
        .stamp_thread
        .then(|| tx.stamp_target(slot::STAMP_AT))
        .transpose();
    let words = words.map_err(|e| fail(e, &mut out))?;
    work.sp.stamp = words.is_some();
    let stamping = AtomicBool::new(false);
    let stamp_cpu = stamp_cpus.as_ref().and_then(StampCpus::cpu);
    let (run, stamp) = std::thread::scope(|s| {
        let stamper = words.zip(stamp_cpus).map(|(w, cpus)| {
            let n = w.len();
            (
                Stamper::start(s, move |t| w.store(t), clock, &stamping, cpus),
                n,
            )
        });
        let run = run_pair(
            &mut work,
            (tx, rx),
            (None, rx_cpu),
            STREAM_RX,
            stop,
            Some(cfg),
        );
        (run, stamper.map(|(st, n)| (st.finish(), n)))
    });
    out.counters = run.counters;
    if let Some(c) = rx_cpu {
        out.notes.push(format!("receiver pinned to cpu {c}"));
    }
    let send_err = run
        .measured
        .map(|(t, h)| (out.send, out.send_histos) = (t, h))
        .err();
    let (r, latency, split) = run.answered.map_err(|e| fail(e, &mut out))?;
    (out.recv, out.latency) = (r, latency);
    out.stamp = split.zip(stamp).map(|(split, (p, words))| StampRun {
        split,
        pass_ns: clock.ticks_to_ns(p.ticks) as f64 / p.passes.max(1) as f64,
        words,
        cpu: stamp_cpu,
    });
    if let Some(st) = &out.stamp {
        out.notes.push(format!(
            "stamping thread {}: one pass over the stamps of {} send buffers every {:.0} ns (a stamp is at most that much older than the HCA's read); {} of {} messages split",
            stamp_cpu.map_or("on the loops' CPUs (none was free)".to_string(), |c| format!("on cpu {c}")),
            st.words,
            st.pass_ns,
            st.split.before.len(),
            out.latency.len()
        ));
    }
    if let Some(e) = send_err {
        return Err(fail(e, &mut out));
    }
    out.finish(clock, out.recv.last_arrival);
    Ok(out)
}

/// The client side of a stream across hosts (latency: hand-over to credit
/// back); `recv_tally` fetches the receiver's counters once drained.
pub fn stream_client(
    cfg: &ProbeConfig,
    spec: &StreamSpec,
    tx: &mut dyn SlotEnd,
    clock: &Clock,
    stop: &AtomicBool,
    recv_tally: impl FnOnce() -> Result<RecvTally, TransportError>,
) -> Result<StreamOutcome, StreamError> {
    let mut out = StreamOutcome::default();
    out.notes = place(cfg).map_err(|e| fail(e, &mut out))?;
    let mut work = Stream::planned(cfg, spec, clock, true);
    let sp = span(cfg);
    let sent = work.measure(tx, stop);
    out.counters = sp.map(Span::finish);
    let (t, mut h) = sent.map_err(|e| fail(e, &mut out))?;
    out.latency = std::mem::take(&mut h.returned);
    out.send = t;
    out.send_histos = h;
    out.finish(clock, t.end);
    out.recv = recv_tally().map_err(|e| fail(e, &mut out))?;
    Ok(out)
}

/// Runs loggp's `plan` in one process: the client on this thread, the
/// responder on another (`cpus`: theirs).
#[allow(clippy::too_many_arguments)]
pub fn loggp_loopback(
    client: &mut dyn SlotEnd,
    peer: &mut dyn SlotEnd,
    clock: Clock,
    plan: &LoggpPlan,
    timeout_ns: u64,
    stop: &AtomicBool,
    cpus: (Option<usize>, Option<usize>),
    step: &mut dyn FnMut(),
) -> Result<Samples, TransportError> {
    let mut work = Loggp {
        plan,
        clock,
        timeout_ns,
        idle_ns: u64::MAX / 4,
        step,
    };
    let run = run_pair(&mut work, (client, peer), cpus, LOGGP_PEER, stop, None);
    let samples = run.measured?;
    run.answered?;
    Ok(samples)
}

fn fail(error: TransportError, out: &mut StreamOutcome) -> StreamError {
    StreamError {
        error,
        outcome: Box::new(std::mem::take(out)),
    }
}
