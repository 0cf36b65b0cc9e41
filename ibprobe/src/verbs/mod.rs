//! Verbs transport: RC, UC and UD queue pairs over sideway +
//! rdma-mummy-sys, and device listing.
//!
//! Why it exists: this is the transport the probe is for. Resources (device
//! context, PD, CQs, QPs, MRs, state transitions) are built with sideway's
//! typed builders; the per-message calls (post, poll, CQ events) and what
//! sideway lacks (UD address handles, UD qkey) are raw calls in
//! [`crate::sys::verbs`], because sideway's post/poll helpers allocate.
//! libibverbs is loaded at run time (rdma-core-mummy), so a host without
//! rdma-core or without a device gets [`VerbsErrorKind::NoDevice`] with a
//! clear message, never a crash.
//!
//! # API
//!
//! - [`devices()`] lists devices, ports, GIDs, NUMA locality and
//!   capabilities ([`DeviceInfo`], serde-serializable for `devices --json`).
//! - [`VerbsConfig::new`] turns a [`crate::spec::ChannelSpec`] (rc, uc or
//!   ud) into a typed, statically validated configuration.
//!   Device-dependent limits (inline, MTU, port state, GID) are checked in
//!   [`prepare`] (cold setup: `setup.rs`; the hot post/poll path:
//!   `channel.rs`; the record both share and the stream's immediate
//!   format: `types.rs`). Most callers open channels through
//!   [`crate::probe::open`] instead of calling this module directly.
//! - One-way loopback (one process, two QPs): [`loopback`] returns a
//!   [`LoopbackChannel`] (implements [`crate::transport::Channel`]).
//! - Round trip (client/server): [`prepare`] returns a [`Prepared`] QP and
//!   the local [`Endpoint`] to send to the peer out of band (serde);
//!   [`Prepared::connect`] with the peer's `Endpoint` returns a
//!   [`VerbsChannel`] (implements `Channel`: `post` sends to the peer,
//!   `poll_recv` sees what the peer sent).
//! - Streams ([`crate::transport::stream::SlotEnd`]): a
//!   [`VerbsSlots`] end holds a registered pool of `slots` send and receive
//!   buffers (every receive posted up front) and sends one slot as one WR
//!   (send, send-imm or write-imm into the peer's pool; rc also writes a
//!   credit counter word). In one process [`stream_pair`] (sender end,
//!   receiver end); across hosts [`prepare_slots`], then
//!   [`PreparedSlots::connect`] with the peer's [`Endpoint`], whose
//!   [`StreamTarget`] says where the peer's pool and counter are. Cold
//!   setup: `stream_setup.rs` (reusing `setup.rs`'s QP creation and
//!   connection); the hot send/recv/counter path: `slots.rs`.
//!
//! Errors are [`VerbsError`]; its [`VerbsErrorKind::Config`] kind marks a
//! refusal of the configuration (one line naming the limit; exit 2).
//!
//! ```no_run
//! use ibprobe::transport::Channel;
//! use ibprobe::spec::{ChannelSpec, Transport};
//! use ibprobe::verbs::{self, VerbsConfig};
//! # fn f() -> Result<(), Box<dyn std::error::Error>> {
//! let cfg = VerbsConfig::new(&ChannelSpec::new(Transport::Rc, 32))?;
//! let mut ch = verbs::loopback(&cfg)?;
//! ch.post(0)?;
//! while ch.poll_recv()?.is_none() {}
//! # Ok(()) }
//! ```
//!
//! Sequence numbers travel in the immediate (32 bits, *-imm ops), in the
//! first 8 bytes of the payload (send, size >= 8; fewer bytes below that),
//! and for plain RDMA write in the target buffer: the first 8 bytes when
//! size >= 9, and in the last byte, which flips per message ((seq % 255) + 1)
//! and is what the receiver polls (as ib_write_lat does). Truncated carriers
//! are unwrapped against the next expected number, so sequence numbers
//! should start at 0 and increase by one (gaps from losses are fine).

mod channel;
mod config;
mod device;
mod error;
mod setup;
mod slots;
mod stream_setup;
mod types;

pub use channel::{LoopbackChannel, VerbsChannel};
pub use config::VerbsConfig;
pub use device::{devices, DeviceCaps, DeviceInfo, GidInfo, PortInfo};
pub use error::{VerbsError, VerbsErrorKind, NO_DEVICE_ELSE};
pub use setup::{loopback, prepare, Endpoint, Prepared, StreamTarget};
pub use slots::VerbsSlots;
pub use stream_setup::{prepare_slots, stream_pair, PreparedSlots};
