//! The client end as a daemon uses it ([`ClientSession`]): one
//! connection to a responder, the handshake once, any number of rounds.

use std::net::SocketAddr;
use std::sync::atomic::AtomicBool;
use std::time::Duration;

use super::error::{err, SessionError};
use super::handshake::{open_client, OneMessage};
use super::serve::hw_finish_after;
use crate::clock::Clock;
use crate::probe::config::{Mode, ProbeConfig};
use crate::probe::executor::{self, RunError};
use crate::probe::outcome::Outcome;
use crate::probe::session::auth::Secret;
use crate::probe::session::oob::{Done, Oob};
use crate::spec::ChannelSpec;
use crate::transport::Channel;

pub struct ClientSession {
    oob: Oob,
    ch: Box<dyn Channel>,
    sent: u64,
}

impl ClientSession {
    /// Connects to `addr`, proves the mesh `secret` if given, and opens
    /// the channel `spec` describes.
    pub fn connect(
        addr: SocketAddr,
        spec: &ChannelSpec,
        timeout: Duration,
        secret: Option<&Secret>,
    ) -> Result<ClientSession, SessionError> {
        let mut oob = Oob::connect(&addr.to_string(), addr.port(), timeout)
            .map_err(|e| err("connect", e))?
            .with_secret(secret.cloned());
        let ch = open_client(&mut oob, spec, &OneMessage::default())?;
        Ok(ClientSession { oob, ch, sent: 0 })
    }

    /// Runs one round (`cfg.mode` is forced to a round trip).
    pub fn round(
        &mut self,
        cfg: &ProbeConfig,
        clock: &Clock,
        stop: &AtomicBool,
    ) -> Result<Outcome, RunError> {
        let cfg = ProbeConfig {
            mode: Mode::RoundTrip,
            ..cfg.clone()
        };
        let r = executor::run(&cfg, self.ch.as_mut(), clock, stop, None);
        let o = match &r {
            Ok(o) => o,
            Err(e) => &e.outcome,
        };
        self.sent += o.sent + o.warmup_count;
        r
    }

    /// [`ClientSession::finish`], and when `last` (the last round's
    /// outcome) has hardware timestamps, [`hw_finish`](super::hw_finish).
    pub fn finish_split(mut self, last: &mut Outcome) -> Result<(), SessionError> {
        if last.hw.is_none() {
            self.finish();
            return Ok(());
        }
        hw_finish_after(&mut self.oob, last, self.sent)
    }

    /// Tells the responder the session is over.
    pub fn finish(mut self) {
        let _ = self.oob.send(&Done {
            sent: self.sent,
            interrupted: false,
        });
    }
}
