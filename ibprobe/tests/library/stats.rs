//! `stats`.

use ibprobe::stats::*;

#[test]
fn empty() {
    let h = LatencyHistogram::new();
    let s = h.summary();
    assert!(h.is_empty());
    assert_eq!(s.count, 0);
    assert_eq!((s.min_ns, s.p50_ns, s.p9999_ns, s.max_ns), (0, 0, 0, 0));
    assert_eq!((s.mean_ns, s.stdev_ns, s.over_10us), (0.0, 0.0, 0.0));
}

#[test]
fn one_sample() {
    let mut h = LatencyHistogram::new();
    h.record(786_123);
    let s = h.summary();
    assert_eq!(s.count, 1);
    // Clamped into [min, max]: every percentile is the sample itself.
    for p in [s.min_ns, s.p50_ns, s.p99_ns, s.p9999_ns, s.max_ns] {
        assert_eq!(p, 786_123);
    }
    assert_eq!(s.mean_ns, 786_123.0);
    assert_eq!(s.stdev_ns, 0.0);
    assert_eq!(s.over_10us_count, 1);
}

#[test]
fn huge_values_are_clamped_but_max_is_exact() {
    let mut h = LatencyHistogram::new();
    h.record(1_000);
    h.record(u64::MAX);
    h.record(MAX_NS * 3);
    assert_eq!(h.len(), 3);
    assert_eq!(h.clamped(), 2);
    let s = h.summary();
    assert_eq!(s.max_ns, u64::MAX);
    assert_eq!(s.min_ns, 1_000);
    assert!(s.p99_ns >= MAX_NS && s.p99_ns <= MAX_NS + MAX_NS / 1000);
    let mean = (1_000.0 + 2.0 * MAX_NS as f64) / 3.0;
    assert!((s.mean_ns - mean).abs() / mean < 1e-9);
    assert_eq!(h.to_hdr().len(), 3);
}

#[test]
fn zero_ns_sample_counts() {
    let mut h = LatencyHistogram::new();
    h.record(0);
    h.record(0);
    assert_eq!(h.summary().min_ns, 0);
    assert_eq!(h.summary().count, 2);
    assert_eq!(h.summary().p50_ns, 0);
}

#[test]
fn reset_forgets_everything() {
    let mut h = LatencyHistogram::new();
    h.record(50_000);
    h.reset();
    assert_eq!(h.summary(), LatencyHistogram::new().summary());
}
