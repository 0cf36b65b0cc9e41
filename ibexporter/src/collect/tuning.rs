//! Tuning drift from ibtune verify (placeholder until written).
