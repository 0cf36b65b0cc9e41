//! `stats`.

use hdrhistogram::Histogram;
use ibstats::latency::*;
use proptest::prelude::*;

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

/// Nearest-rank percentile on sorted samples (the module's definition).
fn exact_quantile(sorted: &[u64], q: f64) -> u64 {
    let n = sorted.len();
    let rank = ((q * n as f64).ceil() as usize).max(1);
    sorted[rank - 1]
}

/// The highest value of exact's bucket: at or above it by at most
/// 0.1% (3 significant digits). A 0 ns sample is bucketed as 1 ns.
fn within_precision(got: u64, exact: u64) -> bool {
    got >= exact && (got - exact) as f64 <= (exact as f64 * 0.001).max(1.0)
}

proptest! {
    /// `buckets()` gives every sample back in its bucket: the counts
    /// add up, values ascend, and each sample is at most its bucket's
    /// highest value and within 0.1% of it; sum and max are exact.
    #[test]
    fn buckets_account_for_every_sample(samples in prop::collection::vec(1u64..50_000_000, 1..300)) {
        let mut h = LatencyHistogram::new();
        for &s in &samples {
            h.record(s);
        }
        let b: Vec<(u64, u64)> = h.buckets().collect();
        prop_assert_eq!(b.iter().map(|&(_, c)| c).sum::<u64>(), samples.len() as u64);
        prop_assert!(b.windows(2).all(|w| w[0].0 < w[1].0));
        for &s in &samples {
            let &(hi, _) = b.iter().find(|&&(hi, _)| hi >= s).expect("a bucket holds it");
            prop_assert!(within_precision(hi, s), "sample {} in bucket up to {}", s, hi);
        }
        prop_assert_eq!(h.sum_ns(), samples.iter().map(|&s| s as u128).sum::<u128>());
        prop_assert_eq!(h.max_ns(), *samples.iter().max().unwrap());
        let half = h.halved();
        prop_assert_eq!(half.buckets().map(|(_, c)| c).sum::<u64>(), samples.len() as u64);
    }
}

fn check(samples: &[u64]) -> Result<(), TestCaseError> {
    let mut h = LatencyHistogram::new();
    for &s in samples {
        h.record(s);
    }
    let s = h.summary();
    let mut sorted = samples.to_vec();
    sorted.sort_unstable();
    let n = sorted.len();
    prop_assert_eq!(s.count, n as u64);
    prop_assert_eq!(s.max_ns, sorted[n - 1]);
    prop_assert_eq!(s.min_ns, sorted[0]);
    for (q, got) in [
        (0.5, s.p50_ns),
        (0.9, s.p90_ns),
        (0.99, s.p99_ns),
        (0.999, s.p999_ns),
        (0.9999, s.p9999_ns),
    ] {
        let exact = exact_quantile(&sorted, q);
        prop_assert!(
            within_precision(got, exact),
            "p{} = {} but exact nearest-rank value is {}",
            q * 100.0,
            got,
            exact
        );
    }
    let clamped: Vec<f64> = sorted.iter().map(|&v| v.min(MAX_NS) as f64).collect();
    let mean = clamped.iter().sum::<f64>() / n as f64;
    let var = clamped.iter().map(|v| (v - mean) * (v - mean)).sum::<f64>() / n as f64;
    let stdev = var.sqrt();
    prop_assert!(
        (s.mean_ns - mean).abs() <= mean.abs() * 1e-3 + 1e-9,
        "mean {} vs exact {}",
        s.mean_ns,
        mean
    );
    prop_assert!(
        (s.stdev_ns - stdev).abs() <= stdev * 1e-3 + 1e-6 * mean.max(1.0),
        "stdev {} vs exact {}",
        s.stdev_ns,
        stdev
    );
    let over = sorted.iter().filter(|&&v| v > 10_000).count() as u64;
    prop_assert_eq!(s.over_10us_count, over);
    prop_assert_eq!(s.over_10us, over as f64 / n as f64);
    Ok(())
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(256))]

    #[test]
    fn summary_matches_sorted_vector(samples in prop::collection::vec(0u64..5_000_000, 1..3000)) {
        check(&samples)?;
    }

    #[test]
    fn summary_matches_with_a_heavy_tail(
        body in prop::collection::vec(500u64..3_000, 1..2000),
        tail in prop::collection::vec(9_000u64..2_000_000_000, 0..40),
    ) {
        let mut v = body;
        v.extend(tail);
        check(&v)?;
    }

    #[test]
    fn merge_equals_recording_everything(
        a in prop::collection::vec(1u64..1_000_000, 1..500),
        b in prop::collection::vec(1u64..1_000_000, 1..500),
    ) {
        let (mut ha, mut hb, mut all) = (LatencyHistogram::new(), LatencyHistogram::new(), LatencyHistogram::new());
        for &x in &a { ha.record(x); all.record(x); }
        for &x in &b { hb.record(x); all.record(x); }
        ha.merge(&hb);
        prop_assert_eq!(ha.summary(), all.summary());
    }
}

proptest! {
    #[test]
    fn buckets_are_hdrhistograms(samples in prop::collection::vec(prop_oneof![0u64..5000, 0u64..u64::MAX, 0u64..2 * MAX_NS], 1..400)) {
        let mut ours = LatencyHistogram::new();
        let mut theirs = Histogram::<u64>::new_with_bounds(1, MAX_NS, 3).expect("bounds");
        for &v in &samples {
            ours.record(v);
            theirs.record(v.clamp(1, MAX_NS)).expect("in bounds");
        }
        let a: Vec<(u64, u64)> = ours.to_hdr().iter_recorded().map(|v| (v.value_iterated_to(), v.count_at_value())).collect();
        let b: Vec<(u64, u64)> = theirs.iter_recorded().map(|v| (v.value_iterated_to(), v.count_at_value())).collect();
        prop_assert_eq!(a, b);
        prop_assert_eq!(ours.len(), theirs.len());
    }
}

#[test]
fn halved_is_rtt_over_two() {
    let mut h = LatencyHistogram::new();
    let mut exact = Vec::new();
    for i in 0..10_000u64 {
        let v = 1_500 + (i * 7919) % 30_000;
        h.record(v);
        exact.push(v / 2);
    }
    exact.sort_unstable();
    let s = h.halved().summary();
    assert_eq!(s.max_ns, exact[exact.len() - 1]);
    assert_eq!(s.min_ns, exact[0]);
    for (q, got) in [(0.5, s.p50_ns), (0.99, s.p99_ns)] {
        let e = exact_quantile(&exact, q);
        assert!(
            got.abs_diff(e) as f64 <= e as f64 * 0.002 + 1.0,
            "p{q}: {got} vs {e}"
        );
    }
    let mean = exact.iter().sum::<u64>() as f64 / exact.len() as f64;
    assert!((s.mean_ns - mean).abs() <= 0.5 + mean * 1e-3);
}
