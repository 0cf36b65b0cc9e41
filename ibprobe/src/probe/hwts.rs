//! Hardware completion timestamps (`--hw-timestamps`): the HCA's clock
//! and the R-Pingmesh split of a round trip. Pure computation: no verbs
//! call, no clock read; `verbs/` reads the stamps, this file turns them
//! into nanoseconds and distributions.
//!
//! Why it exists: a round trip measured on the host clock mixes the
//! network with both hosts' software. With completion timestamps taken by
//! the HCAs (R-Pingmesh, SIGCOMM'24; `shared/ANCHORS.md`), one round trip
//! of message `seq` has six times:
//!
//! | time | where | clock |
//! |---|---|---|
//! | T1 | prober posts the probe | prober's host clock |
//! | T2 | prober's send completion | prober's HCA |
//! | T3 | responder's receive completion | responder's HCA |
//! | T4 | responder's send completion (the echo) | responder's HCA |
//! | T5 | prober's receive completion (the echo) | prober's HCA |
//! | T6 | prober sees the echo | prober's host clock |
//!
//! and splits into (only timestamps of one clock are ever subtracted):
//! - network RTT = (T5 - T2) - (T4 - T3)
//! - prober delay = (T6 - T1) - (T5 - T2)
//! - responder delay = T4 - T3
//!
//! An HCA clock is a free-running counter of `completion_timestamp_mask`
//! bits at a nominal `hca_core_clock` kHz ([`HcaClock`]): differences are
//! taken modulo the mask (it wraps), and converted to nanoseconds with the
//! rate measured against the host clock over the run
//! ([`HcaClock::calibrate`], from `ibv_query_rt_values_ex` pairs), since
//! the nominal rate can be off by tens of ppm.
//!
//! The responder reports its (T3, T4) per sequence number after the run
//! (`session.rs`); they may come in any order, some may be missing (a
//! stamp the HCA did not give, a report cut short), and a message whose
//! parts come out negative is counted as invalid, as R-Pingmesh's
//! `invalid_rtt`, instead of being recorded ([`split`]).
//!
//! Unverified on hardware here: no device of this machine has a non-zero
//! `completion_timestamp_mask` (rxe reports 0). Everything below is tested
//! on synthetic completion streams (unit tests and proptest).

use crate::stats::LatencyHistogram;

/// Why an HCA clock description cannot be used.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum HcaClockError {
    /// The device stamps no completions.
    #[error("{dev} reports completion_timestamp_mask 0: no hardware completion timestamps; run without --hw-timestamps")]
    NoTimestamps {
        /// The device name, e.g. rxe0.
        dev: String,
    },
    /// The device does not say how fast its clock runs.
    #[error("{dev} reports hca_core_clock 0: its completion timestamps cannot be converted to time; run without --hw-timestamps")]
    NoRate {
        /// The device name.
        dev: String,
    },
    /// The mask is not a run of low bits, so wraparound is undefined.
    #[error("{dev} reports completion_timestamp_mask {mask:#x}, not 2^k - 1: wraparound of its clock is undefined; run without --hw-timestamps")]
    OddMask {
        /// The device name.
        dev: String,
        /// The mask as reported.
        mask: u64,
    },
}

/// Largest drift from the nominal rate a calibration may show (ppm);
/// beyond it the pairs are taken as wrong (e.g. a clock step on the host)
/// and the nominal rate stays.
pub const MAX_DRIFT_PPM: f64 = 1000.0;

/// An HCA's completion-timestamp clock: its counter width and rate.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct HcaClock {
    /// `completion_timestamp_mask`: the counter's bits (2^k - 1).
    pub mask: u64,
    /// `hca_core_clock`: nominal rate in kHz.
    pub nominal_khz: u64,
    /// Nanoseconds per tick in use: nominal, or measured by
    /// [`HcaClock::calibrate`].
    pub ns_per_tick: f64,
}

