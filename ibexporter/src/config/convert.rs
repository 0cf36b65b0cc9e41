//! Raw (as written, with positions) to schema (typed, checked): every
//! default, every range and cross-key check, and the one-line refusals
//! that name `file:line:col` and the key.
//!
//! Why it exists: the checks are the config's contract with the operator;
//! they are all here, in the order the sections are read, so a new key is
//! one raw field, one schema field and one block here.

use std::collections::BTreeMap;
use std::net::{IpAddr, SocketAddr};
use std::path::PathBuf;
use std::time::Duration;
use toml::Spanned;

use super::error::{line_col, q, ConfigError, Ctx};
use super::raw::{
    RawBudget, RawConfig, RawLabels, RawLocal, RawProbe, RawStatic, RawTargets, TargetEntry, S,
};
use super::schema::*;
use super::values::{format_duration, parse_cpulist, parse_duration};

/// Readers of the value kinds that recur across sections; each refusal
/// names the key and says what to write instead.
impl Ctx<'_> {
    fn duration(&self, v: &Spanned<String>, key: &str) -> Result<Duration, ConfigError> {
        parse_duration(v.get_ref()).map_err(|e| self.bad_s(v, key, &q(v.get_ref()), &e))
    }

    fn positive_duration(&self, v: &Spanned<String>, key: &str) -> Result<Duration, ConfigError> {
        let d = self.duration(v, key)?;
        if d.is_zero() {
            return Err(self.bad_s(
                v,
                key,
                &q(v.get_ref()),
                "must be longer than zero; give a positive duration such as \"10s\"",
            ));
        }
        Ok(d)
    }

    fn port(&self, v: &Spanned<i64>, key: &str) -> Result<u16, ConfigError> {
        match u16::try_from(*v.get_ref()) {
            Ok(p) if p > 0 => Ok(p),
            _ => Err(self.bad_s(
                v,
                key,
                &v.get_ref().to_string(),
                "not a port; use 1..=65535 (the responder's default is 18515)",
            )),
        }
    }

    /// An optional path; an empty one is refused with `message`.
    fn optional_path(
        &self,
        v: &Option<S<String>>,
        key: &str,
        message: &str,
    ) -> Result<Option<PathBuf>, ConfigError> {
        match v {
            Some(v) if v.get_ref().trim().is_empty() => Err(self.bad_s(v, key, "\"\"", message)),
            Some(v) => Ok(Some(PathBuf::from(v.get_ref()))),
            None => Ok(None),
        }
    }

    /// A positive byte count with binary units (`"256MiB"`).
    fn byte_count(&self, v: &Spanned<String>, key: &str) -> Result<u64, ConfigError> {
        match ibprobe::spec::parse_bytes(v.get_ref()) {
            Ok(0) => Err(self.bad_s(
                v,
                key,
                &q(v.get_ref()),
                "must be more than zero; write a size such as \"256MiB\"",
            )),
            Ok(n) => Ok(n),
            Err(e) => Err(self.bad_s(v, key, &q(v.get_ref()), &e.0)),
        }
    }

    fn socket_addr(&self, v: &Spanned<String>, key: &str) -> Result<SocketAddr, ConfigError> {
        v.get_ref().trim().parse().map_err(|_| {
            self.bad_s(
                v,
                key,
                &q(v.get_ref()),
                "not an IP:port address; write e.g. \"0.0.0.0:9427\" or \"[::]:9427\" (no host names)",
            )
        })
    }
}

fn default_hostname() -> String {
    ibhost::file::read_pseudo("/proc/sys/kernel/hostname", 4096)
        .ok()
        .map(|s| s.trim().to_string())
        .filter(|s| !s.is_empty())
        .or_else(|| std::env::var("HOSTNAME").ok().filter(|s| !s.is_empty()))
        .unwrap_or_else(|| "localhost".into())
}

