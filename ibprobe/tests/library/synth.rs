//! A synthetic HCA clock for the tests of `clock::hca` and `clock::hwts`.

/// Counts at `true_khz` (whatever the device reports), from `start`
/// ticks, wrapping at `mask`.
pub struct SynthHca {
    pub mask: u64,
    pub start: u64,
    pub true_khz: f64,
}

impl SynthHca {
    /// Its counter when the host clock reads `host_ns`.
    pub fn at(&self, host_ns: u64) -> u64 {
        (self.start as u128 + (host_ns as f64 * self.true_khz / 1e6) as u128) as u64 & self.mask
    }
}
