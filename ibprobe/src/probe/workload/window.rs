//! The credit window (Heron, seed 000): the sender posts only while
//! `posted - consumed < window`, the receiver reporting the slots it
//! consumed as a cumulative count (piggybacked on an ack, in a credit
//! message, or written into the sender's memory over rc).

/// The sender's view of its credits.
#[derive(Clone, Copy, Debug, Default)]
pub struct Credits {
    window: u64,
    /// Slots posted (data and FIN), and consumed (cumulative).
    posted: u64,
    consumed: u64,
    /// Most slots ever in flight at a post.
    pub max_in_flight: u64,
}

impl Credits {
    pub fn new(window: u32) -> Credits {
        Credits {
            window: u64::from(window),
            ..Credits::default()
        }
    }

    #[inline(always)]
    pub fn available(&self) -> bool {
        self.posted - self.consumed < self.window
    }

    #[inline(always)]
    pub fn consumed(&self) -> u64 {
        self.consumed
    }

    #[inline(always)]
    pub fn posted(&self) -> u64 {
        self.posted
    }

    #[inline(always)]
    pub fn in_flight(&self) -> u64 {
        self.posted - self.consumed
    }

    #[inline(always)]
    pub fn drained(&self) -> bool {
        self.consumed >= self.posted
    }

    #[inline(always)]
    pub fn on_post(&mut self) {
        self.posted += 1;
        self.max_in_flight = self.max_in_flight.max(self.posted - self.consumed);
    }

    /// The receiver reports `consumed` slots (cumulative: a stale report
    /// changes nothing). True when it gave credits back.
    #[inline(always)]
    pub fn on_return(&mut self, consumed: u64) -> bool {
        let c = consumed.min(self.posted);
        if c > self.consumed {
            self.consumed = c;
            true
        } else {
            false
        }
    }

    /// Lossy: the slots in flight are taken as lost, their credits back.
    pub fn forget_in_flight(&mut self) -> u64 {
        let n = self.posted - self.consumed;
        self.consumed = self.posted;
        n
    }
}
