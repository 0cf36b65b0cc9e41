//! Batching with a flush timer (Derecho's SMC batching, seed 003): the
//! open slot is posted when it holds `k` messages (fill), `--flush T`
//! after its first message (timer), or at the end of a burst or of the
//! run (explicit). k = 1 is no batching.

use super::slot::Cause;

#[derive(Clone, Copy, Debug, Default)]
pub struct Batcher {
    k: u32,
    /// 0: no timer.
    flush_ticks: u64,
    /// Messages in the open slot, and when its first was handed over.
    open: u32,
    first: u64,
    /// Posts by cause: fill, timer, explicit.
    pub flushes: [u64; 3],
}

impl Batcher {
    pub fn new(k: u32, flush_ticks: u64) -> Batcher {
        Batcher {
            k: k.max(1),
            flush_ticks,
            ..Batcher::default()
        }
    }

    #[inline(always)]
    pub fn open(&self) -> u32 {
        self.open
    }

    /// True when the batch is now full.
    #[inline(always)]
    pub fn add(&mut self, now: u64) -> bool {
        if self.open == 0 {
            self.first = now;
        }
        self.open += 1;
        self.open >= self.k
    }

    /// When the open, partial batch must go (`None`: empty, or no timer).
    #[inline(always)]
    pub fn deadline(&self) -> Option<u64> {
        (self.open > 0 && self.flush_ticks > 0).then(|| self.first.wrapping_add(self.flush_ticks))
    }

    #[inline(always)]
    pub fn posted(&mut self, cause: Cause) {
        self.flushes[cause as usize] += 1;
        self.open = 0;
    }

    pub fn reset_counts(&mut self) {
        self.flushes = [0; 3];
    }
}
