//! Localization's rounds from a live Prometheus: instant queries over the
//! exporters' raw series at stepped times, one [`SnapRound`] per window.
//!
//! Why it exists: `ibexporter localize --prometheus URL` must read what
//! the fleet's exporters served, not a recording rule someone may not
//! have loaded; it asks for the series every exporter serves
//! (`ibprobe_probes_total`, `ibprobe_latency_seconds`, `ibexporter_plan`,
//! `ibexporter_plan_peer_rack`) and builds the same checked [`Snapshot`]
//! a saved file gives.
//!
//! What a round is: per ordered (prober, target) pair over one window
//! ending at `at`, messages sent (`increase` of every result) and lost
//! (`result!="ok"`), the median and 10th percentile of
//! `histogram_quantile` over the window (native histogram or classic
//! buckets, every message size pooled), and each prober's own wake-up
//! p99 (its `op="wakeup"` probe), and where the NICs stamp completions
//! the medians of the hardware-timestamp split (`ibprobe_hw_prober_delay_seconds`,
//! `ibprobe_hw_responder_delay_seconds`, `ibprobe_hw_network_rtt_seconds`,
//! classic buckets): a pair gets a split only when all three parts are
//! there (unverified on hardware: no device here stamps completions);
//! each exporter's HCA port error events (`increase` of the counters of
//! [`super::PORT_ERROR_FILES`], summed by `instance`). Racks: a prober's
//! from
//! `ibexporter_plan{source_rack}`, a target's from
//! `ibexporter_plan_peer_rack{target_rack}`.
//!
//! Who is who: an exporter is named by its `source` label, a target by
//! its name in the pinglist (`10.0.0.7:18515`). A source is the same host
//! as the target whose name is the source, or whose host part (before
//! the last `:`) is the source or the host part of the exporter's
//! `instance`; the host then goes by its source name. A target matched by
//! no source (a dead exporter) goes by its target name. `group:` targets
//! (peers aggregated above `cardinality.max_peer_series`) are left out.
//!
//! Hostile answers: hyper's HTTP/1 client reads the body to at most
//! [`MAX_SNAPSHOT_BYTES`] (a larger `Content-Length` is refused before
//! reading) and the header to 64 KiB, each query within
//! [`QUERY_TIMEOUT`], the wait waking every [`POLL`] to see
//! SIGINT/SIGTERM's flag; an answer with more than
//! [`MAX_PROBES`] series, more than [`MAX_HOSTS`] hosts, an error status,
//! malformed JSON or a negative count is an error naming the URL and the
//! query, never a panic. Plain `http://` only.

use std::collections::{BTreeMap, HashMap};
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use crate::limits::{
    CONNECT_TIMEOUT, MAX_HEAD, MAX_HOSTS, MAX_PROBES, MAX_SNAPSHOT_BYTES, POLL, QUERY_TIMEOUT,
};
use serde::Deserialize;

use super::snapshot::{truncate, Host, HwUs, Probe, SnapRound, Snapshot, SCHEMA};

/// Why fetching failed.
#[derive(Debug, Clone, PartialEq)]
pub enum FetchError {
    /// Unreachable, refused, timed out, or answered wrongly: the message
    /// names the URL and the query.
    Failed(String),
    /// SIGINT or SIGTERM arrived.
    Interrupted,
}

impl std::fmt::Display for FetchError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            FetchError::Failed(m) => f.write_str(m),
            FetchError::Interrupted => f.write_str("interrupted"),
        }
    }
}

/// A Prometheus server's HTTP API.
#[derive(Debug, Clone)]
pub struct Client {
    /// The URL as given (messages quote it).
    pub url: String,
    host: String,
    port: u16,
    /// Path prefix (`--web.route-prefix`), without a trailing `/`.
    prefix: String,
    /// Largest body read.
    pub max_body: u64,
    /// The longest one query may take.
    pub timeout: Duration,
    stop: Option<&'static AtomicBool>,
}