/// Checks `raw` section by section and fills in every default.
pub(super) fn convert(cx: &Ctx, raw: RawConfig) -> Result<Config, ConfigError> {
    let listen = match &raw.listen {
        Some(v) => cx.socket_addr(v, "listen")?,
        None => DEFAULT_LISTEN.parse().expect("valid default"),
    };
    let web_config = cx.optional_path(
        &raw.web_config,
        "web_config",
        "empty path; give the web config file, or remove the key for plain HTTP",
    )?;
    let secret_file = cx.optional_path(
        &raw.secret_file,
        "secret_file",
        "empty path; give the mesh secret's key file, or remove the key to serve every peer",
    )?;
    let source = match &raw.source {
        Some(v) => {
            let s = v.get_ref().trim();
            if s.is_empty() || s.chars().any(char::is_control) {
                return Err(cx.bad_s(
                    v,
                    "source",
                    &q(v.get_ref()),
                    "not usable as a label value; give this host's name, or remove the key to use the host name",
                ));
            }
            s.to_string()
        }
        None => default_hostname(),
    };

    let local = convert_local(cx, &raw.local)?;
    let probe = convert_probe(cx, &raw.probe)?;
    let budget = convert_budget(cx, &raw.budget, &probe)?;
    let responder = ResponderConfig {
        enabled: raw.responder.enabled.unwrap_or(true),
        bind: match &raw.responder.bind {
            Some(v) => cx.socket_addr(v, "responder.bind")?,
            None => SocketAddr::new(listen.ip(), DEFAULT_RESPONDER_PORT),
        },
        bind_given: raw.responder.bind.is_some(),
        max_session_memory: match &raw.responder.max_session_memory {
            Some(v) => cx.byte_count(v, "responder.max_session_memory")?,
            None => ibprobe::spec::peer::DEFAULT_MAX_SESSION_MEMORY,
        },
    };
    let targets = convert_targets(cx, &raw.targets, &probe)?;
    let cardinality = CardinalityConfig {
        max_peer_series: match &raw.cardinality.max_peer_series {
            Some(v) => usize::try_from(*v.get_ref()).map_err(|_| {
                cx.bad_s(
                    v,
                    "cardinality.max_peer_series",
                    &v.get_ref().to_string(),
                    "must be 0 or more; 0 groups every peer, 200 is the default",
                )
            })?,
            None => super::schema::DEFAULT_MAX_PEER_SERIES,
        },
        group_label: match &raw.cardinality.group_label {
            Some(v) => {
                check_label_name(v.get_ref())
                    .map_err(|e| cx.bad_s(v, "cardinality.group_label", &q(v.get_ref()), &e))?;
                v.get_ref().clone()
            }
            None => "rack".into(),
        },
    };
    let t = &raw.tuning;
    let path = |v: &Option<S<String>>, key: &str, default: &str| -> Result<PathBuf, ConfigError> {
        let fix = format!("empty path; give a path or remove the key (default {default:?})");
        Ok(cx
            .optional_path(v, key, &fix)?
            .unwrap_or_else(|| PathBuf::from(default)))
    };
    let tuning = TuningSettings {
        profile: cx.optional_path(
            &t.profile,
            "tuning.profile",
            "empty profile; give a profile file or ibtune profile name, or remove the key to turn the drift watch off",
        )?,
        root: path(&t.root, "tuning.root", "/")?,
        state_dir: cx.optional_path(
            &t.state_dir,
            "tuning.state_dir",
            "empty state folder; give ibtune's --state-dir, or remove the key for ibtune's default",
        )?,
        min_interval: match &t.min_interval {
            Some(v) => cx.duration(v, "tuning.min_interval")?,
            None => Duration::from_secs(10),
        },
    };
    Ok(Config {
        listen,
        web_config,
        secret_file,
        source,
        local,
        probe,
        budget,
        responder,
        targets,
        cardinality,
        tuning,
    })
}

