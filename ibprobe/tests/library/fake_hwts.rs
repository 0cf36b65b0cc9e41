//! A stamping channel for tests of the executor and the session (no HCA
//! here stamps completions).

use ibprobe::transport::{Channel, TransportError};

/// A channel whose "HCA" stamps completions on a synthetic 16-bit
/// clock (it wraps every 65 536 ticks, many times in a run): message
/// `seq`'s send completes at `base + 1000 seq + send_off` and its
/// arrival is stamped `base + 1000 seq + recv_off`, so the split's HCA
/// parts are known exactly.
pub struct Stamped<C> {
    inner: C,
    base: u64,
    send_off: u64,
    recv_off: u64,
    sent: Option<u64>,
    send_ts: Option<u64>,
    recv_ts: Option<u64>,
}

/// The synthetic counter's mask.
pub const MASK16: u64 = 0xffff;

impl<C: Channel> Stamped<C> {
    /// Wraps `inner`; stamps as the type says.
    pub fn new(inner: C, base: u64, send_off: u64, recv_off: u64) -> Self {
        Stamped {
            inner,
            base,
            send_off,
            recv_off,
            sent: None,
            send_ts: None,
            recv_ts: None,
        }
    }
    fn at(&self, seq: u64, off: u64) -> u64 {
        (self.base + seq * 1000 + off) & MASK16
    }
}

impl<C: Channel> Channel for Stamped<C> {
    fn post(&mut self, seq: u64) -> Result<(), TransportError> {
        self.sent = Some(seq);
        self.inner.post(seq)
    }
    fn poll_recv(&mut self) -> Result<Option<u64>, TransportError> {
        let got = self.inner.poll_recv()?;
        if let Some(seq) = got {
            self.recv_ts = Some(self.at(seq, self.recv_off));
        }
        Ok(got)
    }
    fn poll_send_done(&mut self) -> Result<Option<u64>, TransportError> {
        let done = self.sent.take();
        if let Some(seq) = done {
            self.send_ts = Some(self.at(seq, self.send_off));
        }
        Ok(done)
    }
    fn has_send_completions(&self) -> bool {
        true
    }
    fn is_signaled(&self, _seq: u64) -> bool {
        true
    }
    fn hw_recv_ts(&self) -> Option<u64> {
        self.recv_ts
    }
    fn hw_send_ts(&self) -> Option<u64> {
        self.send_ts
    }
    fn hw_clock(&self) -> Option<ibprobe::clock::hca::HcaClock> {
        ibprobe::clock::hca::HcaClock::new("fake0", MASK16, 1_000_000).ok()
    }
    fn info(&self) -> ibprobe::transport::TransportInfo {
        self.inner.info()
    }
}
