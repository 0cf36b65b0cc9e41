//! The typed verbs configuration of one channel.
//!
//! Why it exists: the setup needs the verbs knobs of a [`ChannelSpec`]
//! with the QP type resolved and the defaults applied, and the static
//! checks run: [`VerbsConfig::new`] runs [`ChannelSpec::check`], so a
//! refusal comes before any resource is created. Checks that need the
//! device happen in [`super::prepare`].

use serde::Serialize;

use super::error::VerbsError;
use crate::spec::{ChannelSpec, Poll, QpType, SignalMode, VerbsKnobs};

/// The knobs of `spec.verbs` (`knobs.rq_prepost` is resolved into
/// `rq_prepost`), with the QP type, message size and polling of the spec.
#[derive(Clone, Debug, Serialize)]
pub struct VerbsConfig {
    pub knobs: VerbsKnobs,
    pub qp_type: QpType,
    pub size: u32,
    pub poll: Poll,
    pub rq_prepost: u32,
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
        Ok(VerbsConfig {
            knobs: spec.verbs.clone(),
            qp_type,
            // check() bounds verbs sizes to 32 bits.
            size: spec.size as u32,
            poll: spec.poll,
            rq_prepost: spec.verbs.rq_prepost(),
        })
    }

    /// The signal period of a round trip or one-way probe (every = 1,
    /// auto = SQ depth / 2; unset: every send).
    pub fn signal_period(&self) -> u32 {
        self.period_of(self.knobs.signal.unwrap_or(SignalMode::Every))
    }

    /// The signal period of a stream (unset: [`SignalMode::STREAM_DEFAULT`]).
    pub fn stream_signal_period(&self) -> u32 {
        self.period_of(self.knobs.signal.unwrap_or(SignalMode::STREAM_DEFAULT))
    }

    fn period_of(&self, mode: SignalMode) -> u32 {
        match mode {
            SignalMode::Every => 1,
            SignalMode::Period(n) => n,
            SignalMode::Auto => (self.knobs.sq_depth / 2).max(1),
        }
    }
}