fn convert_local(cx: &Ctx, l: &RawLocal) -> Result<LocalConfig, ConfigError> {
    let mut reference = Vec::new();
    match &l.reference {
        Some(list) => {
            for (i, r) in list.iter().enumerate() {
                let key = format!("local.reference[{i}]");
                let v = match r.get_ref().to_ascii_lowercase().as_str() {
                    "shm" => Transport::Shm,
                    "udp" => Transport::Udp,
                    _ => {
                        return Err(cx.bad_s(
                            r,
                            &key,
                            &q(r.get_ref()),
                            "unknown reference transport; use shm or udp (HCAs are probed by hca_loopback)",
                        ))
                    }
                };
                if reference.contains(&v) {
                    return Err(cx.bad_s(
                        r,
                        &key,
                        &q(r.get_ref()),
                        "listed twice; give each reference once",
                    ));
                }
                reference.push(v);
            }
        }
        None => reference = vec![Transport::Shm, Transport::Udp],
    }
    let wakeup_cpus = match &l.wakeup_cpus {
        Some(v) if v.get_ref().trim().eq_ignore_ascii_case("all") => CpuSelection::All,
        Some(v) => CpuSelection::List(
            parse_cpulist(v.get_ref())
                .map_err(|e| cx.bad_s(v, "local.wakeup_cpus", &q(v.get_ref()), &e))?,
        ),
        None => CpuSelection::All,
    };
    Ok(LocalConfig {
        hca_loopback: l.hca_loopback.unwrap_or(true),
        reference,
        host_wakeup: l.host_wakeup.unwrap_or(true),
        wakeup_cpus,
    })
}

fn transport_of(cx: &Ctx, v: &S<String>, key: &str) -> Result<Transport, ConfigError> {
    target_transport(v.get_ref()).ok_or_else(|| {
        cx.bad_s(
            v,
            key,
            &q(v.get_ref()),
            "unknown transport; use rc, uc, ud or udp",
        )
    })
}

fn op_of(cx: &Ctx, v: &S<String>, key: &str) -> Result<Op, ConfigError> {
    v.get_ref().parse::<Op>().ok().ok_or_else(|| {
        cx.bad_s(
            v,
            key,
            &q(v.get_ref()),
            "unknown operation; use send, send-imm, write-imm or write",
        )
    })
}

fn sizes_of(
    cx: &Ctx,
    v: &S<Vec<S<i64>>>,
    key: &str,
    transport: Transport,
) -> Result<Vec<usize>, ConfigError> {
    if v.get_ref().is_empty() {
        return Err(cx.bad_s(
            v,
            key,
            "[]",
            "no sizes; give at least one size in bytes, e.g. [32]",
        ));
    }
    let mut out = Vec::new();
    for (i, s) in v.get_ref().iter().enumerate() {
        let k = format!("{key}[{i}]");
        let size = check_size(transport, *s.get_ref())
            .map_err(|e| cx.bad_s(s, &k, &s.get_ref().to_string(), &e))?;
        if out.contains(&size) {
            return Err(cx.bad_s(
                s,
                &k,
                &size.to_string(),
                "listed twice; give each size once",
            ));
        }
        out.push(size);
    }
    Ok(out)
}

