//! `probe::workload::stream::receive` when more than the window arrives.

use std::sync::atomic::AtomicBool;

use ibprobe::clock::Clock;
use ibprobe::probe::config::{Length, Plan, ProbeConfig};
use ibprobe::probe::workload::slot::{self, Header, RECORD_HEADER, SLOT_HEADER};
use ibprobe::probe::workload::stream::{receive, RecvTally, StreamPlan};
use ibprobe::spec::StreamSpec;
use ibprobe::stats::LatencyHistogram;
use ibprobe::transport::stream::SlotEnd;
use ibprobe::transport::{TransportError, TransportInfo};

const SIZE: usize = 32;

/// An end whose sender ignores the credits (as a UDP sender does once it
/// gave its slots in flight up after --timeout): `slots` one-message data
/// slots at once, then the FIN.
struct Flood {
    slots: u64,
    made: u64,
    lossy: bool,
}

impl SlotEnd for Flood {
    fn slot_size(&self) -> usize {
        SLOT_HEADER + RECORD_HEADER + SIZE
    }
    fn send(&mut self, _: &[u8]) -> Result<bool, TransportError> {
        Ok(true)
    }
    fn recv(&mut self, into: &mut [u8]) -> Result<Option<usize>, TransportError> {
        let s = self.made;
        if s > self.slots {
            return Ok(None);
        }
        self.made += 1;
        if s == self.slots {
            return Ok(Some(slot::write_ctrl(into, slot::FIN, s, s)));
        }
        let len = self.slot_size();
        into[..len].fill(0);
        Header {
            len: len as u32,
            msgs: 1,
            flags: slot::data_flags(slot::Cause::Fill, false),
            word: s,
        }
        .write(into);
        slot::write_record(into, SLOT_HEADER, s, 1);
        into[SLOT_HEADER + RECORD_HEADER] = s as u8;
        into[len - 1] = s as u8;
        Ok(Some(len))
    }
    fn lossy(&self) -> bool {
        self.lossy
    }
    fn info(&self) -> TransportInfo {
        TransportInfo {
            name: "flood".into(),
            detail: "a sender past its credits".into(),
            facts: vec![],
        }
    }
}

fn run(lossy: bool) -> Result<RecvTally, TransportError> {
    let clock = Clock::monotonic();
    let spec = StreamSpec {
        window: 4,
        ..StreamSpec::default()
    };
    let cfg = ProbeConfig {
        size: SIZE,
        length: Length::Count(40),
        warmup: 0,
        lock_memory: false,
        ..ProbeConfig::default()
    };
    let sp = StreamPlan::new(&spec, SIZE, 0, &Plan::measured(&cfg, &clock), &clock);
    let (stop, done) = (AtomicBool::new(false), AtomicBool::new(true));
    let mut end = Flood {
        slots: 40,
        made: 0,
        lossy,
    };
    receive(
        &mut end,
        &clock,
        &sp,
        &stop,
        &done,
        &stop,
        &mut LatencyHistogram::new(),
    )
}

/// A lossy transport's receiver drops what arrives past the window and
/// counts it lost (the run goes on); a reliable one's ends the run: the
/// credits were broken.
#[test]
fn slots_past_the_window_are_dropped_on_a_lossy_transport_and_an_error_on_a_reliable_one() {
    let t = run(true).expect("a lossy transport's receiver drops, not fails");
    assert!(t.lost_slots > 0, "nothing dropped: {t:?}");
    assert_eq!(t.slots + t.lost_slots, 40, "{t:?}");
    assert_eq!(t.max_unconsumed, 4, "{t:?}");
    assert_eq!(t.sender_msgs, Some(40), "{t:?}");
    let e = run(false).expect_err("a reliable transport past the window is broken");
    assert!(e.to_string().contains("stream protocol broken"), "{e}");
}

/// Samples held in ticks and folded later (`record::Pending`, the stream
/// receiver's way) give the histogram that recording each at once gives:
/// every figure, for a count that is not a multiple of the buffer.
#[test]
fn held_samples_fold_into_the_histogram_recording_at_once_gives() {
    use ibprobe::clock::Calibration;
    use ibprobe::probe::workload::record::{Pending, PENDING};
    let clock = Clock::tsc_with(Calibration {
        hz: 2.5e9,
        windows: 5,
        window_ns: 20_000_000,
        spread_ppm: 1.0,
    });
    let (mut held, mut now) = (LatencyHistogram::new(), LatencyHistogram::new());
    let mut p = Pending::default();
    let n = 3 * PENDING + 5;
    let mut folds = 0;
    for i in 0..n as u64 {
        let ticks = (i * 7919) % 60_000 + i % 3;
        now.record(clock.ticks_to_ns(ticks));
        if p.push(ticks) {
            p.fold(&mut held, &clock);
            folds += 1;
        }
    }
    assert_eq!(folds, 3, "a fold every {PENDING} samples");
    assert!(!p.is_empty());
    p.fold(&mut held, &clock);
    assert!(p.is_empty());
    assert_eq!(held.summary(), now.summary());
    assert_eq!(
        held.buckets().collect::<Vec<_>>(),
        now.buckets().collect::<Vec<_>>()
    );
}
