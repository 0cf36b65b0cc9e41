//! `clock::hwts`.

use crate::synth::SynthHca;
use ibprobe::clock::hca::{Calibration, HcaClock};
use ibprobe::clock::hwts::*;
use ibstats::latency::LatencyHistogram;
use proptest::prelude::*;

fn clk32() -> HcaClock {
    HcaClock::new("mlx5_0", u32::MAX as u64, 1_000_000).unwrap()
}

/// One synthetic round trip: host times and both HCAs' stamps of a
/// message with the given true parts (ns).
fn trip(
    seq: u64,
    at_ns: u64,
    (prober_pre, net_out, resp, net_back, prober_post): (u64, u64, u64, u64, u64),
    ph: &SynthHca,
    rh: &SynthHca,
) -> (ProberStamp, ResponderStamp) {
    let t1 = at_ns;
    let t2 = t1 + prober_pre;
    let t3 = t2 + net_out;
    let t4 = t3 + resp;
    let t5 = t4 + net_back;
    let t6 = t5 + prober_post;
    (
        ProberStamp {
            seq,
            t1_ns: t1,
            t2: Some(ph.at(t2)),
            t5: Some(ph.at(t5)),
            t6_ns: t6,
        },
        // The responder's host runs an unrelated clock: only its
        // HCA's ticks travel, offset by its own start.
        ResponderStamp {
            seq,
            t3: Some(rh.at(t3)),
            t4: Some(rh.at(t4)),
        },
    )
}

#[test]
fn split_recovers_known_parts_with_wrap_and_reordering() {
    let ph = SynthHca {
        mask: 0xffff_ffff,
        start: 0xffff_ff00, // wraps during the first message
        true_khz: 1_000_000.0,
    };
    let rh = SynthHca {
        mask: 0xffff_ffff_ffff,
        start: 12_345_678,
        true_khz: 156_250.0, // 6.4 ns ticks
    };
    let rc = HcaClock::new("mlx5_1", 0xffff_ffff_ffff, 156_250).unwrap();
    let (mut ps, mut rs) = (Vec::new(), Vec::new());
    for i in 0..100u64 {
        let (p, r) = trip(
            i,
            1_000 + i * 100_000,
            (700, 1_500, 3_200, 1_500, 900),
            &ph,
            &rh,
        );
        ps.push(p);
        rs.push(r);
    }
    rs.reverse(); // the report comes in any order
    rs.swap(3, 70);
    let s = split(&ps, &clk32(), &mut rs, &rc);
    assert_eq!(
        (s.len(), s.missing_prober, s.missing_responder, s.invalid),
        (100, 0, 0, 0)
    );
    // 6.4 ns ticks: T3/T4 quantized, so within one tick of truth.
    let near = |h: &LatencyHistogram, v: u64, tol: u64| {
        let (lo, hi) = (h.quantile(0.0), h.max_ns());
        assert!(lo + tol >= v && hi <= v + tol, "{lo}..{hi} vs {v}");
    };
    near(&s.network_rtt, 3_000, 10);
    near(&s.responder_delay, 3_200, 10);
    near(&s.prober_delay, 1_600, 4);
}

#[test]
fn split_counts_missing_and_invalid() {
    let h = SynthHca {
        mask: u64::MAX,
        start: 0,
        true_khz: 1_000_000.0,
    };
    let c = HcaClock::new("x", u64::MAX, 1_000_000).unwrap();
    let mk = |i| trip(i, i * 10_000, (100, 1_000, 500, 1_000, 100), &h, &h);
    let (mut p0, r0) = mk(0);
    p0.t2 = None; // unsignaled send: no T2
    let (p1, mut r1) = mk(1);
    r1.t4 = None; // responder's echo completion had no stamp
    let (p2, _) = mk(2); // never reported
    let (mut p3, r3) = mk(3);
    p3.t6_ns = p3.t1_ns + 10; // host RTT shorter than the HCA's: invalid
    let (p4, r4) = mk(4);
    let dup = ResponderStamp {
        seq: 4,
        t3: Some(0),
        t4: Some(u64::MAX), // a bogus second report of 4 is ignored
    };
    let mut rs = vec![dup, r4, r0, r1, r3];
    rs.swap(0, 1); // first report of 4 comes first
    let s = split(&[p0, p1, p2, p3, p4], &c, &mut rs, &c);
    assert_eq!(s.missing_prober, 1);
    assert_eq!(s.missing_responder, 2);
    assert_eq!(s.invalid, 1);
    assert_eq!(s.len(), 1);
    assert_eq!(s.network_rtt.max_ns(), 2_000);
}