fn convert_probe(cx: &Ctx, p: &RawProbe) -> Result<ProbeSettings, ConfigError> {
    let interval = match &p.interval {
        Some(v) => cx.positive_duration(v, "probe.interval")?,
        None => Duration::from_secs(10),
    };
    let probes_per_interval = match &p.probes_per_interval {
        Some(v) => match u32::try_from(*v.get_ref()) {
            Ok(n) if n >= 1 => n,
            _ => {
                return Err(cx.bad_s(
                    v,
                    "probe.probes_per_interval",
                    &v.get_ref().to_string(),
                    "must be 1..=4294967295; the default is 100",
                ))
            }
        },
        None => 100,
    };
    let max_rate = ibprobe::probe::config::MAX_RATE_HZ;
    let rate_hz = match &p.rate_hz {
        Some(v) => {
            let r = *v.get_ref();
            if !r.is_finite() || r <= 0.0 || r > max_rate {
                return Err(cx.bad_s(
                    v,
                    "probe.rate_hz",
                    &r.to_string(),
                    &format!("must be a rate above 0 and at most {max_rate} messages per second; the default is 1000"),
                ));
            }
            r
        }
        None => 1000.0,
    };
    if let Some(v) = &p.probes_per_interval {
        let round = probes_per_interval as f64 / rate_hz;
        if round >= interval.as_secs_f64() {
            return Err(cx.bad_s(
                v,
                "probe.probes_per_interval",
                &probes_per_interval.to_string(),
                &format!(
                    "at rate_hz {rate_hz} a round takes {round} s, not less than probe.interval {}; send fewer probes, raise rate_hz or lengthen interval",
                    format_duration(interval)
                ),
            ));
        }
    } else if probes_per_interval as f64 / rate_hz >= interval.as_secs_f64() {
        let (span, key, val) = match (&p.rate_hz, &p.interval) {
            (Some(r), _) => (r.span(), "probe.rate_hz", r.get_ref().to_string()),
            (None, Some(i)) => (i.span(), "probe.interval", q(i.get_ref())),
            (None, None) => (0..0, "probe.interval", "10s".into()),
        };
        return Err(cx.bad(
            span,
            key,
            &val,
            &format!(
                "a round of {probes_per_interval} probes at {rate_hz} Hz does not fit in probe.interval {}; raise rate_hz, lower probes_per_interval or lengthen interval",
                format_duration(interval)
            ),
        ));
    }
    let timeout = match &p.timeout {
        Some(v) => {
            let t = cx.positive_duration(v, "probe.timeout")?;
            if t >= interval {
                return Err(cx.bad_s(
                    v,
                    "probe.timeout",
                    &q(v.get_ref()),
                    &format!(
                        "must be shorter than probe.interval ({}), or a dead peer stalls every round; lower it (e.g. \"1s\")",
                        format_duration(interval)
                    ),
                ));
            }
            t
        }
        None => {
            let t = Duration::from_secs(1);
            if t >= interval {
                // Short intervals: the default timeout shrinks with them.
                interval / 2
            } else {
                t
            }
        }
    };
    let poll = match &p.poll {
        Some(v) => match v.get_ref().to_ascii_lowercase().as_str() {
            "busy" => Poll::Busy,
            "event" => Poll::Event,
            _ => {
                return Err(cx.bad_s(
                    v,
                    "probe.poll",
                    &q(v.get_ref()),
                    "unknown polling mode; use busy or event",
                ))
            }
        },
        None => Poll::Event,
    };
    let window = match &p.window {
        Some(v) => {
            let w = cx.positive_duration(v, "probe.window")?;
            if w < interval {
                return Err(cx.bad_s(
                    v,
                    "probe.window",
                    &q(v.get_ref()),
                    &format!(
                        "shorter than probe.interval ({}), so it would hold less than one round; make it at least the interval (e.g. \"5m\")",
                        format_duration(interval)
                    ),
                ));
            }
            w
        }
        None => Duration::from_secs(300).max(interval),
    };
    let transport = match &p.transport {
        Some(v) => transport_of(cx, v, "probe.transport")?,
        None => Transport::Rc,
    };
    let op = match &p.op {
        Some(v) => {
            let op = op_of(cx, v, "probe.op")?;
            // udp as default transport ignores op unless it is explicitly non-send.
            check_combo(transport, op).map_err(|e| cx.bad_s(v, "probe.op", &q(v.get_ref()), &e))?;
            op
        }
        None => Op::Send,
    };
    let sizes = match &p.sizes {
        Some(v) => sizes_of(cx, v, "probe.sizes", transport)?,
        None => vec![32],
    };
    Ok(ProbeSettings {
        interval,
        probes_per_interval,
        rate_hz,
        timeout,
        poll,
        window,
        sizes,
        transport,
        op,
        hw_timestamps: p.hw_timestamps.as_ref().is_some_and(|v| *v.get_ref()),
        perf_counters: p.perf_counters.as_ref().is_some_and(|v| *v.get_ref()),
    })
}

