//! The typed verbs configuration and its static checks.
//!
//! Why it exists: the command line speaks strings (`--op write-imm`,
//! `--inline auto`); the setup needs types, and a refusal must come before
//! any resource is created, as one line naming the limit. Checks that need
//! the device (max inline, MTU, port state, GID) happen in
//! [`super::prepare`].

use serde::{Deserialize, Serialize};

use super::args::VerbsArgs;
use super::VerbsError;

/// Queue pair transport type.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum QpType {
    /// Reliable connection.
    Rc,
    /// Unreliable connection.
    Uc,
    /// Unreliable datagram.
    Ud,
}

impl QpType {
    /// "RC", "UC", "UD".
    pub fn name(self) -> &'static str {
        match self {
            QpType::Rc => "RC",
            QpType::Uc => "UC",
            QpType::Ud => "UD",
        }
    }

    /// Parses "rc" | "uc" | "ud" (the CLI's `--transport` values).
    pub fn parse(s: &str) -> Option<QpType> {
        match s.to_ascii_lowercase().as_str() {
            "rc" => Some(QpType::Rc),
            "uc" => Some(QpType::Uc),
            "ud" => Some(QpType::Ud),
            _ => None,
        }
    }
}

/// What each message is.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Op {
    /// Send; consumes a receive on the peer.
    Send,
    /// Send with immediate (the sequence number in the immediate).
    SendImm,
    /// RDMA write with immediate; consumes a receive, data lands in the
    /// peer's target buffer.
    WriteImm,
    /// RDMA write; the peer polls the last byte of its target buffer (as
    /// ib_write_lat does). No receive, no receive completion.
    Write,
}

impl Op {
    /// The `--op` spelling.
    pub fn name(self) -> &'static str {
        match self {
            Op::Send => "send",
            Op::SendImm => "send-imm",
            Op::WriteImm => "write-imm",
            Op::Write => "write",
        }
    }

    /// Whether the peer consumes a receive work request.
    pub fn needs_recv(self) -> bool {
        !matches!(self, Op::Write)
    }

    /// Whether the op is an RDMA write (needs the peer's rkey/address).
    pub fn is_write(self) -> bool {
        matches!(self, Op::Write | Op::WriteImm)
    }
}

/// `--inline`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum InlineMode {
    /// Inline when the message fits the device's max inline.
    Auto,
    /// Never inline.
    Off,
    /// Inline messages up to N bytes (N must not exceed the device max).
    Bytes(u32),
}

/// `--signal`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum SignalMode {
    /// Every send is signaled.
    Every,
    /// Every Nth send is signaled (1 <= N <= SQ depth).
    Period(u32),
    /// SQ depth / 2 (the thesis's best).
    Auto,
}

/// `--poll`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum PollMode {
    /// Spin on ibv_poll_cq.
    Busy,
    /// Completion channel: ibv_req_notify_cq, wait, ibv_get_cq_event, ack.
    Event,
}

/// A verbs run's configuration, typed and statically checked.
#[derive(Clone, Debug, Serialize)]
pub struct VerbsConfig {
    /// Device (None: the first with an active port).
    pub dev: Option<String>,
    /// Receiver's device in one-way loopback (None: same as `dev`).
    pub peer_dev: Option<String>,
    /// Port number.
    pub port: u8,
    /// GID index (None: the IPv4-mapped RoCE v2 GID on Ethernet).
    pub gid_index: Option<u32>,
    /// QP type.
    pub qp_type: QpType,
    /// Operation.
    pub op: Op,
    /// Message size in bytes.
    pub size: u32,
    /// Inline policy.
    pub inline: InlineMode,
    /// Signaling policy.
    pub signal: SignalMode,
    /// Receive completion polling.
    pub poll: PollMode,
    /// Send queue depth.
    pub sq_depth: u32,
    /// Receive queue depth.
    pub rq_depth: u32,
    /// Receives kept posted.
    pub rq_prepost: u32,
    /// Path MTU in bytes (None: the port's active MTU).
    pub mtu: Option<u32>,
    /// Message buffers in huge pages (`--hugepages`).
    pub hugepages: bool,
}

impl VerbsConfig {
    /// Builds and checks the configuration. Errors are `Config` refusals:
    /// write/write-imm on UD, event polling with plain write, a signal
    /// period above the SQ depth, a prepost above the RQ depth, a bad MTU.
    pub fn from_args(a: &VerbsArgs, qp_type: QpType, size: u32) -> Result<VerbsConfig, VerbsError> {
        let op = match a.op.as_str() {
            "send" => Op::Send,
            "send-imm" => Op::SendImm,
            "write-imm" => Op::WriteImm,
            "write" => Op::Write,
            o => {
                return Err(VerbsError::config(format!(
                    "unknown op {o:?}: send | send-imm | write-imm | write"
                )))
            }
        };
        let inline = match a.inline.as_str() {
            "auto" => InlineMode::Auto,
            "off" | "0" => InlineMode::Off,
            n => InlineMode::Bytes(n.parse().map_err(|_| {
                VerbsError::config(format!("bad --inline {n:?}: auto | off | N bytes"))
            })?),
        };
        let signal = match a.signal.as_str() {
            "every" | "1" => SignalMode::Every,
            "auto" => SignalMode::Auto,
            n => SignalMode::Period(n.parse().map_err(|_| {
                VerbsError::config(format!("bad --signal {n:?}: every | N | auto"))
            })?),
        };
        let poll = match a.poll.as_str() {
            "busy" => PollMode::Busy,
            "event" => PollMode::Event,
            p => {
                return Err(VerbsError::config(format!(
                    "bad --poll {p:?}: busy | event"
                )))
            }
        };
        let cfg = VerbsConfig {
            dev: a.dev.clone(),
            peer_dev: a.peer_dev.clone(),
            port: a.port,
            gid_index: a.gid_index,
            qp_type,
            op,
            size,
            inline,
            signal,
            poll,
            sq_depth: a.sq_depth,
            rq_depth: a.rq_depth,
            rq_prepost: a.rq_prepost.unwrap_or(a.rq_depth),
            mtu: a.mtu,
            hugepages: a.hugepages,
        };
        cfg.check()?;
        Ok(cfg)
    }

