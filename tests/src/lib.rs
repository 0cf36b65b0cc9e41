//! Shared helpers for the integration tests (fixture copies, tree snapshots).
