//! Running a stream: both loops of `probe/workload/stream.rs` at once,
//! placed, and their counters turned into a [`StreamOutcome`].
//!
//! Why it exists: a stream needs its two ends running at the same time.
//! In loopback ([`run_loopback`]) this process owns both: the sender runs
//! on the calling thread (pinned to `--cpu`), the receiver on a scoped
//! thread pinned to another CPU (`--rx-cpu`, or the next allowed one), one
//! clock for both, so the per-message latency is exact. Across hosts the
//! client runs [`run_client`] (latency: hand-over to credit back, on its
//! own clock) and the server [`serve_receiver`].

use std::sync::atomic::{AtomicBool, Ordering};

use super::config::{Plan, ProbeConfig};
use super::runner::place;
use super::session::StreamHello;
use super::workload::stream::{receive, RecvTally, SendHistos, SendTally, Sender, StreamPlan};
use crate::clock::Clock;
use crate::counters::Span;
use crate::spec::StreamSpec;
use crate::stats::LatencyHistogram;
use crate::sys::host;
use crate::transport::stream::SlotEnd;
use crate::transport::TransportError;

/// What a stream run measured, before any formatting.
#[derive(Clone, Debug, Default)]
pub struct StreamOutcome {
    /// Per message: delivery at the receiver minus hand-over at the sender, ns.
    pub latency: LatencyHistogram,
    /// The sender's distributions (time in batch, credit wait).
    pub send_histos: SendHistos,
    /// The sender's counters.
    pub send: SendTally,
    /// The receiver's counters (in client/server: what the server reported).
    pub recv: RecvTally,
    /// First measured hand-over to last measured delivery, ns.
    pub elapsed_ns: u64,
    /// Time the sender spent in credit stalls, ns.
    pub credit_stall_ns: u64,
    /// Time the sender spent waiting for acks, ns.
    pub ack_wait_ns: u64,
    /// Placement facts and warnings.
    pub notes: Vec<String>,
    /// CPU of the receiving loop, when pinned.
    pub rx_cpu: Option<usize>,
    /// The sending thread's counters over its run (warm-up included: the
    /// sender's loop runs both), None with `--no-counters`.
    pub counters: Option<crate::counters::CounterReport>,
}

impl StreamOutcome {
    /// Measured messages that never arrived.
    pub fn lost(&self) -> u64 {
        self.send.msgs.saturating_sub(self.recv.msgs)
    }

    /// Delivered messages per second.
    pub fn msgs_per_sec(&self) -> f64 {
        if self.elapsed_ns == 0 {
            return 0.0;
        }
        self.recv.msgs as f64 * 1e9 / self.elapsed_ns as f64
    }

    /// Data posts per message (1/K with batches of K).
    pub fn ops_per_msg(&self) -> f64 {
        ratio(self.send.data_posts, self.send.msgs)
    }

    /// Every operation per message: data posts, credit and ack messages,
    /// credit counter writes.
    pub fn ops_per_msg_total(&self) -> f64 {
        ratio(
            self.send.data_posts
                + self.recv.credit_msgs
                + self.recv.ack_msgs
                + self.recv.counter_writes,
            self.send.msgs,
        )
    }
}

fn ratio(a: u64, b: u64) -> f64 {
    if b == 0 {
        0.0
    } else {
        a as f64 / b as f64
    }
}

/// A stream run that failed: the error and what was measured before it.
#[derive(Debug, thiserror::Error)]
#[error("{error}")]
pub struct StreamError {
    /// What went wrong.
    pub error: TransportError,
    /// The statistics up to the failure.
    pub outcome: Box<StreamOutcome>,
}

