//! THE measurement loop. Everything between two timestamps is in this
//! file, so a reader can check it in one sitting:
//! - no allocation (histograms are allocated before; recording never
//!   allocates), no lock, no syscall beyond the transport's own calls and
//!   the clock read;
//! - one message at a time: `t_subm = now; post(seq)`, then poll until the
//!   arrival of `seq` (`t_recv`) and, for a signaled send, its completion
//!   (`t_comp`); record `t_recv - t_subm` (one-way, or the RTT when the
//!   arrival is the peer's echo) and `t_comp - t_subm`;
//! - an arrival with an older sequence number (a late message already
//!   counted lost) is skipped; no arrival within the timeout is a loss, and
//!   `max_consecutive_lost` losses in a row end the run (the peer is gone);
//! - between messages: the Ctrl-C flag, the end (count or duration), the
//!   rate pacing on the same clock (missed steps counted, as a timer's
//!   expiration count would), the pause after a burst, and the interval
//!   delivery to a [`Sink`]. With event polling the wait for the next step
//!   sleeps in nanosleep until 50 us before it (the one syscall of that
//!   mode besides the transport's), then spins.
//!
//! Event polling (`Plan::event`) waits in `Channel::wait_recv` for the
//! arrival and then polls the send completion, so in that mode `t_comp` is
//! taken no earlier than the arrival.

use std::sync::atomic::{AtomicBool, Ordering};

use super::config::Plan;
use crate::clock::Clock;
use crate::stats::LatencyHistogram;
use crate::transport::{Channel, TransportError};

/// The distributions one loop fills: the primary (one-way or RTT) and the
/// send-completion latency.
#[derive(Clone, Debug, Default)]
pub struct Histos {
    /// t_recv - t_subm: one-way latency, or the round trip.
    pub primary: LatencyHistogram,
    /// t_comp - t_subm for signaled sends.
    pub send_done: LatencyHistogram,
}

impl Histos {
    fn absorb(&mut self, other: &Histos) {
        self.primary.merge(&other.primary);
        self.send_done.merge(&other.send_done);
    }
    fn reset(&mut self) {
        self.primary.reset();
        self.send_done.reset();
    }
}

/// One interval's worth of samples, handed to a [`Sink`] and then reset.
#[derive(Debug)]
pub struct Interval<'a> {
    /// Start of the interval, ns since the measured part began.
    pub start_ns: u64,
    /// End of the interval, ns since the measured part began.
    pub end_ns: u64,
    /// Samples of the interval (one-way or RTT).
    pub primary: &'a LatencyHistogram,
    /// Send-completion samples of the interval.
    pub send_done: &'a LatencyHistogram,
    /// Messages posted in the interval.
    pub sent: u64,
    /// Messages lost in the interval.
    pub lost: u64,
    /// Paced steps missed in the interval.
    pub missed_steps: u64,
}

/// Consumes interval histograms while a probe runs, so a long-running
/// consumer (ibexporter) gets a stream with constant memory: the loop
/// hands over each interval's histograms and then resets them.
/// `interval` runs on the measuring thread between messages: keep it short.
///
/// ```
/// use std::sync::atomic::AtomicBool;
/// use std::time::Duration;
/// use ibprobe::clock::Clock;
/// use ibprobe::probe::hot::{Interval, Sink};
/// use ibprobe::probe::{runner, Length, ProbeConfig};
/// use ibprobe::transport::shm::ShmChannel;
///
/// /// Keeps one p99 per interval (an exporter would set a gauge).
/// struct P99s(Vec<u64>);
/// impl Sink for P99s {
///     fn interval(&mut self, iv: &Interval<'_>) {
///         self.0.push(iv.primary.summary().p99_ns);
///     }
/// }
/// let cfg = ProbeConfig {
///     length: Length::Duration(Duration::from_millis(50)),
///     interval: Some(Duration::from_millis(10)),
///     lock_memory: false,
///     ..ProbeConfig::default()
/// };
/// let mut ch = ShmChannel::loopback(cfg.size).unwrap();
/// let mut sink = P99s(Vec::new());
/// let stop = AtomicBool::new(false);
/// let out = runner::run(&cfg, &mut ch, &Clock::calibrate(), &stop, Some(&mut sink)).unwrap();
/// assert!(!sink.0.is_empty());
/// assert!(out.one_way.unwrap().len() > 0);
/// ```
pub trait Sink {
    /// One interval has ended.
    fn interval(&mut self, iv: &Interval<'_>);
}

/// Counters of one loop.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Tally {
    /// Messages posted.
    pub sent: u64,
    /// Messages with no arrival within the timeout.
    pub lost: u64,
    /// Paced steps missed.
    pub missed_steps: u64,
    /// Ticks from the first post to the end.
    pub elapsed_ticks: u64,
    /// The Ctrl-C flag ended the loop.
    pub interrupted: bool,
    /// Next sequence number to use.
    pub next_seq: u64,
}

