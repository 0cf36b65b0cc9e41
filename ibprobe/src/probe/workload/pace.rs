//! The pacer: when the next message may go (`--rate`, `--burst`/`--pause`,
//! `--duration`, the same for every workload). A step every
//! `period_ticks`; a step that passed while the message before was in
//! flight is *missed* (counted, not made up later), as are the steps due
//! before a timed run's end but never sent. After every `burst` messages
//! it pauses `pause_ticks` and the schedule restarts from there. Waiting
//! spins; with event polling it first sleeps until ~50 us before the step.

use std::sync::atomic::{AtomicBool, Ordering};

use crate::clock::Clock;
use crate::probe::config::Plan;

/// What [`Pacer::before_post`] decided.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Gate {
    /// Post now: `now` (read after any wait) is the hand-over time.
    Go {
        now: u64,
    },
    Stopped,
    /// The run's time is over; `missed` steps were due and never sent.
    End {
        missed: u64,
    },
}

/// The schedule of one run, built at its first timestamp.
#[derive(Clone, Copy, Debug)]
pub struct Pacer {
    period_ticks: u64,
    burst: u64,
    pause_ticks: u64,
    duration_ticks: u64,
    event: bool,
    /// Saturated for a counted run.
    start: u64,
    deadline: u64,
    step: u64,
}

impl Pacer {
    pub fn new(plan: &Plan, start: u64) -> Pacer {
        Pacer {
            period_ticks: plan.period_ticks,
            burst: plan.burst,
            pause_ticks: plan.pause_ticks,
            duration_ticks: plan.duration_ticks,
            event: plan.event,
            start,
            deadline: start.saturating_add(plan.duration_ticks),
            step: start,
        }
    }

    /// Unpaced: the start, always due.
    #[inline(always)]
    pub fn next_step(&self) -> u64 {
        self.step
    }

    /// Waits for the step, then checks the end of a timed run; one clock
    /// read besides the wait.
    #[inline(always)]
    pub fn before_post(&mut self, clock: &Clock, stop: &AtomicBool) -> Gate {
        if self.period_ticks > 0 {
            wait_until(clock, self.step, stop, self.event);
            if stop.load(Ordering::Relaxed) {
                return Gate::Stopped;
            }
        }
        // After the pacing wait: a step at or past the end is not sent.
        let now = clock.now();
        if now.wrapping_sub(self.start) >= self.duration_ticks {
            // Paced steps due before the end but never sent were missed.
            let left = self.deadline.saturating_sub(self.step);
            let missed = match left.checked_div(self.period_ticks) {
                Some(n) => n + u64::from(n * self.period_ticks < left),
                None => 0,
            };
            return Gate::End { missed };
        }
        Gate::Go { now }
    }

    /// After the `sent`-th message, ended at `now`: the steps missed while
    /// it was in flight (0 unpaced); after a full burst, pauses.
    #[inline(always)]
    pub fn after_message(&mut self, clock: &Clock, now: u64, sent: u64, stop: &AtomicBool) -> u64 {
        let mut missed = 0;
        // Paced (period > 0): the steps whose time has come since the last
        // step used (up to the end of a timed run); all but the latest were
        // missed (the message before was in flight).
        if let Some(passed) = now
            .min(self.deadline)
            .saturating_sub(self.step)
            .checked_div(self.period_ticks)
        {
            if passed > 1 {
                missed = passed - 1;
            }
            self.step = self.step.wrapping_add(passed.max(1) * self.period_ticks);
        }
        if self.burst > 0 && sent.is_multiple_of(self.burst) {
            wait_until(clock, now.wrapping_add(self.pause_ticks), stop, self.event);
            self.step = clock.now();
        }
        missed
    }
}

/// Waits until the clock reaches `t` or `stop` is set; with `sleep`, in
/// nanosleep until ~50 us before `t`.
#[inline(always)]
pub fn wait_until(clock: &Clock, t: u64, stop: &AtomicBool, sleep: bool) {
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

/// The receiving end's work on one message (`Plan::consume_ticks`): a
/// spin, no syscall.
#[inline(always)]
pub fn consume(clock: &Clock, plan: &Plan, stop: &AtomicBool) {
    if plan.consume_ticks > 0 {
        wait_until(
            clock,
            clock.now().wrapping_add(plan.consume_ticks),
            stop,
            false,
        );
    }
}