/// Where the two loops of a loopback stream run: `(sender, receiver)`.
/// Asked CPUs win; otherwise, when this process may use two or more
/// CPUs, the sender takes the last but one allowed and the receiver the
/// last (away from CPU 0's housekeeping when there are three or more), or
/// the next allowed after the sender's. `None`: unpinned (one CPU only).
pub fn placement(sender: Option<usize>, receiver: Option<usize>) -> (Option<usize>, Option<usize>) {
    let allowed = host::allowed_cpus();
    let n = allowed.len();
    let sender = sender.or_else(|| (n >= 2).then(|| allowed[n - 2]));
    let receiver = receiver.or_else(|| {
        let after = sender.map_or(0, |s| s + 1);
        allowed
            .iter()
            .copied()
            .find(|&c| Some(c) != sender && c >= after)
            .or_else(|| allowed.iter().copied().find(|&c| Some(c) != sender))
    });
    (sender, receiver)
}

/// The flags the sender raises for the receiving thread, on cache lines of
/// their own (the receiver reads them on every poll; on the sender's stack
/// they would share a line with what the sender writes).
#[derive(Default)]
#[repr(align(128))]
struct Flags {
    sender_done: AtomicBool,
    abort: AtomicBool,
    /// The receiving thread is on its CPU (see [`wait_for_receiver`]).
    rx_ready: AtomicBool,
}

/// Waits (sleeping, so this thread's CPU is free) until the receiving
/// (or answering) thread says it is placed, or has ended, or 5 s passed. A thread
/// starts on its parent's CPUs: under SCHED_FIFO (`chrt -f`) a sender
/// that began spinning on its pinned CPU would never let the new
/// receiver run there to move itself to --rx-cpu.
pub fn wait_for_receiver(ready: &AtomicBool, ended: impl Fn() -> bool) {
    let t0 = std::time::Instant::now();
    while !ready.load(Ordering::Acquire)
        && !ended()
        && t0.elapsed() < std::time::Duration::from_secs(5)
    {
        std::thread::sleep(std::time::Duration::from_micros(50));
    }
}

/// Runs a loopback stream: `tx` sends on this thread, `rx` receives on a
/// thread pinned to `rx_cpu`. `cfg` gives the size, length, warm-up,
/// pacing, consume delay and timeout; `spec` the stream's knobs (checked
/// by the caller).
pub fn run_loopback(
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
    let fail = |error, out| StreamError {
        error,
        outcome: Box::new(out),
    };
    match place(cfg) {
        Ok(n) => out.notes = n,
        Err(e) => return Err(fail(e, out)),
    }
    let measured = Plan::measured(cfg, clock);
    let sp = StreamPlan::new(spec, cfg.size, cfg.warmup, &measured, clock);
    let flags = Flags::default();
    let mut latency = LatencyHistogram::new();
    let mut counters = None;
    let (sent, received) = std::thread::scope(|s| {
        let (sp, sender_done, abort, lat) = (&sp, &flags.sender_done, &flags.abort, &mut latency);
        let rx_ready = &flags.rx_ready;
        let h = std::thread::Builder::new()
            .name("ibprobe-stream-rx".into())
            .spawn_scoped(s, move || -> Result<RecvTally, TransportError> {
                if let Some(c) = rx_cpu {
                    host::pin_to_cpu(c).map_err(|source| TransportError::Io {
                        what: "pin the receiving thread to --rx-cpu (sched_setaffinity)",
                        source,
                    })?;
                }
                rx_ready.store(true, Ordering::Release);
                // The receiver's histogram lives on its own thread (its
                // stack and heap): written per message, it must share no
                // cache line with the sender's data (this stack frame).
                let (mut own, sp) = (LatencyHistogram::new(), *sp);
                let r = receive(rx, clock, &sp, stop, sender_done, abort, &mut own);
                *lat = own;
                r
            })
            .expect("spawning a thread");
        wait_for_receiver(rx_ready, || h.is_finished());
        let span = sender_span(cfg);
        let sent = run_sender(tx, cfg, sp, clock, stop, false);
        counters = span.map(Span::finish);
        if sent.is_err() || stop.load(Ordering::Relaxed) {
            abort.store(true, Ordering::Relaxed);
        }
        sender_done.store(true, Ordering::Relaxed);
        let received = match h.join() {
            Ok(r) => r,
            Err(_) => Err(TransportError::Completion(
                "the receiving thread panicked".into(),
            )),
        };
        (sent, received)
    });
    out.latency = latency;
    out.counters = counters;
    if let Some(c) = rx_cpu {
        out.notes.push(format!("receiver pinned to cpu {c}"));
    }
    let send_err = match sent {
        Ok((t, h)) => {
            out.send = t;
            out.send_histos = h;
            None
        }
        Err(e) => Some(e),
    };
    match received {
        Ok(r) => out.recv = r,
        Err(e) => return Err(fail(e, out)),
    }
    if let Some(e) = send_err {
        return Err(fail(e, out));
    }
    out.elapsed_ns = clock.ticks_to_ns(out.recv.last_arrival.wrapping_sub(out.send.first_handover));
    out.credit_stall_ns = clock.ticks_to_ns(out.send.credit_stall_ticks);
    out.ack_wait_ns = clock.ticks_to_ns(out.send.ack_wait_ticks);
    Ok(out)
}

