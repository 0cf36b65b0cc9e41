//! Helpers for the tests that run the real `ibexporter` binary, and the
//! shipped Prometheus rules ([`rules`]).

#![allow(dead_code)]

pub mod rules;

use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// A running exporter; killed on drop, even when an assertion fails.
pub struct Server {
    /// The process.
    pub child: Child,
    /// Its HTTP address, `127.0.0.1:PORT`.
    pub addr: String,
}

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// The `ibprobe` binary beside this crate's (built if only this crate's
/// tests were built).
pub fn ibprobe() -> std::path::PathBuf {
    let p = std::path::Path::new(env!("CARGO_BIN_EXE_ibexporter")).with_file_name("ibprobe");
    if !p.exists() {
        let st = Command::new(env!("CARGO"))
            .args(["build", "-p", "ibprobe", "--bin", "ibprobe"])
            .status()
            .unwrap();
        assert!(st.success());
    }
    p
}

/// A port nothing listens on right now.
pub fn free_port() -> u16 {
    let l = TcpListener::bind("127.0.0.1:0").unwrap();
    l.local_addr().unwrap().port()
}

/// One HTTP/1.0 GET; the whole response, headers included.
pub fn get(addr: &str, path: &str) -> std::io::Result<String> {
    let mut s = TcpStream::connect(addr)?;
    s.set_read_timeout(Some(Duration::from_secs(10)))?;
    write!(s, "GET {path} HTTP/1.0\r\nHost: {addr}\r\n\r\n")?;
    let mut out = String::new();
    s.read_to_string(&mut out)?;
    Ok(out)
}

/// Starts `ibexporter --listen 127.0.0.1:<free> ARGS...` (with its
/// responder on a free port unless ARGS name one) and waits until it
/// answers /healthz.
pub fn start(args: &[&str]) -> Server {
    let addr = format!("127.0.0.1:{}", free_port());
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_ibexporter"));
    cmd.args(["--listen", &addr]);
    if !args.contains(&"--responder") {
        cmd.args(["--responder", "127.0.0.1:0"]);
    }
    let child = cmd
        .args(args)
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let mut server = Server { child, addr };
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        match get(&server.addr, "/healthz") {
            Ok(r) if r.contains("200") => return server,
            r => {
                assert!(
                    server.child.try_wait().unwrap().is_none(),
                    "ibexporter {args:?} exited early"
                );
                assert!(
                    Instant::now() < deadline,
                    "ibexporter never answered: {r:?}"
                );
                std::thread::sleep(Duration::from_millis(50));
            }
        }
    }
}

/// Scrapes until `pred` holds on the body (or panics after `secs`).
pub fn scrape_until(addr: &str, secs: u64, what: &str, pred: impl Fn(&str) -> bool) -> String {
    let deadline = Instant::now() + Duration::from_secs(secs);
    loop {
        let m = get(addr, "/metrics").unwrap_or_default();
        if pred(&m) {
            return m;
        }
        assert!(
            Instant::now() < deadline,
            "{what} not seen after {secs} s:\n{m}"
        );
        std::thread::sleep(Duration::from_millis(200));
    }
}

/// The value of the first sample line that starts with `prefix` and
/// contains every one of `parts`.
pub fn sample(metrics: &str, prefix: &str, parts: &[&str]) -> Option<f64> {
    metrics
        .lines()
        .find(|l| l.starts_with(prefix) && parts.iter().all(|p| l.contains(p)))
        .and_then(|l| l.rsplit(' ').next())
        .and_then(|v| v.parse().ok())
}

/// The HTTP layer served in this process on 127.0.0.1:0 (no binary, no
/// probes): for tests of formats, auth and timeouts on a known registry.
pub struct InProcess {
    /// Where it listens.
    pub addr: std::net::SocketAddr,
    stop: Option<tokio::sync::oneshot::Sender<()>>,
    rt: Option<tokio::runtime::Runtime>,
}

