//! The library's unit tests that need only its public API, one module per
//! module of `ibprobe/src` (tests of private items stay beside them).

mod attribution;
mod config;
mod config_verbs;
mod counters;
mod interrupts;
mod loggp_predict;
mod model;
mod open;
mod stream_cost;
mod udp;
mod wakeup;
