//! A paired workload's answering side as a server runs it for a client
//! on another host. The server knows a workload only by the word its
//! client's Hello names (`spec::StreamWorkload`): [`serve_paired`] is
//! written by `ibprobe/build.rs`, one arm per `impl Served for TYPE` in
//! the workload folder, sending its `WORD` to [`serve_one`].

use super::place::pin;
use crate::probe::workload::seam::{Answer, Asked, ReplyTo, Served};
use crate::spec::StreamWorkload;
use crate::transport::stream::SlotEnd;
use crate::transport::TransportError;

/// How the server's end of a served workload ended: its word, what the
/// server says after "client PEER WORD done: ", whether Ctrl-C ended it.
#[derive(Debug)]
pub struct Answered {
    pub word: StreamWorkload,
    pub said: String,
    pub interrupted: bool,
}

/// Why a served workload failed: pinning or its loop, or the reply to
/// its client.
#[derive(Debug, thiserror::Error)]
pub enum ServeError<E> {
    #[error("{0}: {1}")]
    Loop(StreamWorkload, TransportError),
    #[error("{0}")]
    Reply(E),
}

/// Runs `W`'s answering side on `end`, on this thread pinned to `cpu`,
/// then sends its reply to `client`.
pub fn serve_one<W: Served, R: ReplyTo>(
    end: &mut dyn SlotEnd,
    asked: &Asked<'_>,
    cpu: Option<usize>,
    client: &mut R,
) -> Result<Answered, ServeError<R::Error>> {
    let failed = |e| ServeError::Loop(W::WORD, e);
    if let Some(c) = cpu {
        pin(c, "pin to --cpu (sched_setaffinity)").map_err(failed)?;
    }
    let Answer {
        said,
        reply,
        interrupted,
    } = W::serve(end, asked).map_err(failed)?;
    if let Some(r) = reply {
        client.reply(&r).map_err(ServeError::Reply)?;
    }
    Ok(Answered {
        word: W::WORD,
        said,
        interrupted,
    })
}

include!(concat!(env!("OUT_DIR"), "/served.rs"));