impl Client {
    /// A client of `url` (`http://HOST[:PORT][/PREFIX]`); `stop` is the
    /// flag SIGINT/SIGTERM set (`ibhost::child::stop_signal_flag`).
    pub fn new(url: &str, stop: Option<&'static AtomicBool>) -> Result<Client, String> {
        let bad = |why: &str| {
            format!(
                "--prometheus {url:?}: {why}; write http://HOST:PORT, e.g. http://localhost:9090"
            )
        };
        if url.starts_with("https://") {
            return Err(bad(
                "https is not supported; use its plain-HTTP listener, or an SSH tunnel to it",
            ));
        }
        let rest = url
            .strip_prefix("http://")
            .ok_or_else(|| bad("not an http:// URL"))?;
        let (authority, path) = match rest.find('/') {
            Some(i) => (&rest[..i], &rest[i..]),
            None => (rest, ""),
        };
        if authority.contains('@') {
            return Err(bad("credentials in the URL are not supported"));
        }
        let (host, port) = match authority.rsplit_once(':') {
            Some((h, p)) if !h.ends_with(']') || authority.starts_with('[') => {
                match p.parse::<u16>() {
                    Ok(p) => (h, p),
                    Err(_) => return Err(bad("the port is not a number")),
                }
            }
            _ => (authority, 80),
        };
        let host = host.trim_start_matches('[').trim_end_matches(']');
        if host.is_empty() {
            return Err(bad("no host"));
        }
        Ok(Client {
            url: url.to_string(),
            host: host.to_string(),
            port,
            prefix: path.trim_end_matches('/').to_string(),
            max_body: MAX_SNAPSHOT_BYTES,
            timeout: QUERY_TIMEOUT,
            stop,
        })
    }

    fn stopped(&self) -> bool {
        self.stop.is_some_and(|s| s.load(Ordering::Relaxed))
    }

    /// GETs `path_and_query` (below the prefix): the body of a 200 answer,
    /// or of an error answer with its status. hyper's HTTP/1 client on a
    /// runtime of this thread: the whole exchange within [`Client::timeout`],
    /// the body cut at [`Client::max_body`], SIGINT/SIGTERM's flag looked
    /// at every [`POLL`] (connecting included).
    fn get(&self, path_and_query: &str) -> Result<(u16, Vec<u8>), FetchError> {
        if self.stopped() {
            return Err(FetchError::Interrupted);
        }
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_io()
            .enable_time()
            .build()
            .map_err(|e| FetchError::Failed(format!("{}: no runtime: {e}", self.url)))?;
        rt.block_on(async {
            let stop = async {
                let mut tick = tokio::time::interval(POLL);
                loop {
                    tick.tick().await;
                    if self.stopped() {
                        return;
                    }
                }
            };
            tokio::select! {
                r = tokio::time::timeout(self.timeout, self.exchange(path_and_query)) => {
                    r.unwrap_or_else(|_| Err(FetchError::Failed(format!(
                        "{}: no complete answer within {} s",
                        self.url,
                        self.timeout.as_secs_f64()
                    ))))
                }
                () = stop => Err(FetchError::Interrupted),
            }
        })
    }

