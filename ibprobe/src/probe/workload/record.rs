//! Recording: the histograms and counters a run fills, and the intervals
//! that stream them to a [`Sink`]. Every workload records the same way,
//! so a workload only says what happened ([`Recorder::arrived`], ...) and
//! when ([`Recorder::tick`]). Nothing here allocates: the executor
//! allocates the histograms before the run.

use crate::clock::hwts::ProberStamp;
use crate::clock::Clock;
use ibnoise::counters::attribution::Attributor;
use ibnoise::counters::{Counts, Meter};
use ibstats::latency::LatencyHistogram;

/// The distributions one loop fills: `primary`, t_recv - t_subm (one-way
/// latency, or the round trip); `send_done`, t_comp - t_subm for signaled
/// sends; with `--stamp-thread`, `split`: (t_read - t_subm, t_recv -
/// t_read), where t_read is the stamp the HCA read with the payload.
#[derive(Clone, Debug, Default)]
pub struct Histos {
    pub primary: LatencyHistogram,
    pub send_done: LatencyHistogram,
    pub split: Option<(LatencyHistogram, LatencyHistogram)>,
}

impl Histos {
    pub fn new(split: bool) -> Histos {
        Histos {
            split: split.then(|| (LatencyHistogram::new(), LatencyHistogram::new())),
            ..Histos::default()
        }
    }
    fn absorb(&mut self, other: &Histos) {
        self.primary.merge(&other.primary);
        self.send_done.merge(&other.send_done);
        if let (Some(a), Some(b)) = (self.split.as_mut(), other.split.as_ref()) {
            a.0.merge(&b.0);
            a.1.merge(&b.1);
        }
    }
    fn reset(&mut self) {
        self.primary.reset();
        self.send_done.reset();
        if let Some((a, b)) = self.split.as_mut() {
            a.reset();
            b.reset();
        }
    }
}

/// One interval, handed to a [`Sink`]: start and end in ns since the
/// measured part began, samples as in [`Histos`], and the measuring
/// thread's counters over it (None: off).
#[derive(Debug)]
pub struct Interval<'a> {
    pub start_ns: u64,
    pub end_ns: u64,
    pub primary: &'a LatencyHistogram,
    pub send_done: &'a LatencyHistogram,
    pub sent: u64,
    pub lost: u64,
    pub missed_steps: u64,
    pub counters: Option<&'a Counts>,
}

/// Consumes interval histograms while a probe runs (constant memory for
/// a long-running consumer such as ibexporter). `interval` runs on the
/// measuring thread between messages: keep it short.
///
/// ```
/// use std::sync::atomic::AtomicBool;
/// use std::time::Duration;
/// use ibprobe::clock::Clock;
/// use ibprobe::probe::workload::{Interval, Sink};
/// use ibprobe::probe::{executor, Length, ProbeConfig};
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
/// let out = executor::run(&cfg, &mut ch, &Clock::calibrate(), &stop, Some(&mut sink)).unwrap();
/// assert!(!sink.0.is_empty());
/// assert!(out.one_way.unwrap().len() > 0);
/// ```
pub trait Sink {
    fn interval(&mut self, iv: &Interval<'_>);

    /// The measured part begins (once, after the warm-up).
    fn measuring(&mut self) {}
}

/// Counters of one loop; `elapsed_ticks` from the first post to the end.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Tally {
    pub sent: u64,
    pub lost: u64,
    pub missed_steps: u64,
    pub elapsed_ticks: u64,
    pub interrupted: bool,
    pub next_seq: u64,
}

/// Records one run: samples into `cur`, which goes to the sink and into
/// `total` every `interval_ticks` (0: only at the end). The workload calls
/// [`Recorder::begin`] at its first timestamp and [`Recorder::finish`] at
/// its last.
pub struct Recorder<'a> {
    clock: &'a Clock,
    interval_ticks: u64,
    cur: &'a mut Histos,
    total: &'a mut Histos,
    sink: Option<&'a mut dyn Sink>,
    start: u64,
    iv_start: u64,
    /// Counted for the run and again for the current interval.
    run: Tally,
    iv: Tally,
    /// `--hw-timestamps`: the prober's stamps, into room reserved before
    /// the run (never grown), and how many did not fit.
    hw: Option<&'a mut Vec<ProberStamp>>,
    pub hw_overflow: u64,
    counters: Option<IntervalCounters<'a>>,
}

/// The counters read at each interval's end (a syscall, between
/// messages), and the attribution they feed.
pub struct IntervalCounters<'a> {
    pub meter: &'a mut Meter,
    pub attr: &'a mut Attributor,
    /// The reading at the current interval's start.
    pub last: Counts,
    /// Read the interrupts too (the user asked for intervals), else
    /// [`Meter::read_without_interrupts`].
    pub interrupts: bool,
}

