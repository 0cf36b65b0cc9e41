//! Pipelined acks (DSM's ORIG/PIPE, seed 004): at most `depth` data slots
//! unacknowledged (depth 1 is ORIG); the receiver acks consumed slots
//! with a cumulative count, so a lost ack is covered by the next.

/// The sender's view of its acks; `None` depth: no acks are asked for.
#[derive(Clone, Copy, Debug, Default)]
pub struct Acks {
    depth: Option<u64>,
    acked: u64,
    /// Most data slots ever unacknowledged at a post.
    pub max_unacked: u64,
}

impl Acks {
    pub fn new(depth: Option<u32>) -> Acks {
        Acks {
            depth: depth.map(u64::from),
            ..Acks::default()
        }
    }

    pub fn on(&self) -> bool {
        self.depth.is_some()
    }

    /// Whether one more slot may be posted when `posted` were.
    #[inline(always)]
    pub fn allows(&self, posted: u64) -> bool {
        self.depth
            .is_none_or(|d| posted - self.acked.min(posted) < d)
    }

    #[inline(always)]
    pub fn on_post(&mut self, posted: u64) {
        if self.depth.is_some() {
            self.max_unacked = self.max_unacked.max(posted - self.acked.min(posted));
        }
    }

    /// Cumulative; true when it moved.
    #[inline(always)]
    pub fn on_ack(&mut self, acked: u64) -> bool {
        if acked > self.acked {
            self.acked = acked;
            true
        } else {
            false
        }
    }

    /// Lossy: the missing acks are taken as lost with their slots.
    pub fn forget(&mut self, posted: u64) {
        self.acked = self.acked.max(posted);
    }
}