    /// One request and its answer, unbounded in time ([`Client::get`]
    /// bounds it).
    async fn exchange(&self, path_and_query: &str) -> Result<(u16, Vec<u8>), FetchError> {
        let fail = |why: String| FetchError::Failed(format!("{}: {why}", self.url));
        let addrs: Vec<_> = tokio::net::lookup_host((self.host.as_str(), self.port))
            .await
            .map_err(|e| fail(format!("cannot resolve {}: {e}", self.host)))?
            .collect();
        let mut stream = None;
        let mut last = String::from("no address");
        for a in addrs {
            match tokio::time::timeout(CONNECT_TIMEOUT, tokio::net::TcpStream::connect(a)).await {
                Ok(Ok(s)) => {
                    stream = Some(s);
                    break;
                }
                Ok(Err(e)) => last = format!("cannot connect to {a}: {e}"),
                Err(_) => last = format!("cannot connect to {a} within {CONNECT_TIMEOUT:?}"),
            }
        }
        let stream = stream.ok_or_else(|| fail(last))?;
        let (mut sender, conn) = hyper::client::conn::http1::Builder::new()
            .max_buf_size(MAX_HEAD)
            .handshake(hyper_util::rt::TokioIo::new(stream))
            .await
            .map_err(|e| fail(format!("{e}")))?;
        // The connection runs beside the request; it ends with the answer.
        tokio::spawn(conn);
        let host = if self.host.contains(':') {
            format!("[{}]:{}", self.host, self.port)
        } else {
            format!("{}:{}", self.host, self.port)
        };
        let request = hyper::Request::get(format!("{}{path_and_query}", self.prefix))
            .header(hyper::header::HOST, host)
            .header(hyper::header::ACCEPT, "application/json")
            .header(
                hyper::header::USER_AGENT,
                format!("ibexporter-localize/{}", crate::VERSION),
            )
            .body(http_body_util::Empty::<bytes::Bytes>::new())
            .map_err(|e| fail(format!("bad request: {e}")))?;
        let answer = sender
            .send_request(request)
            .await
            .map_err(|e| fail(format!("{e}")))?;
        let status = answer.status().as_u16();
        let length = answer
            .headers()
            .get(hyper::header::CONTENT_LENGTH)
            .and_then(|v| v.to_str().ok())
            .and_then(|v| v.trim().parse::<u64>().ok());
        if let Some(n) = length.filter(|&n| n > self.max_body) {
            return Err(fail(format!(
                "the answer is {n} bytes, more than the limit of {} bytes",
                self.max_body
            )));
        }
        let limit = usize::try_from(self.max_body).unwrap_or(usize::MAX);
        let body = http_body_util::BodyExt::collect(http_body_util::Limited::new(
            answer.into_body(),
            limit,
        ))
        .await
        .map_err(|e| {
            if e.is::<http_body_util::LengthLimitError>() {
                fail(format!(
                    "the answer is more than the limit of {} bytes",
                    self.max_body
                ))
            } else {
                fail(format!("{e}"))
            }
        })?;
        Ok((status, body.to_bytes().to_vec()))
    }

    /// An instant query at `at` (unix seconds): its vector's series.
    pub fn query(&self, promql: &str, at: f64) -> Result<Vec<Series>, FetchError> {
        let path = format!("/api/v1/query?query={}&time={at:.3}", url_encode(promql));
        let (status, body) = self.get(&path)?;
        let fail = |why: String| {
            FetchError::Failed(format!("{}: query {promql:?} at {at:.3}: {why}", self.url))
        };
        let answer: Answer = serde_json::from_slice(&body).map_err(|e| {
            fail(format!(
                "HTTP {status}, not a Prometheus API answer ({e}); is this Prometheus' address?"
            ))
        })?;
        if answer.status != "success" || status != 200 {
            return Err(fail(format!(
                "HTTP {status}, {}: {}",
                answer.error_type.as_deref().unwrap_or("error"),
                truncate(answer.error.as_deref().unwrap_or("no reason given"))
            )));
        }
        let data = answer
            .data
            .ok_or_else(|| fail("a success without `data`".into()))?;
        if data.result_type != "vector" {
            return Err(fail(format!(
                "result type {:?}, expected a vector",
                truncate(&data.result_type)
            )));
        }
        if data.result.len() > MAX_PROBES {
            return Err(fail(format!(
                "{} series, more than the limit of {MAX_PROBES}",
                data.result.len()
            )));
        }
        data.result
            .into_iter()
            .map(|r| {
                let v = match r.value.1.as_str() {
                    "NaN" => f64::NAN,
                    "+Inf" => f64::INFINITY,
                    "-Inf" => f64::NEG_INFINITY,
                    t => t
                        .parse()
                        .map_err(|_| fail(format!("value {:?} is not a number", truncate(t))))?,
                };
                Ok(Series {
                    labels: r.metric,
                    value: v,
                })
            })
            .collect()
    }
}

/// One series of an instant vector.
#[derive(Debug, Clone, PartialEq)]
pub struct Series {
    /// Its labels.
    pub labels: BTreeMap<String, String>,
    /// Its value (NaN, ±Inf possible).
    pub value: f64,
}

