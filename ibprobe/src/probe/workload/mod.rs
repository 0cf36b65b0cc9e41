//! Workloads: what the measuring thread (and its peer) does between the
//! run's first and last timestamps.
//!
//! Why it exists: how messages are put on the wire (one at a time, a
//! credit window, batches with a flush timer, pipelined acks, PRTT
//! bursts) is what differs between workloads; placement, warm-up, the
//! peer thread, counters and Ctrl-C are the executor's
//! (`probe/executor/`), the same for all. A workload is a type
//! implementing one of the two shapes of the seam ([`seam`]):
//! [`Workload`] (a loop on one channel, stop-and-wait) or [`Paired`]
//! (two loops on the ends of a slot stream, the stream and loggp). The
//! workloads sit side by side: none imports another, the session or the
//! executor.
//!
//! # The contract of every workload
//!
//! Between [`Recorder::begin`] and [`Recorder::finish`] (or a paired
//! loop's first and last timestamps), per message:
//! - no allocation (the histograms and buffers are allocated before the
//!   first timestamp, recording only counts; the only allocation allowed
//!   is the error that ends the run);
//! - no lock, no syscall beyond the transport's own calls and the clock
//!   read (the pacer's nanosleep in event mode is the one exception, and
//!   happens only between messages);
//! - no dynamic dispatch added: workloads are generic over the channel
//!   (`C: Channel + ?Sized`, `E: SlotEnd + ?Sized`) and monomorphized,
//!   per-message helpers are `#[inline(always)]`;
//! - the Ctrl-C flag is checked between messages, and the run ends at the
//!   plan's count or duration ([`pace::Pacer`] owns the end of a timed run).
//!
//! `ibprobe/tests/reference.rs` checks the no-allocation promise.
//!
//! # Map
//!
//! - [`seam`]: the [`Workload`] and [`Paired`] traits, their [`Ctx`] and
//!   [`Signals`]; [`Served`], a paired workload a server answers;
//! - [`pace`]: the pacer (rate steps, bursts and pauses, missed steps, the
//!   end of a timed run, [`pace::wait_until`]);
//! - [`record`]: [`Histos`], [`Tally`], the [`Sink`] and its [`Interval`],
//!   and the [`Recorder`] that keeps the interval bookkeeping;
//! - [`stop_wait`]: one message at a time, the loss policy (read it: it
//!   is short); [`echo`](mod@echo): its peer, the server side;
//! - [`stream`](mod@stream): a stream's sender and receiver; its format
//!   [`slot`], its policies [`window`], [`batch`], [`pipeline`];
//! - [`loggp`](mod@loggp): PRTT(n, d, s) bursts and their responder.
//!
//! A new workload is a file here implementing [`Workload`] or [`Paired`]
//! (and [`Served`] when a server answers it): `build.rs` writes its
//! `pub mod` line (included below) and its arm of the server's dispatch
//! (ARCHITECTURE.md counts the files). A new knob is a field of
//! `probe::config::Plan` read where it acts (e.g. [`pace::consume`]).

include!(concat!(env!("OUT_DIR"), "/workloads.rs"));

pub use echo::{echo, EchoEnd};
pub use record::{Histos, Interval, Recorder, Sink, Tally};
pub use seam::{Answer, Asked, Ctx, Paired, ReplyTo, Served, Signals, Workload};
pub use stop_wait::StopWait;