/// The client side of a stream across hosts: sends on `tx` (this
/// thread, placed as `cfg` says); the per-message latency is hand-over to
/// the slot's credit coming back, on this host's clock (the receiver's
/// clock is another machine's). `recv_tally` fetches the receiver's
/// counters once the stream is drained (the server sends them over the
/// out-of-band connection).
pub fn run_client(
    cfg: &ProbeConfig,
    spec: &StreamSpec,
    tx: &mut dyn SlotEnd,
    clock: &Clock,
    stop: &AtomicBool,
    recv_tally: impl FnOnce() -> Result<RecvTally, TransportError>,
) -> Result<StreamOutcome, StreamError> {
    let mut out = StreamOutcome::default();
    let fail = |error, out| StreamError {
        error,
        outcome: Box::new(out),
    };
    match place(cfg) {
        Ok(n) => out.notes = n,
        Err(e) => return Err(fail(e, out)),
    }
    let sp = StreamPlan::new(
        spec,
        cfg.size,
        cfg.warmup,
        &Plan::measured(cfg, clock),
        clock,
    );
    let span = sender_span(cfg);
    let sent = run_sender(tx, cfg, &sp, clock, stop, true);
    out.counters = span.map(Span::finish);
    let (t, mut h) = match sent {
        Ok(r) => r,
        Err(e) => return Err(fail(e, out)),
    };
    out.latency = std::mem::take(&mut h.returned);
    out.send = t;
    out.send_histos = h;
    out.elapsed_ns = clock.ticks_to_ns(t.end.wrapping_sub(t.first_handover));
    out.credit_stall_ns = clock.ticks_to_ns(t.credit_stall_ticks);
    out.ack_wait_ns = clock.ticks_to_ns(t.ack_wait_ticks);
    match recv_tally() {
        Ok(r) => out.recv = r,
        Err(e) => return Err(fail(e, out)),
    }
    Ok(out)
}

/// The sending thread's counters (`counters/`), opened on this thread
/// when `cfg.counters`.
fn sender_span(cfg: &ProbeConfig) -> Option<Span> {
    cfg.counters
        .then(|| Span::start(&crate::counters::measuring_cpus(cfg.cpu), cfg.perf_counters))
}

/// The server side of a stream across hosts: receives on `rx` (pinned to
/// `cpu`) until the client's FIN, its transport is lost, or nothing
/// arrives for the client's `--timeout`; the counters to send back.
pub fn serve_receiver(
    rx: &mut dyn SlotEnd,
    hello: &StreamHello,
    size: usize,
    clock: &Clock,
    stop: &AtomicBool,
    cpu: Option<usize>,
) -> Result<RecvTally, TransportError> {
    if let Some(c) = cpu {
        host::pin_to_cpu(c).map_err(|source| TransportError::Io {
            what: "pin the receiving loop (sched_setaffinity)",
            source,
        })?;
    }
    let cfg = ProbeConfig {
        size,
        warmup: hello.warmup,
        timeout: hello.timeout,
        consume_delay: hello.consume_delay,
        ..ProbeConfig::default()
    };
    let sp = StreamPlan::new(
        &hello.spec,
        size,
        hello.warmup,
        &Plan::measured(&cfg, clock),
        clock,
    );
    // The client's clock is not ours: this histogram is not reported.
    let mut unused = LatencyHistogram::new();
    let idle_ends = AtomicBool::new(true);
    receive(rx, clock, &sp, stop, &idle_ends, stop, &mut unused)
}

