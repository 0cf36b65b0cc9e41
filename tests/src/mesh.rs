//! A mesh of exporters under the `rack-mesh` plan, with one real
//! Prometheus: every exporter in its own network namespace
//! ([`crate::netns`]), racks from the file_sd labels, probing each other
//! over udp; Prometheus in a namespace of its own scrapes them all and
//! evaluates the rule files it is given (the shipped ones, from
//! `deploy/`, never copies).
//!
//! Why it exists: the plan test (`ibexporter/tests/plan_mesh.rs`) and the
//! fault test (`ibexporter/tests/mesh_faults.rs`) run the same mesh; one
//! definition of how it is started, queried and torn down. Needs root (as
//! [`NetnsMesh`]). Every process is killed on drop, before the namespaces
//! go (also when the test panics).

use crate::netns::NetnsMesh;
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::{Child, Stdio};

/// The port every exporter's responder listens on (its `target` label).
pub const RESPONDER_PORT: u16 = 18515;

/// What the mesh runs.
#[derive(Debug, Clone)]
pub struct MeshSpec {
    /// The `ibexporter` binary (`env!("CARGO_BIN_EXE_ibexporter")`).
    pub bin: PathBuf,
    /// Exporters.
    pub hosts: usize,
    /// Exporters per rack (hosts `0..rack` are rack0, and so on).
    pub rack: usize,
    /// `[probe] interval`, seconds.
    pub interval_s: u64,
    /// Prometheus' scrape and evaluation interval, seconds.
    pub scrape_s: u64,
    /// Rule files Prometheus loads.
    pub rules: Vec<PathBuf>,
}

/// The mesh's processes, killed on drop (before the namespaces go).
struct Procs(Vec<Option<Child>>);

impl Drop for Procs {
    fn drop(&mut self) {
        for c in self.0.iter_mut().flatten() {
            let _ = c.kill();
            let _ = c.wait();
        }
    }
}

/// A running mesh: exporters `0..hosts`, Prometheus in namespace `hosts`.
pub struct ExporterMesh {
    // Field order is drop order: processes, then namespaces, then files.
    procs: Procs,
    net: NetnsMesh,
    dir: tempfile::TempDir,
    spec: MeshSpec,
}

impl ExporterMesh {
    /// Starts the exporters and Prometheus; returns once they are spawned
    /// (see [`ExporterMesh::wait_up`]).
    pub fn start(spec: MeshSpec) -> ExporterMesh {
        let dir = tempfile::tempdir().unwrap();
        let net = NetnsMesh::new(spec.hosts + 1).unwrap_or_else(|e| panic!("making the mesh: {e}"));
        let mut m = ExporterMesh {
            procs: Procs(Vec::new()),
            net,
            dir,
            spec,
        };
        let mut racks: BTreeMap<String, Vec<String>> = BTreeMap::new();
        for i in 0..m.spec.hosts {
            racks.entry(m.rack_of(i)).or_default().push(m.target(i));
        }
        let groups: Vec<serde_json::Value> = racks
            .iter()
            .map(|(r, t)| serde_json::json!({"targets": t, "labels": {"rack": r}}))
            .collect();
        std::fs::write(m.list(), serde_json::to_string(&groups).unwrap()).unwrap();
        let cfg = m.dir.path().join("ibexporter.toml");
        std::fs::write(
            &cfg,
            format!(
                "[local]\nhca_loopback = false\nreference = []\nhost_wakeup = false\n\n\
                 [budget]\nmax_core_fraction = 0.5\n\n\
                 [probe]\ninterval = \"{}s\"\nprobes_per_interval = 10\ntimeout = \"500ms\"\ntransport = \"udp\"\n\n\
                 [targets]\nplan = \"rack-mesh\"\n\n\
                 [[targets.file_sd]]\npath = {:?}\nrefresh = \"5s\"\n",
                m.spec.interval_s,
                m.list().display().to_string()
            ),
        )
        .unwrap();
        for i in 0..m.spec.hosts {
            let log = std::fs::File::create(m.dir.path().join(format!("h{i}.log"))).unwrap();
            let child = m
                .net
                .command(i, &m.spec.bin)
                .args(["--config", cfg.to_str().unwrap()])
                .args(["--listen", &format!("{}:9427", m.net.ip(i))])
                .args(["--source", &format!("h{i}")])
                .stdin(Stdio::null())
                .stdout(Stdio::null())
                .stderr(log)
                .spawn()
                .unwrap();
            m.procs.0.push(Some(child));
        }
        let targets: Vec<String> = (0..m.spec.hosts)
            .map(|i| format!("\"{}:9427\"", m.net.ip(i)))
            .collect();
        let rules: Vec<String> = m
            .spec
            .rules
            .iter()
            .map(|r| format!("  - {r:?}\n"))
            .collect();
        // Prometheus scrapes itself too: its rule groups' evaluations
        // (`prometheus_rule_group_iterations_total`, `..._missed_total`).
        let pcfg = m.dir.path().join("prometheus.yml");
        let prom = m.prom();
        let s = m.spec.scrape_s;
        std::fs::write(
            &pcfg,
            format!(
                "global:\n  scrape_interval: {s}s\n  scrape_timeout: {s}s\n  evaluation_interval: {s}s\n\
                 rule_files:\n{}scrape_configs:\n  - job_name: mesh\n    static_configs:\n      - targets: [{}]\n  \
                 - job_name: prometheus\n    static_configs:\n      - targets: [\"{}:9090\"]\n",
                rules.concat(),
                targets.join(", "),
                m.net.ip(prom)
            ),
        )
        .unwrap();
        let plog = std::fs::File::create(m.dir.path().join("prometheus.log")).unwrap();
        let p = m
            .net
            .command(prom, "prometheus")
            .arg(format!("--config.file={}", pcfg.display()))
            .arg(format!(
                "--storage.tsdb.path={}",
                m.dir.path().join("data").display()
            ))
            .arg(format!("--web.listen-address={}:9090", m.net.ip(prom)))
            .stdin(Stdio::null())
            .stdout(plog.try_clone().unwrap())
            .stderr(plog)
            .spawn()
            .unwrap();
        m.procs.0.push(Some(p));
        m
    }