enum Msg {
    Arrived { recv: u64, comp: Option<u64> },
    Lost,
}

/// Sends one message and waits for its arrival (and send completion).
#[inline(always)]
fn one<C: Channel + ?Sized>(
    ch: &mut C,
    clock: &Clock,
    plan: &Plan,
    seq: u64,
) -> Result<Msg, TransportError> {
    let want_comp = ch.has_send_completions() && ch.is_signaled(seq);
    let t_subm = clock.now();
    ch.post(seq)?;
    let (mut t_recv, mut t_comp) = (None, None);
    loop {
        if t_recv.is_none() {
            let got = if plan.event {
                ch.wait_recv(clock, plan.timeout_ns)?
            } else {
                ch.poll_recv()?
            };
            if let Some(s) = got {
                let t = clock.now();
                if s == seq {
                    t_recv = Some(t);
                }
            }
        }
        if want_comp && t_comp.is_none() {
            if let Some(s) = ch.poll_send_done()? {
                let t = clock.now();
                if s == seq {
                    t_comp = Some(t);
                }
            }
        }
        if t_recv.is_some() && (!want_comp || t_comp.is_some()) {
            break;
        }
        if clock.now().wrapping_sub(t_subm) > plan.timeout_ticks {
            break;
        }
    }
    Ok(match t_recv {
        Some(r) => Msg::Arrived {
            recv: clock.ticks_to_ns(r.wrapping_sub(t_subm)),
            comp: t_comp.map(|c| clock.ticks_to_ns(c.wrapping_sub(t_subm))),
        },
        None => Msg::Lost,
    })
}

/// Waits until the clock reaches `t` or `stop` is set: spinning, or with
/// `sleep` (event polling) in nanosleep until ~50 us before `t`, then
/// spinning, so a paced event-mode probe costs almost no CPU between
/// messages (ibexporter's overhead budget) yet posts on time.
#[inline(always)]
fn wait_until(clock: &Clock, t: u64, stop: &AtomicBool, sleep: bool) {
    if sleep {
        loop {
            let left = t.wrapping_sub(clock.now()) as i64;
            let left_ns = if left > 0 {
                clock.ticks_to_ns(left as u64)
            } else {
                0
            };
            if left_ns <= 50_000 || stop.load(Ordering::Relaxed) {
                break;
            }
            // nanosleep: no allocation, no lock; at most 100 ms so the
            // stop flag is seen.
            std::thread::sleep(std::time::Duration::from_nanos(
                (left_ns - 50_000).min(100_000_000),
            ));
        }
    }
    while (clock.now().wrapping_sub(t) as i64) < 0 && !stop.load(Ordering::Relaxed) {
        std::hint::spin_loop();
    }
}

/// Hands one interval to the sink: ticks since the measured part began
/// (`from`, `to`), its histograms and its (sent, lost, missed) counts.
fn deliver(
    sink: &mut dyn Sink,
    clock: &Clock,
    from: u64,
    to: u64,
    cur: &Histos,
    counts: (u64, u64, u64),
) {
    sink.interval(&Interval {
        start_ns: clock.ticks_to_ns(from),
        end_ns: clock.ticks_to_ns(to),
        primary: &cur.primary,
        send_done: &cur.send_done,
        sent: counts.0,
        lost: counts.1,
        missed_steps: counts.2,
    });
}

