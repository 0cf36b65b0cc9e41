//! The HTTP layer served in-process on 127.0.0.1:0: content negotiation
//! (text 0.0.4 checked by promtool, OpenMetrics, protobuf decoded with
//! prost), routes, status codes, slow clients, basic auth and TLS.

mod common;

use common::{latency_buckets, test_registry, InProcess};
use ibexporter::http::{Format, Metrics, ServeOptions, WebConfig};
use ibtools_tests::prom::promtool_check_metrics;
use prometheus_client::encoding::prometheus_protobuf::prometheus_data_model as pb;
use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::path::Path;
use std::sync::Arc;
use std::time::{Duration, Instant};
use tokio_rustls::rustls;

const PROTOBUF_ACCEPT: &str = "application/vnd.google.protobuf;proto=io.prometheus.client.MetricFamily;encoding=delimited,application/openmetrics-text;version=1.0.0;q=0.8,application/openmetrics-text;version=0.0.1;q=0.75,text/plain;version=0.0.4;q=0.5,*/*;q=0.1";
const OPENMETRICS_ACCEPT: &str = "application/openmetrics-text;version=1.0.0,application/openmetrics-text;version=0.0.1;q=0.75,text/plain;version=0.0.4;q=0.5,*/*;q=0.1";

fn start_server(web: Option<WebConfig>, opts: ServeOptions) -> InProcess {
    InProcess::start(Metrics::new(test_registry().0), web, opts)
}

#[derive(Debug)]
struct Answer {
    status: u16,
    headers: Vec<(String, String)>,
    body: Vec<u8>,
}

impl Answer {
    fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(k, _)| k.eq_ignore_ascii_case(name))
            .map(|(_, v)| v.as_str())
    }
    fn text(&self) -> String {
        String::from_utf8_lossy(&self.body).into_owned()
    }
}

fn parse_answer(raw: &[u8]) -> Answer {
    let split = raw
        .windows(4)
        .position(|w| w == b"\r\n\r\n")
        .unwrap_or_else(|| panic!("no header end in {:?}", String::from_utf8_lossy(raw)));
    let head = String::from_utf8_lossy(&raw[..split]).into_owned();
    let mut lines = head.split("\r\n");
    let status = lines
        .next()
        .and_then(|l| l.split_whitespace().nth(1))
        .and_then(|c| c.parse().ok())
        .unwrap_or_else(|| panic!("bad status line in {head:?}"));
    let headers = lines
        .filter_map(|l| l.split_once(':'))
        .map(|(k, v)| (k.trim().to_string(), v.trim().to_string()))
        .collect();
    Answer {
        status,
        headers,
        body: raw[split + 4..].to_vec(),
    }
}

fn request_on<S: Read + Write>(
    s: &mut S,
    method: &str,
    path: &str,
    headers: &[(&str, &str)],
) -> Answer {
    let mut req = format!("{method} {path} HTTP/1.0\r\nHost: localhost\r\n");
    for (k, v) in headers {
        req += &format!("{k}: {v}\r\n");
    }
    req += "\r\n";
    s.write_all(req.as_bytes()).unwrap();
    let mut raw = Vec::new();
    // rustls reports a missing close_notify as an error after the data.
    if let Err(e) = s.read_to_end(&mut raw) {
        assert!(!raw.is_empty(), "{method} {path}: {e}");
    }
    parse_answer(&raw)
}

fn request(addr: SocketAddr, method: &str, path: &str, headers: &[(&str, &str)]) -> Answer {
    let mut s = TcpStream::connect(addr).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    request_on(&mut s, method, path, headers)
}

fn get(addr: SocketAddr, path: &str) -> Answer {
    request(addr, "GET", path, &[])
}

fn quick_opts() -> ServeOptions {
    ServeOptions {
        header_read_timeout: Duration::from_secs(30),
        ..ServeOptions::default()
    }
}

