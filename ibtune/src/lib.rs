//! ibtune: apply, verify, hold and revert a host latency profile for RDMA
//! real-time work.
//!
//! The library is a map of the program:
//! - [`host`]: discovery of the host through a root (`/` or a snapshot);
//! - [`profile`]: profile files, parsed with spans and resolved against a host,
//!   and `profile::suggest`, which derives a starting one from a host;
//! - [`tune`]: the plan of changes, the journal, apply / verify / revert;
//! - [`sys`]: the few raw syscalls (memory policy, scheduling), the crate's
//!   only `unsafe`.
//!
//! [`host::CpuSet`] and the affinity / SCHED_FIFO / mlockall calls in
//! [`sys`] come from the shared `ibhost` crate (ibprobe uses the same ones
//! without linking libhwloc); ibtune re-exports them under its own paths.

pub mod cli;
pub mod host;
pub mod profile;
pub mod sys;
pub mod tune;
