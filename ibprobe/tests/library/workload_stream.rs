//! `probe::workload::stream::receive` when more than the window arrives, and its `--stamp-thread` split.

use std::sync::atomic::AtomicBool;

use ibprobe::clock::Clock;
use ibprobe::probe::config::{Length, Plan, ProbeConfig};
use ibprobe::probe::workload::slot::{self, Header, RECORD_HEADER, SLOT_HEADER};
use ibprobe::probe::workload::stream::{
    receive, receive_stamped, RecvTally, StampSplit, StreamPlan,
};
use ibprobe::spec::StreamSpec;
use ibprobe::transport::stream::SlotEnd;
use ibprobe::transport::{TransportError, TransportInfo};
use ibstats::latency::LatencyHistogram;

const SIZE: usize = 32;

/// An end whose sender ignores the credits (as a UDP sender does once it
/// gave its slots in flight up after --timeout): `slots` one-message data
/// slots at once, then the FIN.
struct Flood {
    slots: u64,
    made: u64,
    lossy: bool,
}

/// The number of the data slot a fake end delivers next (`made` counts
/// them), or what its `recv` returns instead: after `slots` slots of
/// `per_slot` messages the FIN (written into `into`), then nothing.
fn next_slot(
    made: &mut u64,
    slots: u64,
    per_slot: u64,
    into: &mut [u8],
) -> Result<u64, Option<usize>> {
    let s = *made;
    if s > slots {
        return Err(None);
    }
    *made += 1;
    if s == slots {
        return Err(Some(slot::write_ctrl(into, slot::FIN, s, per_slot * s)));
    }
    Ok(s)
}

