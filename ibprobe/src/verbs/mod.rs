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
//! Cold setup and hot path live apart: `setup.rs` and `channel.rs` for a
//! one-message channel, `stream_setup.rs` and `slots.rs` for a stream's
//! [`VerbsSlots`] end. Most callers open through [`crate::probe::open`].
//! A [`VerbsErrorKind::Config`] error is a refusal of the configuration
//! (one line naming the limit; exit 2).
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