#[test]
fn text_by_default_and_promtool_is_clean() {
    let srv = start_server(None, quick_opts());
    let a = get(srv.addr, "/metrics");
    assert_eq!(a.status, 200, "{a:?}");
    assert_eq!(
        a.header("content-type"),
        Some("text/plain; version=0.0.4; charset=utf-8")
    );
    let text = a.text();
    assert!(
        text.contains("# TYPE test_requests_total counter\ntest_requests_total 42\n"),
        "{text}"
    );
    assert!(text.contains("\ntest_temperature_celsius 37\n"), "{text}");
    assert!(
        text.contains("test_rdma_latency_seconds_bucket{le=\"2.5e-6\"} 100\n")
            || text.contains("test_rdma_latency_seconds_bucket{le=\"0.0000025\"} 100\n"),
        "{text}"
    );
    assert!(
        text.contains("test_rdma_latency_seconds_bucket{le=\"+Inf\"} 160\n"),
        "{text}"
    );
    assert!(
        text.contains("test_rdma_latency_seconds_count 160\n"),
        "{text}"
    );
    assert!(!text.contains("# EOF"), "{text}");
    if let Err(e) = promtool_check_metrics(&text) {
        panic!("{e}\n--- served text:\n{text}");
    }
    // The self metric counts the first scrape in the next one.
    let again = get(srv.addr, "/metrics").text();
    assert!(
        again.contains("ibexporter_scrape_duration_seconds_count{format=\"text\"} 1\n"),
        "{again}"
    );
    assert!(promtool_check_metrics(&again).is_ok(), "{again}");
    // curl, browsers and `Accept: */*` get text too.
    let a = request(srv.addr, "GET", "/metrics", &[("Accept", "*/*")]);
    assert!(a
        .header("content-type")
        .unwrap()
        .starts_with("text/plain; version=0.0.4"));
}

#[test]
fn openmetrics_when_asked() {
    let srv = start_server(None, quick_opts());
    let a = request(
        srv.addr,
        "GET",
        "/metrics",
        &[("Accept", OPENMETRICS_ACCEPT)],
    );
    assert_eq!(a.status, 200);
    assert_eq!(
        a.header("content-type"),
        Some("application/openmetrics-text; version=1.0.0; charset=utf-8")
    );
    let text = a.text();
    assert!(
        text.contains("# TYPE test_requests counter\ntest_requests_total 42\n"),
        "{text}"
    );
    assert!(text.ends_with("# EOF\n"), "{text}");
    assert_eq!(text.matches("# EOF").count(), 1, "{text}");
    // ?format= overrides Accept.
    let a = request(
        srv.addr,
        "GET",
        "/metrics?format=openmetrics",
        &[("Accept", "text/plain")],
    );
    assert!(a.text().ends_with("# EOF\n"));
    let a = get(srv.addr, "/metrics?format=bogus");
    assert_eq!(a.status, 400, "{a:?}");
    assert!(
        a.text().contains("use text, openmetrics or protobuf"),
        "{a:?}"
    );
}