/// Runs `plan` on `ch`, recording into `cur` (delivered to `sink` and
/// merged into `total` every `plan.interval_ticks`, and at the end).
/// Sequence numbers start at `first_seq`. Returns the counters; an error
/// from the transport, or `max_consecutive_lost` losses in a row, ends it.
#[allow(clippy::too_many_arguments)]
pub fn measure<C: Channel + ?Sized>(
    ch: &mut C,
    clock: &Clock,
    plan: &Plan,
    first_seq: u64,
    stop: &AtomicBool,
    cur: &mut Histos,
    total: &mut Histos,
    mut sink: Option<&mut dyn Sink>,
) -> Result<Tally, TransportError> {
    let mut tally = Tally {
        next_seq: first_seq,
        ..Tally::default()
    };
    let (mut iv_sent, mut iv_lost, mut iv_missed) = (0u64, 0u64, 0u64);
    let mut in_a_row = 0u32;
    let start = clock.now();
    let mut iv_start = start;
    let mut step = start;
    let deadline = start.saturating_add(plan.duration_ticks);
    loop {
        if stop.load(Ordering::Relaxed) {
            tally.interrupted = true;
            break;
        }
        if tally.sent >= plan.count {
            break;
        }
        if plan.period_ticks > 0 {
            wait_until(clock, step, stop, plan.event);
            if stop.load(Ordering::Relaxed) {
                continue;
            }
        }
        // After the pacing wait: a step at or past the end is not sent.
        if clock.now().wrapping_sub(start) >= plan.duration_ticks {
            // Paced steps due before the end but never sent were missed.
            if let Some(n) = deadline.saturating_sub(step).checked_div(plan.period_ticks) {
                let due = n + u64::from(n * plan.period_ticks < deadline.saturating_sub(step));
                tally.missed_steps += due;
                iv_missed += due;
            }
            break;
        }
        let seq = tally.next_seq;
        let msg = one(ch, clock, plan, seq)?;
        tally.next_seq += 1;
        tally.sent += 1;
        iv_sent += 1;
        match msg {
            Msg::Arrived { recv, comp } => {
                in_a_row = 0;
                cur.primary.record(recv);
                if let Some(c) = comp {
                    cur.send_done.record(c);
                }
            }
            Msg::Lost => {
                tally.lost += 1;
                iv_lost += 1;
                in_a_row += 1;
                if in_a_row >= plan.max_consecutive_lost {
                    total.absorb(cur);
                    return Err(TransportError::PeerLost(format!(
                        "{in_a_row} messages in a row got no answer within {} ms each (last seq {seq})",
                        plan.timeout_ns / 1_000_000
                    )));
                }
            }
        }
        let now = clock.now();
        // Paced (period > 0): the steps whose time has come since the last
        // step used (up to the end of a timed run); all but the latest were
        // missed (the message before was in flight).
        if let Some(passed) = now
            .min(deadline)
            .saturating_sub(step)
            .checked_div(plan.period_ticks)
        {
            if passed > 1 {
                tally.missed_steps += passed - 1;
                iv_missed += passed - 1;
            }
            step = step.wrapping_add(passed.max(1) * plan.period_ticks);
        }
        if plan.burst > 0 && tally.sent.is_multiple_of(plan.burst) {
            wait_until(clock, now.wrapping_add(plan.pause_ticks), stop, plan.event);
            step = clock.now();
        }
        if plan.interval_ticks > 0 && now.wrapping_sub(iv_start) >= plan.interval_ticks {
            if let Some(s) = sink.as_deref_mut() {
                let counts = (iv_sent, iv_lost, iv_missed);
                deliver(
                    s,
                    clock,
                    iv_start.wrapping_sub(start),
                    now.wrapping_sub(start),
                    cur,
                    counts,
                );
            }
            total.absorb(cur);
            cur.reset();
            (iv_sent, iv_lost, iv_missed, iv_start) = (0, 0, 0, now);
        }
    }
    let end = clock.now();
    tally.elapsed_ticks = end.wrapping_sub(start);
    if plan.interval_ticks > 0 && iv_sent > 0 {
        if let Some(s) = sink {
            let counts = (iv_sent, iv_lost, iv_missed);
            deliver(
                s,
                clock,
                iv_start.wrapping_sub(start),
                tally.elapsed_ticks,
                cur,
                counts,
            );
        }
    }
    total.absorb(cur);
    cur.reset();
    Ok(tally)
}

/// Why [`echo`] returned.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum EchoEnd {
    /// The idle check said the session is over.
    Finished,
    /// The Ctrl-C flag was set.
    Interrupted,
}

