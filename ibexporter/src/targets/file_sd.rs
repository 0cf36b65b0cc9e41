//! The `targets.file_sd` source: a pinglist in Prometheus' file_sd JSON.
//!
//! Why it exists: in a Pingmesh-style deployment a controller writes each
//! host's pinglist; the exporter follows the file. The format is
//! Prometheus' file_sd, **JSON only** (YAML pinglists are not read):
//!
//! ```json
//! [
//!   {"targets": ["10.0.0.2:18515", "node7:18515", "10.0.0.3"],
//!    "labels": {"rack": "r1", "__transport": "udp", "__sizes": "32,4096"}}
//! ]
//! ```
//!
//! - A target without a port gets the entry's `port` (default 18515).
//!   IPv6 is written `[fe80::1]:18515`. The target's name (its `target`
//!   label) is the string as written.
//! - Labels are the entry's `labels` overridden by the group's. Meta labels
//!   set how the group is probed and are not exported: `__transport`
//!   (rc|uc|ud|udp), `__op` (send|send-imm|write-imm|write), `__sizes`
//!   (`"32,4096"`). Labels starting with `__meta_` are dropped; any other
//!   `__` label is an error (probably a typo).
//! - The file is checked every `refresh` and re-read when its size, mtime
//!   or inode changed (an atomic rename is seen), or at once on a reload
//!   (SIGHUP). Host names are resolved again at every check.
//! - A file that cannot be read or parsed, or that has one bad entry,
//!   changes nothing: the previous good list is kept, the failure is
//!   counted and logged once as `file:line:col: what; what to do`.

use super::dns::{ip_literal, resolve_many};
use super::source::{Origin, Round, SourceError, SourceState, Target, TargetSource};
use crate::config::{
    check_combo, check_label_name, check_size, target_transport, FileSdSource, Op, TargetProbe,
    Transport,
};
use crate::limits::MAX_PINGLIST;
use serde::Deserialize;
use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::os::unix::fs::MetadataExt;
use std::path::Path;
use std::time::Instant;

/// One group of a file_sd pinglist, as written.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct Group {
    targets: Vec<String>,
    #[serde(default)]
    labels: BTreeMap<String, String>,
}

/// One parsed pinglist target, before resolution.
#[derive(Debug, Clone, PartialEq)]
struct Entry {
    name: String,
    host: String,
    port: u16,
    labels: BTreeMap<String, String>,
    probe: TargetProbe,
}

/// What identifies a version of the file without reading it.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Stamp {
    Present {
        len: u64,
        mtime_ns: i128,
        ino: u64,
        dev: u64,
    },
    Missing(String),
}

fn stamp(path: &Path) -> Stamp {
    match std::fs::metadata(path) {
        Ok(m) => Stamp::Present {
            len: m.len(),
            mtime_ns: m.mtime() as i128 * 1_000_000_000 + m.mtime_nsec() as i128,
            ino: m.ino(),
            dev: m.dev(),
        },
        Err(e) => Stamp::Missing(e.to_string()),
    }
}

/// A pinglist's text, through the bounded reader: a FIFO or device is
/// refused without waiting on it, a file over [`MAX_PINGLIST`] without
/// reading it all. The error is one line naming the path and the fix.
pub fn read_pinglist(path: &Path) -> Result<String, String> {
    use ibhost::file::SmallFileError;
    ibhost::file::read_small_text(path, MAX_PINGLIST).map_err(|e| match e {
        SmallFileError::Io { source, .. } => format!(
            "{}: cannot read the pinglist: {source}; check its permissions",
            path.display()
        ),
        other => format!("{other} (a file_sd pinglist is a JSON file)"),
    })
}

/// A 1-based (line, column) of a byte offset.
fn line_col(text: &str, offset: usize) -> (usize, usize) {
    let before = &text[..offset.min(text.len())];
    let line = before.matches('\n').count() + 1;
    let start = before.rfind('\n').map(|i| i + 1).unwrap_or(0);
    (line, before[start..].chars().count() + 1)
}

/// Where the JSON string `s` first appears in `text`, as `:line:col`.
fn pos_of(text: &str, s: &str) -> String {
    let quoted = serde_json::to_string(s).unwrap_or_default();
    match text.find(&quoted) {
        Some(off) => {
            let (l, c) = line_col(text, off);
            format!(":{l}:{c}")
        }
        None => String::new(),
    }
}

