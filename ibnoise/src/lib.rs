//! ibnoise: what the host does to a latency loop, apart from any
//! transport. Two questions, one crate, shared by the three tools:
//!
//! - How late does this host wake a thread that asked to run? Measured
//!   by a real-time thread pinned on each CPU ([`wakeup`]: `ibprobe host`,
//!   ibexporter's `host` probe), or by the kernel's timerlat tracer
//!   ([`timerlat`], whose trace lines [`timerlat_trace`] reads: `ibprobe
//!   host --trace`).
//! - What did the kernel and the hardware do to the measuring thread
//!   while it measured? [`counters`]: context switches, migrations, page
//!   faults, perf events, interrupts by source, SMIs, and which of them
//!   follow the tail ([`counters::attribution`]); `ibtune verify --watch`
//!   reads the isolated CPUs' interrupts with [`counters::interrupts`].
//!
//! What it imports: `ibhost` (placement, clocks, [`ibhost::vocabulary!`])
//! and `ibstats` (the latency histogram); no libibverbs, no libhwloc, no
//! `unsafe` (forbidden below).

#![forbid(unsafe_code)]

pub mod counters;
pub mod timerlat;
pub mod timerlat_trace;
pub mod wakeup;