#[test]
fn one_way_split_and_the_report_round_trip() {
    let h = SynthHca {
        mask: 0xffff,
        start: 0xff00,
        true_khz: 1_000_000.0,
    };
    let c = HcaClock::new("x", 0xffff, 1_000_000).unwrap();
    let mut stamps = Vec::new();
    let mut rs = Vec::new();
    for i in 0..10 {
        let (p, r) = trip(i, 100 + i * 1_000, (50, 300, 0, 0, 70), &h, &h);
        stamps.push(p);
        rs.push(r);
    }
    let log = ProberLog {
        clock: c,
        calibration: Calibration::Measured { drift_ppm: 3.0 },
        stamps,
        overflow: 0,
    };
    let ow = log.split_one_way();
    assert!(ow.one_way);
    assert_eq!(ow.split.len(), 10);
    assert_eq!(ow.split.network_rtt.max_ns(), 300);
    assert_eq!(ow.split.prober_delay.max_ns(), 120);
    assert!(ow.notes[0].contains("+3.0 ppm"), "{:?}", ow.notes);
    // Through JSON, as the session carries it.
    let rep = ResponderReport::new(&c, &rs, 7);
    let rep: ResponderReport = serde_json::from_str(&serde_json::to_string(&rep).unwrap()).unwrap();
    let rt = log.split_with(&rep).unwrap();
    assert_eq!(rt.split.len(), 10);
    assert_eq!(rt.split.network_rtt.max_ns(), 300);
    assert!(rt.notes.iter().any(|n| n.contains("7 more")));
    let bad = ResponderReport { version: 2, ..rep };
    assert!(log.split_with(&bad).unwrap_err().contains("version 2"));
}

proptest! {
    /// Whatever the start of either counter (wraps anywhere), its
    /// width, the order of the responder's report and the true parts,
    /// the split gives back the parts to within one tick.
    #[test]
    fn split_is_exact_up_to_a_tick(
        pstart in any::<u64>(),
        rstart in any::<u64>(),
        pbits in 32u32..=64,
        rbits in 32u32..=64,
        parts in proptest::collection::vec((0u64..5_000, 0u64..50_000, 0u64..20_000, 0u64..50_000, 0u64..5_000), 1..40),
        shuffle in any::<u64>(),
    ) {
        let mask = |b: u32| if b == 64 { u64::MAX } else { (1u64 << b) - 1 };
        let ph = SynthHca { mask: mask(pbits), start: pstart & mask(pbits), true_khz: 1_000_000.0 };
        let rh = SynthHca { mask: mask(rbits), start: rstart & mask(rbits), true_khz: 1_000_000.0 };
        let pc = HcaClock::new("p", mask(pbits), 1_000_000).unwrap();
        let rc = HcaClock::new("r", mask(rbits), 1_000_000).unwrap();
        let (mut ps, mut rs) = (Vec::new(), Vec::new());
        for (i, pt) in parts.iter().enumerate() {
            let (p, r) = trip(i as u64, 1 + i as u64 * 1_000_000, *pt, &ph, &rh);
            ps.push(p);
            rs.push(r);
        }
        let n = rs.len();
        for i in 0..n {
            rs.swap(i, (shuffle.rotate_left(i as u32) as usize) % n);
        }
        let s = split(&ps, &pc, &mut rs, &rc);
        prop_assert_eq!(s.len(), parts.len() as u64);
        prop_assert_eq!(s.invalid + s.missing_prober + s.missing_responder, 0);
        let want_net: u64 = parts.iter().map(|p| p.1 + p.3).max().unwrap();
        let want_resp: u64 = parts.iter().map(|p| p.2).max().unwrap();
        prop_assert!(s.network_rtt.max_ns().abs_diff(want_net) <= want_net / 100 + 2);
        prop_assert!(s.responder_delay.max_ns().abs_diff(want_resp) <= want_resp / 100 + 2);
    }
}