    /// Waits until Prometheus scrapes every exporter up and every rack
    /// pair is covered by the plan.
    pub fn wait_up(&self, secs: u64) {
        let n = self.spec.hosts.to_string();
        self.wait_query("count(up{job=\"mesh\"} == 1)", secs, |v| {
            v.first().and_then(|s| s["value"][1].as_str()) == Some(n.as_str())
        });
    }

    /// The namespace index of Prometheus.
    pub fn prom(&self) -> usize {
        self.spec.hosts
    }

    /// The mesh's namespaces.
    pub fn net(&self) -> &NetnsMesh {
        &self.net
    }

    /// The pinglist (file_sd) every exporter reads.
    pub fn list(&self) -> PathBuf {
        self.dir.path().join("pinglist.json")
    }

    /// A scratch directory that lives as long as the mesh.
    pub fn dir(&self) -> &Path {
        self.dir.path()
    }

    /// Host `i`'s rack name.
    pub fn rack_of(&self, i: usize) -> String {
        format!("rack{}", i / self.spec.rack)
    }

    /// Host `i`'s responder address, as `target` labels spell it.
    pub fn target(&self, i: usize) -> String {
        format!("{}:{RESPONDER_PORT}", self.net.ip(i))
    }

    /// The host whose `instance` label (`ip:9427`) or `target` label
    /// (`ip:18515`) this is.
    pub fn host_of(&self, addr: &str) -> Option<usize> {
        let ip = addr.rsplit_once(':').map_or(addr, |(ip, _)| ip);
        (0..self.spec.hosts).find(|&i| self.net.ip(i) == ip)
    }

    /// Host `i`'s exporter process id (`ip netns exec` execs it).
    pub fn pid(&self, i: usize) -> Option<u32> {
        self.procs.0[i].as_ref().map(Child::id)
    }

    /// Kills host `i`'s exporter and waits for it.
    pub fn kill(&mut self, i: usize) {
        let mut c = self.procs.0[i].take().expect("a running exporter");
        c.kill().unwrap();
        c.wait().unwrap();
    }

    /// `promtool query instant` inside Prometheus' namespace: the result
    /// vector.
    pub fn query(&self, expr: &str) -> Result<Vec<serde_json::Value>, String> {
        crate::prom::promtool_query(
            self.net.command(self.prom(), "promtool"),
            &self.server(),
            expr,
        )
    }

