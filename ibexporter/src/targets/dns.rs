//! DNS: name lookups with a bounded wait, and the `targets.dns` source.
//!
//! Why it exists: `getaddrinfo` can block for tens of seconds on a broken
//! resolver; the exporter's refresh thread must not. Every lookup here
//! runs on a helper thread and is abandoned (left to finish on its own)
//! when the timeout passes. A `targets.dns` entry (a headless Kubernetes
//! Service) turns every A/AAAA record into a target named `<ip>:<port>`.

use super::source::{Origin, Round, SourceError, SourceState, Target, TargetSource};
use crate::config::DnsSource;
use crate::limits::MAX_PARALLEL_LOOKUPS;
use std::collections::VecDeque;
use std::net::{IpAddr, SocketAddr, ToSocketAddrs};
use std::sync::mpsc;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// Why a name gave no address.
///
/// Why it exists: a timeout (resolver slow or unreachable) and a failure
/// (name unknown) call for different fixes; both messages say which.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ResolveError {
    /// No answer within the timeout; the lookup thread is left behind.
    #[error("DNS lookup of {host:?} took longer than {timeout:?}; check the resolver (/etc/resolv.conf) or raise targets.resolve_timeout")]
    Timeout {
        /// The name looked up.
        host: String,
        /// The bound that passed.
        timeout: Duration,
    },
    /// The resolver answered with an error.
    #[error("cannot resolve {host:?}: {message}; check the name and the resolver")]
    Failed {
        /// The name looked up.
        host: String,
        /// The resolver's error.
        message: String,
    },
    /// The resolver answered with no address.
    #[error("{host:?} resolves to no address; check that the name has A/AAAA records")]
    Empty {
        /// The name looked up.
        host: String,
    },
}

/// Parses an IP literal, with or without `[]` around IPv6.
pub(crate) fn ip_literal(host: &str) -> Option<IpAddr> {
    let h = host.trim();
    let h = h
        .strip_prefix('[')
        .and_then(|x| x.strip_suffix(']'))
        .unwrap_or(h);
    h.parse().ok()
}

fn lookup(host: &str, port: u16) -> Result<Vec<SocketAddr>, ResolveError> {
    match (host, port).to_socket_addrs() {
        Ok(it) => {
            let mut out: Vec<SocketAddr> = Vec::new();
            for a in it {
                if !out.contains(&a) {
                    out.push(a);
                }
            }
            if out.is_empty() {
                Err(ResolveError::Empty { host: host.into() })
            } else {
                Ok(out)
            }
        }
        Err(e) => Err(ResolveError::Failed {
            host: host.into(),
            message: e.to_string(),
        }),
    }
}

/// Resolves `host` to all its addresses (resolver order, duplicates
/// removed), waiting at most `timeout`. IP literals return at once.
///
/// Why it exists: the one bounded lookup every source uses.
pub fn resolve(host: &str, port: u16, timeout: Duration) -> Result<Vec<SocketAddr>, ResolveError> {
    resolve_many(&[(host.to_string(), port)], timeout)
        .pop()
        .expect("one result per name")
}

/// Resolves many names at once (up to [`MAX_PARALLEL_LOOKUPS`] in
/// parallel), all within one `timeout`; one result per input, in order.
///
/// Why it exists: a pinglist may name hundreds of hosts; one slow name
/// must not cost hundreds of timeouts.
pub fn resolve_many(
    names: &[(String, u16)],
    timeout: Duration,
) -> Vec<Result<Vec<SocketAddr>, ResolveError>> {
    let deadline = Instant::now() + timeout;
    let mut results: Vec<Option<Result<Vec<SocketAddr>, ResolveError>>> = vec![None; names.len()];
    let mut queue = VecDeque::new();
    for (i, (host, port)) in names.iter().enumerate() {
        match ip_literal(host) {
            Some(ip) => results[i] = Some(Ok(vec![SocketAddr::new(ip, *port)])),
            None => queue.push_back((i, host.clone(), *port)),
        }
    }
    let mut remaining = queue.len();
    if remaining > 0 {
        let workers = remaining.min(MAX_PARALLEL_LOOKUPS);
        let queue = Arc::new(Mutex::new(queue));
        let (tx, rx) = mpsc::channel();
        for _ in 0..workers {
            let queue = Arc::clone(&queue);
            let tx = tx.clone();
            // A thread that cannot start leaves its names to the others,
            // or to the timeout below.
            let _ = std::thread::Builder::new()
                .name("ibexporter-dns".into())
                .spawn(move || loop {
                    if Instant::now() >= deadline {
                        break;
                    }
                    let item = match queue.lock() {
                        Ok(mut q) => q.pop_front(),
                        Err(_) => None,
                    };
                    let Some((i, host, port)) = item else { break };
                    if tx.send((i, lookup(&host, port))).is_err() {
                        break;
                    }
                });
        }
        drop(tx);
        while remaining > 0 {
            let now = Instant::now();
            if now >= deadline {
                break;
            }
            match rx.recv_timeout(deadline - now) {
                Ok((i, r)) => {
                    results[i] = Some(r);
                    remaining -= 1;
                }
                Err(_) => break,
            }
        }
    }
    results
        .into_iter()
        .zip(names)
        .map(|(r, (host, _))| {
            r.unwrap_or_else(|| {
                Err(ResolveError::Timeout {
                    host: host.clone(),
                    timeout,
                })
            })
        })
        .collect()
}

/// A `targets.dns` entry and what it last resolved to.
///
/// Why it exists: keeps the previous addresses when a lookup fails (a
/// resolver hiccup must not drop every peer's series).
#[derive(Debug)]
pub struct DnsWatch {
    cfg: DnsSource,
    next: Option<Instant>,
    state: SourceState,
}

impl DnsWatch {
    /// Watches one `targets.dns` entry; nothing is resolved until the first refresh.
    pub fn new(cfg: DnsSource) -> Self {
        DnsWatch {
            cfg,
            next: None,
            state: SourceState::default(),
        }
    }
}

impl TargetSource for DnsWatch {
    fn origin(&self) -> Origin {
        Origin::Dns(self.cfg.name.clone())
    }

    fn refresh(&mut self, round: Round, errors: &mut Vec<SourceError>) {
        if !round.force && self.next.is_some_and(|n| round.now < n) {
            return;
        }
        self.next = Some(round.now + self.cfg.refresh);
        match resolve(&self.cfg.name, self.cfg.port, round.resolve_timeout) {
            Ok(mut addrs) => {
                addrs.sort();
                self.state.targets = addrs
                    .into_iter()
                    .map(|a| {
                        Target::new(
                            a.to_string(),
                            a,
                            self.cfg.labels.clone(),
                            &self.cfg.probe,
                            self.origin(),
                        )
                    })
                    .collect();
                self.state.last_error = None;
            }
            Err(e) => {
                let message = format!(
                    "targets.dns {:?}: {e}; keeping the previous {} targets",
                    self.cfg.name,
                    self.state.targets.len()
                );
                self.state.fail(self.origin(), message, errors);
            }
        }
    }

    fn next_due(&self) -> Option<Instant> {
        self.next
    }

    fn state(&self) -> &SourceState {
        &self.state
    }
}
