//! The server side of a session after the handshake ([`serve`]: echo
//! until the client is done), and the `--hw-timestamps` exchange that
//! ends it: the server's report after the client's Done ([`hw_finish`]).

use std::sync::atomic::AtomicBool;
use std::time::{Duration, Instant};

use super::error::{err, protocol, SessionError};
use crate::clock::hwts::{ResponderLog, ResponderReport};
use crate::clock::Clock;
use crate::probe::config::Receiver;
use crate::probe::executor::{self, one_message::hw_pair};
use crate::probe::outcome::Outcome;
use crate::probe::session::oob::{Closing, Done, Oob};
use crate::probe::workload::EchoEnd;
use crate::transport::{Channel, TransportError};

/// How a served session ended well.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ServeEnd {
    Done { sent: u64 },
    Closed,
    Interrupted,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Served {
    pub echoed: u64,
    pub end: ServeEnd,
}

/// Echoes on `ch` until the client says Done, vanishes or `stop` is set.
/// A finished client may close its transport before its Done is read, so
/// after a transport error the server waits up to `grace` for the Done.
pub fn serve(
    oob: &mut Oob,
    ch: &mut dyn Channel,
    clock: &Clock,
    stop: &AtomicBool,
    cpu: Option<usize>,
    receiver: &Receiver,
    grace: Duration,
) -> Result<Served, SessionError> {
    let peer = oob.peer_addr();
    let mut closing = None;
    // --hw-timestamps: each echo's T3/T4 and HCA/host clock pairs around
    // the session; the report goes to the client after its Done.
    let mut hw = ch.hw_clock().map(|c| (c, ResponderLog::new(), Vec::new()));
    if let Some((_, _, pairs)) = hw.as_mut() {
        hw_pair(ch, clock, pairs);
    }
    let still_on = || match oob.poll_closing() {
        Closing::Open => true,
        other => {
            closing = Some(other);
            false
        }
    };
    let log = hw.as_mut().map(|h| &mut h.1);
    let r = executor::serve(ch, clock, stop, cpu, receiver, still_on, log);
    if let (Some((mut c, log, mut pairs)), Some(Closing::Done(_))) = (hw, &closing) {
        hw_pair(ch, clock, &mut pairs);
        let _ = c.calibrate(&pairs);
        oob.send(&ResponderReport::new(&c, &log.stamps, log.overflow))
            .map_err(protocol)?;
    }
    let served = |echoed, end| Ok(Served { echoed, end });
    let echoed = match r {
        Ok((n, EchoEnd::Interrupted)) => return served(n, ServeEnd::Interrupted),
        Ok((n, EchoEnd::Finished)) => n,
        Err(e) => {
            let t0 = Instant::now();
            loop {
                match oob.poll_closing() {
                    Closing::Open if t0.elapsed() < grace => {
                        std::thread::sleep(Duration::from_millis(5))
                    }
                    Closing::Done(d) => return served(0, ServeEnd::Done { sent: d.sent }),
                    _ => {
                        let detail = match e {
                            TransportError::PeerLost(why) => {
                                format!("client {peer} lost mid-run: {why}")
                            }
                            e => format!("client {peer}: {e}"),
                        };
                        return Err(err("peer_lost", detail));
                    }
                }
            }
        }
    };
    match closing {
        Some(Closing::Done(d)) => served(echoed, ServeEnd::Done { sent: d.sent }),
        Some(Closing::Gone(e)) => Err(err(
            "peer_lost",
            format!("client {peer} vanished after {echoed} messages: {e}"),
        )),
        _ => served(echoed, ServeEnd::Closed),
    }
}

/// The client's side of `--hw-timestamps` after its run: says Done, and
/// splits `outcome`'s round trips with the server's [`ResponderReport`].
pub fn hw_finish(oob: &mut Oob, outcome: &mut Outcome) -> Result<(), SessionError> {
    let sent = outcome.sent + outcome.warmup_count;
    hw_finish_after(oob, outcome, sent)
}

/// [`hw_finish`] for a session that sent `sent` messages in all.
pub(super) fn hw_finish_after(
    oob: &mut Oob,
    outcome: &mut Outcome,
    sent: u64,
) -> Result<(), SessionError> {
    let Some(log) = outcome.hw.as_ref() else {
        return Ok(());
    };
    oob.send(&Done {
        sent,
        interrupted: outcome.interrupted,
    })
    .map_err(protocol)?;
    let rep: ResponderReport = oob.recv("hardware timestamp report").map_err(protocol)?;
    outcome.hw_split = Some(log.split_with(&rep).map_err(protocol)?);
    Ok(())
}