    /// [`ExporterMesh::query`] every 500 ms until `ok` holds (panics after
    /// `secs` seconds with the last answer).
    pub fn wait_query(
        &self,
        expr: &str,
        secs: u64,
        ok: impl Fn(&[serde_json::Value]) -> bool,
    ) -> Vec<serde_json::Value> {
        crate::prom::promtool_wait(
            || self.net.command(self.prom(), "promtool"),
            &self.server(),
            expr,
            secs,
            ok,
        )
    }

    fn server(&self) -> String {
        format!("http://{}:9090", self.net.ip(self.prom()))
    }

    /// The last lines of host `i`'s log, or Prometheus' for `i == hosts`.
    pub fn log_tail(&self, i: usize) -> String {
        let name = if i == self.prom() {
            "prometheus.log".to_string()
        } else {
            format!("h{i}.log")
        };
        let text = std::fs::read_to_string(self.dir.path().join(name)).unwrap_or_default();
        let lines: Vec<&str> = text.lines().collect();
        lines[lines.len().saturating_sub(20)..].join("\n")
    }
}

/// A label of one result of a query (empty when absent).
pub fn label<'a>(v: &'a serde_json::Value, l: &str) -> &'a str {
    v["metric"][l].as_str().unwrap_or("")
}

/// The value of one result of an instant query.
pub fn value(v: &serde_json::Value) -> f64 {
    v["value"][1]
        .as_str()
        .and_then(|x| x.parse().ok())
        .unwrap_or(f64::NAN)
}

/// A slow host for real: every system call of one exporter stopped and
/// resumed by a tracer (`strace -f` attached to all its threads, output
/// thrown away). Each message the host sends or answers goes through a
/// few system calls (poll, recv, send, the pacing sleep), each now tens of
/// microseconds longer, on both sides: as prober and as target, every
/// message, the fast ones too, so the whole distribution moves: what a
/// host whose kernel path is slow on every message looks like (a tracing
/// or auditing agent, a debug kernel), and what the localizer calls a
/// slow host. Undone on drop: the tracer is killed, which detaches it.
///
/// Why not the others (measured in this mesh, 21 exporters): one
/// exporter starved of CPU (pinned with a busy loop, `SCHED_IDLE`) moved
/// the p50 of the probes to it 5x but left their p10 where it was (the
/// messages that find it running are answered at once), and its own
/// probes not at all: a second mode, which the localizer by design does
/// not name; a stop/continue duty cycle (SIGSTOP/SIGCONT, or cfs
/// bandwidth throttling, the same at the cgroup level) does the same;
/// `sch_netem` (a delay per packet on one veth) is not in every kernel
/// (not in this project's VM kernel), and `tbf`/`htb` delay packets only
/// under load, not paced probes.
pub struct Traced {
    tracer: Child,
}

impl Traced {
    /// Attaches the tracer to process `pid` and all its threads; returns
    /// once it is attached (its first system call seen).
    pub fn start(pid: u32) -> Traced {
        let tracer = std::process::Command::new("strace")
            .args(["-f", "-qq", "-o", "/dev/null", "-p", &pid.to_string()])
            .stdin(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap_or_else(|e| panic!("strace (Debian package strace, scripts/setup): {e}"));
        let t = Traced { tracer };
        // Attached: the kernel names the tracer in the traced process.
        let status = format!("/proc/{pid}/status");
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
        loop {
            let tracer = std::fs::read_to_string(&status)
                .unwrap_or_default()
                .lines()
                .find_map(|l| l.strip_prefix("TracerPid:").map(|v| v.trim().to_string()));
            if tracer.as_deref().is_some_and(|v| v != "0") {
                return t;
            }
            assert!(
                std::time::Instant::now() < deadline,
                "strace never attached to {pid}"
            );
            std::thread::sleep(std::time::Duration::from_millis(50));
        }
    }
}

impl Drop for Traced {
    fn drop(&mut self) {
        // SIGTERM: strace detaches from every thread before it exits.
        let _ = std::process::Command::new("kill")
            .args(["-TERM", &self.tracer.id().to_string()])
            .status();
        let _ = self.tracer.wait();
    }
}