/// The sending side of a stream: the warm-up, the measured part, the FIN
/// and the drain, on `tx`; `track`: record each message's hand-over to
/// credit-back time (`SendHistos::returned`).
pub fn run_sender(
    tx: &mut dyn SlotEnd,
    cfg: &ProbeConfig,
    sp: &StreamPlan,
    clock: &Clock,
    stop: &AtomicBool,
    track: bool,
) -> Result<(SendTally, SendHistos), TransportError> {
    let mut s = Sender::new(tx, clock, sp, stop);
    if track {
        s.track_returns();
    }
    s.run(&Plan::warmup(cfg, clock), false)?;
    s.run(&Plan::measured(cfg, clock), true)?;
    let t = s.finish()?;
    Ok((t, std::mem::take(&mut s.histos)))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::probe::config::Length;
    use crate::probe::open::stream_pair;
    use crate::spec::{ChannelSpec, Transport};
    use std::time::Duration;

    fn cfg(count: u64) -> ProbeConfig {
        ProbeConfig {
            length: Length::Count(count),
            warmup: 100,
            lock_memory: false,
            ..ProbeConfig::default()
        }
    }

    /// The stream tests spin two threads each: one at a time, so their
    /// timing is not the other tests' contention.
    pub(super) static SERIAL: std::sync::Mutex<()> = std::sync::Mutex::new(());

    fn run(
        t: Transport,
        cfg: &ProbeConfig,
        spec: &StreamSpec,
    ) -> Result<StreamOutcome, StreamError> {
        let _one = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
        let (mut a, mut b) = stream_pair(&ChannelSpec::new(t, cfg.size), spec).unwrap();
        let stop = AtomicBool::new(false);
        run_loopback(
            cfg,
            spec,
            a.as_mut(),
            b.as_mut(),
            &Clock::calibrate(),
            &stop,
            None,
        )
    }

    #[test]
    fn batches_of_k_take_one_post_per_k_messages() {
        for t in [Transport::Shm, Transport::Udp] {
            let spec = StreamSpec {
                batch: 8,
                ..StreamSpec::default()
            };
            let o = run(t, &cfg(20_000), &spec).unwrap();
            assert_eq!(o.send.msgs, 20_000, "{t}");
            assert_eq!(o.recv.msgs + o.lost(), 20_000, "{t}");
            assert_eq!(o.send.data_posts, 2_500, "{t}: 20000 / 8, no partial batch");
            assert!((o.ops_per_msg() - 0.125).abs() < 1e-9, "{t}");
            assert_eq!(o.send.flushes, [2_500, 0, 0], "{t}");
            assert_eq!(o.latency.len(), o.recv.msgs);
            assert!(o.msgs_per_sec() > 0.0);
        }
    }

    #[test]
    fn a_slow_consumer_stalls_the_window_and_never_exceeds_it() {
        let spec = StreamSpec {
            window: 4,
            ..StreamSpec::default()
        };
        let c = ProbeConfig {
            consume_delay: Duration::from_micros(20),
            ..cfg(2_000)
        };
        let o = run(Transport::Shm, &c, &spec).unwrap();
        assert!(o.send.credit_stalls > 0, "{:?}", o.send);
        assert!(
            o.recv.max_unconsumed <= 4 && o.recv.max_unconsumed >= 2,
            "{}",
            o.recv.max_unconsumed
        );
        assert!(o.send.max_in_flight <= 4);
    }

    #[test]
    fn pipeline_depth_bounds_unacked_slots() {
        for d in [1, 2] {
            let spec = StreamSpec {
                pipeline: Some(d),
                ..StreamSpec::default()
            };
            let o = run(Transport::Shm, &cfg(5_000), &spec).unwrap();
            assert!(o.recv.max_unacked <= u64::from(d));
            assert!(o.send.max_unacked <= u64::from(d) && o.send.max_unacked >= 1);
            assert_eq!(
                o.recv.ack_msgs,
                o.send.data_posts + 100,
                "one ack per data slot, warm-up included"
            );
        }
    }

    #[test]
    fn a_timer_flushes_partial_batches_at_a_slow_rate() {
        let spec = StreamSpec {
            batch: 16,
            flush: Some(Duration::from_micros(200)),
            ..StreamSpec::default()
        };
        let c = ProbeConfig {
            rate_hz: Some(1_000.0),
            warmup: 0,
            ..cfg(200)
        };
        let o = run(Transport::Udp, &c, &spec).unwrap();
        // Every flush is the timer's, but the run's end (explicit).
        assert_eq!(o.send.flushes[0], 0, "{:?}", o.send);
        assert!(o.send.flushes[2] <= 1, "{:?}", o.send);
        assert_eq!(o.send.flushes[1] + o.send.flushes[2], o.send.data_posts);
        // Never early (late is this machine's contention; the bound
        // T + 50 us is checked in tests/stream.rs, where runs are alone).
        assert!(o.send_histos.in_batch.summary().p50_ns >= 200_000);
    }

    #[test]
    fn large_messages_span_slots() {
        let spec = StreamSpec {
            slot_size: 256,
            ..StreamSpec::default()
        };
        let c = ProbeConfig {
            size: 1000,
            ..cfg(1_000)
        };
        let o = run(Transport::Shm, &c, &spec).unwrap();
        assert_eq!(o.recv.msgs, 1_000);
        assert_eq!(o.recv.corrupt, 0);
        assert_eq!(
            o.send.data_posts, 5_000,
            "(16 + 1000) / 240 -> 5 slots per message"
        );
    }
}

