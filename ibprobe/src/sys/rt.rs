//! Real-time scheduling and absolute sleeps for `ibprobe host`:
//! SCHED_FIFO for the calling thread, CLOCK_MONOTONIC reads,
//! `clock_nanosleep(TIMER_ABSTIME)` and the thread's CPU time.
//!
//! Why it exists: the wake-up latency probe is cyclictest's measurement.
//! The calls live in the shared `ibhost::rt` (ibtune uses them too); this
//! module keeps the paths the crate and ibexporter use. Errors are the
//! kernel's own (`raw_os_error()` works).

pub use ibhost::rt::{monotonic_ns, set_fifo, set_other, sleep_until_ns, thread_cpu_ns};