impl InProcess {
    /// Serves `metrics` with `web` (TLS, basic auth) and `opts`.
    pub fn start(
        metrics: ibexporter::http::Metrics,
        web: Option<ibexporter::http::WebConfig>,
        opts: ibexporter::http::ServeOptions,
    ) -> InProcess {
        let rt = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .enable_all()
            .build()
            .unwrap();
        let std_l = TcpListener::bind("127.0.0.1:0").unwrap();
        std_l.set_nonblocking(true).unwrap();
        let addr = std_l.local_addr().unwrap();
        let (tx, rx) = tokio::sync::oneshot::channel::<()>();
        {
            let _g = rt.enter();
            let l = tokio::net::TcpListener::from_std(std_l).unwrap();
            rt.spawn(ibexporter::http::serve_with(
                l,
                web,
                ibexporter::http::router(metrics),
                async {
                    let _ = rx.await;
                },
                opts,
            ));
        }
        InProcess {
            addr,
            stop: Some(tx),
            rt: Some(rt),
        }
    }
}

impl Drop for InProcess {
    fn drop(&mut self) {
        if let Some(s) = self.stop.take() {
            let _ = s.send(());
        }
        if let Some(rt) = self.rt.take() {
            rt.shutdown_timeout(Duration::from_secs(2));
        }
    }
}

/// The value of the sample line `series` (name and labels exactly as
/// encoded), if there is one: for collectors whose label order is fixed.
pub fn exact_sample(text: &str, series: &str) -> Option<String> {
    text.lines()
        .find_map(|l| l.strip_prefix(series)?.strip_prefix(' '))
        .map(str::to_string)
}

/// Asserts that the sample line `series` has the value `want`.
pub fn assert_sample(text: &str, series: &str, want: &str) {
    assert_eq!(
        exact_sample(text, series).as_deref(),
        Some(want),
        "{series} in:\n{text}"
    );
}

/// Runs `f` with a `tracing` subscriber that keeps what is logged (plain
/// text, no colours) and returns `f`'s result with that log.
pub fn with_logs<T>(f: impl FnOnce() -> T) -> (T, String) {
    use std::sync::{Arc, Mutex};
    #[derive(Clone, Default)]
    struct Logs(Arc<Mutex<Vec<u8>>>);
    impl Write for Logs {
        fn write(&mut self, b: &[u8]) -> std::io::Result<usize> {
            self.0.lock().unwrap().extend_from_slice(b);
            Ok(b.len())
        }
        fn flush(&mut self) -> std::io::Result<()> {
            Ok(())
        }
    }
    let logs = Logs::default();
    let sub = tracing_subscriber::fmt()
        .with_writer({
            let l = logs.clone();
            move || l.clone()
        })
        .with_ansi(false)
        .finish();
    let out = tracing::subscriber::with_default(sub, f);
    let text = String::from_utf8_lossy(&logs.0.lock().unwrap()).into_owned();
    (out, text)
}

/// 250 ns .. 10 ms, 1-2.5-5 per decade (log-linear), in seconds: the
/// buckets of the test registry's histogram.
pub fn latency_buckets() -> Vec<f64> {
    vec![
        250e-9, 500e-9, 1e-6, 2.5e-6, 5e-6, 10e-6, 25e-6, 50e-6, 100e-6, 250e-6, 500e-6, 1e-3,
        2.5e-3, 5e-3, 10e-3,
    ]
}

/// Ten parts 2 µs, five 20 µs, one 1 ms: the median is 2 µs.
pub fn observe_batch(h: &prometheus_client::metrics::histogram::Histogram) {
    for _ in 0..10 {
        h.observe(2e-6);
    }
    for _ in 0..5 {
        h.observe(20e-6);
    }
    h.observe(1e-3);
}

/// A counter (42), a gauge (37) and a classic+native histogram with 100
/// observations of 2 µs, 50 of 20 µs and 10 of 1 ms: a known registry for
/// the tests of formats, serving and a real Prometheus.
pub fn test_registry() -> (
    prometheus_client::registry::Registry,
    prometheus_client::metrics::histogram::Histogram,
) {
    use prometheus_client::metrics::counter::Counter;
    use prometheus_client::metrics::gauge::Gauge;
    use prometheus_client::metrics::histogram::{Histogram, NativeHistogramConfig};
    let mut reg = prometheus_client::registry::Registry::default();
    let c: Counter = Counter::default();
    c.inc_by(42);
    reg.register("test_requests", "Requests handled", c);
    let g: Gauge = Gauge::default();
    g.set(37);
    reg.register("test_temperature_celsius", "HCA temperature", g);
    let h = Histogram::new_classic_and_native(latency_buckets(), NativeHistogramConfig::new(1.1));
    for _ in 0..10 {
        observe_batch(&h);
    }
    reg.register("test_rdma_latency_seconds", "Round-trip latency", h.clone());
    (reg, h)
}
