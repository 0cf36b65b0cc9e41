//! The typed verbs configuration of one channel.
//!
//! Why it exists: the setup needs the verbs knobs of a [`ChannelSpec`]
//! with the QP type resolved and the defaults applied, and the static
//! checks run: [`VerbsConfig::new`] runs [`ChannelSpec::check`], so a
//! refusal comes before any resource is created. Checks that need the
//! device happen in [`super::prepare`].

use serde::Serialize;

use super::error::VerbsError;
use crate::spec::{ChannelSpec, InlineMode, Op, Poll, QpType, SignalMode};

#[derive(Clone, Debug, Serialize)]
pub struct VerbsConfig {
    /// Device (None: the first with an active port).
    pub dev: Option<String>,
    /// Receiver's device in one-way loopback (None: same as `dev`).
    pub peer_dev: Option<String>,
    pub port: u8,
    /// GID index (None: the IPv4-mapped RoCE v2 GID on Ethernet).
    pub gid_index: Option<u32>,
    pub qp_type: QpType,
    pub op: Op,
    pub size: u32,
    pub inline: InlineMode,
    /// Signaling policy (None: the workload's default, see
    /// [`VerbsConfig::signal_period`] and [`VerbsConfig::stream_signal_period`]).
    pub signal: Option<SignalMode>,
    pub poll: Poll,
    pub sq_depth: u32,
    pub rq_depth: u32,
    pub rq_prepost: u32,
    /// Path MTU in bytes (None: the port's active MTU).
    pub mtu: Option<u32>,
    /// `--hugepages`, `--hw-timestamps`.
    pub hugepages: bool,
    pub hw_timestamps: bool,
}

impl VerbsConfig {
    /// The verbs configuration of `spec` (rc, uc or ud), after its static
    /// checks. Errors are `Config` refusals (exit 2).
    pub fn new(spec: &ChannelSpec) -> Result<VerbsConfig, VerbsError> {
        let qp_type = spec.transport.qp_type().ok_or_else(|| {
            VerbsError::config(format!(
                "transport {} is not a verbs transport; use rc, uc or ud",
                spec.transport
            ))
        })?;
        spec.check().map_err(|e| VerbsError::config(e.0))?;
        let v = &spec.verbs;
        Ok(VerbsConfig {
            dev: v.dev.clone(),
            peer_dev: v.peer_dev.clone(),
            port: v.port,
            gid_index: v.gid_index,
            qp_type,
            op: v.op,
            // check() bounds verbs sizes to 32 bits.
            size: spec.size as u32,
            inline: v.inline,
            signal: v.signal,
            poll: spec.poll,
            sq_depth: v.sq_depth,
            rq_depth: v.rq_depth,
            rq_prepost: v.rq_prepost(),
            mtu: v.mtu,
            hugepages: v.hugepages,
            hw_timestamps: v.hw_timestamps,
        })
    }

    /// The signal period of a round trip or one-way probe (every = 1,
    /// auto = SQ depth / 2; unset: every send).
    pub fn signal_period(&self) -> u32 {
        self.period_of(self.signal.unwrap_or(SignalMode::Every))
    }

    /// The signal period of a stream (unset: [`SignalMode::STREAM_DEFAULT`]).
    pub fn stream_signal_period(&self) -> u32 {
        self.period_of(self.signal.unwrap_or(SignalMode::STREAM_DEFAULT))
    }

    fn period_of(&self, mode: SignalMode) -> u32 {
        match mode {
            SignalMode::Every => 1,
            SignalMode::Period(n) => n,
            SignalMode::Auto => (self.sq_depth / 2).max(1),
        }
    }
}
