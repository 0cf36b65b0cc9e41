//! The executor: runs every workload of `probe/workload/` the same way
//! (placement, warm-up, the peer thread, the counters' span, timeouts,
//! Ctrl-C); the workloads are the loops between two timestamps.
//!
//! - [`place`](mod@place): pinning, mlockall, pre-faulting, the CPUs of a
//!   loopback pair, the counters' span; [`stamp`]: the stamping thread;
//! - [`one_message`]: stop-and-wait -> [`Outcome`](crate::probe::Outcome),
//!   its echo in this process ([`EchoThread`]) and the server's ([`serve`]);
//! - [`peer`]: a [`Paired`](crate::probe::workload::Paired) workload's two
//!   sides at once ([`run_pair`]); [`paired`]: the stream and loggp in
//!   loopback and as a client; [`served`]: the answering side as a server
//!   runs it for a client on another host, found by its word.

pub mod one_message;
pub mod paired;
pub mod peer;
pub mod place;
pub mod served;
pub mod stamp;

pub use one_message::{run, serve, EchoThread, RunError, ATTRIBUTION_INTERVAL, SERVER_IDLE_CHECK};
pub use paired::{loggp_loopback, stream_client, stream_loopback};
pub use peer::{run_pair, PairRun, PeerThread};
pub use place::{place, placement};
pub use served::{serve_paired, ServeError};
