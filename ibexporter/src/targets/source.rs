//! What every source of targets shares: a [`Target`] and its [`TargetKey`],
//! where it came from ([`Origin`]), a failed refresh ([`SourceError`]), and
//! the seam a source implements (`TargetSource`, with its `Round` and
//! `SourceState`). Its own file so that the sources take these from here,
//! not through `mod.rs`, which runs them.

use crate::config::{Op, TargetProbe, Transport};
use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::time::{Duration, Instant};

/// Where a target came from.
///
/// Why it exists: logs and per-source error counters name the source.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Origin {
    /// `targets.static` in the config file.
    Static,
    /// A `targets.file_sd` pinglist.
    FileSd(PathBuf),
    /// A `targets.dns` name.
    Dns(String),
}

impl std::fmt::Display for Origin {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Origin::Static => write!(f, "static"),
            Origin::FileSd(p) => write!(f, "file_sd:{}", p.display()),
            Origin::Dns(n) => write!(f, "dns:{n}"),
        }
    }
}

/// What identifies a target: one address probed over one transport.
///
/// Why it exists: the key of the scheduler's per-target state and of
/// deduplication (the same peer may be probed over rc and udp).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct TargetKey {
    /// The peer's responder address.
    pub addr: SocketAddr,
    /// The transport it is probed over.
    pub transport: Transport,
}

/// One remote peer to probe.
///
/// Why it exists: everything the scheduler needs to probe a peer and label
/// its series.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Target {
    /// The peer as named: `host:port` as written (static, file_sd) or `<ip>:<port>` (dns).
    pub name: String,
    /// The resolved responder address.
    pub addr: SocketAddr,
    /// Labels from the config and the pinglist (no reserved or `__` names).
    pub labels: BTreeMap<String, String>,
    /// Transport.
    pub transport: Transport,
    /// Verbs operation (`send` for udp).
    pub op: Op,
    /// Message sizes in bytes, each probed every round.
    pub sizes: Vec<usize>,
    /// The source it came from.
    pub origin: Origin,
}

impl Target {
    /// Builds a target from its parts.
    pub fn new(
        name: String,
        addr: SocketAddr,
        labels: BTreeMap<String, String>,
        probe: &TargetProbe,
        origin: Origin,
    ) -> Target {
        Target {
            name,
            addr,
            labels,
            transport: probe.transport,
            op: probe.op,
            sizes: probe.sizes.clone(),
            origin,
        }
    }

    /// Its identity: address and transport.
    pub fn key(&self) -> TargetKey {
        TargetKey {
            addr: self.addr,
            transport: self.transport,
        }
    }
}

/// A failure of one source during a refresh.
///
/// Why it exists: the caller counts them (e.g. a
/// `..._target_source_errors_total{source=...}` counter); each is already
/// logged once with `tracing::warn!`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SourceError {
    /// The source that failed.
    pub origin: Origin,
    /// One line: what failed, with what input, what was kept, what to do.
    pub message: String,
}

impl std::fmt::Display for SourceError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.message)
    }
}

/// When and how one [`TargetSet::refresh`] asks its sources to refresh.
///
/// Why it exists: every source gets the same three facts; one value keeps
/// [`TargetSource::refresh`] short.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Round {
    /// The time of this refresh.
    pub(super) now: Instant,
    /// A reload: re-read / re-resolve even if not due.
    pub(super) force: bool,
    /// The bound on every DNS lookup (`targets.resolve_timeout`).
    pub(super) resolve_timeout: Duration,
}

/// What every source keeps: its current targets and its failure record.
///
/// Why it exists: the status of a source ([`SourceStatus`]) and the steps
/// of a failure (count, log once, remember, report) are the same for every
/// source; each source holds one of these and defines only how it refreshes.
#[derive(Debug, Default)]
pub(crate) struct SourceState {
    /// The targets it currently contributes (the last good list on failure).
    pub(super) targets: Vec<Target>,
    /// Failures since start.
    pub(super) failures: u64,
    /// The last failure, until the next success.
    pub(super) last_error: Option<String>,
}

impl SourceState {
    /// Records one failure of `origin`: counts it, logs `message` once with
    /// `tracing::warn!`, keeps it as the last error and pushes it to `errors`.
    pub(super) fn fail(&mut self, origin: Origin, message: String, errors: &mut Vec<SourceError>) {
        self.failures += 1;
        tracing::warn!("{message}");
        self.last_error = Some(message.clone());
        errors.push(SourceError { origin, message });
    }
}

/// One source of targets (static, file_sd, dns).
pub(crate) trait TargetSource: Send + std::fmt::Debug {
    fn origin(&self) -> Origin;
    /// Re-reads / re-resolves if due (or a reload); on failure keeps its
    /// previous targets and pushes the error.
    fn refresh(&mut self, round: Round, errors: &mut Vec<SourceError>);
    fn next_due(&self) -> Option<Instant>;
    /// Its current targets and failure record.
    fn state(&self) -> &SourceState;
}