impl HcaClock {
    /// The clock of device `dev` as `ibv_query_device_ex` describes it;
    /// refuses a mask of 0 (no timestamps: rxe), a rate of 0 and a mask
    /// that is not 2^k - 1.
    pub fn new(dev: &str, mask: u64, khz: u64) -> Result<HcaClock, HcaClockError> {
        if mask == 0 {
            return Err(HcaClockError::NoTimestamps { dev: dev.into() });
        }
        if mask & mask.wrapping_add(1) != 0 {
            return Err(HcaClockError::OddMask {
                dev: dev.into(),
                mask,
            });
        }
        if khz == 0 {
            return Err(HcaClockError::NoRate { dev: dev.into() });
        }
        Ok(HcaClock {
            mask,
            nominal_khz: khz,
            ns_per_tick: 1e6 / khz as f64,
        })
    }

    /// Ticks from `a` to `b`, forward, across at most one wrap of the
    /// counter (`b` taken as later than `a`).
    #[inline(always)]
    pub fn elapsed(&self, a: u64, b: u64) -> u64 {
        b.wrapping_sub(a) & self.mask
    }

    /// `ticks` in nanoseconds at the rate in use.
    #[inline(always)]
    pub fn ns(&self, ticks: u64) -> f64 {
        ticks as f64 * self.ns_per_tick
    }

    /// How long the counter takes to wrap, in ns (a round trip longer than
    /// this cannot be split).
    pub fn wrap_ns(&self) -> f64 {
        self.ns(self.mask).max(0.0) + self.ns_per_tick
    }

    /// Measures the rate against the host clock from (HCA ticks, host ns)
    /// pairs taken in order across the run (ibv_query_rt_values_ex next to
    /// a host clock read): the least-squares slope of host ns over
    /// unwrapped ticks. Keeps the nominal rate (and says why) when fewer
    /// than two pairs span time, or the slope is more than
    /// [`MAX_DRIFT_PPM`] off the nominal one. Consecutive pairs must be
    /// less than one wrap apart.
    pub fn calibrate(&mut self, pairs: &[(u64, u64)]) -> Calibration {
        let nominal = 1e6 / self.nominal_khz as f64;
        let Some(&(t0, h0)) = pairs.first() else {
            return Calibration::Nominal("no (HCA, host) clock pairs".into());
        };
        // Unwrap the ticks: each pair is after the one before.
        let mut x = Vec::with_capacity(pairs.len());
        let mut acc = 0u64;
        let mut prev = t0;
        for &(t, h) in pairs {
            acc = acc.wrapping_add(self.elapsed(prev, t));
            prev = t;
            x.push((acc as f64, h.wrapping_sub(h0) as i64 as f64));
        }
        let n = x.len() as f64;
        let mx = x.iter().map(|p| p.0).sum::<f64>() / n;
        let my = x.iter().map(|p| p.1).sum::<f64>() / n;
        let sxx: f64 = x.iter().map(|p| (p.0 - mx) * (p.0 - mx)).sum();
        let sxy: f64 = x.iter().map(|p| (p.0 - mx) * (p.1 - my)).sum();
        if x.len() < 2 || sxx <= 0.0 {
            return Calibration::Nominal("the clock pairs span no time".into());
        }
        let slope = sxy / sxx;
        let ppm = (slope / nominal - 1.0) * 1e6;
        if !ppm.is_finite() || ppm.abs() > MAX_DRIFT_PPM {
            return Calibration::Nominal(format!(
                "the measured rate is {ppm:.0} ppm off hca_core_clock (more than {MAX_DRIFT_PPM} ppm: a host clock step?)"
            ));
        }
        self.ns_per_tick = slope;
        Calibration::Measured { drift_ppm: ppm }
    }
}

/// What [`HcaClock::calibrate`] did.
#[derive(Clone, Debug, PartialEq)]
pub enum Calibration {
    /// The rate was measured; the HCA clock runs `drift_ppm` ppm slower
    /// (positive: each tick is longer) than `hca_core_clock` says.
    Measured {
        /// (measured ns per tick / nominal - 1) x 1e6.
        drift_ppm: f64,
    },
    /// The nominal rate stays, for the reason given.
    Nominal(String),
}

