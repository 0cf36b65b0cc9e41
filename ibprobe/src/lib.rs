//! ibprobe: a verbs latency probe with true percentiles, as a library with
//! a thin CLI, so ibexporter can embed the same probe.
//!
//! Map: `ARCHITECTURE.md`. In short: [`spec`] is the vocabulary, [`probe`]
//! opens channels and measures them, [`report`] renders every output,
//! [`cli`] is the command line (the only module that knows clap) and
//! [`sys`] holds all `unsafe`.
//!
//! Opening a channel and measuring it, as ibexporter does:
//!
//! ```
//! use std::sync::atomic::AtomicBool;
//! use ibprobe::clock::Clock;
//! use ibprobe::probe::{executor, open, ProbeConfig};
//! use ibprobe::spec::{ChannelSpec, Transport};
//!
//! let spec = ChannelSpec::new(Transport::Shm, 64);
//! let cfg = ProbeConfig { size: 64, lock_memory: false, ..ProbeConfig::default() };
//! let mut ch = open::loopback(&spec).unwrap();
//! let out = executor::run(&cfg, ch.as_mut(), &Clock::monotonic(), &AtomicBool::new(false), None)
//!     .unwrap();
//! assert_eq!(out.one_way.unwrap().len(), 10_000);
//! ```

pub mod cli;
pub mod clock;
pub mod probe;
pub mod report;
pub mod spec;
pub mod sys;
pub mod transport;
pub mod verbs;
