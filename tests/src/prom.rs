//! A real Prometheus server and `promtool` for tests: Debian's
//! `/usr/bin/prometheus` (package `prometheus`) scraping the exporter under
//! test, queried through its HTTP API.
//!
//! Why it exists: an exporter is only right if Prometheus itself accepts
//! what it serves (content negotiation, protobuf, native histograms,
//! `histogram_quantile`); parsing our own output with our own code proves
//! little. Missing binaries fail the test with the package to install,
//! they never skip it.

use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// One scrape job: Prometheus scrapes `http://<address><metrics_path>`
/// with the given query parameters, every second.
///
/// Why it exists: tests scrape the same exporter as several jobs (for
/// example once negotiated, once with `?format=text`).
#[derive(Debug, Clone)]
pub struct Target {
    /// `job_name`, and the `job` label on every series it yields.
    pub job: String,
    /// `host:port` of the exporter.
    pub address: String,
    /// Path scraped; `/metrics` unless changed.
    pub metrics_path: String,
    /// Query parameters added to each scrape (`params:` in the config).
    pub params: Vec<(String, String)>,
}

impl Target {
    /// A job scraping `http://<address>/metrics`.
    pub fn new(job: &str, address: &str) -> Target {
        Target {
            job: job.to_string(),
            address: address.to_string(),
            metrics_path: "/metrics".to_string(),
            params: Vec::new(),
        }
    }

    /// Adds a query parameter to each scrape.
    pub fn param(mut self, key: &str, value: &str) -> Target {
        self.params.push((key.to_string(), value.to_string()));
        self
    }
}

/// A running Prometheus on `127.0.0.1:<free port>`, storing into a
/// temporary directory; killed and removed on drop.
///
/// Why it exists: see the module docs.
pub struct Prometheus {
    child: Child,
    dir: tempfile::TempDir,
    /// `127.0.0.1:<port>` of its web API.
    pub address: String,
    /// Its version, from `prometheus --version`.
    pub version: (u32, u32, u32),
    /// Whether `scrape_classic_histograms: true` was written for every job
    /// (Prometheus 2.45+ with native histograms): then a histogram scraped
    /// as protobuf is kept as both native and classic `_bucket` series.
    /// Older versions keep only the native one.
    pub classic_with_native: bool,
}

/// Finds `name` on `PATH`, else fails naming the Debian package.
fn binary(name: &str) -> PathBuf {
    binary_of(name, "prometheus")
}

/// Finds `name` on `PATH` or in `/usr/bin`, else fails naming the Debian
/// `package` that ships it.
pub(crate) fn binary_of(name: &str, package: &str) -> PathBuf {
    let found = std::env::var_os("PATH")
        .map(|p| std::env::split_paths(&p).collect::<Vec<_>>())
        .unwrap_or_default()
        .into_iter()
        .chain([PathBuf::from("/usr/bin")])
        .map(|d| d.join(name))
        .find(|p| p.is_file());
    found.unwrap_or_else(|| {
        panic!(
            "`{name}` not found on PATH nor in /usr/bin: these tests run it for real; \
             install it with `apt-get install {package}` (scripts/setup does)"
        )
    })
}

/// Parses `prometheus, version 2.42.0+ds (...)`.
fn parse_version(out: &str) -> Option<(u32, u32, u32)> {
    let v = out.split("version ").nth(1)?;
    let v: String = v
        .chars()
        .take_while(|c| c.is_ascii_digit() || *c == '.')
        .collect();
    let mut it = v.split('.').map(|p| p.parse::<u32>().ok());
    Some((it.next()??, it.next()??, it.next().flatten().unwrap_or(0)))
}

pub(crate) fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .expect("binding 127.0.0.1:0 to find a free port")
        .port()
}

fn yaml_str(s: &str) -> String {
    // JSON strings are valid YAML flow scalars.
    serde_json::Value::String(s.to_string()).to_string()
}

impl Prometheus {
    /// Writes a `prometheus.yml` scraping `targets` every second, starts
    /// Prometheus with it (`--enable-feature=native-histograms` when
    /// `native_histograms`) and waits until `/-/ready` answers 200.
    ///
    /// Panics, with the log's tail, if it is missing or does not become
    /// ready within 30 s.
    pub fn start(targets: &[Target], native_histograms: bool) -> Prometheus {
        Prometheus::start_with_rules(targets, native_histograms, &[])
    }

