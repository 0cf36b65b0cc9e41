//! HTTP serving (placeholder until written).
