//! An HCA's completion-timestamp clock (`--hw-timestamps`): a free-running
//! counter of `completion_timestamp_mask` bits at a nominal
//! `hca_core_clock` kHz, both from `ibv_query_device_ex`. Pure: the verbs
//! calls that read it live in `sys/verbs.rs` and `verbs/`.
//!
//! Why it exists: differences of completion timestamps are taken modulo
//! the mask (the counter wraps: a 48-bit counter at 1 GHz every 3.3 days,
//! a narrower one sooner) and converted to nanoseconds with the rate
//! measured against the host clock ([`HcaClock::calibrate`], from
//! `ibv_query_rt_values_ex` readings paired with host clock reads), since
//! the nominal rate can be off by tens of ppm. A device whose mask is 0
//! (rxe) stamps nothing: [`HcaClock::new`] refuses it with the sentence
//! users see.
//!
//! Unverified on hardware here (no device of this machine stamps
//! completions); tested on synthetic clocks.

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

/// A synthetic HCA clock for tests (here and in `clock/hwts.rs`).
#[cfg(test)]
pub(crate) mod synth {
    /// Counts at `true_khz` (whatever the device reports), from `start`
    /// ticks, wrapping at `mask`.
    pub(crate) struct SynthHca {
        pub(crate) mask: u64,
        pub(crate) start: u64,
        pub(crate) true_khz: f64,
    }

    impl SynthHca {
        /// Its counter when the host clock reads `host_ns`.
        pub(crate) fn at(&self, host_ns: u64) -> u64 {
            (self.start as u128 + (host_ns as f64 * self.true_khz / 1e6) as u128) as u64 & self.mask
        }
    }
}

#[cfg(test)]
mod tests {
    use super::synth::SynthHca;
    use super::*;

    /// A 32-bit counter at 1 GHz (wraps every 4.3 s).
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
}
