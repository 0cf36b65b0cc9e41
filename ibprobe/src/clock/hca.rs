//! An HCA's completion-timestamp clock (`--hw-timestamps`): a free-running
//! counter of `completion_timestamp_mask` bits at a nominal
//! `hca_core_clock` kHz, both from `ibv_query_device_ex` (read in
//! `sys/verbs.rs` and `verbs/`). Differences are taken modulo the mask
//! and converted with the rate measured against the host clock
//! ([`HcaClock::calibrate`]): the nominal rate can be off by tens of ppm.
//! Unverified on hardware here; tested on synthetic clocks.

/// Why an HCA clock description cannot be used.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum HcaClockError {
    #[error("{dev} reports completion_timestamp_mask 0: no hardware completion timestamps; run without --hw-timestamps")]
    NoTimestamps { dev: String },
    #[error("{dev} reports hca_core_clock 0: its completion timestamps cannot be converted to time; run without --hw-timestamps")]
    NoRate { dev: String },
    #[error("{dev} reports completion_timestamp_mask {mask:#x}, not 2^k - 1: wraparound of its clock is undefined; run without --hw-timestamps")]
    OddMask { dev: String, mask: u64 },
}

/// Largest drift from the nominal rate a calibration may show (ppm);
/// beyond it the pairs are taken as wrong (e.g. a clock step on the host)
/// and the nominal rate stays.
pub const MAX_DRIFT_PPM: f64 = 1000.0;

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
    /// The clock of device `dev` as `ibv_query_device_ex` describes it, or
    /// why it cannot be used (a mask of 0, rxe's, stamps nothing).
    pub fn new(dev: &str, mask: u64, khz: u64) -> Result<HcaClock, HcaClockError> {
        let dev = dev.to_string();
        match (mask, khz) {
            (0, _) => Err(HcaClockError::NoTimestamps { dev }),
            (m, _) if m & m.wrapping_add(1) != 0 => Err(HcaClockError::OddMask { dev, mask }),
            (_, 0) => Err(HcaClockError::NoRate { dev }),
            _ => Ok(HcaClock {
                mask,
                nominal_khz: khz,
                ns_per_tick: 1e6 / khz as f64,
            }),
        }
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
        let (mut acc, mut prev) = (0u64, t0);
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
    Measured { drift_ppm: f64 },
    /// The nominal rate stays, for the reason given.
    Nominal(String),
}