fn convert_budget(
    cx: &Ctx,
    b: &RawBudget,
    probe: &ProbeSettings,
) -> Result<BudgetConfig, ConfigError> {
    let max_core_fraction = match &b.max_core_fraction {
        Some(v) => {
            let f = *v.get_ref();
            if !(f > 0.0 && f <= 1.0) {
                return Err(cx.bad_s(
                    v,
                    "budget.max_core_fraction",
                    &f.to_string(),
                    "must be in (0, 1], a share of one core; e.g. 0.01 for 1 %",
                ));
            }
            f
        }
        None => 0.01,
    };
    let min_interval = match &b.min_interval {
        Some(v) => {
            let d = cx.positive_duration(v, "budget.min_interval")?;
            if d > probe.interval {
                return Err(cx.bad_s(
                    v,
                    "budget.min_interval",
                    &q(v.get_ref()),
                    &format!(
                        "longer than probe.interval ({}), which the budget could then never allow; make it at most the interval, or remove it",
                        format_duration(probe.interval)
                    ),
                ));
            }
            d
        }
        None => probe.interval,
    };
    let max_interval = match &b.max_interval {
        Some(v) => {
            let d = cx.positive_duration(v, "budget.max_interval")?;
            if d < probe.interval {
                return Err(cx.bad_s(
                    v,
                    "budget.max_interval",
                    &q(v.get_ref()),
                    &format!(
                        "shorter than probe.interval ({}); throttling only lengthens the interval, so make it at least that (e.g. \"5m\")",
                        format_duration(probe.interval)
                    ),
                ));
            }
            d
        }
        None => Duration::from_secs(300).max(probe.interval),
    };
    Ok(BudgetConfig {
        max_core_fraction,
        min_interval,
        max_interval,
    })
}

/// Resolves an entry's transport/op/sizes against the `[probe]` defaults.
fn target_probe(
    cx: &Ctx,
    key: &str,
    entry: &S<impl TargetEntry>,
    probe: &ProbeSettings,
) -> Result<TargetProbe, ConfigError> {
    let entry_span = entry.span();
    let (transport, op, sizes) = {
        let e = entry.get_ref();
        (e.transport(), e.op(), e.sizes())
    };
    let t = match transport {
        Some(v) => transport_of(cx, v, &format!("{key}.transport"))?,
        None => probe.transport,
    };
    let o = match op {
        Some(v) => {
            let o = op_of(cx, v, &format!("{key}.op"))?;
            check_combo(t, o)
                .map_err(|e| cx.bad_s(v, &format!("{key}.op"), &q(v.get_ref()), &e))?;
            o
        }
        // udp inherits no verbs op.
        None if t == Transport::Udp => Op::Send,
        None => {
            if let Err(e) = check_combo(t, probe.op) {
                let (span, k, val) = match transport {
                    Some(v) => (v.span(), format!("{key}.transport"), q(v.get_ref())),
                    None => (entry_span, key.to_string(), "{...}".into()),
                };
                return Err(cx.bad(
                    span,
                    &k,
                    &val,
                    &format!(
                        "with op {} inherited from probe.op: {e}; set op on this entry",
                        probe.op.name()
                    ),
                ));
            }
            probe.op
        }
    };
    let s = match sizes {
        Some(v) => sizes_of(cx, v, &format!("{key}.sizes"), t)?,
        None => {
            // The defaults were checked for probe.transport; check them for this one.
            for &size in &probe.sizes {
                if let Err(e) = check_size(t, size as i64) {
                    let (span, k, val) = match transport {
                        Some(v) => (v.span(), format!("{key}.transport"), q(v.get_ref())),
                        None => (entry_span.clone(), key.to_string(), "{...}".into()),
                    };
                    return Err(cx.bad(
                        span,
                        &k,
                        &val,
                        &format!(
                            "with sizes inherited from probe.sizes: {e}; set sizes on this entry"
                        ),
                    ));
                }
            }
            probe.sizes.clone()
        }
    };
    Ok(TargetProbe {
        transport: t,
        op: o,
        sizes: s,
    })
}

