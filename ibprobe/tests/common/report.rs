//! Fixed inputs of the report tests: histograms of known samples and a
//! calibrated clock that does not depend on the host.

use ibprobe::clock::{Calibration, Clock};
use ibprobe::stats::LatencyHistogram;

/// A histogram of exactly `values`.
pub fn hist(values: impl IntoIterator<Item = u64>) -> LatencyHistogram {
    let mut h = LatencyHistogram::new();
    for v in values {
        h.record(v);
    }
    h
}

/// A TSC clock of 2 GHz, calibrated with a 12.5 ppm spread.
pub fn clock() -> Clock {
    Clock::tsc_with(Calibration {
        hz: 2_000_000_000.0,
        windows: 5,
        window_ns: 20_000_000,
        spread_ppm: 12.5,
    })
}
