//! `probe::stream_cost`.

use ibprobe::clock::Clock;
use ibprobe::probe::stream_cost::*;
use ibprobe::spec::StreamSpec;

#[test]
fn the_loops_run_to_the_end_on_free_ends() {
    let spec = StreamSpec {
        batch: 4,
        slot_size: 256,
        ..StreamSpec::default()
    };
    let (s, r) = loop_cost_ns(&spec, 32, &Clock::monotonic(), false).unwrap();
    assert!(s > 0.0 && r > 0.0, "{s} {r}");
}

/// The receiver's free end keeps to the pipeline as a sender would
/// (`loggp --predict --pipelines 1` failed: "64 slots unacknowledged
/// at the receiver, above --pipeline 1").
#[test]
fn the_free_source_keeps_to_the_pipeline() {
    for d in [1, 2, 4] {
        let spec = StreamSpec {
            pipeline: Some(d),
            slot_size: 256,
            ..StreamSpec::default()
        };
        let (s, r) = loop_cost_ns(&spec, 32, &Clock::monotonic(), false).unwrap();
        assert!(s > 0.0 && r > 0.0, "pipeline {d}: {s} {r}");
    }
}