#[cfg(test)]
mod dead_receiver {
    use super::*;
    use crate::probe::config::Length;
    use crate::probe::open::stream_pair;
    use crate::spec::{ChannelSpec, Transport};
    use std::time::{Duration, Instant};

    /// A receiver that never reads: the sender fills the window, waits
    /// `--timeout` for a credit, and fails (shm at once; udp, lossy, after
    /// `max_consecutive_lost` timeouts in a row), never hangs.
    #[test]
    fn a_dead_receiver_ends_the_run_with_peer_lost_within_the_timeouts() {
        let _one = super::tests::SERIAL
            .lock()
            .unwrap_or_else(|e| e.into_inner());
        for (t, timeouts) in [(Transport::Shm, 1u32), (Transport::Udp, 3)] {
            let cfg = ProbeConfig {
                length: Length::Count(100_000),
                warmup: 0,
                timeout: Duration::from_millis(100),
                lock_memory: false,
                ..ProbeConfig::default()
            };
            let spec = StreamSpec {
                window: 8,
                ..StreamSpec::default()
            };
            let (mut tx, _rx) = stream_pair(&ChannelSpec::new(t, 32), &spec).unwrap();
            let clock = Clock::calibrate();
            let sp = StreamPlan::new(&spec, 32, 0, &Plan::measured(&cfg, &clock), &clock);
            let t0 = Instant::now();
            let r = run_sender(
                tx.as_mut(),
                &cfg,
                &sp,
                &clock,
                &AtomicBool::new(false),
                false,
            );
            let took = t0.elapsed();
            assert!(matches!(r, Err(TransportError::PeerLost(_))), "{t}: {r:?}");
            let most = Duration::from_millis(100) * timeouts + Duration::from_millis(400);
            assert!(
                took >= Duration::from_millis(100) && took < most,
                "{t}: {took:?}"
            );
        }
    }
}
