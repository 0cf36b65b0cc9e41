//! Probe configuration, the workloads and the one executor that runs them.
//!
//! - [`config`]: the typed [`config::ProbeConfig`] and its validation;
//! - [`workload`]: the loops between two timestamps, side by side;
//! - [`executor`]: placement, warm-up, the peer thread, counters, Ctrl-C:
//!   every workload is run here -> [`Outcome`] or [`StreamOutcome`]
//!   (`outcome.rs`, which `crate::report` prints);
//! - [`open`]: both ends of a channel or a stream in this process;
//!   [`session`]: the one handshake of server and client, the server's
//!   echo loop, the responder;
//! - [`loggp_fit`], [`loggp_predict`]: pure LogGP math on what
//!   `ibprobe loggp` measured; [`stream_cost`]: the stream loops' own
//!   cost per slot.

pub mod config;
pub mod executor;
pub mod loggp_fit;
pub mod loggp_predict;
pub mod open;
pub mod outcome;
pub mod session;
pub mod stream_cost;
pub mod workload;

pub use config::{Length, Mode, ProbeConfig};
pub use outcome::{Outcome, StreamOutcome};
