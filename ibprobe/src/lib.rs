//! ibprobe: a verbs latency probe with true percentiles, as a library with
//! a thin CLI, so ibexporter can embed the same probe.
//!
//! Map of the crate (one folder per concern):
//! - [`clock`]: the one clock every timestamp comes from (TSC calibrated
//!   against CLOCK_MONOTONIC_RAW, or clock_gettime).
//! - [`stats`]: the streaming HDR histogram and the summary computed from it.
//! - [`transport`]: the [`transport::Channel`] trait and one file per
//!   reference transport (shm, udp); verbs lives in [`verbs`].
//! - [`verbs`]: RC/UC/UD over sideway + rdma-mummy-sys; device listing.
//! - [`probe`]: configuration, the workloads (`probe/workload/`; today's
//!   loop, `stop_wait.rs`, is small enough to read in one sitting) and the
//!   runner that yields a report.
//! - [`report`]: the report and its formats (table, JSON, CSV, Markdown,
//!   perftest), HDR interval logs and SVG plots.
//! - [`cli`]: the command line.

pub mod cli;
pub mod clock;
pub mod probe;
pub mod report;
pub mod stats;
pub mod sys;
pub mod transport;
pub mod verbs;