/// An entry's `labels`, each name checked.
fn labels_of(
    cx: &Ctx,
    entry: &S<impl TargetEntry>,
    key: &str,
) -> Result<BTreeMap<String, String>, ConfigError> {
    let mut out = BTreeMap::new();
    for (k, v) in entry.get_ref().labels() {
        let name = k.get_ref();
        check_label_name(name)
            .map_err(|e| cx.bad_s(k, &format!("{key}.labels.{name}"), &q(v.get_ref()), &e))?;
        out.insert(name.clone(), v.get_ref().clone());
    }
    Ok(out)
}

/// An entry's responder port (default 18515).
fn port_of(cx: &Ctx, v: &Option<S<i64>>, key: &str) -> Result<u16, ConfigError> {
    match v {
        Some(v) => cx.port(v, key),
        None => Ok(DEFAULT_RESPONDER_PORT),
    }
}

fn refresh_of(cx: &Ctx, v: &Option<S<String>>, key: &str) -> Result<Duration, ConfigError> {
    match v {
        Some(v) => cx.positive_duration(v, key),
        None => Ok(Duration::from_secs(30)),
    }
}

/// `targets.static`: each host checked, duplicates (same host, port and
/// transport) refused.
fn convert_static(
    cx: &Ctx,
    entries: &[S<RawStatic>],
    probe: &ProbeSettings,
) -> Result<Vec<StaticTarget>, ConfigError> {
    let mut static_targets: Vec<StaticTarget> = Vec::new();
    let mut seen: BTreeMap<(String, u16, Transport), (usize, usize)> = BTreeMap::new();
    for (i, e) in entries.iter().enumerate() {
        let key = format!("targets.static[{i}]");
        let r = e.get_ref();
        let host = r.host.get_ref().trim();
        let host = host
            .strip_prefix('[')
            .and_then(|h| h.strip_suffix(']'))
            .unwrap_or(host);
        if !valid_host(host) {
            return Err(cx.bad_s(
                &r.host,
                &format!("{key}.host"),
                &q(r.host.get_ref()),
                "not an IP address or host name; give e.g. \"10.0.0.2\", \"fe80::1\" or \"node7.example\" (the port goes in port)",
            ));
        }
        let port = port_of(cx, &r.port, &format!("{key}.port"))?;
        let probe = target_probe(cx, &key, e, probe)?;
        let id = (host.to_ascii_lowercase(), port, probe.transport);
        if let Some(&(j, line)) = seen.get(&id) {
            return Err(cx.bad_s(
                &r.host,
                &format!("{key}.host"),
                &q(r.host.get_ref()),
                &format!(
                    "duplicate of targets.static[{j}] (line {line}): same host, port {port} and transport {}; remove one of them",
                    probe.transport.name()
                ),
            ));
        }
        seen.insert(id, (i, line_col(cx.text, r.host.span().start).0));
        static_targets.push(StaticTarget {
            host: host.to_string(),
            port,
            labels: labels_of(cx, e, &key)?,
            probe,
        });
    }
    Ok(static_targets)
}