/// The prober's times of one message: T1 and T6 on the host clock (ns),
/// T2 and T5 raw HCA ticks (None: the completion carried no stamp, e.g.
/// an unsignaled send).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ProberStamp {
    /// The message's sequence number.
    pub seq: u64,
    /// T1: post, host ns.
    pub t1_ns: u64,
    /// T2: send completion, prober HCA ticks.
    pub t2: Option<u64>,
    /// T5: receive completion of the echo, prober HCA ticks.
    pub t5: Option<u64>,
    /// T6: the echo seen by the prober, host ns.
    pub t6_ns: u64,
}

/// The responder's times of one message, raw HCA ticks of its device.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ResponderStamp {
    /// The message's sequence number.
    pub seq: u64,
    /// T3: receive completion.
    pub t3: Option<u64>,
    /// T4: send completion of the echo.
    pub t4: Option<u64>,
}

/// The split of a run's round trips into three distributions, and why
/// the messages left out were left out.
#[derive(Clone, Debug, Default)]
pub struct Split {
    /// (T5 - T2) - (T4 - T3).
    pub network_rtt: LatencyHistogram,
    /// (T6 - T1) - (T5 - T2).
    pub prober_delay: LatencyHistogram,
    /// T4 - T3.
    pub responder_delay: LatencyHistogram,
    /// Messages whose prober stamps (T2 or T5) are missing.
    pub missing_prober: u64,
    /// Messages the responder reported no (or an incomplete) T3/T4 for.
    pub missing_responder: u64,
    /// Messages with a negative part (stamps out of order, a clock step):
    /// R-Pingmesh's invalid_rtt.
    pub invalid: u64,
}

impl Split {
    /// Messages split (each distribution has this many samples).
    pub fn len(&self) -> u64 {
        self.network_rtt.len()
    }

    /// True when no message could be split.
    pub fn is_empty(&self) -> bool {
        self.network_rtt.is_empty()
    }
}

/// The three parts of one round trip, ns; None when one is negative.
pub fn parts(
    p: &ProberStamp,
    (t2, t5): (u64, u64),
    (t3, t4): (u64, u64),
    pc: &HcaClock,
    rc: &HcaClock,
) -> Option<(f64, f64, f64)> {
    let host_rtt = p.t6_ns.checked_sub(p.t1_ns)? as f64;
    let prober_hca = pc.ns(pc.elapsed(t2, t5));
    let responder = rc.ns(rc.elapsed(t3, t4));
    let network = prober_hca - responder;
    let prober = host_rtt - prober_hca;
    (network >= 0.0 && prober >= 0.0).then_some((network, prober, responder))
}

