//! Tuning: from a resolved profile to changes on the host, and back.
//!
//! - [`boot`] the kernel command line of `[boot]` as a GRUB fragment;
//! - [`plan`] orders the settings a profile asks for ([`item::Item`]s);
//! - [`journal`] records each original value durably before it changes;
//! - [`engine`] applies, rolls back and reverts;
//! - [`hold`] keeps `/dev/cpu_dma_latency` held by a process;
//! - [`run`] starts a command inside a cpuset with its memory policy;
//! - [`experiment`] the variants of `ibtune experiment` and one round of one.

pub mod boot;
pub mod engine;
pub mod experiment;
pub mod hold;
pub mod item;
pub mod journal;
pub mod plan;
pub mod run;
