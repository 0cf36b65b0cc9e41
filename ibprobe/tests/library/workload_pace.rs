//! `probe::workload::pace`.

use ibprobe::clock::Clock;
use ibprobe::probe::config::Plan;
use ibprobe::probe::config::{Length, ProbeConfig};
use ibprobe::probe::workload::stop_wait::measure;
use ibprobe::probe::workload::Histos;
use ibprobe::transport::{Channel, TransportError, TransportInfo};
use std::sync::atomic::AtomicBool;

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