/// Splits `host:port`, `[v6]:port`, `host` or a bare IPv6 address.
fn split_target(s: &str, default_port: u16) -> Result<(String, u16), String> {
    let t = s.trim();
    if t.is_empty() {
        return Err("empty target; write \"host:port\"".into());
    }
    let bad_port = |p: &str| {
        format!("port {p:?} is not 1..=65535; write \"host:port\" with a valid port, or leave the port out for {default_port}")
    };
    let parse_port = |p: &str| match p.parse::<u16>() {
        Ok(n) if n > 0 => Ok(n),
        _ => Err(bad_port(p)),
    };
    if let Some(rest) = t.strip_prefix('[') {
        let Some((h, after)) = rest.split_once(']') else {
            return Err("unclosed '['; write IPv6 targets as \"[fe80::1]:18515\"".into());
        };
        let port = match after.strip_prefix(':') {
            Some(p) => parse_port(p)?,
            None if after.is_empty() => default_port,
            None => return Err("text after ']'; write IPv6 targets as \"[fe80::1]:18515\"".into()),
        };
        return Ok((h.to_string(), port));
    }
    if ip_literal(t).is_some() {
        // A bare IPv6 (or IPv4) address without port.
        return Ok((t.to_string(), default_port));
    }
    match t.rsplit_once(':') {
        Some((h, _)) if h.contains(':') => {
            Err("IPv6 address with a port must be in brackets; write \"[fe80::1]:18515\"".into())
        }
        Some((h, p)) => Ok((h.to_string(), parse_port(p)?)),
        None => Ok((t.to_string(), default_port)),
    }
}

/// Parses a pinglist; the error is one line with `path:line:col`.
fn parse_pinglist(path: &Path, text: &str, cfg: &FileSdSource) -> Result<Vec<Entry>, String> {
    let file = path.display();
    let groups: Vec<Group> = serde_json::from_str(text).map_err(|e| {
        let full = e.to_string();
        let suffix = format!(" at line {} column {}", e.line(), e.column());
        let msg = full.strip_suffix(&suffix).unwrap_or(&full);
        format!(
            "{file}:{}:{}: invalid pinglist JSON: {msg}; write Prometheus file_sd JSON: [{{\"targets\": [\"host:port\"], \"labels\": {{\"rack\": \"r1\"}}}}]",
            e.line(),
            e.column()
        )
    })?;
    let mut out = Vec::new();
    for (gi, g) in groups.into_iter().enumerate() {
        let mut probe = cfg.probe.clone();
        let mut labels = cfg.labels.clone();
        let mut op_set = false;
        for (k, v) in &g.labels {
            let at = pos_of(text, k);
            let err = |m: String| format!("{file}{at}: group {gi} label {k:?} = {v:?}: {m}");
            match k.as_str() {
                "__transport" => {
                    probe.transport = target_transport(v)
                        .ok_or_else(|| err("unknown transport; use rc, uc, ud or udp".into()))?;
                }
                "__op" => {
                    probe.op = v.parse::<Op>().ok().ok_or_else(|| {
                        err("unknown operation; use send, send-imm, write-imm or write".into())
                    })?;
                    op_set = true;
                }
                "__sizes" => {
                    let mut sizes = Vec::new();
                    for part in v.split(',') {
                        let n: i64 = part.trim().parse().map_err(|_| {
                            err(format!(
                                "{part:?} is not a size; write sizes in bytes as \"32,4096\""
                            ))
                        })?;
                        sizes.push(n);
                    }
                    probe.sizes = sizes.into_iter().map(|n| n as usize).collect();
                    probe.sizes.sort_unstable();
                    probe.sizes.dedup();
                }
                _ if k.starts_with("__meta_") => {}
                _ => {
                    check_label_name(k).map_err(err)?;
                    labels.insert(k.clone(), v.clone());
                }
            }
        }
        if probe.transport == Transport::Udp && !op_set {
            probe.op = Op::Send;
        }
        let at = g
            .labels
            .keys()
            .next()
            .map(|k| pos_of(text, k))
            .unwrap_or_default();
        check_combo(probe.transport, probe.op)
            .map_err(|m| format!("{file}{at}: group {gi}: {m}"))?;
        for &s in &probe.sizes {
            check_size(probe.transport, s as i64)
                .map_err(|m| format!("{file}{at}: group {gi}: {m}"))?;
        }
        for t in &g.targets {
            let (host, port) = split_target(t, cfg.port)
                .map_err(|m| format!("{file}{}: group {gi} target {t:?}: {m}", pos_of(text, t)))?;
            out.push(Entry {
                name: t.trim().to_string(),
                host,
                port,
                labels: labels.clone(),
                probe: probe.clone(),
            });
        }
    }
    Ok(out)
}

/// The members of a pinglist as a probe plan sees them: each target's
/// name (as written, its `target` label) and its `rack_label` value (`""`
/// without one). The error is one line with `path:line:col`.
///
/// Why it exists: `ibexporter mesh` reads the same list the exporters do,
/// with the same checks, without resolving any name.
pub fn plan_members(
    path: &Path,
    text: &str,
    rack_label: &str,
) -> Result<Vec<(String, String)>, String> {
    let cfg = crate::config::Config::default();
    let src = FileSdSource {
        path: path.to_path_buf(),
        refresh: std::time::Duration::from_secs(30),
        port: crate::config::DEFAULT_RESPONDER_PORT,
        labels: BTreeMap::new(),
        probe: TargetProbe {
            transport: cfg.probe.transport,
            op: cfg.probe.op,
            sizes: cfg.probe.sizes.clone(),
        },
    };
    Ok(parse_pinglist(path, text, &src)?
        .into_iter()
        .map(|e| {
            let rack = e.labels.get(rack_label).cloned().unwrap_or_default();
            (e.name, rack)
        })
        .collect())
}

