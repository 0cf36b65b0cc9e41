//! Remote targets: where they come from and the merged, current set.
//!
//! Why it exists: the probe scheduler needs one list of peers, however they
//! were named — in the config (`targets.static`, [`static_list`]), in a
//! pinglist file ([`file_sd`]) or by a DNS name ([`dns`]). [`TargetSet`]
//! merges the sources, drops duplicates (same address and transport; the
//! first source wins, in the order static, file_sd, dns) and, with
//! `targets.skip_self`, this exporter's own responder; [`TargetSet::refresh`]
//! says what changed.
//!
//! Nothing here blocks for long: every DNS lookup is bounded by
//! `targets.resolve_timeout` (see [`dns::resolve_many`]), so one refresh
//! takes at most about one timeout per source that is due. Call
//! [`TargetSet::refresh`] from a dedicated thread, e.g. every second or at
//! [`TargetSet::next_due`]; sources that are not due cost nothing.
//!
//! Reloads: [`TargetSet::request_reload`] (or setting the flag from
//! [`TargetSet::reload_flag`]) makes the next refresh re-read every
//! pinglist and re-resolve every name. [`sighup_flag`] sets such a flag on
//! SIGHUP; pass it to [`TargetSet::use_reload_flag`].

pub mod cardinality;
pub mod dns;
pub mod file_sd;
pub mod plan;
pub mod simulate;
mod source;
pub mod static_list;

pub use cardinality::series_labels;
pub use source::{Origin, SourceError, Target, TargetKey};
pub(crate) use source::{Round, TargetSource};

use crate::config::{Config, TargetsConfig};
use std::collections::{BTreeMap, HashMap};
use std::net::{IpAddr, SocketAddr, UdpSocket};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, OnceLock};
use std::time::{Duration, Instant};

/// What one [`TargetSet::refresh`] changed.
///
/// Why it exists: the scheduler starts probing added targets, stops
/// removed ones (and drops their series), and reconfigures updated ones.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct RefreshReport {
    /// Targets that are new.
    pub added: Vec<Target>,
    /// Targets that are gone (as they were).
    pub removed: Vec<Target>,
    /// Targets with the same key whose name, labels, op, sizes or origin changed (new value).
    pub updated: Vec<Target>,
    /// Source failures in this refresh (each previous list was kept).
    pub errors: Vec<SourceError>,
    /// Whether this refresh was a reload (SIGHUP or [`TargetSet::request_reload`]).
    pub reloaded: bool,
    /// Targets dropped because another source already has the same key.
    pub duplicates: usize,
    /// Targets dropped because they are this exporter's own responder.
    pub skipped_self: usize,
}

impl RefreshReport {
    /// Whether the current set differs from before this refresh.
    pub fn changed(&self) -> bool {
        !(self.added.is_empty() && self.removed.is_empty() && self.updated.is_empty())
    }
}

/// The state of one source, for status pages and counters.
///
/// Why it exists: "why is peer X not probed?" is answered by the source's
/// last error.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SourceStatus {
    /// The source.
    pub origin: Origin,
    /// Targets it currently contributes (before deduplication).
    pub targets: usize,
    /// Failures since start.
    pub failures: u64,
    /// The last failure, until the next success.
    pub last_error: Option<String>,
}

/// All remote targets, merged from every configured source.
///
/// Why it exists: the scheduler's one view of "whom to probe now".
#[derive(Debug)]
pub struct TargetSet {
    sources: Vec<Box<dyn TargetSource>>,
    current: Vec<Target>,
    resolve_timeout: Duration,
    skip_self: bool,
    self_port: Option<u16>,
    local_ips: HashMap<IpAddr, bool>,
    reload: Arc<AtomicBool>,
    skipped: Vec<Target>,
}

impl TargetSet {
    /// The target set of a configuration: its sources, and (with
    /// `skip_self`) the responder's port as "self". Empty until the first
    /// [`TargetSet::refresh`].
    pub fn new(config: &Config) -> TargetSet {
        TargetSet::from_targets(&config.targets, Some(config.responder.bind.port()))
    }

    /// As [`TargetSet::new`], from the `[targets]` section alone;
    /// `self_port`: this exporter's responder port (a target at one of this
    /// host's addresses and this port is skipped when `skip_self` is on).
    pub fn from_targets(cfg: &TargetsConfig, self_port: Option<u16>) -> TargetSet {
        let mut sources: Vec<Box<dyn TargetSource>> = Vec::new();
        if !cfg.static_targets.is_empty() {
            sources.push(Box::new(static_list::StaticList::new(
                cfg.static_targets.clone(),
            )));
        }
        for f in &cfg.file_sd {
            sources.push(Box::new(file_sd::FileSdWatch::new(f.clone())));
        }
        for d in &cfg.dns {
            sources.push(Box::new(dns::DnsWatch::new(d.clone())));
        }
        TargetSet {
            sources,
            current: Vec::new(),
            resolve_timeout: cfg.resolve_timeout,
            skip_self: cfg.skip_self,
            self_port,
            local_ips: HashMap::new(),
            reload: Arc::new(AtomicBool::new(false)),
            skipped: Vec::new(),
        }
    }

    /// The current targets, sorted by [`TargetKey`].
    pub fn current(&self) -> &[Target] {
        &self.current
    }

    /// The targets the last refresh skipped as this exporter's own
    /// responder (`skip_self`): this exporter as the list names it, which is
    /// how a probe plan knows its own member and rack.
    pub fn skipped_self(&self) -> &[Target] {
        &self.skipped
    }

