//! The order in which variants run: randomised blocks, mirrored in pairs.

/// The run order of `rounds` blocks of `variants` variants (0 is the
/// baseline): each block runs every variant once; odd blocks are a random
/// permutation, and each even block runs the block before it backwards
/// (A B | B A for two variants), so a drift that is linear over a pair of
/// blocks adds the same to every variant. `seed` makes it reproducible
/// (the report prints it).
pub fn schedule(variants: usize, rounds: usize, seed: u64) -> Vec<Vec<usize>> {
    let mut rng = fastrand::Rng::with_seed(seed);
    let mut out: Vec<Vec<usize>> = Vec::with_capacity(rounds);
    for r in 0..rounds {
        let block = if r % 2 == 1 {
            let mut b = out[r - 1].clone();
            b.reverse();
            b
        } else {
            let mut b: Vec<usize> = (0..variants).collect();
            rng.shuffle(&mut b);
            b
        };
        out.push(block);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::schedule;

    #[test]
    fn every_block_runs_every_variant_once_and_pairs_mirror() {
        for seed in 0..20 {
            let s = schedule(3, 6, seed);
            assert_eq!(s.len(), 6);
            for b in &s {
                let mut c = b.clone();
                c.sort();
                assert_eq!(c, [0, 1, 2]);
            }
            for pair in s.chunks(2) {
                let mut back = pair[1].clone();
                back.reverse();
                assert_eq!(pair[0], back);
            }
        }
        assert_eq!(schedule(2, 4, 7), schedule(2, 4, 7));
        // Not always the same order: over seeds, both AB and BA start.
        let firsts: std::collections::BTreeSet<usize> =
            (0..40).map(|s| schedule(2, 2, s)[0][0]).collect();
        assert_eq!(firsts.len(), 2);
    }
}
