//! ibprobe: a verbs latency probe with true percentiles, as a library with
//! a thin CLI, so ibexporter can embed the same probe.
//!
//! Map of the crate (one folder per concern; `ARCHITECTURE.md` at the
//! workspace root says what may use what and where new things go):
//! - [`spec`]: the vocabulary, defined once: [`spec::Transport`],
//!   [`spec::Op`], [`spec::Poll`], the verbs knobs and
//!   [`spec::ChannelSpec`], with every static check of a channel;
//! - [`clock`]: the one clock every timestamp comes from (TSC calibrated
//!   against CLOCK_MONOTONIC_RAW, or clock_gettime), an HCA's completion
//!   clock and the split of a round trip by its timestamps (`clock::hwts`);
//! - [`counters`]: the measuring thread's kernel and hardware counters
//!   (perf events, getrusage, `/proc/interrupts`, SMIs) and their
//!   per-interval attribution to the tail;
//! - [`host`]: host measurement apart from any transport: wake-up latency
//!   per CPU and the kernel's timerlat tracer (`ibprobe host`);
//! - [`stats`]: the streaming HDR histogram and the summary computed from it;
//! - [`transport`]: the [`transport::Channel`] trait and one file per
//!   reference transport (shm, udp); verbs lives in [`verbs`];
//! - [`verbs`]: RC/UC/UD over sideway + rdma-mummy-sys (cold setup and
//!   the hot data path in separate files); device listing;
//! - [`probe`]: the probe's configuration, [`probe::open`] (both ends in
//!   this process) and [`probe::session`] (the one client/server
//!   handshake), the executor and the measurement loops
//!   (`probe/workload/`, small enough to read in one sitting);
//! - [`report`]: every output format of every command (table, JSON, CSV,
//!   Markdown, perftest, the sweep's grid), HDR interval logs, SVG plots;
//! - [`cli`]: the command line; `cli/args.rs` is the only file that knows
//!   clap;
//! - [`sys`]: all `unsafe` of the crate.
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
pub mod counters;
pub mod host;
pub mod probe;
pub mod report;
pub mod spec;
pub mod stats;
pub mod sys;
pub mod transport;
pub mod verbs;
mod words;