    /// Makes the next refresh a reload: every pinglist re-read, every name
    /// re-resolved, whether due or not.
    pub fn request_reload(&self) {
        self.reload.store(true, Ordering::SeqCst);
    }

    /// The flag [`TargetSet::request_reload`] sets; set it from another
    /// thread or a signal handler to request a reload.
    pub fn reload_flag(&self) -> Arc<AtomicBool> {
        Arc::clone(&self.reload)
    }

    /// Uses `flag` (e.g. from [`sighup_flag`]) as the reload flag.
    pub fn use_reload_flag(&mut self, flag: Arc<AtomicBool>) {
        self.reload = flag;
    }

    /// The earliest time a source is due; `None` when no source will ever
    /// be due without a reload.
    pub fn next_due(&self) -> Option<Instant> {
        self.sources.iter().filter_map(|s| s.next_due()).min()
    }

    /// Per-source state: targets, failures, last error.
    pub fn sources(&self) -> Vec<SourceStatus> {
        self.sources
            .iter()
            .map(|s| SourceStatus {
                origin: s.origin(),
                targets: s.state().targets.len(),
                failures: s.state().failures,
                last_error: s.state().last_error.clone(),
            })
            .collect()
    }

    fn is_self(&mut self, addr: SocketAddr) -> bool {
        if !self.skip_self || self.self_port != Some(addr.port()) {
            return false;
        }
        let ip = addr.ip();
        // Binding succeeds only for an address this host has.
        *self
            .local_ips
            .entry(ip)
            .or_insert_with(|| UdpSocket::bind(SocketAddr::new(ip, 0)).is_ok())
    }

    /// Refreshes every due source (all of them on a reload) and merges.
    /// Blocks at most about `targets.resolve_timeout` per due source.
    pub fn refresh(&mut self) -> RefreshReport {
        let now = Instant::now();
        let force = self.reload.swap(false, Ordering::SeqCst);
        let mut report = RefreshReport {
            reloaded: force,
            ..RefreshReport::default()
        };
        if force {
            self.local_ips.clear();
        }
        let round = Round {
            now,
            force,
            resolve_timeout: self.resolve_timeout,
        };
        for s in &mut self.sources {
            s.refresh(round, &mut report.errors);
        }
        let all: Vec<Target> = self
            .sources
            .iter()
            .flat_map(|s| s.state().targets.iter().cloned())
            .collect();
        let mut merged: BTreeMap<TargetKey, Target> = BTreeMap::new();
        self.skipped.clear();
        for t in all {
            if self.is_self(t.addr) {
                report.skipped_self += 1;
                self.skipped.push(t);
                continue;
            }
            match merged.entry(t.key()) {
                std::collections::btree_map::Entry::Vacant(v) => {
                    v.insert(t);
                }
                std::collections::btree_map::Entry::Occupied(_) => report.duplicates += 1,
            }
        }
        let mut old: BTreeMap<TargetKey, Target> =
            self.current.drain(..).map(|t| (t.key(), t)).collect();
        for (k, t) in &merged {
            match old.remove(k) {
                None => report.added.push(t.clone()),
                Some(o) if o != *t => report.updated.push(t.clone()),
                Some(_) => {}
            }
        }
        report.removed = old.into_values().collect();
        self.current = merged.into_values().collect();
        report
    }
}

static SIGHUP: OnceLock<Arc<AtomicBool>> = OnceLock::new();

/// A flag set to `true` whenever the process receives SIGHUP (the consumer
/// resets it); registers the handler on first call, later calls return the
/// same flag.
///
/// Why it exists: `kill -HUP` is how operators ask daemons to re-read their
/// inputs. The handler runs on a small dedicated thread (tokio's signal
/// support on a one-thread runtime; no `unsafe`, no extra crate). Once this
/// returns `Ok`, SIGHUP no longer terminates the process. Pass the flag to
/// [`TargetSet::use_reload_flag`].
pub fn sighup_flag() -> std::io::Result<Arc<AtomicBool>> {
    if let Some(f) = SIGHUP.get() {
        return Ok(Arc::clone(f));
    }
    let flag = Arc::new(AtomicBool::new(false));
    let (tx, rx) = std::sync::mpsc::channel::<std::io::Result<()>>();
    let f = Arc::clone(&flag);
    std::thread::Builder::new()
        .name("ibexporter-sighup".into())
        .spawn(move || {
            let rt = match tokio::runtime::Builder::new_current_thread()
                .enable_io()
                .build()
            {
                Ok(rt) => rt,
                Err(e) => {
                    let _ = tx.send(Err(e));
                    return;
                }
            };
            rt.block_on(async move {
                use tokio::signal::unix::{signal, SignalKind};
                let mut s = match signal(SignalKind::hangup()) {
                    Ok(s) => {
                        let _ = tx.send(Ok(()));
                        s
                    }
                    Err(e) => {
                        let _ = tx.send(Err(e));
                        return;
                    }
                };
                while s.recv().await.is_some() {
                    tracing::info!("SIGHUP: reloading target sources");
                    f.store(true, Ordering::SeqCst);
                }
            });
        })?;
    rx.recv().map_err(|_| {
        std::io::Error::other("the SIGHUP thread ended before registering its handler")
    })??;
    // A concurrent first call may have won; both handlers set their own flag,
    // the winner's is returned to everyone from now on.
    Ok(Arc::clone(SIGHUP.get_or_init(|| flag)))
}
