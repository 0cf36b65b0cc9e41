//! ibhost: the small host utilities that ibtune, ibprobe and ibexporter
//! share, defined once.
//!
//! Why it exists: CPU lists, duration parsing and the real-time syscalls
//! (pinning, SCHED_FIFO, mlockall, clocks) are needed by every tool, and
//! copies drift apart in bounds and syntax (a CPU list parser without a
//! bound allocates for `0-4000000000`). Each lives here once:
//!
//! - [`cpulist`]: [`CpuSet`], the ordered CPU (or NUMA node) set, parsed from
//!   kernel lists (`0-3,8`) and hex masks, and [`cpulist::parse_list_ordered`]
//!   for callers that need the list as written; both bounded by
//!   [`cpulist::MAX_CPU`].
//! - [`duration`]: one parser ([`duration::parse`], with
//!   [`duration::parse_strict`] for config files) and one formatter
//!   ([`duration::format()`]) whose output always parses back.
//! - [`exit`]: the exit codes of the three tools, one meaning per code,
//!   and the table every top-level `--help` ends with.
//! - [`file`]: [`file::read_small`], a named small file (config, key,
//!   certificate) read only if it is a regular file under a size cap.
//! - [`child`]: a measurement command run per round (`ibtune experiment`,
//!   `ibprobe compare`): its own process group, SIGINT/SIGTERM/SIGHUP
//!   forwarded to it, a grace and then SIGKILL, a per-run timeout, and its
//!   output kept bounded. Its stop handler is the workspace's one
//!   stop-signal mechanism: [`child::stop_on_signals`] for a tool that
//!   runs commands, [`child::stop_signal_flag`] for ibprobe's measurement
//!   loops; it is one of the two `unsafe` places of the crate.
//! - [`list`]: comma-separated lists: message sizes with doubling ranges
//!   (`8,64,512`, `2..4096`), the same in ibprobe and ibexporter.
//! - [`renamed`]: old spellings of renamed options and commands, still
//!   accepted, answered with one warning naming the new one.
//! - [`words`]: [`vocabulary!`], the one way a closed list of words
//!   (transports, formats, noise kinds) is defined, with its spellings,
//!   help lines, parsing and serde.
//! - [`rt`]: placing the calling thread: CPU affinity, SCHED_FIFO/OTHER,
//!   mlockall, CLOCK_MONOTONIC and thread CPU time, absolute sleeps. With
//!   [`child::stop_on_signals`], the crate's only `unsafe`.
//!
//! What may import it: every crate of the workspace; it imports none of
//! them. It deliberately has **no libhwloc (hwlocality) dependency**, so
//! ibprobe, which links it, still starts on a host without libhwloc;
//! topology discovery that needs hwloc stays in ibtune.

pub mod child;
pub mod cpulist;
pub mod duration;
pub mod exit;
pub mod file;
pub mod list;
pub mod renamed;
pub mod rt;
pub mod words;

pub use cpulist::CpuSet;