impl SlotEnd for Flood {
    fn slot_size(&self) -> usize {
        SLOT_HEADER + RECORD_HEADER + SIZE
    }
    fn send(&mut self, _: &[u8]) -> Result<bool, TransportError> {
        Ok(true)
    }
    fn recv(&mut self, into: &mut [u8]) -> Result<Option<usize>, TransportError> {
        let s = match next_slot(&mut self.made, self.slots, 1, into) {
            Ok(s) => s,
            Err(r) => return Ok(r),
        };
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

/// An end whose slots arrive stamped as `--stamp-thread`'s HCA read
/// would leave them: two messages per slot handed over 3000 and 2000 ns
/// before the slot is taken, read by the "HCA" 1500 ns before; every
/// third slot carries a stale stamp (from before its hand-overs: the
/// stamping thread did not run in between), which splits nothing.
struct Stamped {
    clock: Clock,
    slots: u64,
    made: u64,
}

const PER_SLOT: usize = 2;

impl SlotEnd for Stamped {
    fn slot_size(&self) -> usize {
        SLOT_HEADER + PER_SLOT * (RECORD_HEADER + SIZE)
    }
    fn send(&mut self, _: &[u8]) -> Result<bool, TransportError> {
        Ok(true)
    }
    fn recv(&mut self, into: &mut [u8]) -> Result<Option<usize>, TransportError> {
        let s = match next_slot(&mut self.made, self.slots, PER_SLOT as u64, into) {
            Ok(s) => s,
            Err(r) => return Ok(r),
        };
        let now = self.clock.now();
        let len = self.slot_size();
        Header {
            len: len as u32,
            msgs: PER_SLOT as u16,
            flags: slot::data_flags(slot::Cause::Fill, false),
            word: s,
        }
        .write(into);
        let rec = RECORD_HEADER + SIZE;
        for i in 0..PER_SLOT {
            let seq = PER_SLOT as u64 * s + i as u64;
            let at = SLOT_HEADER + i * rec;
            slot::write_record(into, at, seq, now - 3000 + 1000 * i as u64);
            into[at + RECORD_HEADER..at + rec].fill(seq as u8);
        }
        let stamp = if s % 3 == 2 { now - 5000 } else { now - 1500 };
        into[slot::STAMP_AT..slot::STAMP_AT + 8].copy_from_slice(&stamp.to_le_bytes());
        Ok(Some(len))
    }
    fn lossy(&self) -> bool {
        false
    }
    fn info(&self) -> TransportInfo {
        TransportInfo {
            name: "stamped".into(),
            detail: "slots stamped at a synthetic HCA read".into(),
            facts: vec![],
        }
    }
}

/// `--stamp-thread`'s receiving side: each message's latency splits at
/// its slot's stamp (one per slot, shared by its messages), the two parts
/// adding up to the latency; a stale stamp splits nothing, and the
/// payload check does not see the stamp (it lies inside the first
/// message's payload).
#[test]
fn the_receiver_splits_each_message_at_its_slots_stamp() {
    let clock = Clock::monotonic();
    let spec = StreamSpec {
        batch: PER_SLOT as u32,
        ..StreamSpec::default()
    };
    let cfg = ProbeConfig {
        size: SIZE,
        length: Length::Count(60),
        warmup: 0,
        lock_memory: false,
        ..ProbeConfig::default()
    };
    let mut sp = StreamPlan::new(&spec, SIZE, 0, &Plan::measured(&cfg, &clock), &clock);
    sp.stamp = true;
    let stop = AtomicBool::new(false);
    let mut end = Stamped {
        clock,
        slots: 30,
        made: 0,
    };
    let (mut latency, mut split) = (LatencyHistogram::new(), StampSplit::default());
    let t = receive_stamped(
        &mut end,
        &clock,
        &sp,
        (&stop, &stop, &stop),
        &mut latency,
        Some(&mut split),
    )
    .unwrap();
    assert_eq!((t.msgs, t.corrupt), (60, 0), "{t:?}");
    // 20 of 30 slots carry a fresh stamp: 40 messages split.
    assert_eq!((split.before.len(), split.after.len()), (40, 40));
    let (b, a, l) = (
        split.before.summary(),
        split.after.summary(),
        latency.summary(),
    );
    // Hand-overs 3000 and 2000 ns before the slot was made, the read
    // 1500 ns before: before is 1500 or 500 ns; after is 1500 ns plus the
    // time from making the slot to taking it (same in the latency).
    assert_eq!((b.min_ns, b.max_ns), (500, 1500), "{b:?}");
    assert!(a.min_ns >= 1500 && a.min_ns < 1500 + 1_000_000, "{a:?}");
    assert!(l.min_ns >= 2000 && l.max_ns >= 3000, "{l:?}");
    // The parts add up to the latency: the sums of their means over the
    // split messages equal the mean latency of those messages.
    let split_mean = b.mean_ns + a.mean_ns;
    assert!(
        split_mean >= 2000.0 && split_mean <= l.max_ns as f64,
        "{b:?} {a:?} {l:?}"
    );
    // ... exactly, message by message: the split messages' own latency
    // (exact means: the two parts' sums add up to its sum).
    let s = split.latency.summary();
    assert_eq!(s.count, 40);
    assert!(
        (s.mean_ns - split_mean).abs() < 1e-6 * split_mean,
        "{s:?} {b:?} {a:?}"
    );

    // Without the split the same slots are only delivered.
    let mut end = Stamped {
        clock,
        slots: 30,
        made: 0,
    };
    let t = receive(
        &mut end,
        &clock,
        &sp,
        &stop,
        &stop,
        &stop,
        &mut LatencyHistogram::new(),
    )
    .unwrap();
    assert_eq!((t.msgs, t.corrupt), (60, 0), "{t:?}");
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

/// An end that delivers the given slots (compact ones, made by the test,
/// good or hostile), then a FIN after as many data slots.
struct Given {
    slots: Vec<Vec<u8>>,
    at: usize,
    lossy: bool,
}

impl SlotEnd for Given {
    fn slot_size(&self) -> usize {
        64
    }
    fn send(&mut self, _: &[u8]) -> Result<bool, TransportError> {
        Ok(true)
    }
    fn recv(&mut self, into: &mut [u8]) -> Result<Option<usize>, TransportError> {
        let i = self.at;
        self.at += 1;
        let n = self.slots.len();
        match i.cmp(&n) {
            std::cmp::Ordering::Less => {
                let s = &self.slots[i];
                into[..s.len()].copy_from_slice(s);
                Ok(Some(s.len()))
            }
            std::cmp::Ordering::Equal => {
                Ok(Some(slot::write_ctrl(into, slot::FIN, n as u64, n as u64)))
            }
            std::cmp::Ordering::Greater => Ok(None),
        }
    }
    fn lossy(&self) -> bool {
        self.lossy
    }
    fn info(&self) -> TransportInfo {
        TransportInfo {
            name: "given".into(),
            detail: "slots made by the test".into(),
            facts: vec![],
        }
    }
}

/// A compact slot of message `seq` of `SIZE` bytes, handed over at `t`.
fn compact(seq: u64, t: u64) -> Vec<u8> {
    let mut b = vec![seq as u8; slot::COMPACT_HEADER + SIZE];
    let n = slot::write_compact(&mut b, seq, t, SIZE, slot::Cause::Fill);
    assert_eq!(n, b.len());
    b
}

fn receive_given(
    slots: Vec<Vec<u8>>,
    lossy: bool,
) -> Result<(RecvTally, LatencyHistogram), TransportError> {
    let clock = Clock::monotonic();
    let cfg = ProbeConfig {
        size: SIZE,
        length: Length::Count(8),
        warmup: 0,
        lock_memory: false,
        ..ProbeConfig::default()
    };
    let sp = StreamPlan::new(
        &StreamSpec::default(),
        SIZE,
        0,
        &Plan::measured(&cfg, &clock),
        &clock,
    );
    let (stop, done) = (AtomicBool::new(false), AtomicBool::new(true));
    let mut latency = LatencyHistogram::new();
    let mut end = Given {
        slots,
        at: 0,
        lossy,
    };
    let t = receive(&mut end, &clock, &sp, &stop, &done, &stop, &mut latency)?;
    Ok((t, latency))
}

/// Compact slots (one message in 16 B of header): delivered with their
/// latency widened from the 48 bits of hand-over tick they carry, and
/// their payload checked.
#[test]
fn compact_slots_are_delivered_with_their_latency() {
    let now = Clock::monotonic().now();
    let mut slots: Vec<Vec<u8>> = (0..8).map(|s| compact(s, now - 3000)).collect();
    slots[5][slot::COMPACT_HEADER + SIZE - 1] ^= 1;
    let (t, latency) = receive_given(slots, false).unwrap();
    assert_eq!(
        (t.msgs, t.slots, t.lost_slots, t.corrupt),
        (8, 8, 0, 1),
        "{t:?}"
    );
    assert_eq!(t.sender_msgs, Some(8));
    let l = latency.summary();
    // Handed over 3000 ns before the test began: no less, and not the
    // 2^48-tick wrap a wrong widening would give.
    assert!(l.min_ns >= 3000 && l.max_ns < 10_000_000_000, "{l:?}");
}

/// A hostile or broken peer's compact slot (a length not one message's,
/// the header's length not the transport's, flags beside DATA, COMPACT
/// and a cause, a sequence number out of turn on a reliable transport)
/// ends the run with one line saying what was wrong: no panic, nothing
/// delivered from it. On a lossy transport a number ahead is a loss and
/// one from before the stream is stale.
#[test]
fn hostile_compact_slots_are_refused() {
    let now = Clock::monotonic().now();
    let good = |s| compact(s, now);
    let cases: Vec<(&str, Vec<u8>, &str)> = vec![
        (
            "one byte more than a message",
            {
                let mut b = good(0);
                b.push(0);
                let n = b.len() as u32;
                b[0..4].copy_from_slice(&n.to_le_bytes());
                b
            },
            "compact slot of 49 B saying 49 B, where one message makes 48 B",
        ),
        (
            "the header's length not the transport's",
            {
                let mut b = good(0);
                b[0..4].copy_from_slice(&4096u32.to_le_bytes());
                b
            },
            "compact slot of 48 B saying 4096 B",
        ),
        (
            "a fragment flag",
            {
                let mut b = good(0);
                let f = u16::from_le_bytes([b[6], b[7]]) | slot::FRAG;
                b[6..8].copy_from_slice(&f.to_le_bytes());
                b
            },
            "compact slot with flags 0x0023",
        ),
        (
            "a cause that does not exist",
            {
                let mut b = good(0);
                let f = u16::from_le_bytes([b[6], b[7]]) | 3 << 8;
                b[6..8].copy_from_slice(&f.to_le_bytes());
                b
            },
            "compact slot with flags 0x0321",
        ),
        (
            "a FIN flag",
            {
                let mut b = good(0);
                let f = slot::DATA | slot::COMPACT | slot::CREDIT | slot::ACK;
                b[6..8].copy_from_slice(&f.to_le_bytes());
                b
            },
            "compact slot with flags 0x002d",
        ),
        (
            "slot 5 first",
            good(5),
            "compact slot 5 arrived where 0 was next",
        ),
        (
            "a slot from before the stream",
            good(u64::from(u32::MAX)),
            "compact slot 4294967295 (below 0) arrived where 0 was next",
        ),
    ];
    for (what, bad, says) in cases {
        let e = receive_given(vec![bad], false).expect_err(what);
        let e = e.to_string();
        assert!(
            e.contains("stream protocol broken") && e.contains(says),
            "{what}: {e}"
        );
    }
    // After good slots too: slot 3 where 2 is next.
    let e = receive_given(vec![good(0), good(1), good(3)], false).unwrap_err();
    assert!(
        e.to_string()
            .contains("compact slot 3 arrived where 2 was next"),
        "{e}"
    );
    // Lossy: ahead is lost, before the stream is stale, a bad length is
    // still refused.
    let (t, _) = receive_given(
        vec![good(0), good(3), good(u64::from(u32::MAX)), good(4)],
        true,
    )
    .unwrap();
    assert_eq!((t.msgs, t.slots, t.lost_slots), (3, 3, 2), "{t:?}");
    let mut b = good(1);
    b[0..4].copy_from_slice(&47u32.to_le_bytes());
    assert!(receive_given(vec![good(0), b], true).is_err());
}
