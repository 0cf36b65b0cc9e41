//! CPU lists (`0-3,8,10-11`) and hex masks as one ordered set type,
//! [`CpuSet`]: defined in the shared `ibhost` crate (so ibprobe has it
//! without libhwloc) and re-exported here under the path ibtune has always
//! used.

pub use ibhost::cpulist::*;
