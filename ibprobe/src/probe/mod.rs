//! Probe configuration, the measurement loop and the runner.
//!
//! - [`config`]: the typed [`config::ProbeConfig`] and its validation;
//! - [`hot`]: the measurement loop (read it: it is short) and the
//!   streaming [`hot::Sink`];
//! - [`runner`]: placement, warm-up, measured run, Ctrl-C -> [`Outcome`];
//! - [`oob`]: the out-of-band TCP handshake of server and client;
//! - `outcome.rs`: the contract between the runner, which fills it, and
//!   `crate::report`, which prints it.

pub mod config;
pub mod hot;
pub mod oob;
pub mod open;
pub mod outcome;
pub mod runner;
pub mod session;
pub mod wakeup;

pub use config::{Length, Mode, ProbeConfig};
pub use outcome::Outcome;
