//! The library's unit tests that need only its public API, one module per
//! module of `ibprobe/src` (tests of private items stay beside them).

mod attribution;
mod clock;
mod compare;
mod counters;
mod hca;
mod heatmap;
mod hwts;
mod interrupts;
mod loggp_predict;
mod mem;
mod model;
mod open;
mod probe_config;
mod progress;
mod shm;
mod stats;
mod stream_cost;
mod sweep;
mod synth;
mod threshold;
mod timerlat_trace;
mod udp;
mod verbs_config;
mod wakeup;
