//! Every bound on what a peer, a scrape, a file or a Prometheus answer can
//! make ibexporter allocate, open, hold or wait for, in one table.
//!
//! Why one file: hostile input is bounded before anything is allocated,
//! mapped or waited on, and a reviewer checks the bounds here instead of
//! in every reader. Each bound says what it protects; the files that
//! apply it import it from here. Shared readers' own bounds (the small
//! file reader, CPU lists, child processes) are `ibhost`'s; the HTTP
//! server's per-connection timeouts are `http::ServeOptions`' defaults
//! (tests shorten them).

use std::time::Duration;

// The responder (engine/responder.rs): peers' sessions.
/// Sessions served at once (all sources together).
pub const MAX_SESSIONS: usize = 64;
/// Sessions served at once for one source address.
pub const MAX_PER_SOURCE: usize = 8;

// The HTTP server (http/server.rs).
/// The listen backlog: connections the kernel queues before accept.
pub const LISTEN_BACKLOG: u32 = 4096;
/// Verified `Authorization` headers remembered (bcrypt is slow on
/// purpose: a repeated header is not hashed again); when full, the cache
/// is emptied.
pub const AUTH_CACHE_MAX: usize = 64;

// Scrapes (http/mod.rs).
/// How many `/metrics` answers are encoded at the same time; further
/// scrapes wait. Collectors may read sysfs or talk to devices, so a burst
/// of scrapes must not fan out into a burst of collection.
pub const MAX_CONCURRENT_ENCODES: usize = 2;

// Targets (targets/).
/// At most this many lookups run at once in [`crate::targets::dns::resolve_many`].
pub const MAX_PARALLEL_LOOKUPS: usize = 8;
/// The largest pinglist read: 64 MiB. A file_sd entry of one host with
/// its labels is 100-300 bytes of JSON, so 100,000 hosts fit twice over;
/// anything larger is not a pinglist (a device, a log named by mistake).
pub const MAX_PINGLIST: u64 = 64 << 20;

// Counter files kept open (collect/open_files.rs).
/// The most files the HCA collector keeps open: a two-port host with the
/// full counter set and a driver's `hw_counters/` keeps about 150. They
/// come out of the 512 descriptors the daemon leaves to everything but
/// HTTP connections (`FILES_NOT_FOR_HTTP` in `daemon.rs`): the responder's
/// sessions, the probes and the listeners need the rest.
pub const MAX_KEPT_FILES: usize = 256;
/// The largest value read: a sysfs attribute is at most one page.
pub const VALUE_BYTES: usize = 4096;

// Localization input: snapshots and Prometheus answers (localize/).
/// The largest snapshot file read (and the largest Prometheus answer
/// body): 256 MiB, about 2.5 million probes.
pub const MAX_SNAPSHOT_BYTES: u64 = 256 << 20;
/// Most hosts of one snapshot (the plan's 100,000-host scale).
pub const MAX_HOSTS: usize = 100_000;
/// Most rounds of one snapshot (or of several replayed together).
pub const MAX_ROUNDS: usize = 64;
/// Most probes (ordered host pairs) in one round, and most series in one
/// Prometheus answer.
pub const MAX_PROBES: usize = 4_000_000;
/// Longest host or rack name, bytes.
pub const MAX_NAME: usize = 256;
/// The longest one query (connect, send, answer) may take.
pub const QUERY_TIMEOUT: Duration = Duration::from_secs(30);
/// How often a blocked read wakes to look at the stop flag.
pub const POLL: Duration = Duration::from_millis(200);
/// The largest HTTP header block read.
pub const MAX_HEAD: usize = 64 << 10;
/// The longest connecting to one of the host's addresses may take.
pub const CONNECT_TIMEOUT: Duration = Duration::from_secs(5);

// The configuration (config/).
/// The highest CPU number a CPU list may name (the kernel's NR_CPUS limit is 8192).
pub const MAX_CPU: usize = 8191;