impl Series {
    fn label(&self, l: &str) -> &str {
        self.labels.get(l).map_or("", String::as_str)
    }
}

#[derive(Deserialize)]
struct Answer {
    status: String,
    data: Option<Data>,
    #[serde(rename = "errorType")]
    error_type: Option<String>,
    error: Option<String>,
}

#[derive(Deserialize)]
struct Data {
    #[serde(rename = "resultType")]
    result_type: String,
    result: Vec<RawSeries>,
}

#[derive(Deserialize)]
struct RawSeries {
    metric: BTreeMap<String, String>,
    value: (f64, String),
}

/// Percent-encodes a query parameter.
fn url_encode(s: &str) -> String {
    let mut out = String::with_capacity(s.len() * 3);
    for b in s.bytes() {
        if b.is_ascii_alphanumeric() || b"-_.~".contains(&b) {
            out.push(b as char);
        } else {
            out.push_str(&format!("%{b:02X}"));
        }
    }
    out
}

/// The queries of one round, over a window of `w` (a PromQL duration).
struct Queries {
    sent: String,
    lost: String,
    p50: String,
    p10: String,
    /// Medians of the hardware split: prober, responder, network.
    hw: [String; 3],
    wakeup: String,
    /// Each exporter's HCA port error events over the window.
    port_errors: String,
    plan: String,
    sources: String,
    peer_rack: String,
}

fn quantile(q: &str, by: &str, selector: &str, w: &str) -> String {
    format!(
        "histogram_quantile({q}, sum by ({by}) (rate(ibprobe_latency_seconds{selector}[{w}]))) or histogram_quantile({q}, sum by ({by}, le) (rate(ibprobe_latency_seconds_bucket{selector}[{w}])))"
    )
}

impl Queries {
    fn new(w: &str) -> Queries {
        Queries {
            sent: format!("sum by (source, target) (increase(ibprobe_probes_total[{w}]))"),
            lost: format!(
                "sum by (source, target) (increase(ibprobe_probes_total{{result!=\"ok\"}}[{w}]))"
            ),
            p50: quantile("0.5", "source, target", "{op!=\"wakeup\"}", w),
            p10: quantile("0.1", "source, target", "{op!=\"wakeup\"}", w),
            hw: [
                "ibprobe_hw_prober_delay_seconds",
                "ibprobe_hw_responder_delay_seconds",
                "ibprobe_hw_network_rtt_seconds",
            ]
            .map(|m| {
                format!(
                    "histogram_quantile(0.5, sum by (source, target, le) (rate({m}_bucket[{w}])))"
                )
            }),
            wakeup: quantile("0.99", "source", "{op=\"wakeup\"}", w),
            port_errors: format!(
                "sum by (instance) ({})",
                super::port_errors_increase(w, " or ")
            ),
            plan: format!("max by (instance, source_rack) (max_over_time(ibexporter_plan[{w}]))"),
            sources: format!(
                "count by (instance, source) (max_over_time(ibprobe_probes_total[{w}]))"
            ),
            peer_rack: format!(
                "max by (target, target_rack) (max_over_time(ibexporter_plan_peer_rack[{w}]))"
            ),
        }
    }
}

/// The part of a `host:port` name before its port.
fn host_part(name: &str) -> &str {
    let name = name.trim_start_matches('[');
    match name.rsplit_once(':') {
        Some((h, p)) if p.bytes().all(|b| b.is_ascii_digit()) => h.trim_end_matches(']'),
        _ => name,
    }
}

/// One round's answers, by name.
#[derive(Default)]
struct Raw {
    /// (source, target) -> [sent, lost, p50 s, p10 s, hw prober s, hw
    /// responder s, hw network s].
    pairs: BTreeMap<(String, String), [f64; 7]>,
    wakeup_s: BTreeMap<String, f64>,
    /// source -> HCA port error events.
    port_errors: BTreeMap<String, f64>,
    /// source -> (instance, rack).
    sources: BTreeMap<String, (String, String)>,
    /// target -> rack.
    targets: BTreeMap<String, String>,
}

