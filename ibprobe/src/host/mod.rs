//! Host measurement: how late this host wakes a thread that asked to run,
//! apart from any transport (`ibprobe host`, ibexporter's `host` probe).
//!
//! - [`wakeup`]: the wake-up latency of a timed sleep on each CPU, measured
//!   by a real-time thread pinned there;
//! - [`timerlat`]: `host --trace`: the kernel's timerlat tracer through a
//!   private tracefs instance;
//! - [`timerlat_trace`]: pure: its trace lines -> IRQ/thread distributions,
//!   interference, the worst wake-up's causes.

pub mod timerlat;
pub mod timerlat_trace;
pub mod wakeup;
