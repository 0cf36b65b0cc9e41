//! Probe configuration, the measurement loop and the runner.
//!
//! - [`config`]: the typed [`config::ProbeConfig`] and its validation;
//! - [`workload`]: what the measuring thread does between two timestamps:
//!   the [`workload::Workload`] trait, the pacer, the recorder and the
//!   streaming [`workload::Sink`], the stop-and-wait loop (read it: it is
//!   short) and the server's echo loop;
//! - [`runner`]: placement, warm-up, measured run, Ctrl-C -> [`Outcome`];
//! - [`stream`]: a stream's two loops at once (sender here, receiver on a
//!   pinned thread) -> [`stream::StreamOutcome`];
//! - [`loggp`]: PRTT(n, d, s) round trips of `ibprobe loggp` (real or
//!   simulated), [`loggp_fit`]: LogGP parameters with 95% intervals;
//! - [`session`]: the one handshake of server and client (its framing,
//!   the optional mesh secret), the server's echo loop, the responder;
//! - `outcome.rs`: the contract between the runner, which fills it, and
//!   `crate::report`, which prints it.

pub mod config;
pub mod loggp;
pub mod loggp_fit;
pub mod loggp_predict;
pub mod open;
pub mod outcome;
pub mod runner;
pub mod session;
pub mod stream;
pub mod stream_cost;
pub mod workload;

pub use config::{Length, Mode, ProbeConfig};
pub use outcome::Outcome;