#[test]
fn protobuf_when_asked_decodes() {
    let srv = start_server(None, quick_opts());
    let a = request(srv.addr, "GET", "/metrics", &[("Accept", PROTOBUF_ACCEPT)]);
    assert_eq!(a.status, 200);
    assert_eq!(
        a.header("content-type"),
        Some("application/vnd.google.protobuf; proto=io.prometheus.client.MetricFamily; encoding=delimited")
    );
    let mut buf = &a.body[..];
    let mut fams = Vec::new();
    while !buf.is_empty() {
        fams.push(<pb::MetricFamily as prost::Message>::decode_length_delimited(&mut buf).unwrap());
    }
    let fam = |n: &str| {
        fams.iter().find(|f| f.name == n).unwrap_or_else(|| {
            panic!(
                "no family {n} in {:?}",
                fams.iter().map(|f| &f.name).collect::<Vec<_>>()
            )
        })
    };
    let c = fam("test_requests_total");
    assert_eq!(c.r#type, pb::MetricType::Counter as i32);
    assert_eq!(c.metric[0].counter.as_ref().unwrap().value, 42.0);
    assert_eq!(
        fam("test_temperature_celsius").metric[0]
            .gauge
            .as_ref()
            .unwrap()
            .value,
        37.0
    );
    let h = fam("test_rdma_latency_seconds");
    assert_eq!(h.r#type, pb::MetricType::Histogram as i32);
    let h = h.metric[0].histogram.as_ref().unwrap();
    assert_eq!(h.sample_count, 160);
    assert_eq!(h.schema, 3, "factor 1.1 -> schema 3 (2^(1/8))");
    assert!(
        !h.positive_span.is_empty() && !h.positive_delta.is_empty(),
        "{h:?}"
    );
    let native_total: i64 = h
        .positive_delta
        .iter()
        .scan(0i64, |acc, d| {
            *acc += d;
            Some(*acc)
        })
        .sum();
    assert_eq!(native_total as u64 + h.zero_count, 160, "{h:?}");
    assert_eq!(
        h.bucket.len(),
        latency_buckets().len() + 1,
        "classic buckets and +Inf"
    );
    assert_eq!(h.bucket.last().unwrap().cumulative_count, 160);
    fam("ibexporter_scrape_duration_seconds");
    assert_eq!(Format::negotiate(Some(PROTOBUF_ACCEPT)), Format::Protobuf);
}

#[test]
fn healthz_index_404_405() {
    let srv = start_server(None, quick_opts());
    let a = get(srv.addr, "/healthz");
    assert_eq!((a.status, a.text().as_str()), (200, "ok\n"));
    let a = get(srv.addr, "/");
    assert_eq!(a.status, 200);
    assert!(a.header("content-type").unwrap().starts_with("text/html"));
    let page = a.text();
    assert!(page.contains("href=\"/metrics\""), "{page}");
    assert!(page.contains("href=\"/healthz\""), "{page}");
    assert!(page.contains(env!("CARGO_PKG_VERSION")), "{page}");
    // HEAD is answered like GET, without a body.
    let a = request(srv.addr, "HEAD", "/metrics", &[]);
    assert_eq!(a.status, 200, "{a:?}");
    assert!(a.body.is_empty(), "{a:?}");
    assert_eq!(get(srv.addr, "/metrics").header("vary"), Some("Accept"));
    let a = get(srv.addr, "/nope");
    assert_eq!(a.status, 404, "{a:?}");
    assert!(a.text().contains("/metrics"));
    for (m, p) in [
        ("POST", "/metrics"),
        ("PUT", "/healthz"),
        ("DELETE", "/"),
        ("PATCH", "/metrics"),
    ] {
        let a = request(srv.addr, m, p, &[("Content-Length", "0")]);
        assert_eq!(a.status, 405, "{m} {p}: {a:?}");
        assert!(
            a.header("allow").is_some_and(|v| v.contains("GET")),
            "{m} {p}: {a:?}"
        );
    }
}

#[test]
fn silent_clients_do_not_block_scrapes() {
    let srv = start_server(None, quick_opts());
    // Connections that send nothing, or stop half-way through the headers.
    let mut silent: Vec<TcpStream> = (0..8)
        .map(|_| TcpStream::connect(srv.addr).unwrap())
        .collect();
    let mut partial = TcpStream::connect(srv.addr).unwrap();
    partial
        .write_all(b"GET /metrics HTTP/1.1\r\nHost: x\r\nAcc")
        .unwrap();
    let addr = srv.addr;
    let scrapers: Vec<_> = (0..4)
        .map(|_| {
            std::thread::spawn(move || {
                let t = Instant::now();
                let a = get(addr, "/metrics");
                (a.status, t.elapsed())
            })
        })
        .collect();
    for s in scrapers {
        let (status, took) = s.join().unwrap();
        assert_eq!(status, 200);
        assert!(
            took < Duration::from_secs(5),
            "scrape took {took:?} beside silent clients"
        );
    }
    // The silent ones are still open: the scrapes did not wait for them.
    silent[0].set_nonblocking(true).unwrap();
    let mut b = [0u8; 1];
    assert!(
        matches!(silent[0].read(&mut b), Err(e) if e.kind() == std::io::ErrorKind::WouldBlock),
        "silent connection was closed early"
    );
    silent.clear();
}

#[test]
fn header_timeout_closes_silent_clients_and_cap_holds() {
    let opts = ServeOptions {
        header_read_timeout: Duration::from_secs(1),
        max_connections: 3,
        ..ServeOptions::default()
    };
    let srv = start_server(None, opts);
    let mut silent: Vec<TcpStream> = (0..3)
        .map(|_| {
            let s = TcpStream::connect(srv.addr).unwrap();
            std::thread::sleep(Duration::from_millis(30));
            s
        })
        .collect();
    std::thread::sleep(Duration::from_millis(100));
    // All 3 slots are taken by idle clients: the scrape does not wait, the
    // connection idle for longest (the first) is closed to make room.
    let t = Instant::now();
    let a = get(srv.addr, "/metrics");
    let took = t.elapsed();
    assert_eq!(a.status, 200);
    assert!(
        took < Duration::from_millis(500),
        "scrape waited for a slot: {took:?}"
    );
    let closed = |s: &mut TcpStream, within: Duration| {
        s.set_read_timeout(Some(within)).unwrap();
        let mut b = [0u8; 16];
        match s.read(&mut b) {
            Ok(0) => true,
            // hyper may answer 408 before closing.
            Ok(n) => String::from_utf8_lossy(&b[..n]).starts_with("HTTP/1.1 408"),
            Err(e) => e.kind() == std::io::ErrorKind::ConnectionReset,
        }
    };
    assert!(
        closed(&mut silent[0], Duration::from_millis(300)),
        "the oldest idle connection was not closed to make room"
    );
    // The others are closed by the header timeout (EOF, or reset).
    for s in &mut silent[1..] {
        assert!(closed(s, Duration::from_secs(5)), "silent client kept open");
    }
}

fn write_web_config(dir: &Path, yaml: &str) -> WebConfig {
    let p = dir.join("web.yml");
    std::fs::write(&p, yaml).unwrap();
    WebConfig::load(&p).unwrap_or_else(|e| panic!("{e}"))
}

fn basic(user: &str, pass: &str) -> String {
    use base64::Engine as _;
    format!(
        "Basic {}",
        base64::engine::general_purpose::STANDARD.encode(format!("{user}:{pass}"))
    )
}

#[test]
fn basic_auth() {
    let dir = tempfile::tempdir().unwrap();
    let hash = bcrypt::hash("s3cret", 4).unwrap();
    let web = write_web_config(
        dir.path(),
        &format!("basic_auth_users:\n  prometheus: '{hash}'\n"),
    );
    assert!(web.basic_auth_enabled() && !web.tls_enabled());
    let srv = start_server(Some(web), quick_opts());

    let a = get(srv.addr, "/metrics");
    assert_eq!(a.status, 401, "{a:?}");
    let www = a
        .header("www-authenticate")
        .expect("WWW-Authenticate on 401");
    assert!(www.starts_with("Basic realm="), "{www}");
    assert!(!a.text().contains("test_requests"), "{a:?}");

    for (u, p) in [
        ("prometheus", "wrong"),
        ("nobody", "s3cret"),
        ("prometheus", ""),
    ] {
        let a = request(
            srv.addr,
            "GET",
            "/metrics",
            &[("Authorization", &basic(u, p))],
        );
        assert_eq!(a.status, 401, "{u}:{p}: {a:?}");
    }
    let a = request(
        srv.addr,
        "GET",
        "/metrics",
        &[("Authorization", "Bearer abc")],
    );
    assert_eq!(a.status, 401);

    let ok = basic("prometheus", "s3cret");
    for _ in 0..2 {
        // The second one is served from the verification cache.
        let a = request(srv.addr, "GET", "/metrics", &[("Authorization", &ok)]);
        assert_eq!(a.status, 200, "{a:?}");
        assert!(a.text().contains("test_requests_total 42"));
    }
    // Every path is behind auth, the 404 too.
    assert_eq!(get(srv.addr, "/healthz").status, 401);
    assert_eq!(get(srv.addr, "/nope").status, 401);
    assert_eq!(
        request(srv.addr, "GET", "/nope", &[("Authorization", &ok)]).status,
        404
    );
}

fn tls_client(ca_der: rustls::pki_types::CertificateDer<'static>) -> Arc<rustls::ClientConfig> {
    let mut roots = rustls::RootCertStore::empty();
    roots.add(ca_der).unwrap();
    Arc::new(
        rustls::ClientConfig::builder_with_provider(Arc::new(
            rustls::crypto::ring::default_provider(),
        ))
        .with_safe_default_protocol_versions()
        .unwrap()
        .with_root_certificates(roots)
        .with_no_client_auth(),
    )
}

fn tls_request(
    addr: SocketAddr,
    cfg: &Arc<rustls::ClientConfig>,
    path: &str,
    headers: &[(&str, &str)],
) -> Answer {
    let name = rustls::pki_types::ServerName::try_from("localhost").unwrap();
    let conn = rustls::ClientConnection::new(Arc::clone(cfg), name).unwrap();
    let tcp = TcpStream::connect(addr).unwrap();
    tcp.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    let mut s = rustls::StreamOwned::new(conn, tcp);
    request_on(&mut s, "GET", path, headers)
}

#[test]
fn tls_with_and_without_auth() {
    let dir = tempfile::tempdir().unwrap();
    let ck = rcgen::generate_simple_self_signed(vec!["localhost".to_string()]).unwrap();
    std::fs::write(dir.path().join("server.crt"), ck.cert.pem()).unwrap();
    std::fs::write(
        dir.path().join("server.key"),
        ck.signing_key.serialize_pem(),
    )
    .unwrap();
    let client = tls_client(ck.cert.der().clone());

    // Relative paths resolve against the web config's directory.
    let web = write_web_config(
        dir.path(),
        "tls_server_config:\n  cert_file: server.crt\n  key_file: server.key\n",
    );
    assert!(web.tls_enabled());
    let srv = start_server(Some(web), quick_opts());
    let a = tls_request(srv.addr, &client, "/metrics", &[]);
    assert_eq!(a.status, 200, "{a:?}");
    assert!(a.text().contains("test_requests_total 42"), "{a:?}");
    assert_eq!(
        tls_request(srv.addr, &client, "/healthz", &[]).text(),
        "ok\n"
    );
    // Plain HTTP on the TLS port gets no metrics.
    let mut s = TcpStream::connect(srv.addr).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
    s.write_all(b"GET /metrics HTTP/1.0\r\n\r\n").unwrap();
    let mut raw = Vec::new();
    let _ = s.read_to_end(&mut raw);
    assert!(
        !String::from_utf8_lossy(&raw).contains("test_requests"),
        "{raw:?}"
    );
    drop(srv);

    let hash = bcrypt::hash("pw", 4).unwrap();
    let web = write_web_config(
        dir.path(),
        &format!(
            "tls_server_config:\n  cert_file: {0}/server.crt\n  key_file: {0}/server.key\nbasic_auth_users:\n  scraper: '{hash}'\n",
            dir.path().display()
        ),
    );
    let srv = start_server(Some(web), quick_opts());
    assert_eq!(tls_request(srv.addr, &client, "/metrics", &[]).status, 401);
    let a = tls_request(
        srv.addr,
        &client,
        "/metrics",
        &[("Authorization", &basic("scraper", "pw"))],
    );
    assert_eq!(a.status, 200, "{a:?}");
}

#[test]
fn bad_web_configs_name_file_and_field() {
    let dir = tempfile::tempdir().unwrap();
    let ck = rcgen::generate_simple_self_signed(vec!["localhost".to_string()]).unwrap();
    let other = rcgen::KeyPair::generate().unwrap();
    std::fs::write(dir.path().join("server.crt"), ck.cert.pem()).unwrap();
    std::fs::write(dir.path().join("other.key"), other.serialize_pem()).unwrap();
    std::fs::write(dir.path().join("garbage.key"), "not a key\n").unwrap();
    let p = dir.path().join("web.yml");
    let load = |yaml: &str| {
        std::fs::write(&p, yaml).unwrap();
        WebConfig::load(&p).unwrap_err()
    };
    let cases = [
        (
            "tls_server_config:\n  cert_file: server.crt\n  key_file: missing.key\n",
            "tls_server_config.key_file",
            "missing.key",
        ),
        (
            "tls_server_config:\n  cert_file: server.crt\n  key_file: garbage.key\n",
            "tls_server_config.key_file",
            "no usable PEM private key",
        ),
        (
            "tls_server_config:\n  cert_file: server.crt\n  key_file: other.key\n",
            "tls_server_config",
            "key belongs to the certificate",
        ),
        (
            "tls_server_config:\n  cert_file: server.crt\n  key_file: other.key\n  min_version: TLS13\n",
            "tls_server_config.min_version",
            "unknown field `min_version`",
        ),
        ("basic_auth_users:\n  bob: hunter2\n", "basic_auth_users.bob", "not a bcrypt hash"),
        (
            "tls_server_config: [\n",
            "tls_server_config",
            "invalid type: sequence",
        ),
        ("basic_auth_users:\n  a: 'open\n", "basic_auth_users.a", "line 2"),
    ];
    for (yaml, field, needle) in cases {
        let e = load(yaml);
        let line = e.to_string();
        eprintln!("{line}");
        assert_eq!(e.field, field, "{line}");
        assert!(line.contains(needle), "{line}");
        assert!(
            line.starts_with(&format!("web config {}", p.display())),
            "{line}"
        );
        assert!(!line.contains('\n'), "{line}");
    }
    let e = WebConfig::load(&dir.path().join("absent.yml")).unwrap_err();
    assert!(
        e.to_string().contains("absent.yml") && e.to_string().contains("cannot read"),
        "{e}"
    );
}

/// A collector that takes 600 ms: scrapes stay in flight.
#[derive(Debug)]
struct Slow;

impl prometheus_client::collector::Collector for Slow {
    fn encode(
        &self,
        _: prometheus_client::encoding::DescriptorEncoder,
    ) -> Result<(), std::fmt::Error> {
        std::thread::sleep(Duration::from_millis(600));
        Ok(())
    }
}

#[test]
fn requests_past_max_requests_get_503_at_once() {
    let scrape_all = |max_requests: usize| {
        let mut reg = prometheus_client::registry::Registry::default();
        reg.register_collector(Box::new(Slow));
        let opts = ServeOptions {
            max_requests,
            ..quick_opts()
        };
        let srv = InProcess::start(Metrics::new(reg), None, opts);
        let addr = srv.addr;
        let scrapes: Vec<_> = (0..5)
            .map(|_| {
                std::thread::spawn(move || {
                    let t = Instant::now();
                    let a = get(addr, "/metrics");
                    (a.status, t.elapsed(), a.text())
                })
            })
            .collect();
        scrapes
            .into_iter()
            .map(|s| s.join().unwrap())
            .collect::<Vec<_>>()
    };
    let r = scrape_all(2);
    let ok = r.iter().filter(|(s, _, _)| *s == 200).count();
    let busy: Vec<_> = r.iter().filter(|(s, _, _)| *s == 503).collect();
    assert!(ok >= 2, "{r:?}");
    assert!(!busy.is_empty(), "no 503 past --web.max-requests: {r:?}");
    for (_, took, text) in &busy {
        assert!(*took < Duration::from_millis(400), "503 took {took:?}");
        assert!(text.contains("--web.max-requests"), "{text}");
    }
    // 0: no limit.
    let r = scrape_all(0);
    assert!(r.iter().all(|(s, _, _)| *s == 200), "{r:?}");
}
