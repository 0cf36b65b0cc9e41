//! Workloads: what the measuring thread (and its peer) does between the
//! run's first and last timestamps: how messages are put on the wire (one
//! at a time, a credit window, batches, pipelined acks, PRTT bursts).
//! Placement, warm-up, the peer thread, counters and Ctrl-C are the
//! executor's (`probe/executor/`). A workload implements one shape of the
//! [`seam`]: [`Workload`] (stop-and-wait) or [`Paired`] (the stream,
//! loggp); none imports another, the session or the executor.
//!
//! # The contract of every workload
//!
//! Between its first and last timestamps, per message:
//! - no allocation (buffers and histograms are allocated before; the
//!   error that ends the run is the one exception);
//! - no lock, no syscall beyond the transport's and the clock read (the
//!   pacer's nanosleep in event mode, between messages, excepted);
//! - no dynamic dispatch added: generic over the channel and
//!   monomorphized, per-message helpers `#[inline(always)]`;
//! - the Ctrl-C flag checked between messages; the run ends at the plan's
//!   count or duration ([`pace::Pacer`]).
//!
//! `ibprobe/tests/reference.rs` checks the no-allocation promise.
//!
//! A new workload is a file here implementing [`Workload`] or [`Paired`]
//! (and [`Served`] when a server answers it): `build.rs` writes its
//! `pub mod` line (included below) and its arm of the server's dispatch.
//! A new knob is a field of `probe::config::Plan` read where it acts
//! (e.g. [`pace::consume`]).

include!(concat!(env!("OUT_DIR"), "/workloads.rs"));

pub use echo::{echo, EchoEnd};
pub use record::{Histos, Interval, Recorder, Sink, Tally};
pub use seam::{Answer, Asked, Ctx, Paired, ReplyTo, Served, Signals, Workload};
pub use stop_wait::StopWait;