impl<'a> Recorder<'a> {
    pub fn new<'s: 'a>(
        clock: &'a Clock,
        interval_ticks: u64,
        cur: &'a mut Histos,
        total: &'a mut Histos,
        sink: Option<&'a mut (dyn Sink + 's)>,
    ) -> Recorder<'a> {
        Recorder {
            clock,
            interval_ticks,
            cur,
            total,
            sink: sink.map(|s| s as &mut dyn Sink),
            start: 0,
            iv_start: 0,
            run: Tally::default(),
            iv: Tally::default(),
            hw: None,
            hw_overflow: 0,
            counters: None,
        }
    }

    /// Keeps each answered message's [`ProberStamp`] in `log`, up to its
    /// capacity.
    pub fn with_hw_log(mut self, log: &'a mut Vec<ProberStamp>) -> Recorder<'a> {
        self.hw = Some(log);
        self
    }

    /// `--hw-timestamps`: message `seq` was answered `primary_ns` after its
    /// post, with HCA timestamps `t2` (send completion) and `t5` (receive).
    #[inline(always)]
    pub fn hw(&mut self, seq: u64, primary_ns: u64, t2: Option<u64>, t5: Option<u64>) {
        if let Some(log) = self.hw.as_mut() {
            if log.len() < log.capacity() {
                log.push(ProberStamp {
                    seq,
                    t1_ns: 0,
                    t2,
                    t5,
                    t6_ns: primary_ns,
                });
            } else {
                self.hw_overflow += 1;
            }
        }
    }

    pub fn with_counters(mut self, ic: IntervalCounters<'a>) -> Recorder<'a> {
        self.counters = Some(ic);
        self
    }

    #[inline(always)]
    pub fn begin(&mut self, now: u64) {
        self.start = now;
        self.iv_start = now;
    }

    #[inline(always)]
    pub fn sent(&self) -> u64 {
        self.run.sent
    }

    #[inline(always)]
    pub fn posted(&mut self) {
        self.run.sent += 1;
        self.iv.sent += 1;
    }

    /// A message arrived `primary_ns` after its post, its send completed
    /// `send_done_ns` after it.
    #[inline(always)]
    pub fn arrived(&mut self, primary_ns: u64, send_done_ns: Option<u64>) {
        self.cur.primary.record(primary_ns);
        if let Some(c) = send_done_ns {
            self.cur.send_done.record(c);
        }
    }

    /// A stamped arrival: `before_ns` from the post to the HCA's read of
    /// the send buffer, `after_ns` from that read to the arrival.
    #[inline(always)]
    pub fn split(&mut self, before_ns: u64, after_ns: u64) {
        if let Some((b, a)) = self.cur.split.as_mut() {
            b.record(before_ns);
            a.record(after_ns);
        }
    }

    #[inline(always)]
    pub fn lost(&mut self) {
        self.run.lost += 1;
        self.iv.lost += 1;
    }

    #[inline(always)]
    pub fn missed(&mut self, n: u64) {
        self.run.missed_steps += n;
        self.iv.missed_steps += n;
    }

    /// Between messages: ends the interval when it is over.
    #[inline(always)]
    pub fn tick(&mut self, now: u64) {
        if self.interval_ticks > 0 && now.wrapping_sub(self.iv_start) >= self.interval_ticks {
            self.roll(now);
        }
    }

    fn roll(&mut self, now: u64) {
        self.deliver(now.wrapping_sub(self.start));
        self.total.absorb(self.cur);
        self.cur.reset();
        self.iv = Tally::default();
        self.iv_start = now;
    }

    fn read_counters(&mut self) -> Option<Counts> {
        let ic = self.counters.as_mut()?;
        let now = if ic.interrupts {
            ic.meter.read()
        } else {
            ic.meter.read_without_interrupts()
        };
        let d = now.since(&ic.last);
        ic.last = now;
        ic.attr.interval(&d, &self.cur.primary);
        Some(d)
    }

    /// Hands the current interval, ending `to` ticks after the start, to
    /// the sink.
    fn deliver(&mut self, to: u64) {
        let counters = self.read_counters();
        if let Some(s) = self.sink.as_deref_mut() {
            s.interval(&Interval {
                start_ns: self
                    .clock
                    .ticks_to_ns(self.iv_start.wrapping_sub(self.start)),
                end_ns: self.clock.ticks_to_ns(to),
                primary: &self.cur.primary,
                send_done: &self.cur.send_done,
                sent: self.iv.sent,
                lost: self.iv.lost,
                missed_steps: self.iv.missed_steps,
                counters: counters.as_ref(),
            });
        }
    }

    /// A failed run keeps what it measured (not given to the sink).
    pub fn keep_partial(&mut self) {
        self.total.absorb(self.cur);
    }

    /// The run ended at `end`: delivers the last, partial interval (if it
    /// has messages) and returns the run's counters.
    pub fn finish(&mut self, end: u64, next_seq: u64, interrupted: bool) -> Tally {
        let elapsed_ticks = end.wrapping_sub(self.start);
        if self.interval_ticks > 0 && self.iv.sent > 0 {
            self.deliver(elapsed_ticks);
        }
        self.total.absorb(self.cur);
        self.cur.reset();
        Tally {
            elapsed_ticks,
            interrupted,
            next_seq,
            ..self.run
        }
    }
}

/// Samples a hot loop holds, in clock ticks, before they go into a
/// histogram.
pub const PENDING: usize = 64;

/// Latency samples in ticks waiting to be recorded, folded into the
/// histogram every [`PENDING`]: a record right behind a clock read costs
/// several times a plain store (`benches/hot_path.rs`); later, the same
/// values cost the same per sample.
#[derive(Clone, Debug)]
pub struct Pending {
    ticks: [u64; PENDING],
    n: usize,
}

impl Default for Pending {
    fn default() -> Self {
        Pending {
            ticks: [0; PENDING],
            n: 0,
        }
    }
}

impl Pending {
    /// True when full (fold now).
    #[inline(always)]
    pub fn push(&mut self, ticks: u64) -> bool {
        // `n < PENDING` always holds here: a full buffer is folded at once.
        if let Some(slot) = self.ticks.get_mut(self.n) {
            *slot = ticks;
            self.n += 1;
        }
        self.n >= PENDING
    }

    #[inline(always)]
    pub fn is_empty(&self) -> bool {
        self.n == 0
    }

    /// Records every held sample into `hist`, in ns, and empties it.
    #[inline(never)]
    pub fn fold(&mut self, hist: &mut LatencyHistogram, clock: &Clock) {
        for &t in &self.ticks[..self.n] {
            hist.record(clock.ticks_to_ns(t));
        }
        self.n = 0;
    }
}
