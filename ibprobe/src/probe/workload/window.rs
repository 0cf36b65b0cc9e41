//! The credit window (Heron, seed 000): the sender may have at most
//! `window` slots posted and not yet consumed by the receiver.
//!
//! A credit is a receive slot the receiver has freed by consuming it; the
//! receiver reports how many slots it has consumed so far (a cumulative
//! count: piggybacked on an ack, in a credit message, or written into the
//! sender's memory over rc), and the sender posts only while
//! `posted - consumed < window`.

/// The sender's view of its credits.
#[derive(Clone, Copy, Debug, Default)]
pub struct Credits {
    window: u64,
    /// Slots posted so far (data, and the final FIN), and those the
    /// receiver said it consumed (cumulative).
    posted: u64,
    consumed: u64,
    /// Most slots ever in flight at a post (never above the window).
    pub max_in_flight: u64,
}

impl Credits {
    /// A full window of `window` credits.
    pub fn new(window: u32) -> Credits {
        Credits {
            window: u64::from(window),
            ..Credits::default()
        }
    }

    /// Whether a slot may be posted now.
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

    /// Slots posted and not yet consumed.
    #[inline(always)]
    pub fn in_flight(&self) -> u64 {
        self.posted - self.consumed
    }

    /// Whether every posted slot was consumed (the stream is drained).
    #[inline(always)]
    pub fn drained(&self) -> bool {
        self.consumed >= self.posted
    }

    /// A slot was posted (the caller checked [`Credits::available`]).
    #[inline(always)]
    pub fn on_post(&mut self) {
        self.posted += 1;
        self.max_in_flight = self.max_in_flight.max(self.posted - self.consumed);
    }

    /// The receiver reports `consumed` slots (cumulative; a stale or
    /// repeated report changes nothing). True when it gave credits back.
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

    /// On a lossy transport, slots whose credit never came back within the
    /// timeout are taken as lost: their credits are restored.
    pub fn forget_in_flight(&mut self) -> u64 {
        let n = self.posted - self.consumed;
        self.consumed = self.posted;
        n
    }
}
