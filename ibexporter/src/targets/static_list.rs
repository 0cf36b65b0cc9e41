//! The `targets.static` source: peers named in the config file.
//!
//! Why it exists: the simplest mesh is a fixed list. IP addresses are used
//! as written; host names are resolved (bounded by
//! `targets.resolve_timeout`, first address in resolver order), again on
//! every reload (SIGHUP), and retried every [`RETRY`] while they fail.
//! A name that fails after having resolved keeps its previous address.

use super::dns::resolve_many;
use super::source::{Origin, Round, SourceError, SourceState, Target, TargetSource};
use crate::config::StaticTarget;
use std::net::SocketAddr;
use std::time::{Duration, Instant};

/// How soon a static host name that failed to resolve is tried again.
pub const RETRY: Duration = Duration::from_secs(30);

/// The configured static targets and their resolved addresses.
///
/// Why it exists: resolves once, not on every refresh, and remembers the
/// last good address of each name.
#[derive(Debug)]
pub struct StaticList {
    entries: Vec<StaticTarget>,
    addrs: Vec<Option<SocketAddr>>,
    started: bool,
    next_retry: Option<Instant>,
    state: SourceState,
}

/// The `target` name of a static entry: `host:port`, IPv6 in brackets.
pub fn static_name(host: &str, port: u16) -> String {
    if host.contains(':') {
        format!("[{host}]:{port}")
    } else {
        format!("{host}:{port}")
    }
}

impl StaticList {
    /// Takes the `targets.static` entries; nothing is resolved until the first refresh.
    pub fn new(entries: Vec<StaticTarget>) -> Self {
        let n = entries.len();
        StaticList {
            entries,
            addrs: vec![None; n],
            started: false,
            next_retry: None,
            state: SourceState::default(),
        }
    }
}

impl TargetSource for StaticList {
    fn origin(&self) -> Origin {
        Origin::Static
    }

    fn refresh(&mut self, round: Round, errors: &mut Vec<SourceError>) {
        let retry_due = self.next_retry.is_some_and(|t| round.now >= t);
        if self.started && !round.force && !retry_due {
            return;
        }
        // First time or reload: everything; a retry: only what failed.
        let all = !self.started || round.force;
        self.started = true;
        let todo: Vec<usize> = (0..self.entries.len())
            .filter(|&i| all || self.addrs[i].is_none())
            .collect();
        let names: Vec<(String, u16)> = todo
            .iter()
            .map(|&i| (self.entries[i].host.clone(), self.entries[i].port))
            .collect();
        let results = resolve_many(&names, round.resolve_timeout);
        let mut failed = false;
        for (&i, r) in todo.iter().zip(results) {
            match r {
                Ok(a) => self.addrs[i] = a.first().copied(),
                Err(err) => {
                    failed = true;
                    let e = &self.entries[i];
                    let keeping = match self.addrs[i] {
                        Some(a) => format!("keeping its previous address {a}"),
                        None => format!(
                            "not probed until it resolves (next try in {}s)",
                            RETRY.as_secs()
                        ),
                    };
                    let message = format!(
                        "targets.static {}: {err}; {keeping}",
                        static_name(&e.host, e.port)
                    );
                    self.state.fail(Origin::Static, message, errors);
                }
            }
        }
        if failed {
            self.next_retry = Some(round.now + RETRY);
        } else {
            self.state.last_error = None;
            self.next_retry = self
                .addrs
                .iter()
                .any(Option::is_none)
                .then_some(round.now + RETRY);
        }
        self.state.targets = self
            .entries
            .iter()
            .zip(&self.addrs)
            .filter_map(|(e, a)| {
                Some(Target::new(
                    static_name(&e.host, e.port),
                    (*a)?,
                    e.labels.clone(),
                    &e.probe,
                    Origin::Static,
                ))
            })
            .collect();
    }

    fn next_due(&self) -> Option<Instant> {
        self.next_retry
    }

    fn state(&self) -> &SourceState {
        &self.state
    }
}