/// The server side of a round trip: sends every arrival straight back.
/// When nothing arrived for `idle_ticks`, calls `idle` (off the fast path:
/// it may make syscalls, e.g. look at the out-of-band connection); `false`
/// from it ends the loop. With `event`, it sleeps in `Channel::wait_recv`
/// (at most `idle_ticks` at a time) instead of spinning. Returns the
/// number of messages echoed.
pub fn echo<C: Channel + ?Sized>(
    ch: &mut C,
    clock: &Clock,
    stop: &AtomicBool,
    idle_ticks: u64,
    event: bool,
    mut idle: impl FnMut() -> bool,
) -> Result<(u64, EchoEnd), TransportError> {
    let mut echoed = 0u64;
    let mut last = clock.now();
    let idle_ns = clock.ticks_to_ns(idle_ticks);
    loop {
        let got = if event {
            ch.wait_recv(clock, idle_ns)?
        } else {
            ch.poll_recv()?
        };
        if let Some(seq) = got {
            ch.post(seq)?;
            echoed += 1;
            last = clock.now();
            continue;
        }
        if stop.load(Ordering::Relaxed) {
            return Ok((echoed, EchoEnd::Interrupted));
        }
        let now = clock.now();
        if now.wrapping_sub(last) >= idle_ticks {
            if !idle() {
                return Ok((echoed, EchoEnd::Finished));
            }
            last = now;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::probe::config::{Length, ProbeConfig};
    use crate::transport::TransportInfo;

    /// Delivers each message `delay_ns` after its post (a slow network).
    struct Slow {
        clock: Clock,
        delay_ns: u64,
        posted: Option<(u64, u64)>,
    }

    impl Channel for Slow {
        fn post(&mut self, seq: u64) -> Result<(), TransportError> {
            self.posted = Some((seq, self.clock.now()));
            Ok(())
        }
        fn poll_recv(&mut self) -> Result<Option<u64>, TransportError> {
            match self.posted {
                Some((s, t)) if self.clock.ticks_to_ns(self.clock.now() - t) >= self.delay_ns => {
                    self.posted = None;
                    Ok(Some(s))
                }
                _ => Ok(None),
            }
        }
        fn info(&self) -> TransportInfo {
            TransportInfo::default()
        }
    }

    #[test]
    fn slow_messages_miss_paced_steps_and_the_schedule_adds_up() {
        let clock = Clock::monotonic();
        let cfg = ProbeConfig {
            length: Length::Count(200),
            rate_hz: Some(10_000.0), // 100 us steps
            ..ProbeConfig::default()
        };
        let plan = Plan::measured(&cfg, &clock);
        let mut ch = Slow {
            clock,
            delay_ns: 250_000,
            posted: None,
        };
        let (mut cur, mut total) = (Histos::default(), Histos::default());
        let t = measure(
            &mut ch,
            &clock,
            &plan,
            0,
            &AtomicBool::new(false),
            &mut cur,
            &mut total,
            None,
        )
        .unwrap();
        assert_eq!((t.sent, t.lost), (200, 0));
        assert_eq!(total.primary.len(), 200);
        assert!(total.primary.summary().min_ns >= 250_000);
        // Each message takes 2.5 steps: at least 1.5 missed per message
        // (more if this thread was preempted).
        assert!(t.missed_steps >= 290, "missed {}", t.missed_steps);
        // Sent + missed steps cover the elapsed time, one step per 100 us.
        let steps = t.sent + t.missed_steps;
        let by_time = clock.ticks_to_ns(t.elapsed_ticks) / 100_000;
        assert!(
            steps.abs_diff(by_time) <= 3,
            "steps {steps}, elapsed {by_time} periods"
        );
    }

    /// Holds message 0 back until message 1 is posted, then delivers
    /// both in order; never delivers anything when `silent`. Driven by
    /// posts, not time, so a loaded machine cannot change the outcome.
    struct Held {
        silent: bool,
        queue: Vec<u64>,
    }

    impl Channel for Held {
        fn post(&mut self, seq: u64) -> Result<(), TransportError> {
            if !self.silent && seq >= 1 {
                if seq == 1 {
                    self.queue.push(0);
                }
                self.queue.push(seq);
            }
            Ok(())
        }
        fn poll_recv(&mut self) -> Result<Option<u64>, TransportError> {
            Ok(if self.queue.is_empty() {
                None
            } else {
                Some(self.queue.remove(0))
            })
        }
        fn info(&self) -> TransportInfo {
            TransportInfo::default()
        }
    }

    fn short_timeout(count: u64) -> Plan {
        let cfg = ProbeConfig {
            length: Length::Count(count),
            timeout: std::time::Duration::from_millis(5),
            max_consecutive_lost: 2,
            ..ProbeConfig::default()
        };
        Plan::measured(&cfg, &Clock::monotonic())
    }

    #[test]
    fn losses_in_a_row_end_the_run() {
        let mut ch = Held {
            silent: true,
            queue: Vec::new(),
        };
        let (mut cur, mut total) = (Histos::default(), Histos::default());
        let clock = Clock::monotonic();
        let stop = AtomicBool::new(false);
        let e = measure(
            &mut ch,
            &clock,
            &short_timeout(10),
            0,
            &stop,
            &mut cur,
            &mut total,
            None,
        )
        .unwrap_err();
        assert!(e.to_string().contains("2 messages in a row"), "{e}");
        assert!(total.primary.is_empty());
    }

    #[test]
    fn a_late_arrival_is_lost_once_and_then_skipped() {
        let mut ch = Held {
            silent: false,
            queue: Vec::with_capacity(8),
        };
        let (mut cur, mut total) = (Histos::default(), Histos::default());
        let clock = Clock::monotonic();
        let stop = AtomicBool::new(false);
        let t = measure(
            &mut ch,
            &clock,
            &short_timeout(3),
            0,
            &stop,
            &mut cur,
            &mut total,
            None,
        )
        .unwrap();
        // 0 is lost (held past its timeout), then arrives before 1 and is
        // skipped, not taken for 1; 1 and 2 are measured.
        assert_eq!((t.sent, t.lost), (3, 1));
        assert_eq!(total.primary.len(), 2);
        assert!(ch.queue.is_empty());
    }
}