/// `targets.static` entries given as values rather than text (`main`'s
/// `--target HOST:PORT`), checked by the same code as a file's entries and
/// resolved against `probe` as a file's are against its `[probe]`.
/// `origin` (e.g. `--target`) starts every error; errors have no position.
pub fn static_targets(
    origin: &str,
    entries: &[(String, i64)],
    probe: &ProbeSettings,
) -> Result<Vec<StaticTarget>, ConfigError> {
    let cx = Ctx { origin, text: "" };
    // Values from flags have no place in a text.
    fn at<T>(v: T) -> S<T> {
        S::new(0..0, v)
    }
    let raw: Vec<S<RawStatic>> = entries
        .iter()
        .map(|(host, port)| {
            at(RawStatic {
                host: at(host.clone()),
                port: Some(at(*port)),
                labels: RawLabels::new(),
                transport: None,
                op: None,
                sizes: None,
            })
        })
        .collect();
    convert_static(&cx, &raw, probe).map_err(|e| ConfigError { pos: None, ..e })
}

fn convert_targets(
    cx: &Ctx,
    t: &RawTargets,
    probe: &ProbeSettings,
) -> Result<TargetsConfig, ConfigError> {
    let resolve_timeout = match &t.resolve_timeout {
        Some(v) => cx.positive_duration(v, "targets.resolve_timeout")?,
        None => Duration::from_secs(2),
    };
    let static_targets = convert_static(cx, &t.static_, probe)?;
    let mut file_sd = Vec::new();
    for (i, e) in t.file_sd.iter().enumerate() {
        let key = format!("targets.file_sd[{i}]");
        let r = e.get_ref();
        if r.path.get_ref().trim().is_empty() {
            return Err(cx.bad_s(
                &r.path,
                &format!("{key}.path"),
                "\"\"",
                "empty path; give the pinglist JSON file",
            ));
        }
        file_sd.push(FileSdSource {
            path: PathBuf::from(r.path.get_ref()),
            refresh: refresh_of(cx, &r.refresh, &format!("{key}.refresh"))?,
            port: port_of(cx, &r.port, &format!("{key}.port"))?,
            labels: labels_of(cx, e, &key)?,
            probe: target_probe(cx, &key, e, probe)?,
        });
    }
    let mut dns = Vec::new();
    for (i, e) in t.dns.iter().enumerate() {
        let key = format!("targets.dns[{i}]");
        let r = e.get_ref();
        let name = r.name.get_ref().trim();
        if !valid_host(name) || name.parse::<IpAddr>().is_ok() {
            return Err(cx.bad_s(
                &r.name,
                &format!("{key}.name"),
                &q(r.name.get_ref()),
                "not a DNS name; give e.g. \"ibexporter.rdma.svc.cluster.local\" (put IP addresses in targets.static)",
            ));
        }
        dns.push(DnsSource {
            name: name.to_string(),
            port: port_of(cx, &r.port, &format!("{key}.port"))?,
            refresh: refresh_of(cx, &r.refresh, &format!("{key}.refresh"))?,
            labels: labels_of(cx, e, &key)?,
            probe: target_probe(cx, &key, e, probe)?,
        });
    }
    let mut plan = PlanConfig::default();
    if let Some(v) = &t.plan {
        plan.choice = v
            .get_ref()
            .parse::<PlanChoice>()
            .map_err(|e| cx.bad_s(v, "targets.plan", &q(v.get_ref()), &e))?;
    }
    if let Some(v) = &t.plan_rack_label {
        check_label_name(v.get_ref())
            .map_err(|e| cx.bad_s(v, "targets.plan_rack_label", &q(v.get_ref()), &e))?;
        plan.rack_label = v.get_ref().clone();
    }
    if let Some(v) = &t.plan_rack_peers {
        plan.rack_peers = match usize::try_from(*v.get_ref()) {
            Ok(n) if (1..=64).contains(&n) => n,
            _ => {
                return Err(cx.bad_s(
                    v,
                    "targets.plan_rack_peers",
                    &v.get_ref().to_string(),
                    "must be 1..=64 probes per rack pair per round; 1 is the default",
                ))
            }
        };
    }
    Ok(TargetsConfig {
        plan,
        skip_self: t.skip_self.unwrap_or(true),
        resolve_timeout,
        static_targets,
        file_sd,
        dns,
    })
}
