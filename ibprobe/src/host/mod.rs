//! Host measurement: how late this host wakes a thread that asked to run,
//! apart from any transport (`ibprobe host`, ibexporter's `host` probe):
//! by a real-time thread pinned on each CPU ([`wakeup`]), or by the
//! kernel's timerlat tracer (`host --trace`: [`timerlat`], whose trace
//! lines [`timerlat_trace`] reads).

pub mod timerlat;
pub mod timerlat_trace;
pub mod wakeup;
