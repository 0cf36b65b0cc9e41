//! A paired workload's answering side as a server runs it for a client
//! on another host: `ibprobe server` receiving a stream, answering loggp's
//! bursts.
//!
//! Why it exists: the server knows a workload by the word its client's
//! stream Hello names (`spec::StreamWorkload`), and nothing else of it.
//! [`serve_paired`] is written by `ibprobe/build.rs`: one arm per
//! `impl Served for TYPE` in the workload folder, sending its `const
//! WORD` to [`serve_one`] with that type (a word no file serves fails the
//! build there). This file only places the thread and sends the reply.

use std::fmt;

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
#[derive(Debug)]
pub enum ServeError<E> {
    Loop(StreamWorkload, TransportError),
    Reply(E),
}

impl<E: fmt::Display> fmt::Display for ServeError<E> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ServeError::Loop(word, e) => write!(f, "{word}: {e}"),
            ServeError::Reply(e) => e.fmt(f),
        }
    }
}

/// Runs `W`'s answering side on `end`, on this thread pinned to `cpu`
/// (the server's `--cpu`), then sends its reply to `client`.
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