/// A `targets.file_sd` entry: the pinglist's last good content.
///
/// Why it exists: follows one file, keeping the last good list across
/// bad writes.
#[derive(Debug)]
pub struct FileSdWatch {
    cfg: FileSdSource,
    stamp: Option<Stamp>,
    checked: Option<Instant>,
    entries: Vec<Entry>,
    addrs: BTreeMap<(String, u16), SocketAddr>,
    state: SourceState,
}

impl FileSdWatch {
    /// Follows one `targets.file_sd` entry; nothing is read until the first refresh.
    pub fn new(cfg: FileSdSource) -> Self {
        FileSdWatch {
            cfg,
            stamp: None,
            checked: None,
            entries: Vec::new(),
            addrs: BTreeMap::new(),
            state: SourceState::default(),
        }
    }

    /// A failure of the whole pinglist: the previous list is kept.
    fn fail(&mut self, message: String, errors: &mut Vec<SourceError>) {
        let message = format!(
            "{message} (keeping the previous {} targets)",
            self.state.targets.len()
        );
        self.state.fail(self.origin(), message, errors);
    }
}

impl TargetSource for FileSdWatch {
    fn origin(&self) -> Origin {
        Origin::FileSd(self.cfg.path.clone())
    }

    fn refresh(&mut self, round: Round, errors: &mut Vec<SourceError>) {
        if !round.force
            && self
                .checked
                .is_some_and(|c| round.now < c + self.cfg.refresh)
        {
            return;
        }
        self.checked = Some(round.now);
        let st = stamp(&self.cfg.path);
        let changed = round.force || self.stamp.as_ref() != Some(&st);
        let mut reparsed = false;
        if changed {
            self.stamp = Some(st.clone());
            let file = self.cfg.path.display().to_string();
            match st {
                Stamp::Missing(e) => self.fail(
                    format!("{file}: cannot read the pinglist: {e}; create it or fix targets.file_sd.path"),
                    errors,
                ),
                Stamp::Present { .. } => match read_pinglist(&self.cfg.path) {
                    Err(m) => self.fail(m, errors),
                    Ok(text) => match parse_pinglist(&self.cfg.path, &text, &self.cfg) {
                        Ok(entries) => {
                            self.entries = entries;
                            reparsed = true;
                            self.state.last_error = None;
                        }
                        Err(m) => self.fail(m, errors),
                    },
                },
            }
        }
        let names: Vec<(String, u16)> = self
            .entries
            .iter()
            .filter(|e| ip_literal(&e.host).is_none())
            .map(|e| (e.host.clone(), e.port))
            .collect();
        if !reparsed && names.is_empty() {
            return;
        }
        let results = resolve_many(&names, round.resolve_timeout);
        let mut resolved = BTreeMap::new();
        for ((host, port), r) in names.into_iter().zip(results) {
            match r {
                Ok(a) => {
                    resolved.insert((host, port), a[0]);
                }
                Err(e) => {
                    let prev = self.addrs.get(&(host.clone(), port)).copied();
                    let keeping = match prev {
                        Some(a) => format!("keeping its previous address {a}"),
                        None => "not probed until it resolves".to_string(),
                    };
                    let message = format!(
                        "{}: target {host}:{port}: {e}; {keeping}",
                        self.cfg.path.display()
                    );
                    self.state.fail(self.origin(), message, errors);
                    if let Some(a) = prev {
                        resolved.insert((host, port), a);
                    }
                }
            }
        }
        self.addrs = resolved;
        let origin = self.origin();
        self.state.targets = self
            .entries
            .iter()
            .filter_map(|e| {
                let addr = match ip_literal(&e.host) {
                    Some(ip) => SocketAddr::new(ip, e.port),
                    None => *self.addrs.get(&(e.host.clone(), e.port))?,
                };
                Some(Target::new(
                    e.name.clone(),
                    addr,
                    e.labels.clone(),
                    &e.probe,
                    origin.clone(),
                ))
            })
            .collect();
    }

    fn next_due(&self) -> Option<Instant> {
        Some(
            self.checked
                .map_or_else(Instant::now, |c| c + self.cfg.refresh),
        )
    }

    fn state(&self) -> &SourceState {
        &self.state
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn splits_targets() {
        assert_eq!(split_target("h:1", 9), Ok(("h".into(), 1)));
        assert_eq!(split_target("h", 9), Ok(("h".into(), 9)));
        assert_eq!(split_target("[::1]:5", 9), Ok(("::1".into(), 5)));
        assert_eq!(split_target("fe80::1", 9), Ok(("fe80::1".into(), 9)));
        assert!(split_target("h:0", 9).is_err());
        assert!(split_target("fe80::1:x", 9).is_err());
    }
}