fn count(v: f64, what: &str, s: &Series) -> Result<f64, String> {
    if v.is_nan() || v < 0.0 || v.is_infinite() {
        return Err(format!(
            "{what} of {:?} -> {:?} is {v}, not a count",
            truncate(s.label("source")),
            truncate(s.label("target"))
        ));
    }
    Ok(v.round())
}

/// Fetches `rounds` windows of `window`, the last ending at `at` (unix
/// seconds), and returns them as a checked snapshot.
pub fn fetch(
    client: &Client,
    at: f64,
    rounds: usize,
    window: Duration,
) -> Result<Snapshot, FetchError> {
    let w = format!("{}ms", window.as_millis().max(1));
    let q = Queries::new(&w);
    let step = window.as_secs_f64();
    let mut raws = Vec::with_capacity(rounds);
    for i in 0..rounds {
        let t = at - (rounds - 1 - i) as f64 * step;
        let fail = |why: String| FetchError::Failed(format!("{}: at {t:.3}: {why}", client.url));
        let mut raw = Raw::default();
        for s in client.query(&q.peer_rack, t)? {
            let target = s.label("target");
            if !target.is_empty() && !target.starts_with("group:") {
                raw.targets
                    .insert(target.to_string(), s.label("target_rack").to_string());
            }
        }
        // Before the pair queries, whose answers grow with hosts squared.
        if raw.targets.len() > MAX_HOSTS {
            return Err(fail(format!(
                "{} targets, more than the limit of {MAX_HOSTS} hosts",
                raw.targets.len()
            )));
        }
        // An exporter serves `source_rack=""` until its plan names its
        // rack: a named rack wins.
        let mut plan: HashMap<String, String> = HashMap::new();
        for s in client.query(&q.plan, t)? {
            let rack = plan.entry(s.label("instance").to_string()).or_default();
            if rack.is_empty() {
                *rack = s.label("source_rack").to_string();
            }
        }
        for s in client.query(&q.sources, t)? {
            let inst = s.label("instance");
            if let Some(rack) = plan.get(inst) {
                raw.sources.insert(
                    s.label("source").to_string(),
                    (inst.to_string(), rack.clone()),
                );
            }
        }
        let keep = |s: &Series| {
            raw.sources.contains_key(s.label("source"))
                && raw.targets.contains_key(s.label("target"))
        };
        for (slot, query) in [
            (0usize, &q.sent),
            (1, &q.lost),
            (2, &q.p50),
            (3, &q.p10),
            (4, &q.hw[0]),
            (5, &q.hw[1]),
            (6, &q.hw[2]),
        ] {
            for s in client.query(query, t)? {
                if !keep(&s) {
                    continue;
                }
                let v = match slot {
                    0 => count(s.value, "messages sent", &s).map_err(fail)?,
                    1 => count(s.value, "messages lost", &s).map_err(fail)?,
                    _ => s.value,
                };
                let key = (s.label("source").to_string(), s.label("target").to_string());
                // A split without a probe count is left out below
                // (`sent` 0), as is a count without a split (NaN parts).
                let e = raw.pairs.entry(key).or_insert([
                    0.0,
                    0.0,
                    f64::NAN,
                    f64::NAN,
                    f64::NAN,
                    f64::NAN,
                    f64::NAN,
                ]);
                e[slot] = v;
            }
        }
        for s in client.query(&q.wakeup, t)? {
            if raw.sources.contains_key(s.label("source")) && s.value.is_finite() && s.value >= 0.0
            {
                raw.wakeup_s.insert(s.label("source").to_string(), s.value);
            }
        }
        let source_of: HashMap<&str, &str> = raw
            .sources
            .iter()
            .map(|(s, (inst, _))| (inst.as_str(), s.as_str()))
            .collect();
        let mut errors = BTreeMap::new();
        for s in client.query(&q.port_errors, t)? {
            if let Some(src) = source_of.get(s.label("instance")) {
                if s.value.is_finite() && s.value >= 0.0 {
                    errors.insert(src.to_string(), s.value.round());
                }
            }
        }
        raw.port_errors = errors;
        raws.push((t, raw));
    }
    assemble(client, step, raws)
}

