//! Holm's step-down correction of a family of p-values.

/// Holm-adjusted p-values, in the order given: the i-th smallest p is
/// multiplied by (m - i), running maxima keep the order, capped at 1.
/// Rejecting where the adjusted p < alpha controls the chance of any
/// false rejection in the family at alpha.
pub fn adjust(p: &[f64]) -> Vec<f64> {
    let m = p.len();
    let mut idx: Vec<usize> = (0..m).collect();
    idx.sort_by(|&a, &b| p[a].total_cmp(&p[b]));
    let mut out = vec![0.0; m];
    let mut running: f64 = 0.0;
    for (rank, &i) in idx.iter().enumerate() {
        let adj = ((m - rank) as f64 * p[i]).min(1.0);
        running = running.max(adj);
        out[i] = running;
    }
    out
}

#[cfg(test)]
mod tests {
    #[test]
    fn holm_by_hand() {
        // m = 3: 0.01*3 = 0.03, 0.04*2 = 0.08, 0.03 -> max(0.03, 0.03*... ) order.
        let a = super::adjust(&[0.01, 0.04, 0.03]);
        // sorted: 0.01 (x3 = 0.03), 0.03 (x2 = 0.06), 0.04 (x1 = 0.04 -> 0.06 by monotonicity)
        assert_eq!(a.len(), 3);
        assert!((a[0] - 0.03).abs() < 1e-12);
        assert!((a[2] - 0.06).abs() < 1e-12);
        assert!((a[1] - 0.06).abs() < 1e-12);
        assert_eq!(super::adjust(&[0.6, 0.9]), vec![1.0, 1.0]);
        assert_eq!(super::adjust(&[0.02]), vec![0.02]);
    }
}
