//! A real VictoriaMetrics for tests: Debian's package `victoria-metrics`,
//! its single-node store (`/usr/bin/victoria-metrics`, receiving
//! Prometheus `remote_write` on `/api/v1/write` and answering the
//! Prometheus query API) and its rule evaluator (`/usr/bin/vmalert`,
//! evaluating Prometheus rule files against the store and writing the
//! recorded series back into it).
//!
//! Why it exists: the shipped remote-write topology
//! (`deploy/victoriametrics/`) is only right if a real Prometheus ships
//! the exporter's series into the real store and the shipped rules
//! evaluate there. Missing binaries fail the test with the package to
//! install; they never skip it.

use crate::prom::{binary_of, free_port, http, http_get, url_encode};
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// A child process logging into a file of a temporary directory; killed
/// on drop.
struct Daemon {
    child: Child,
    dir: tempfile::TempDir,
    name: &'static str,
}

impl Daemon {
    /// Starts `bin args...`, its output into `<dir>/<name>.log`.
    fn spawn(name: &'static str, args: &[String], dir: tempfile::TempDir) -> Daemon {
        let bin = binary_of(name, "victoria-metrics");
        let log = std::fs::File::create(dir.path().join(format!("{name}.log")))
            .unwrap_or_else(|e| panic!("creating {name}.log: {e}"));
        let child = Command::new(&bin)
            .args(args)
            .stdin(Stdio::null())
            .stdout(log.try_clone().expect("dup log"))
            .stderr(log)
            .spawn()
            .unwrap_or_else(|e| panic!("starting {}: {e}", bin.display()));
        Daemon { child, dir, name }
    }

    /// The last 4 KiB of its log.
    fn log_tail(&self) -> String {
        let log =
            std::fs::read(self.dir.path().join(format!("{}.log", self.name))).unwrap_or_default();
        String::from_utf8_lossy(&log[log.len().saturating_sub(4096)..]).into_owned()
    }

    /// Waits until `GET http://addr/path` answers 200, or panics with the log.
    fn wait_ready(&mut self, addr: &str, path: &str) {
        let deadline = Instant::now() + Duration::from_secs(30);
        loop {
            if let Some(status) = self.child.try_wait().expect("polling a child") {
                panic!(
                    "{} exited early ({status}); log:\n{}",
                    self.name,
                    self.log_tail()
                );
            }
            if matches!(http_get(addr, path), Ok((200, _))) {
                return;
            }
            assert!(
                Instant::now() < deadline,
                "{} on {addr} not ready after 30 s; log:\n{}",
                self.name,
                self.log_tail()
            );
            std::thread::sleep(Duration::from_millis(100));
        }
    }
}

impl Drop for Daemon {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// A running single-node VictoriaMetrics on `127.0.0.1:<free port>`,
/// storing into a temporary directory.
pub struct VictoriaMetrics {
    daemon: Daemon,
    /// `127.0.0.1:<port>`: `remote_write` to `/api/v1/write`, queries on
    /// `/api/v1/query`.
    pub address: String,
}

impl VictoriaMetrics {
    /// Starts the store and waits until `/health` answers. Samples are
    /// queryable one second after they arrive (`-search.latencyOffset`,
    /// 30 s by default, hides the newest samples from queries).
    pub fn start() -> VictoriaMetrics {
        let dir = tempfile::tempdir().expect("creating a tempdir for VictoriaMetrics");
        let address = format!("127.0.0.1:{}", free_port());
        let args = vec![
            format!("-storageDataPath={}", dir.path().join("data").display()),
            format!("-httpListenAddr={address}"),
            "-search.latencyOffset=1s".to_string(),
            "-search.disableCache".to_string(),
        ];
        let mut daemon = Daemon::spawn("victoria-metrics", &args, dir);
        daemon.wait_ready(&address, "/health");
        VictoriaMetrics { daemon, address }
    }

    /// The URL a Prometheus `remote_write` sends to.
    pub fn write_url(&self) -> String {
        format!("http://{}/api/v1/write", self.address)
    }

