//! Native (sparse, exponential) histogram buckets, schema 3, as
//! Prometheus and client_golang define them.
//!
//! Why it exists: `ibprobe_latency_seconds` carries a native histogram in
//! the protobuf format, and the store keeps its own buckets so a scrape
//! writes them straight out. Bucket `k` holds values in
//! (2^((k-1)/8), 2^(k/8)] seconds; the index is computed from the
//! float's exponent and mantissa exactly as client_golang does, so the
//! same value lands in the same bucket as with any other client.

/// The schema: 2^(2^-3), buckets about 9% wide.
pub const SCHEMA: i8 = 3;

/// The zero bucket's width: client_golang's default, 2^-128.
pub const ZERO_THRESHOLD: f64 = 2.938_735_877_055_719e-39;

/// Bucket bounds of one power of two for schema 3: 2^(i/8) / 2.
const BOUNDS: [f64; 8] = [
    0.5,
    0.545_253_866_332_628_8,
    0.594_603_557_501_360_5,
    0.648_419_777_325_504_8,
    std::f64::consts::FRAC_1_SQRT_2,
    0.771_105_412_703_970_4,
    0.840_896_415_253_714_5,
    0.917_004_043_204_671_2,
];

/// The bucket index of a positive, finite value `v` (seconds).
pub fn index(v: f64) -> i32 {
    let (frac, exp) = frexp(v);
    let bucket = BOUNDS.partition_point(|b| *b < frac) as i32;
    bucket + (exp - 1) * BOUNDS.len() as i32
}

/// `v = frac * 2^exp` with frac in [0.5, 1), for positive normal and
/// subnormal `v`.
fn frexp(v: f64) -> (f64, i32) {
    let bits = v.to_bits();
    let exponent = ((bits >> 52) & 0x7ff) as i32;
    let mantissa = bits & ((1u64 << 52) - 1);
    if exponent == 0 {
        // Subnormal: scale into the normal range first.
        let (f, e) = frexp(v * 2f64.powi(64));
        return (f, e - 64);
    }
    let frac = f64::from_bits((1022u64 << 52) | mantissa);
    (frac, exponent - 1022)
}

/// Sparse bucket counts, ascending by index.
pub type Buckets = Vec<(i32, u64)>;

/// Adds `n` to bucket `i`, keeping `b` sorted.
pub fn add(b: &mut Buckets, i: i32, n: u64) {
    match b.binary_search_by_key(&i, |&(k, _)| k) {
        Ok(at) => b[at].1 += n,
        Err(at) => b.insert(at, (i, n)),
    }
}

/// The spans (offset, length) and count deltas the protobuf format wants:
/// a gap of up to two empty buckets is carried as zero deltas (cheaper
/// than a new span), as client_golang does.
pub fn spans_and_deltas(b: &Buckets, spans: &mut Vec<(i32, u32)>, deltas: &mut Vec<i64>) {
    spans.clear();
    deltas.clear();
    let mut previous = 0i64;
    let mut next_index = 0i32;
    for (n, &(index, count)) in b.iter().enumerate() {
        let count = i64::try_from(count).unwrap_or(i64::MAX);
        let gap = index - next_index;
        if n == 0 || gap > 2 {
            spans.push((gap, 0));
        } else {
            for _ in 0..gap {
                deltas.push(-previous);
                previous = 0;
                if let Some((_, len)) = spans.last_mut() {
                    *len += 1;
                }
            }
        }
        deltas.push(count - previous);
        previous = count;
        if let Some((_, len)) = spans.last_mut() {
            *len += 1;
        }
        next_index = index + 1;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bounds_are_powers_of_the_base() {
        for (i, b) in BOUNDS.iter().enumerate() {
            assert!((b - 2f64.powf(i as f64 / 8.0) / 2.0).abs() < 1e-15, "{i}");
        }
    }

    #[test]
    fn a_bucket_holds_values_up_to_its_upper_bound() {
        // 1 s is the upper bound of bucket 0; just above it is bucket 1.
        assert_eq!(index(1.0), 0);
        assert_eq!(index(1.0 + 1e-12), 1);
        assert_eq!(index(2.0), 8);
        assert_eq!(index(0.5), -8);
        for k in [-240, -160, -100, -1, 0, 1, 37] {
            let upper = 2f64.powf(k as f64 / 8.0);
            assert_eq!(index(upper * (1.0 + 1e-9)), k + 1, "just above bucket {k}");
            assert_eq!(
                index(upper * (1.0 - 1e-9)),
                k,
                "just below {k}'s upper bound"
            );
        }
        assert!(index(1e-300) < -7000);
        assert!(index(5e-324) < index(1e-300), "subnormal");
    }

    #[test]
    fn small_gaps_become_zero_deltas() {
        let b: Buckets = vec![(-160, 1), (-158, 3), (-150, 2)];
        let (mut s, mut d) = (Vec::new(), Vec::new());
        spans_and_deltas(&b, &mut s, &mut d);
        assert_eq!(s, vec![(-160, 3), (7, 1)]);
        assert_eq!(d, vec![1, -1, 3, -1]);
    }
}
