//! Exit codes, for scripts; `--help` lists the same numbers.

/// Success; for `verify`, the host matches the profile.
pub const OK: i32 = 0;
/// `verify`: the host drifted from the profile.
pub const DRIFT: i32 = 1;
/// Error: bad arguments or profile, missing privileges, unreadable host.
/// Nothing was changed.
pub const ERROR: i32 = 2;
/// `apply` failed part way and rolled back everything it had changed.
pub const ROLLED_BACK: i32 = 3;
/// `apply` or `revert` failed and could not restore everything; the
/// journal is kept: fix the cause the message names and run the revert
/// command it gives.
pub const INCOMPLETE: i32 = 4;
/// `apply` or `revert`: another ibtune held the host lock (a lock on
/// the `--root` folder) for all of `--lock-wait`; nothing was changed.
pub const LOCKED: i32 = 5;
