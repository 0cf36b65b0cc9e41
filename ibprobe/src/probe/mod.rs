//! Probe configuration, the measurement loop and the runner.
//!
//! (Being built for issue 4; `outcome.rs` is the contract between the
//! runner, which fills it, and `crate::report`, which prints it.)

pub mod outcome;
