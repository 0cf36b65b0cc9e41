//! Workloads: what the measuring thread does with a [`Channel`](crate::transport::Channel) between
//! the run's first and last timestamps.
//!
//! Why it exists: how messages are put on the wire (one at a time, a
//! credit window, batches with a flush timer, pipelined acks) is the one
//! thing that differs between workloads; pacing, recording and interval
//! delivery are the same for all. A workload is a type implementing
//! [`Workload`], built from [`pace`] and [`record`]; the runner
//! (`probe/runner.rs`) allocates, places and calls it.
//!
//! # The contract of every workload
//!
//! Between [`Recorder::begin`] and [`Recorder::finish`], per message:
//! - no allocation (the histograms are allocated by the runner, recording
//!   only counts; the only allocation allowed is the error that ends the
//!   run);
//! - no lock, no syscall beyond the transport's own calls and the clock
//!   read (the pacer's nanosleep in event mode is the one exception, and
//!   happens only between messages);
//! - no dynamic dispatch added: workloads are generic over the channel
//!   (`C: Channel + ?Sized`) and monomorphized, per-message helpers are
//!   `#[inline(always)]`;
//! - the Ctrl-C flag is checked between messages, and the run ends at the
//!   plan's count or duration ([`pace::Pacer`] owns the end of a timed run).
//!
//! `ibprobe/tests/reference.rs` checks the no-allocation promise of the
//! stop-and-wait loop over shm and udp.
//!
//! # Map
//!
//! - [`seam`]: the [`Workload`] trait and its [`Ctx`];
//! - [`pace`]: the pacer (rate steps, bursts and pauses, missed steps, the
//!   end of a timed run, [`pace::wait_until`]);
//! - [`record`]: [`Histos`], [`Tally`], the [`Sink`] and its [`Interval`],
//!   and the [`Recorder`] that keeps the interval bookkeeping;
//! - [`stop_wait`]: one message at a time, the loss policy (today's loop);
//! - [`echo`](mod@echo): the server side of a round trip.
//!
//! A new workload (a credit window, batching, pipelined acks) is a new
//! file here implementing [`Workload`], picked in `runner.rs`. A new knob
//! is a field of `probe::config::Plan` read where it acts: the
//! receive-side `--consume-delay`, for instance, is [`pace::consume`]
//! called in `stop_wait.rs` after an arrival and in `echo.rs` before the
//! echo (the echo gets its `Plan` from the client's `Receiver` settings).

pub mod batch;
pub mod echo;
pub mod pace;
pub mod pipeline;
pub mod record;
pub mod seam;
pub mod slot;
pub mod stop_wait;
pub mod stream;
pub mod window;

pub use echo::{echo, EchoEnd};
pub use record::{Histos, Interval, Recorder, Sink, Tally};
pub use seam::{Ctx, Workload};
pub use stop_wait::StopWait;
