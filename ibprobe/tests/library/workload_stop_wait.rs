//! `probe::workload::stop_wait`.

use ibprobe::clock::Clock;
use ibprobe::probe::config::Plan;
use ibprobe::probe::config::{Length, ProbeConfig};
use ibprobe::probe::workload::record::Histos;
use ibprobe::probe::workload::stop_wait::*;
use ibprobe::transport::TransportInfo;
use ibprobe::transport::{Channel, TransportError};
use std::sync::atomic::AtomicBool;

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
