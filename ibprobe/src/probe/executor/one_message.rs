//! Running a one-message [`Workload`] (stop-and-wait): everything around
//! the loop that happens once per run (placement, allocating the
//! histograms, warm-up, counters, HCA clock pairs), so the loop stays
//! small and free of syscalls; and its echo, in this process
//! ([`EchoThread`]) or as the server's loop ([`serve`]).

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::Duration;

use super::place::{pin, place, span};
use super::stamp::{stamp_cpus, Stamper};
use crate::clock::hwts::{self, ProberLog, ResponderLog};
use crate::clock::Clock;
use crate::probe::config::{self, Mode, Plan, ProbeConfig, Receiver};
use crate::probe::outcome::Outcome;
use crate::probe::workload::echo::{echo, EchoEnd};
use crate::probe::workload::record::{Histos, IntervalCounters, Recorder, Sink, Tally};
use crate::probe::workload::seam::{Ctx, Workload};
use crate::probe::workload::stop_wait::StopWait;
use crate::transport::{Channel, TransportError};
use ibnoise::counters::attribution::Attributor;
use ibstats::latency::LatencyHistogram;

/// A run that failed part-way, with what was measured before it.
#[derive(Debug, thiserror::Error)]
#[error("{error} (after {} samples)", .outcome.one_way.as_ref().or(.outcome.rtt.as_ref()).map_or(0, |h| h.len()))]
pub struct RunError {
    pub error: TransportError,
    pub outcome: Box<Outcome>,
}

/// Runs the probe described by `cfg` over `ch`. `stop` ends the run early
/// (`Outcome::interrupted`); `sink` receives interval histograms.
pub fn run(
    cfg: &ProbeConfig,
    ch: &mut dyn Channel,
    clock: &Clock,
    stop: &AtomicBool,
    mut sink: Option<&mut dyn Sink>,
) -> Result<Outcome, RunError> {
    let fail = |error, out: &mut Outcome| RunError {
        error,
        outcome: Box::new(std::mem::take(out)),
    };
    let mut out = Outcome::default();
    // `--stamp-thread` (`stamp.rs`): beside the whole run, on another CPU.
    let stamps = cfg.stamp_thread.then(|| ch.stamp_target()).transpose();
    let stamps = stamps.map_err(|e| fail(e, &mut out))?;
    let stamping = AtomicBool::new(true);
    std::thread::scope(|s| {
        let _stamping = stamps.map(|word| {
            let cpus = stamp_cpus(&[cfg.cpu]);
            Stamper::start(s, move |t| word.store(t), clock, &stamping, cpus)
        });
        // The one place a workload other than stop-and-wait would be picked.
        let mut work = StopWait;
        out.notes = place(cfg).map_err(|e| fail(e, &mut out))?;
        // Allocated here, once: the loop only records.
        let histos = || Histos::new(cfg.stamp_thread);
        let (mut cur, mut total, mut warm, mut scratch) = (histos(), histos(), histos(), histos());

        let wplan = Plan::warmup(cfg, clock);
        let cx = Ctx {
            clock,
            plan: &wplan,
            stop,
            first_seq: 0,
        };
        let mut rec = Recorder::new(clock, wplan.interval_ticks, &mut scratch, &mut warm, None);
        let w = work.run(ch, &cx, &mut rec).map_err(|e| fail(e, &mut out))?;
        out.warmup_count = w.sent;
        let max = |h: &LatencyHistogram| h.summary().max_ns;
        out.warmup_max_ns = max(&warm.primary).max(max(&warm.send_done));

        if let (Some(s), false) = (sink.as_mut(), w.interrupted) {
            s.measuring();
        }
        let mut plan = Plan::measured(cfg, clock);
        // --hw-timestamps: room for the prober's stamps, and (HCA, host)
        // clock pairs around the measured part for the rate.
        let hw_clock = ch.hw_clock().filter(|_| cfg.hw_timestamps);
        let logged = hw_clock.map_or(0, |_| plan.count.min(hwts::LOG_MAX as u64) as usize);
        let mut hw_log = Vec::with_capacity(logged);
        let mut pairs = Vec::new();
        if hw_clock.is_some() {
            hw_pair(ch, clock, &mut pairs);
        }
        let mut hw_overflow = 0;
        // Counters: around the measured part and at each interval's end
        // (without --interval, every ATTRIBUTION_INTERVAL for the
        // attribution, whose histograms are allocated before the span).
        let mut attr = (cfg.counters && cfg.attribution).then(Attributor::new);
        let mut span = span(cfg);
        // Intervals the user asked for read the interrupts too; those of
        // the attribution alone do not (`Meter::read_without_interrupts`:
        // ibprobe/README.md, counters "Cost").
        let interrupts = plan.interval_ticks > 0;
        if attr.is_some() && plan.interval_ticks == 0 {
            plan.interval_ticks = config::ticks(clock, ATTRIBUTION_INTERVAL);
        }
        let result = if w.interrupted {
            Ok(Tally {
                interrupted: true,
                ..Default::default()
            })
        } else {
            let cx = Ctx {
                plan: &plan,
                first_seq: w.next_seq,
                ..cx
            };
            let mut rec = Recorder::new(clock, plan.interval_ticks, &mut cur, &mut total, sink)
                .with_hw_log(&mut hw_log);
            if let (Some(sp), Some(attr)) = (span.as_mut(), attr.as_mut()) {
                let meter = sp.meter();
                let last = meter.read();
                rec = rec.with_counters(IntervalCounters {
                    meter,
                    attr,
                    last,
                    interrupts,
                });
            }
            let r = work.run(ch, &cx, &mut rec);
            hw_overflow = rec.hw_overflow;
            r
        };
        out.counters = span.map(|sp| {
            let mut r = sp.finish();
            r.attribution = attr.map(|a| a.finish());
            r
        });
        if hw_clock.is_some() {
            hw_pair(ch, clock, &mut pairs);
        }
        out.hw = hw_clock.map(|mut c| ProberLog {
            calibration: c.calibrate(&pairs),
            clock: c,
            stamps: hw_log,
            overflow: hw_overflow,
        });
        match cfg.mode {
            Mode::OneWay => {
                out.hw_split = out.hw.as_ref().map(ProberLog::split_one_way);
                out.one_way = Some(total.primary);
            }
            Mode::RoundTrip => out.rtt = Some(total.primary),
        }
        out.send_done = ch.has_send_completions().then_some(total.send_done);
        out.t_send_split = total.split;
        let t = match result {
            Ok(t) => t,
            Err(e) => {
                out.sent = out
                    .one_way
                    .as_ref()
                    .or(out.rtt.as_ref())
                    .map_or(0, |h| h.len());
                return Err(fail(e, &mut out));
            }
        };
        out.sent = t.sent;
        out.lost = t.lost;
        out.missed_steps = t.missed_steps;
        out.steps = if plan.period_ticks > 0 {
            t.sent + t.missed_steps
        } else {
            0
        };
        out.elapsed_ns = clock.ticks_to_ns(t.elapsed_ticks);
        out.interrupted = t.interrupted;
        Ok(out)
    })
}

