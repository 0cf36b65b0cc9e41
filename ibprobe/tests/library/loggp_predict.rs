//! `probe::loggp_predict`.

use ibprobe::probe::loggp_predict::*;
use ibprobe::spec::ModelParams;

#[test]
fn the_slowest_stage_paces_the_stream() {
    let m: ModelParams = "L=5us,os=1us,or=1.5us,g=2us,G=1ns".parse().unwrap();
    let p = Params::given(&m);
    let w = Workload {
        batch: 1,
        window: 64,
        pipeline: None,
        credit_batch: 16,
        size: 32,
        loop_ns: (0.0, 0.0),
    };
    // Link: g + G*b = 2000 + 48 ns per slot of 48 B (a compact slot:
    // 16 B of header before the 32 B message).
    let r = predict(&p, &w);
    assert_eq!(r.bound, "link");
    assert!((r.msgs_per_s - 1e9 / 2048.0).abs() < 1e-6, "{r:?}");
    // Stop-and-wait: one round trip per slot.
    let r = predict(
        &p,
        &Workload {
            pipeline: Some(1),
            ..w
        },
    );
    assert_eq!(r.bound, "pipeline");
    let rtt = 1000.0 + 48.0 + 5000.0 + 1500.0 + 1000.0 + 24.0 + 5000.0 + 1500.0;
    assert!((r.msgs_per_s - 1e9 / rtt).abs() < 1e-6, "{r:?}");
}

#[test]
fn the_link_term_uses_the_segment_of_the_slot() {
    let p = Params {
        g: 1.0,
        big_g: 9.0,
        segments: vec![(24.0, 10.0, 0.5), (4112.0, 200.0, 0.1)],
        ..Params::default()
    };
    assert_eq!(p.link_at(100.0), 10.0 + 50.0);
    assert_eq!(p.link_at(5000.0), 200.0 + 500.0);
    assert_eq!(p.link_at(8.0), 10.0 + 4.0);
    assert_eq!(Params::default().link_at(8.0), 0.0);
}

#[test]
fn overheads_interpolate_between_sizes() {
    let p = Params {
        overheads: vec![(24.0, 10.0, 20.0), (1024.0, 110.0, 220.0)],
        ..Params::default()
    };
    assert_eq!(p.overheads_at(524.0), (60.0, 120.0));
    assert_eq!(p.overheads_at(2024.0), (210.0, 420.0));
    assert_eq!(p.overheads_at(0.0).0.max(0.0), p.overheads_at(0.0).0);
}
