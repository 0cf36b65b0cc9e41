//! `clock::hca`.

use crate::synth::SynthHca;
use ibprobe::clock::hca::*;

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