/// Names every host once over all rounds, then builds the snapshot.
fn assemble(client: &Client, step: f64, raws: Vec<(f64, Raw)>) -> Result<Snapshot, FetchError> {
    let fail = |why: String| FetchError::Failed(format!("{}: {why}", client.url));
    let mut target_rack: BTreeMap<&str, &str> = BTreeMap::new();
    let mut source_of: BTreeMap<&str, (&str, &str)> = BTreeMap::new();
    for (_, r) in &raws {
        for (t, rack) in &r.targets {
            target_rack.entry(t).or_insert(rack);
        }
        for (s, (inst, rack)) in &r.sources {
            source_of.entry(s).or_insert((inst, rack));
        }
    }
    // Targets by host part, to find each source's own target entry.
    let mut by_host: HashMap<&str, Vec<&str>> = HashMap::new();
    for t in target_rack.keys() {
        by_host.entry(host_part(t)).or_default().push(t);
    }
    let one = |h: &str| match by_host.get(h).map(Vec::as_slice) {
        Some([t]) => Some(*t),
        _ => None,
    };
    // target name -> host name.
    let mut name_of: HashMap<&str, &str> = HashMap::new();
    let mut hosts: Vec<Host> = Vec::new();
    for (s, (inst, rack)) in &source_of {
        let own = target_rack
            .contains_key(s)
            .then_some(*s)
            .or_else(|| one(s))
            .or_else(|| one(host_part(inst)));
        if let Some(t) = own {
            name_of.insert(t, s);
        }
        let rack = if rack.is_empty() {
            own.and_then(|t| target_rack.get(t).copied()).unwrap_or("")
        } else {
            rack
        };
        hosts.push(Host {
            name: s.to_string(),
            rack: if rack.is_empty() {
                "-".into()
            } else {
                rack.to_string()
            },
        });
    }
    for (t, rack) in &target_rack {
        if !name_of.contains_key(t) && !source_of.contains_key(t) {
            name_of.insert(t, t);
            hosts.push(Host {
                name: t.to_string(),
                rack: if rack.is_empty() {
                    "-".into()
                } else {
                    rack.to_string()
                },
            });
        }
    }
    if hosts.len() > MAX_HOSTS {
        return Err(fail(format!(
            "{} hosts, more than the limit of {MAX_HOSTS}",
            hosts.len()
        )));
    }
    let us = |s: f64| {
        if s.is_nan() {
            None
        } else if s.is_infinite() && s > 0.0 {
            // Above the largest bucket: slower than anything measured.
            Some(1e9)
        } else {
            Some((s * 1e6).max(0.0))
        }
    };
    let mut rounds = Vec::with_capacity(raws.len());
    for (at, r) in &raws {
        let mut probes = Vec::with_capacity(r.pairs.len());
        for ((s, t), v) in &r.pairs {
            let target = name_of.get(t.as_str()).copied().unwrap_or(t.as_str());
            if target == s.as_str() || v[0] < 1.0 {
                continue;
            }
            probes.push(Probe {
                prober: s.clone(),
                target: target.to_string(),
                sent: v[0] as u64,
                lost: (v[1] as u64).min(v[0] as u64),
                p50_us: us(v[2]),
                p10_us: us(v[3]),
                hw_us: match (us(v[4]), us(v[5]), us(v[6])) {
                    (Some(prober), Some(responder), Some(network)) => Some(HwUs {
                        prober,
                        responder,
                        network,
                    }),
                    _ => None,
                },
            });
        }
        rounds.push(SnapRound {
            at: *at,
            probes,
            wakeup_p99_us: r
                .wakeup_s
                .iter()
                .map(|(h, v)| (h.clone(), v * 1e6))
                .collect(),
            port_errors: r.port_errors.clone(),
        });
    }
    let snap = Snapshot {
        schema: SCHEMA.into(),
        source: client.url.clone(),
        window_seconds: step,
        hosts,
        rounds,
    };
    snap.check().map_err(fail)?;
    Ok(snap)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::{Read, Write};
    use std::net::TcpListener;
    use std::time::Instant;

    /// A one-shot server answering `reply` to the first request.
    fn serve(reply: Vec<u8>) -> String {
        let l = TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = l.local_addr().unwrap();
        std::thread::spawn(move || {
            if let Ok((mut s, _)) = l.accept() {
                let mut buf = [0u8; 4096];
                let _ = s.read(&mut buf);
                let _ = s.write_all(&reply);
            }
        });
        format!("http://{addr}")
    }

    fn http(status: &str, body: &str) -> Vec<u8> {
        format!("HTTP/1.0 {status}\r\nContent-Type: application/json\r\n\r\n{body}").into_bytes()
    }

    #[test]
    fn urls_are_read_or_refused_with_what_to_write() {
        let c = Client::new("http://prom.example:9091/prom/", None).unwrap();
        assert_eq!(
            (c.host.as_str(), c.port, c.prefix.as_str()),
            ("prom.example", 9091, "/prom")
        );
        let c = Client::new("http://[::1]:9090", None).unwrap();
        assert_eq!((c.host.as_str(), c.port), ("::1", 9090));
        for bad in [
            "https://p:9090",
            "prom:9090",
            "http://u:p@h:9090",
            "http://h:x",
        ] {
            let e = Client::new(bad, None).unwrap_err();
            assert!(e.contains(bad) && e.contains("http://HOST:PORT"), "{e}");
        }
    }

    #[test]
    fn truncated_json_is_an_error_naming_the_url_and_query() {
        let url = serve(http(
            "200 OK",
            "{\"status\":\"success\",\"data\":{\"resultType\":\"vec",
        ));
        let e = Client::new(&url, None)
            .unwrap()
            .query("up", 1.0)
            .unwrap_err();
        let FetchError::Failed(m) = e else { panic!() };
        assert!(
            m.contains(&url) && m.contains("\"up\"") && m.contains("not a Prometheus API answer"),
            "{m}"
        );
    }

    #[test]
    fn an_error_answer_gives_prometheus_reason() {
        let url = serve(http(
            "400 Bad Request",
            r#"{"status":"error","errorType":"bad_data","error":"parse error"}"#,
        ));
        let e = Client::new(&url, None)
            .unwrap()
            .query("up{", 1.0)
            .unwrap_err();
        assert!(
            e.to_string().contains("HTTP 400, bad_data: parse error"),
            "{e}"
        );
    }

    #[test]
    fn a_body_over_the_limit_is_refused_without_reading_it_whole() {
        let url = serve(
            "HTTP/1.0 200 OK\r\nContent-Length: 99999999999\r\n\r\n{"
                .as_bytes()
                .to_vec(),
        );
        let e = Client::new(&url, None)
            .unwrap()
            .query("up", 1.0)
            .unwrap_err();
        assert!(e.to_string().contains("more than the limit"), "{e}");
        // No length: cut at the limit.
        let mut c = Client::new(&serve(http("200 OK", &"x".repeat(10_000))), None).unwrap();
        c.max_body = 1000;
        let e = c.query("up", 1.0).unwrap_err();
        assert!(
            e.to_string().contains("more than the limit of 1000 bytes"),
            "{e}"
        );
    }

    #[test]
    fn a_chunked_answer_is_read_and_a_huge_header_is_refused() {
        let body = r#"{"status":"success","data":{"resultType":"vector","result":[]}}"#;
        let (a, b) = body.split_at(20);
        let chunked = format!(
            "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\nConnection: close\r\n\r\n{:x}\r\n{a}\r\n{:x}\r\n{b}\r\n0\r\n\r\n",
            a.len(),
            b.len()
        );
        let got = Client::new(&serve(chunked.into_bytes()), None)
            .unwrap()
            .query("up", 1.0)
            .unwrap();
        assert!(got.is_empty());
        // Chunks past the limit are cut there, length or not.
        let big = "y".repeat(3000);
        let mut c = Client::new(
            &serve(
                format!("HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n{:x}\r\n{big}\r\n0\r\n\r\n", big.len())
                    .into_bytes(),
            ),
            None,
        )
        .unwrap();
        c.max_body = 1000;
        let e = c.query("up", 1.0).unwrap_err();
        assert!(
            e.to_string().contains("more than the limit of 1000 bytes"),
            "{e}"
        );
        // A header that never ends within the header limit.
        let huge = format!(
            "HTTP/1.0 200 OK\r\nX-Pad: {}\r\n\r\n{{}}",
            "z".repeat(MAX_HEAD * 2)
        );
        let e = Client::new(&serve(huge.into_bytes()), None)
            .unwrap()
            .query("up", 1.0)
            .unwrap_err();
        let FetchError::Failed(m) = e else {
            panic!("{e:?}")
        };
        assert!(m.contains("127.0.0.1"), "{m}");
    }

    #[test]
    fn a_stop_flag_set_during_a_silent_wait_ends_it_within_a_poll() {
        let l = TcpListener::bind("127.0.0.1:0").unwrap();
        let url = format!("http://{}", l.local_addr().unwrap());
        std::thread::spawn(move || {
            let c = l.accept();
            std::thread::sleep(Duration::from_secs(5));
            drop(c);
        });
        static STOP: AtomicBool = AtomicBool::new(false);
        std::thread::spawn(|| {
            std::thread::sleep(Duration::from_millis(300));
            STOP.store(true, Ordering::Relaxed);
        });
        let c = Client::new(&url, Some(&STOP)).unwrap();
        let t = Instant::now();
        assert_eq!(c.query("up", 1.0).unwrap_err(), FetchError::Interrupted);
        let took = t.elapsed();
        assert!(
            took >= Duration::from_millis(300) && took < Duration::from_millis(300) + 3 * POLL,
            "{took:?}"
        );
    }

    #[test]
    fn a_silent_server_times_out_and_a_stop_flag_wakes_the_wait() {
        let l = TcpListener::bind("127.0.0.1:0").unwrap();
        let url = format!("http://{}", l.local_addr().unwrap());
        // Holds the connection open, silent, past the timeout (not joined).
        std::thread::spawn(move || {
            let c = l.accept();
            std::thread::sleep(Duration::from_secs(2));
            drop(c);
        });
        let mut c = Client::new(&url, None).unwrap();
        c.timeout = Duration::from_millis(500);
        let t = Instant::now();
        let e = c.query("up", 1.0).unwrap_err();
        assert!(e.to_string().contains("no complete answer"), "{e}");
        assert!(
            t.elapsed() < Duration::from_millis(1500),
            "{:?}",
            t.elapsed()
        );

        static STOP: AtomicBool = AtomicBool::new(true);
        let c = Client::new("http://127.0.0.1:9", Some(&STOP)).unwrap();
        assert_eq!(c.query("up", 1.0).unwrap_err(), FetchError::Interrupted);
    }

    #[test]
    fn negative_counts_and_non_numbers_are_refused() {
        let url = serve(http(
            "200 OK",
            r#"{"status":"success","data":{"resultType":"vector","result":[{"metric":{"source":"a","target":"b"},"value":[1,"seven"]}]}}"#,
        ));
        let e = Client::new(&url, None)
            .unwrap()
            .query("x", 1.0)
            .unwrap_err();
        assert!(e.to_string().contains("\"seven\" is not a number"), "{e}");
        let s = Series {
            labels: BTreeMap::from([("source".into(), "a".into()), ("target".into(), "b".into())]),
            value: -3.0,
        };
        assert!(count(-3.0, "messages sent", &s)
            .unwrap_err()
            .contains("is -3, not a count"));
        assert!(count(f64::NAN, "messages sent", &s).is_err());
    }

    #[test]
    fn sources_are_matched_to_their_target_entries() {
        assert_eq!(host_part("10.0.0.7:18515"), "10.0.0.7");
        assert_eq!(host_part("[::1]:18515"), "::1");
        assert_eq!(host_part("h07"), "h07");
    }
}
