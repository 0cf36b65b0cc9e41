//! The crate's tests that need only its public API, one module per module
//! of `ibnoise/src`. The commands that show these measurements (`ibprobe
//! host`, `--counters`) are tested end to end in ibprobe's `tests/`.

mod attribution;
mod counters;
mod counters_sched;
mod interrupts;
mod timerlat_trace;
mod wakeup;