    /// The static checks (also run by [`super::prepare`] for configs built
    /// by hand).
    pub fn check(&self) -> Result<(), VerbsError> {
        let c = |m: String| VerbsError::config(m);
        if self.qp_type == QpType::Ud && self.op.is_write() {
            return Err(c(format!(
                "{} on UD: UD has no RDMA write (use send or send-imm)",
                self.op.name()
            )));
        }
        if self.op == Op::Write && self.size == 0 {
            return Err(c(
                "write with size 0: the receiver polls the last byte (size >= 1)".into(),
            ));
        }
        if self.op == Op::Write && self.poll == PollMode::Event {
            return Err(c(
                "poll event with write: plain RDMA write raises no receive completion (use write-imm or poll busy)"
                    .into(),
            ));
        }
        if self.sq_depth == 0 || self.rq_depth == 0 {
            return Err(c("SQ and RQ depth must be >= 1".into()));
        }
        if let SignalMode::Period(n) = self.signal {
            if n == 0 {
                return Err(c("signal period 0: use every, N >= 1 or auto".into()));
            }
            if n > self.sq_depth {
                return Err(c(format!(
                    "signal period {n} > SQ depth {}: the send queue would fill before a completion frees it",
                    self.sq_depth
                )));
            }
        }
        if self.rq_prepost > self.rq_depth {
            return Err(c(format!(
                "rq prepost {} > RQ depth {}",
                self.rq_prepost, self.rq_depth
            )));
        }
        if self.op.needs_recv() && self.rq_prepost == 0 {
            return Err(c(format!(
                "rq prepost 0: {} needs posted receives",
                self.op.name()
            )));
        }
        if let Some(m) = self.mtu {
            if super::device::mtu_from_bytes(m).is_none() {
                return Err(c(format!("mtu {m}: 256 | 512 | 1024 | 2048 | 4096")));
            }
        }
        if self.qp_type == QpType::Ud && self.size > 4096 {
            return Err(c(format!(
                "UD message {} B > 4096 B: UD sends one packet",
                self.size
            )));
        }
        Ok(())
    }

    /// The signal period the run uses (every = 1, auto = SQ depth / 2).
    pub fn signal_period(&self) -> u32 {
        match self.signal {
            SignalMode::Every => 1,
            SignalMode::Period(n) => n,
            SignalMode::Auto => (self.sq_depth / 2).max(1),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::verbs::VerbsErrorKind;
    use clap::Parser;

    #[derive(Parser)]
    struct T {
        #[command(flatten)]
        v: VerbsArgs,
    }

    fn cfg(args: &[&str], t: QpType, size: u32) -> Result<VerbsConfig, VerbsError> {
        let mut argv = vec!["t"];
        argv.extend_from_slice(args);
        VerbsConfig::from_args(&T::parse_from(argv).v, t, size)
    }

    fn refusal(args: &[&str], t: QpType, size: u32) -> String {
        let e = cfg(args, t, size).unwrap_err();
        assert_eq!(e.kind, VerbsErrorKind::Config, "{e}");
        assert_eq!(e.exit_code(), 2);
        e.message
    }

    #[test]
    fn defaults_parse() {
        let c = cfg(&[], QpType::Rc, 32).unwrap();
        assert_eq!(c.op, Op::Send);
        assert_eq!(c.inline, InlineMode::Auto);
        assert_eq!(c.signal_period(), 1);
        assert_eq!(c.poll, PollMode::Busy);
        assert_eq!(c.rq_prepost, 128);
        let c = cfg(
            &["--signal", "auto", "--sq-depth", "64", "--inline", "off"],
            QpType::Uc,
            8,
        )
        .unwrap();
        assert_eq!(c.signal_period(), 32);
        assert_eq!(c.inline, InlineMode::Off);
    }

    #[test]
    fn refusals_name_the_limit() {
        assert!(refusal(&["--op", "write"], QpType::Ud, 32).contains("UD has no RDMA write"));
        assert!(refusal(&["--op", "write-imm"], QpType::Ud, 32).contains("UD"));
        assert!(refusal(&["--signal", "200"], QpType::Rc, 32)
            .contains("signal period 200 > SQ depth 128"));
        assert!(
            refusal(&["--op", "write", "--poll", "event"], QpType::Rc, 32).contains("poll event")
        );
        assert!(refusal(&["--rq-prepost", "200"], QpType::Rc, 32)
            .contains("rq prepost 200 > RQ depth 128"));
        assert!(refusal(&["--mtu", "1000"], QpType::Rc, 32).contains("mtu 1000"));
        assert!(refusal(&["--op", "write"], QpType::Rc, 0).contains("size 0"));
        assert!(refusal(&["--inline", "lots"], QpType::Rc, 32).contains("--inline"));
        assert!(refusal(&["--op", "read"], QpType::Rc, 32).contains("unknown op"));
        assert!(refusal(&[], QpType::Ud, 8192).contains("UD message"));
    }
}