    /// As [`Prometheus::start`], with `rule_files` (recording and alerting
    /// rules) loaded and evaluated every second.
    ///
    /// Why it exists: the shipped rules must load into a real Prometheus
    /// and their alerts fire against a real exporter, not only pass
    /// `promtool test rules` on synthetic series.
    pub fn start_with_rules(
        targets: &[Target],
        native_histograms: bool,
        rule_files: &[PathBuf],
    ) -> Prometheus {
        Prometheus::start_with(targets, native_histograms, rule_files, "")
    }

    /// As [`Prometheus::start_with_rules`], with `extra` (top-level YAML
    /// sections such as a shipped `remote_write:` stanza) appended to the
    /// generated configuration.
    pub fn start_with(
        targets: &[Target],
        native_histograms: bool,
        rule_files: &[PathBuf],
        extra: &str,
    ) -> Prometheus {
        let dir = tempfile::tempdir().expect("creating a tempdir for Prometheus");
        Prometheus::start_in(dir, targets, native_histograms, rule_files, extra)
    }

    /// A Prometheus scraping nothing whose storage holds `openmetrics`
    /// (OpenMetrics text with timestamps, ending in `# EOF`), written into
    /// blocks by `promtool tsdb create-blocks-from openmetrics` before it
    /// starts: series at chosen past times, with no exporter to run.
    ///
    /// Why it exists: a test of a reader of Prometheus (`ibexporter
    /// localize`) needs windows of known data now, not minutes of scrapes.
    pub fn start_backfilled(openmetrics: &str) -> Prometheus {
        let dir = tempfile::tempdir().expect("creating a tempdir for Prometheus");
        let input = dir.path().join("backfill.om");
        std::fs::write(&input, openmetrics).expect("writing the backfill input");
        let bin = binary("promtool");
        let out = Command::new(&bin)
            .args(["tsdb", "create-blocks-from", "openmetrics"])
            .arg(&input)
            .arg(dir.path().join("data"))
            .output()
            .unwrap_or_else(|e| panic!("starting {}: {e}", bin.display()));
        assert!(
            out.status.success(),
            "promtool tsdb create-blocks-from openmetrics: {}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
        Prometheus::start_in(dir, &[], false, &[], "")
    }

    fn start_in(
        dir: tempfile::TempDir,
        targets: &[Target],
        native_histograms: bool,
        rule_files: &[PathBuf],
        extra: &str,
    ) -> Prometheus {
        let bin = binary("prometheus");
        let out = Command::new(&bin)
            .arg("--version")
            .output()
            .unwrap_or_else(|e| panic!("running {} --version: {e}", bin.display()));
        let text = String::from_utf8_lossy(&out.stdout).to_string()
            + &String::from_utf8_lossy(&out.stderr);
        let version = parse_version(&text).unwrap_or_else(|| {
            panic!(
                "cannot read a version from `{} --version`: {text:?}",
                bin.display()
            )
        });
        // `scrape_classic_histograms` exists from 2.45 on; older versions
        // refuse a config that names it.
        let classic_with_native = native_histograms && version >= (2, 45, 0);

        let mut cfg = String::from(
            "global:\n  scrape_interval: 1s\n  scrape_timeout: 1s\n  evaluation_interval: 1s\n",
        );
        if !rule_files.is_empty() {
            cfg += "rule_files:\n";
            for f in rule_files {
                cfg += &format!("  - {}\n", yaml_str(&f.display().to_string()));
            }
        }
        cfg += if targets.is_empty() {
            "scrape_configs: []\n"
        } else {
            "scrape_configs:\n"
        };
        for t in targets {
            cfg += &format!(
                "  - job_name: {}\n    metrics_path: {}\n    static_configs:\n      - targets: [{}]\n",
                yaml_str(&t.job),
                yaml_str(&t.metrics_path),
                yaml_str(&t.address)
            );
            if !t.params.is_empty() {
                cfg += "    params:\n";
                for (k, v) in &t.params {
                    cfg += &format!("      {}: [{}]\n", yaml_str(k), yaml_str(v));
                }
            }
            if classic_with_native {
                cfg += "    scrape_classic_histograms: true\n";
            }
        }
        cfg += extra;
        let cfg_path = dir.path().join("prometheus.yml");
        std::fs::write(&cfg_path, &cfg).expect("writing prometheus.yml");
        let log_path = dir.path().join("prometheus.log");
        let log = std::fs::File::create(&log_path).expect("creating prometheus.log");

        let address = format!("127.0.0.1:{}", free_port());
        let mut cmd = Command::new(&bin);
        cmd.arg(format!("--config.file={}", cfg_path.display()))
            .arg(format!(
                "--storage.tsdb.path={}",
                dir.path().join("data").display()
            ))
            .arg(format!("--web.listen-address={address}"))
            .stdin(Stdio::null())
            .stdout(log.try_clone().expect("dup log"))
            .stderr(log);
        if native_histograms {
            cmd.arg("--enable-feature=native-histograms");
        }
        let child = cmd
            .spawn()
            .unwrap_or_else(|e| panic!("starting {}: {e}", bin.display()));
        let mut p = Prometheus {
            child,
            dir,
            address,
            version,
            classic_with_native,
        };
        let deadline = Instant::now() + Duration::from_secs(30);
        loop {
            if let Some(status) = p.child.try_wait().expect("polling prometheus") {
                panic!(
                    "prometheus exited early ({status}) with config:\n{cfg}\nlog:\n{}",
                    p.log_tail()
                );
            }
            if matches!(http_get(&p.address, "/-/ready"), Ok((200, _))) {
                break;
            }
            if Instant::now() > deadline {
                panic!(
                    "prometheus on {} not ready after 30 s; log:\n{}",
                    p.address,
                    p.log_tail()
                );
            }
            std::thread::sleep(Duration::from_millis(100));
        }
        p
    }

    /// The temporary directory holding `prometheus.yml`, `prometheus.log`
    /// and `data/`.
    pub fn dir(&self) -> &Path {
        self.dir.path()
    }

    /// The last 4 KiB of Prometheus' log, for failure messages.
    pub fn log_tail(&self) -> String {
        let log = std::fs::read_to_string(self.dir.path().join("prometheus.log"))
            .unwrap_or_else(|e| format!("(cannot read prometheus.log: {e})"));
        let start = log.len().saturating_sub(4096);
        let start = (start..log.len())
            .find(|i| log.is_char_boundary(*i))
            .unwrap_or(log.len());
        log[start..].to_string()
    }

    /// GETs an API path (`/api/v1/...`, already encoded) and returns the
    /// parsed JSON; panics on a transport error or non-JSON answer.
    pub fn api(&self, path_and_query: &str) -> serde_json::Value {
        let (status, body) = http_get(&self.address, path_and_query)
            .unwrap_or_else(|e| panic!("GET {path_and_query} from prometheus: {e}"));
        serde_json::from_slice(&body).unwrap_or_else(|e| {
            panic!(
                "GET {path_and_query}: status {status}, not JSON ({e}): {}",
                String::from_utf8_lossy(&body)
            )
        })
    }

    /// Runs an instant query and returns the whole API answer
    /// (`{"status": "success", "data": {"resultType": ..., "result": [...]}}`).
    /// Panics if Prometheus answers with an error (bad PromQL).
    pub fn query(&self, promql: &str) -> serde_json::Value {
        let v = self.api(&format!("/api/v1/query?query={}", url_encode(promql)));
        assert_eq!(
            v["status"],
            "success",
            "query {promql:?} failed: {v}\nprometheus log:\n{}",
            self.log_tail()
        );
        v
    }

    /// Repeats `query` until its result is non-empty and returns the result
    /// array; panics after `timeout` showing the last answer and the
    /// targets' scrape health.
    pub fn wait_for(&self, promql: &str, timeout: Duration) -> Vec<serde_json::Value> {
        let deadline = Instant::now() + timeout;
        loop {
            let v = self.query(promql);
            match v["data"]["result"].as_array() {
                Some(r) if !r.is_empty() => return r.clone(),
                _ => {}
            }
            if Instant::now() > deadline {
                panic!(
                    "query {promql:?} still empty after {timeout:?}; last answer: {v}\n\
                     targets: {}\nprometheus log:\n{}",
                    self.targets_summary(),
                    self.log_tail()
                );
            }
            std::thread::sleep(Duration::from_millis(200));
        }
    }

    /// One line per scrape target: job, health, last error.
    pub fn targets_summary(&self) -> String {
        let v = self.api("/api/v1/targets");
        v["data"]["activeTargets"]
            .as_array()
            .map(|ts| {
                ts.iter()
                    .map(|t| {
                        format!(
                            "{} {} {} {}",
                            t["labels"]["job"], t["scrapeUrl"], t["health"], t["lastError"]
                        )
                    })
                    .collect::<Vec<_>>()
                    .join("; ")
            })
            .unwrap_or_else(|| v.to_string())
    }
}

impl Drop for Prometheus {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Runs `promtool check metrics` on `text` (Prometheus text format 0.0.4)
/// and returns `Ok` only if it exits 0 **and** prints nothing; otherwise
/// `Err` with what it printed (parse errors and lint problems alike).
///
/// Why it exists: promtool is the reference checker for the text format
/// and its naming conventions.
pub fn promtool_check_metrics(text: &str) -> Result<(), String> {
    let bin = binary("promtool");
    let mut child = Command::new(&bin)
        .args(["check", "metrics"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap_or_else(|e| panic!("starting {}: {e}", bin.display()));
    let mut stdin = child.stdin.take().expect("piped stdin");
    let input = text.to_string();
    let writer = std::thread::spawn(move || stdin.write_all(input.as_bytes()));
    let out = child
        .wait_with_output()
        .unwrap_or_else(|e| panic!("waiting for promtool: {e}"));
    let _ = writer.join();
    crate::quiet_success("promtool check metrics", &out, |_| false)
}

/// Runs `promtool check rules FILES...`: Ok with what it printed (one
/// `SUCCESS: N rules found` per file) when it exits 0 and reports nothing
/// else; Err with its output otherwise (syntax, PromQL or lint errors:
/// duplicate rules, bad templates).
///
/// Why it exists: the shipped rule files must load in the Prometheus the
/// README installs.
pub fn promtool_check_rules(files: &[PathBuf]) -> Result<String, String> {
    promtool_rules("check", files, |l| {
        l.starts_with("Checking ") || l.starts_with("SUCCESS")
    })
}

/// Runs `promtool test rules FILES...` (unit tests of rules, on synthetic
/// series): Ok with what it printed when every test passed, Err with the
/// failures (expected against got) otherwise.
///
/// Why it exists: the shipped alerts are tested firing and not firing.
pub fn promtool_test_rules(files: &[PathBuf]) -> Result<String, String> {
    promtool_rules("test", files, |l| {
        l.starts_with("Unit Testing: ") || l.starts_with("SUCCESS")
    })
}

fn promtool_rules(
    verb: &str,
    files: &[PathBuf],
    expected: impl Fn(&str) -> bool,
) -> Result<String, String> {
    assert!(!files.is_empty(), "promtool {verb} rules: no files given");
    let bin = binary("promtool");
    let out = Command::new(&bin)
        .args([verb, "rules"])
        .args(files)
        .output()
        .unwrap_or_else(|e| panic!("starting {}: {e}", bin.display()));
    let said =
        String::from_utf8_lossy(&out.stdout).to_string() + &String::from_utf8_lossy(&out.stderr);
    crate::quiet_success(&format!("promtool {verb} rules"), &out, expected).map(|()| said)
}

/// `promtool query instant -o json SERVER EXPR`, run as `promtool` (a
/// command naming it, e.g. inside a network namespace:
/// `NetnsMesh::command(i, "promtool")`): the result vector, or what
/// promtool said.
///
/// Why it exists: a Prometheus inside a network namespace is reached
/// from inside it; the mesh tests and the recipes query it this way.
pub fn promtool_query(
    mut promtool: Command,
    server: &str,
    expr: &str,
) -> Result<Vec<serde_json::Value>, String> {
    let out = promtool
        .args(["query", "instant", "-o", "json", server, expr])
        .output()
        .map_err(|e| format!("promtool: {e}"))?;
    if !out.status.success() {
        return Err(String::from_utf8_lossy(&out.stderr).into_owned());
    }
    serde_json::from_slice::<Vec<serde_json::Value>>(&out.stdout)
        .map_err(|e| format!("{e}: {}", String::from_utf8_lossy(&out.stdout)))
}

/// Repeats [`promtool_query`] (with a fresh `promtool()` command each
/// time) every 500 ms until `ok` holds for its result, and returns it;
/// panics after `secs` seconds with the last answer.
pub fn promtool_wait(
    promtool: impl Fn() -> Command,
    server: &str,
    expr: &str,
    secs: u64,
    ok: impl Fn(&[serde_json::Value]) -> bool,
) -> Vec<serde_json::Value> {
    let deadline = Instant::now() + Duration::from_secs(secs);
    loop {
        let r = promtool_query(promtool(), server, expr);
        if let Ok(v) = &r {
            if ok(v) {
                return v.clone();
            }
        }
        assert!(
            Instant::now() < deadline,
            "{expr}: never held in {secs}s; last {r:?}"
        );
        std::thread::sleep(Duration::from_millis(500));
    }
}

/// Percent-encodes a query parameter value (RFC 3986 unreserved kept).
pub fn url_encode(s: &str) -> String {
    let mut out = String::with_capacity(s.len() * 3);
    for b in s.bytes() {
        if b.is_ascii_alphanumeric() || b"-._~".contains(&b) {
            out.push(b as char);
        } else {
            out.push_str(&format!("%{b:02X}"));
        }
    }
    out
}

/// A plain HTTP/1.0 GET: returns the status code and the body.
pub(crate) fn http_get(addr: &str, path: &str) -> std::io::Result<(u16, Vec<u8>)> {
    http(addr, "GET", path, &[])
}

/// One HTTP/1.0 request, `body` sent after the headers when not empty;
/// the answer's status and body.
pub(crate) fn http(
    addr: &str,
    method: &str,
    path: &str,
    body: &[u8],
) -> std::io::Result<(u16, Vec<u8>)> {
    let mut s = TcpStream::connect(addr)?;
    s.set_read_timeout(Some(Duration::from_secs(10)))?;
    let length = if body.is_empty() {
        String::new()
    } else {
        format!("Content-Length: {}\r\n", body.len())
    };
    write!(
        s,
        "{method} {path} HTTP/1.0\r\nHost: {addr}\r\nAccept: application/json\r\n{length}\r\n"
    )?;
    s.write_all(body)?;
    let mut raw = Vec::new();
    s.read_to_end(&mut raw)?;
    let split = raw
        .windows(4)
        .position(|w| w == b"\r\n\r\n")
        .ok_or_else(|| std::io::Error::other("no end of HTTP headers in the answer"))?;
    let head = String::from_utf8_lossy(&raw[..split]);
    let status = head
        .split_whitespace()
        .nth(1)
        .and_then(|c| c.parse().ok())
        .ok_or_else(|| std::io::Error::other(format!("bad status line: {head}")))?;
    Ok((status, raw[split + 4..].to_vec()))
}

/// Runs `promtool check config FILE`: Ok when it exits 0 and says
/// nothing but its "Checking" and "SUCCESS" lines (a missing file_sd file
/// is only a WARNING to promtool, and an error here).
///
/// Why it exists: the shipped scrape configuration must load in the
/// Prometheus the README installs, not only parse as YAML.
pub fn promtool_check_config(file: &Path) -> Result<(), String> {
    let bin = binary("promtool");
    let out = Command::new(&bin)
        .args(["check", "config"])
        .arg(file)
        .output()
        .unwrap_or_else(|e| panic!("starting {}: {e}", bin.display()));
    crate::quiet_success(
        &format!("promtool check config {}", file.display()),
        &out,
        |l| l.starts_with("Checking ") || l.starts_with("SUCCESS"),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn versions() {
        assert_eq!(
            parse_version("prometheus, version 2.42.0+ds (branch: debian/sid)"),
            Some((2, 42, 0))
        );
        assert_eq!(parse_version("prometheus, version 3.1"), Some((3, 1, 0)));
        assert_eq!(parse_version("nope"), None);
    }

    #[test]
    fn encoding() {
        assert_eq!(url_encode("up{job=\"a b\"}"), "up%7Bjob%3D%22a%20b%22%7D");
    }
}