/// Splits every prober record for which the responder reported its
/// stamps. `responder` is sorted by sequence number here (the report may
/// come in any order; a repeated sequence number keeps its first report).
pub fn split(
    prober: &[ProberStamp],
    pc: &HcaClock,
    responder: &mut [ResponderStamp],
    rc: &HcaClock,
) -> Split {
    responder.sort_by_key(|r| r.seq);
    let mut out = Split::default();
    for p in prober {
        let (Some(t2), Some(t5)) = (p.t2, p.t5) else {
            out.missing_prober += 1;
            continue;
        };
        let r = responder
            .binary_search_by_key(&p.seq, |r| r.seq)
            .ok()
            .map(|i| {
                // The first of equal keys: binary_search may land on any.
                let mut i = i;
                while i > 0 && responder[i - 1].seq == p.seq {
                    i -= 1;
                }
                responder[i]
            });
        let Some((Some(t3), Some(t4))) = r.map(|r| (r.t3, r.t4)) else {
            out.missing_responder += 1;
            continue;
        };
        match parts(p, (t2, t5), (t3, t4), pc, rc) {
            Some((n, pd, rd)) => {
                out.network_rtt.record(n.round() as u64);
                out.prober_delay.record(pd.round() as u64);
                out.responder_delay.record(rd.round() as u64);
            }
            None => out.invalid += 1,
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    /// A ConnectX-like clock: 64-bit mask would never wrap in a test, so
    /// a 32-bit one at 1 GHz (wraps every 4.3 s).
    fn clk32() -> HcaClock {
        HcaClock::new("mlx5_0", u32::MAX as u64, 1_000_000).unwrap()
    }

    #[test]
    fn refuses_devices_without_timestamps() {
        let e = HcaClock::new("rxe0", 0, 0).unwrap_err();
        assert_eq!(
            e.to_string(),
            "rxe0 reports completion_timestamp_mask 0: no hardware completion timestamps; run without --hw-timestamps"
        );
        assert!(matches!(
            HcaClock::new("x", 0xff, 0),
            Err(HcaClockError::NoRate { .. })
        ));
        assert!(matches!(
            HcaClock::new("x", 0xf0, 1000),
            Err(HcaClockError::OddMask { mask: 0xf0, .. })
        ));
        assert!(HcaClock::new("x", u64::MAX, 156_250).is_ok());
    }

    #[test]
    fn elapsed_wraps_with_the_mask() {
        let c = HcaClock::new("x", 0xffff, 1_000_000).unwrap();
        assert_eq!(c.elapsed(10, 30), 20);
        assert_eq!(c.elapsed(0xfff0, 0x0010), 0x20);
        let full = HcaClock::new("x", u64::MAX, 1_000_000).unwrap();
        assert_eq!(full.elapsed(u64::MAX - 1, 3), 5);
        // 156.25 MHz: 6.4 ns per tick.
        let cx = HcaClock::new("x", u64::MAX, 156_250).unwrap();
        assert!((cx.ns(10) - 64.0).abs() < 1e-9);
    }

    /// Synthetic HCA: counts at `true_khz` although it reports
    /// `nominal_khz`, starting at `start` ticks, wrapping at `mask`.
    struct SynthHca {
        mask: u64,
        start: u64,
        true_khz: f64,
    }

    impl SynthHca {
        fn at(&self, host_ns: u64) -> u64 {
            (self.start as u128 + (host_ns as f64 * self.true_khz / 1e6) as u128) as u64 & self.mask
        }
    }

    #[test]
    fn calibration_measures_drift_across_wraps() {
        // Reports 1 GHz, runs 50 ppm fast, 32-bit counter wrapping every
        // ~4.3 s; pairs every second for 20 s (several wraps).
        let hca = SynthHca {
            mask: u32::MAX as u64,
            start: 0xffff_0000,
            true_khz: 1_000_050.0,
        };
        let mut c = clk32();
        let pairs: Vec<(u64, u64)> = (0..=20u64)
            .map(|s| {
                let h = 1_000 + s * 1_000_000_000;
                (hca.at(h), h)
            })
            .collect();
        match c.calibrate(&pairs) {
            Calibration::Measured { drift_ppm } => {
                // Fast clock: shorter ticks: -50 ppm.
                assert!((drift_ppm + 50.0).abs() < 0.5, "{drift_ppm}");
            }
            other => panic!("{other:?}"),
        }
        // 3 s of HCA ticks now read as 3 s of host time (nominal: +150 us).
        let t = hca.at(1_000_000_000);
        let u = hca.at(4_000_000_000);
        let got = c.ns(c.elapsed(t, u));
        assert!((got - 3e9).abs() < 2_000.0, "{got}");
        assert!((clk32().ns(c.elapsed(t, u)) - 3e9).abs() > 100_000.0);
    }

    #[test]
    fn calibration_refuses_bad_pairs() {
        let mut c = clk32();
        assert!(matches!(c.calibrate(&[]), Calibration::Nominal(_)));
        assert!(matches!(
            c.calibrate(&[(5, 100), (5, 100)]),
            Calibration::Nominal(_)
        ));
        // Host clock stepped by a second over 1 ms of HCA time.
        let r = c.calibrate(&[(0, 0), (1_000_000, 1_001_000_000)]);
        assert!(
            matches!(r, Calibration::Nominal(ref s) if s.contains("ppm")),
            "{r:?}"
        );
        assert_eq!(c.ns_per_tick, 1.0);
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
}
