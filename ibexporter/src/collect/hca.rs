//! HCA port counters from sysfs (placeholder until written).
