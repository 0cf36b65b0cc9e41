//! `probe::loggp_fit`.

use ibprobe::probe::loggp_fit::*;

#[test]
fn median_interval_ranks_are_the_binomial_ones() {
    // Tables of the sign test: n = 6 -> 1, 9 -> 2, 11 -> 2, 15 -> 4, 20 -> 6.
    for (n, k) in [(6, 1), (9, 2), (11, 2), (15, 4), (20, 6)] {
        assert_eq!(median_ci_rank(n), k, "n = {n}");
    }
    let e = estimate(&[5.0, 1.0, 4.0, 2.0, 3.0, 9.0, 7.0, 8.0, 6.0]);
    assert_eq!((e.value, e.low, e.high), (5.0, 2.0, 8.0));
}