    /// The store's log tail, for failure messages.
    pub fn log_tail(&self) -> String {
        self.daemon.log_tail()
    }

    /// Stores samples given in the Prometheus text format, one
    /// `name{labels} value timestamp_ms` a line, through the store's
    /// `/api/v1/import/prometheus`, with `extra_labels` added to each (as
    /// a scrape adds `job` and `instance`); panics unless it answers 204.
    pub fn import(&self, text: &str, extra_labels: &[(&str, &str)]) {
        let mut path = "/api/v1/import/prometheus?".to_string();
        for (k, v) in extra_labels {
            path += &format!("extra_label={}&", url_encode(&format!("{k}={v}")));
        }
        let (status, body) = http(&self.address, "POST", &path, text.as_bytes())
            .unwrap_or_else(|e| panic!("POST {path} to VictoriaMetrics: {e}"));
        assert_eq!(
            status,
            204,
            "POST {path} to VictoriaMetrics: {}\nsamples:\n{text}",
            String::from_utf8_lossy(&body)
        );
    }

    /// An instant query's result array; panics on an error answer. The
    /// store's write buffers are flushed first: freshly written samples
    /// become searchable only at its periodic flush, seconds later, which
    /// a test would otherwise wait for.
    pub fn query(&self, promql: &str) -> Vec<serde_json::Value> {
        let _ = http_get(&self.address, "/internal/force_flush");
        let path = format!("/api/v1/query?query={}", url_encode(promql));
        let (status, body) = http_get(&self.address, &path)
            .unwrap_or_else(|e| panic!("GET {path} from VictoriaMetrics: {e}"));
        let v: serde_json::Value = serde_json::from_slice(&body).unwrap_or_else(|e| {
            panic!(
                "GET {path}: status {status}, not JSON ({e}): {}",
                String::from_utf8_lossy(&body)
            )
        });
        assert_eq!(v["status"], "success", "query {promql:?} failed: {v}");
        v["data"]["result"].as_array().cloned().unwrap_or_default()
    }

    /// Repeats `promql` until its result is non-empty; panics after
    /// `timeout` with `why_not()` (the other daemons' logs).
    pub fn wait_for(
        &self,
        promql: &str,
        timeout: Duration,
        why_not: impl Fn() -> String,
    ) -> Vec<serde_json::Value> {
        let deadline = Instant::now() + timeout;
        loop {
            let r = self.query(promql);
            if !r.is_empty() {
                return r;
            }
            assert!(
                Instant::now() < deadline,
                "{promql:?} still empty in VictoriaMetrics after {timeout:?}\n{}\nstore log:\n{}",
                why_not(),
                self.log_tail()
            );
            std::thread::sleep(Duration::from_millis(250));
        }
    }
}

/// A running `vmalert` evaluating rule files against a store and writing
/// the recorded series back into it.
pub struct VmAlert {
    daemon: Daemon,
}

impl VmAlert {
    /// Starts `vmalert` with `rules` against `store` (queries and
    /// recorded series both there), evaluating every second, plus `extra`
    /// flags; waits until its `/health` answers.
    pub fn start(store: &VictoriaMetrics, rules: &[PathBuf], extra: &[&str]) -> VmAlert {
        let dir = tempfile::tempdir().expect("creating a tempdir for vmalert");
        let address = format!("127.0.0.1:{}", free_port());
        let url = format!("http://{}", store.address);
        let mut args = vec![
            format!("-datasource.url={url}"),
            format!("-remoteWrite.url={url}"),
            format!("-httpListenAddr={address}"),
            "-evaluationInterval=1s".to_string(),
            "-remoteWrite.flushInterval=500ms".to_string(),
        ];
        args.extend(rules.iter().map(|r| format!("-rule={}", r.display())));
        args.extend(extra.iter().map(|s| s.to_string()));
        let mut daemon = Daemon::spawn("vmalert", &args, dir);
        daemon.wait_ready(&address, "/health");
        VmAlert { daemon }
    }

    /// vmalert's log tail.
    pub fn log_tail(&self) -> String {
        self.daemon.log_tail()
    }
}