/// One (HCA ticks, host ns) pair for the rate of the HCA clock (cold).
pub fn hw_pair(ch: &dyn Channel, clock: &Clock, pairs: &mut Vec<(u64, u64)>) {
    if let Some(t) = ch.hw_clock_now() {
        pairs.push((t, clock.ticks_to_ns(clock.now())));
    }
}

/// The interval of the counters' attribution when the run has no
/// `--interval` of its own.
pub const ATTRIBUTION_INTERVAL: Duration = Duration::from_millis(100);

/// An echo thread in this process (the peer of an in-process round
/// trip), until dropped.
pub struct EchoThread {
    stop: Arc<AtomicBool>,
    handle: Option<JoinHandle<Result<u64, TransportError>>>,
}

impl EchoThread {
    pub fn spawn<C: Channel + Send + 'static>(
        mut ch: C,
        clock: Clock,
        cpu: Option<usize>,
        receiver: Receiver,
    ) -> EchoThread {
        let stop = Arc::new(AtomicBool::new(false));
        let s = stop.clone();
        let handle = std::thread::Builder::new()
            .name("ibprobe-echo".into())
            .spawn(move || {
                if let Some(c) = cpu {
                    pin(c, "pin echo thread")?;
                }
                let idle = clock.ns_to_ticks(10_000_000);
                let plan = Plan::echo(&receiver, &clock);
                let still_on = || !s.load(Ordering::Relaxed);
                echo(&mut ch, &clock, &plan, &s, idle, still_on, None).map(|(n, _)| n)
            })
            .expect("spawning a thread");
        EchoThread {
            stop,
            handle: Some(handle),
        }
    }

    /// Stops the thread; the messages it echoed.
    pub fn finish(mut self) -> Result<u64, TransportError> {
        self.stop.store(true, Ordering::Relaxed);
        match self.handle.take().map(|h| h.join()) {
            Some(Ok(r)) => r,
            Some(Err(_)) => Err(TransportError::PeerLost("the echo thread panicked".into())),
            None => Ok(0),
        }
    }
}

impl Drop for EchoThread {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        if let Some(h) = self.handle.take() {
            let _ = h.join();
        }
    }
}

/// How long the server waits between looks at the out-of-band connection
/// while no message arrives.
pub const SERVER_IDLE_CHECK: Duration = Duration::from_millis(50);

/// Runs the server's echo loop until `still_on` says the session ended
/// (asked after `SERVER_IDLE_CHECK` without arrivals) or `stop` is set;
/// with `log` it keeps each echo's HCA timestamps.
pub fn serve(
    ch: &mut dyn Channel,
    clock: &Clock,
    stop: &AtomicBool,
    cpu: Option<usize>,
    receiver: &Receiver,
    still_on: impl FnMut() -> bool,
    log: Option<&mut ResponderLog>,
) -> Result<(u64, EchoEnd), TransportError> {
    if let Some(c) = cpu {
        pin(c, "pin to --cpu (sched_setaffinity)")?;
    }
    let idle = config::ticks(clock, SERVER_IDLE_CHECK);
    let plan = Plan::echo(receiver, clock);
    echo(ch, clock, &plan, stop, idle, still_on, log)
}
