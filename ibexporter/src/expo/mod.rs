//! Exposition formats: how metrics are written on the wire, apart from
//! what they are.
//!
//! Why it exists: two writers produce Prometheus text, the registries'
//! (in [`crate::http`]) and the latency families' (in
//! [`crate::collect::latency`]); both write it through [`text`], so the
//! escaping and the line shapes are defined once. The protobuf format is
//! prometheus-client's own encoder (registries) and
//! `collect/latency/protobuf.rs` (latency families).
//!
//! Depends on nothing in this crate; `http` and `collect` depend on it.

pub mod text;
