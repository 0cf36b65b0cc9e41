//! Fixed inputs of the report tests: histograms of known samples and a
//! calibrated clock that does not depend on the host.

use ibprobe::clock::{Calibration, Clock};
use ibprobe::probe::outcome::Outcome;
use ibstats::latency::LatencyHistogram;

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

/// Loopback: one-way = 600..=1599 ns plus one 250 us outlier (n = 1001),
/// send-completion = 400..=1399 ns (n = 1000).
pub fn loopback_outcome() -> Outcome {
    Outcome {
        one_way: Some(hist((600..1600).chain([250_000]))),
        send_done: Some(hist(400..1400)),
        warmup_count: 100,
        warmup_max_ns: 750_000,
        sent: 1004,
        lost: 3,
        steps: 1004,
        missed_steps: 5,
        elapsed_ns: 1_234_567_890,
        notes: vec!["pinned to CPU 1".into()],
        ..Outcome::default()
    }
}

/// Client: RTT = 1000..=1999 ns (n = 1000), so RTT/2 = 500..=999.
pub fn client_outcome() -> Outcome {
    Outcome {
        rtt: Some(hist(1000..2000)),
        sent: 1000,
        warmup_count: 10,
        warmup_max_ns: 1500,
        elapsed_ns: 2_000_000,
        ..Outcome::default()
    }
}
