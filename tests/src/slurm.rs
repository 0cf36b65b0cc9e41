//! A one-node Slurm cluster of Debian's own daemons, made for one test:
//! munged with its own key and socket, slurmctld and slurmd with a
//! generated `slurm.conf` (their own ports, spool, state and log folders,
//! all in a temporary folder), the node being this host.
//!
//! Why it exists: a Prolog and an Epilog are only known to work when a
//! real slurmd runs them, with the environment and the failure handling
//! (draining, requeueing) of the Slurm that users have. Needs root and the
//! packages `slurmctld slurmd munge slurm-client` (scripts/setup); a
//! running system Slurm or munge does not matter, nothing here uses their
//! ports, sockets or files.
//!
//! Cleanup: [`Cluster`] cancels its jobs, waits for their Epilogs and
//! stops its daemons on drop (also when the test panics). Every wait is
//! bounded and names what it waited for.

use std::fs;
use std::net::TcpListener;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::time::{Duration, Instant};

/// The daemons a cluster needs, for the skip message.
const DAEMONS: &[&str] = &[
    "/usr/sbin/munged",
    "/usr/sbin/slurmctld",
    "/usr/sbin/slurmd",
];

/// Why a Slurm cluster cannot be made here (not root, Slurm or munge not
/// installed), or None when it can.
pub fn unavailable() -> Option<String> {
    if !crate::is_root() {
        return Some("not root (slurmd runs its Prolog as root)".into());
    }
    let missing: Vec<&str> = DAEMONS
        .iter()
        .copied()
        .filter(|d| !Path::new(d).exists())
        .collect();
    if !missing.is_empty() || which("sbatch").is_none() {
        return Some(format!(
            "Slurm is not installed (missing {}): apt-get install slurmctld slurmd munge slurm-client (scripts/setup)",
            if missing.is_empty() { "sbatch".to_string() } else { missing.join(", ") }
        ));
    }
    None
}

fn which(cmd: &str) -> Option<PathBuf> {
    std::env::var_os("PATH")?
        .to_str()?
        .split(':')
        .map(|d| Path::new(d).join(cmd))
        .find(|p| p.is_file())
}

/// What the test puts into the generated config.
pub struct Setup<'a> {
    /// `Features=` of the node (comma-separated), e.g. `ibtune:live`.
    pub features: &'a str,
    /// `Prolog=`: a program slurmd runs as root before each job.
    pub prolog: &'a Path,
    /// `Epilog=`: a program slurmd runs as root after each job.
    pub epilog: &'a Path,
}

/// A running one-node cluster; stopped on drop.
pub struct Cluster {
    dir: tempfile::TempDir,
    conf: PathBuf,
    /// The node's name (this host's short name).
    pub node: String,
    munged: Option<Child>,
    slurmctld: Option<Child>,
    slurmd: Option<Child>,
}

fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .expect("a free TCP port")
        .port()
}

fn spawn(what: &str, cmd: &mut Command, log: &Path) -> Child {
    let out = fs::File::create(log).expect("daemon log file");
    let err = out.try_clone().expect("daemon log file");
    cmd.stdin(Stdio::null())
        .stdout(out)
        .stderr(err)
        .spawn()
        .unwrap_or_else(|e| panic!("starting {what}: {e} (scripts/setup installs it)"))
}

/// Polls `cond` every 50 ms for up to `limit`; false when it never held.
pub fn poll(limit: Duration, mut cond: impl FnMut() -> bool) -> bool {
    let deadline = Instant::now() + limit;
    loop {
        if cond() {
            return true;
        }
        if Instant::now() >= deadline {
            return false;
        }
        std::thread::sleep(Duration::from_millis(50));
    }
}

impl Cluster {
    /// Starts munged, slurmctld and slurmd, and waits (10 s at most) until
    /// the node is idle.
    pub fn start(setup: &Setup) -> Cluster {
        let dir = tempfile::Builder::new()
            .prefix("ibtools-slurm.")
            .tempdir()
            .expect("a temporary folder");
        let d = dir.path();
        for sub in ["munge", "state", "spool", "log"] {
            fs::create_dir(d.join(sub)).expect("cluster folder");
        }
        // munged refuses a key readable by others.
        let mut key = vec![0u8; 1024];
        use std::io::Read;
        fs::File::open("/dev/urandom")
            .and_then(|mut r| r.read_exact(&mut key))
            .expect("a munge key from /dev/urandom");
        let key_path = d.join("munge/key");
        fs::write(&key_path, key).expect("munge key");
        use std::os::unix::fs::PermissionsExt;
        fs::set_permissions(&key_path, fs::Permissions::from_mode(0o400)).expect("chmod key");
        let socket = d.join("munge/socket");
        let mut munged = Command::new("/usr/sbin/munged");
        munged
            .arg("--foreground")
            .arg("--force")
            .arg(format!("--socket={}", socket.display()))
            .arg(format!("--key-file={}", key_path.display()))
            .arg(format!("--pid-file={}", d.join("munge/pid").display()))
            .arg(format!("--seed-file={}", d.join("munge/seed").display()))
            .arg(format!("--log-file={}", d.join("log/munged.log").display()));
        let node = fs::read_to_string("/proc/sys/kernel/hostname")
            .expect("hostname")
            .trim()
            .split('.')
            .next()
            .unwrap_or("localhost")
            .to_string();
        let cpus = std::thread::available_parallelism().map_or(1, |n| n.get());
        let p = |s: &str| d.join(s).display().to_string();
        let conf_text = format!(
            "# A one-node test cluster (ibtools_tests::slurm).\n\
             ClusterName=ibtools\n\
             SlurmctldHost={node}(127.0.0.1)\n\
             SlurmctldPort={ctld_port}\n\
             SlurmdPort={slurmd_port}\n\
             SlurmUser=root\n\
             SlurmdUser=root\n\
             AuthType=auth/munge\n\
             AuthInfo=socket={socket}\n\
             CredType=cred/munge\n\
             StateSaveLocation={state}\n\
             SlurmdSpoolDir={spool}\n\
             SlurmctldPidFile={ctld_pid}\n\
             SlurmdPidFile={slurmd_pid}\n\
             SlurmctldLogFile={ctld_log}\n\
             SlurmdLogFile={slurmd_log}\n\
             # No cgroup plugin: the test host may have cgroup v1 or v2, and the\n\
             # Prolog's work does not depend on how tasks are tracked.\n\
             ProctrackType=proctrack/linuxproc\n\
             TaskPlugin=task/none\n\
             JobAcctGatherType=jobacct_gather/none\n\
             AccountingStorageType=accounting_storage/none\n\
             JobCompType=jobcomp/none\n\
             SchedulerType=sched/builtin\n\
             # A batch job is scheduled when submitted, not up to 3 s later.\n\
             SchedulerParameters=batch_sched_delay=0\n\
             SelectType=select/cons_tres\n\
             SelectTypeParameters=CR_CPU\n\
             MpiDefault=none\n\
             ReturnToService=2\n\
             Prolog={prolog}\n\
             Epilog={epilog}\n\
             PrologFlags=Alloc\n\
             PrologEpilogTimeout=60\n\
             NodeName={node} NodeAddr=127.0.0.1 CPUs={cpus} Features={features} State=UNKNOWN\n\
             PartitionName=test Nodes={node} Default=YES MaxTime=INFINITE State=UP\n",
            ctld_port = free_port(),
            slurmd_port = free_port(),
            socket = socket.display(),
            state = p("state"),
            spool = p("spool"),
            ctld_pid = p("slurmctld.pid"),
            slurmd_pid = p("slurmd.pid"),
            ctld_log = p("log/slurmctld.log"),
            slurmd_log = p("log/slurmd.log"),
            prolog = setup.prolog.display(),
            epilog = setup.epilog.display(),
            features = setup.features,
        );
        let conf = d.join("slurm.conf");
        fs::write(&conf, conf_text).expect("slurm.conf");
        let mut cluster = Cluster {
            munged: Some(spawn("munged", &mut munged, &d.join("log/munged.out"))),
            conf,
            node,
            slurmctld: None,
            slurmd: None,
            dir,
        };
        let sock = socket.clone();
        cluster.expect(
            poll(Duration::from_secs(10), || sock.exists()),
            "munged's socket",
        );
        let mut ctld = Command::new("/usr/sbin/slurmctld");
        ctld.arg("-D").arg("-i").arg("-f").arg(&cluster.conf);
        cluster.slurmctld = Some(spawn(
            "slurmctld",
            &mut ctld,
            &cluster.dir.path().join("log/slurmctld.out"),
        ));
        cluster.start_slurmd();
        cluster
    }

    /// Starts slurmd and waits (10 s at most) until the node is idle.
    fn start_slurmd(&mut self) {
        self.spawn_slurmd();
        let ok = poll(Duration::from_secs(10), || self.node_state() == "idle");
        self.expect(ok, "the node to register idle");
    }

    fn spawn_slurmd(&mut self) {
        let mut cmd = Command::new("/usr/sbin/slurmd");
        cmd.arg("-D").arg("-f").arg(&self.conf);
        self.slurmd = Some(spawn(
            "slurmd",
            &mut cmd,
            &self.dir.path().join("log/slurmd.out"),
        ));
    }

    /// Stops slurmd (SIGTERM, as `systemctl restart slurmd` does) and
    /// starts it again; running jobs stay (their slurmstepd is apart).
    /// Returns once the new slurmd says it started (10 s at most): until
    /// then it does not answer slurmctld, whose requests (a job's
    /// cancellation) wait for its next retry.
    pub fn restart_slurmd(&mut self) {
        let log = self.dir.path().join("log/slurmd.log");
        let starts = || {
            fs::read_to_string(&log)
                .unwrap_or_default()
                .matches("slurmd started on")
                .count()
        };
        let before = starts();
        if let Some(c) = self.slurmd.take() {
            stop(c, "slurmd");
        }
        self.spawn_slurmd();
        let ok = poll(Duration::from_secs(10), || starts() > before);
        self.expect(ok, "the restarted slurmd to start");
    }

    /// A client command (`sbatch`, `scontrol`, ...) of this cluster.
    pub fn cmd(&self, program: &str) -> Command {
        let mut c = Command::new(program);
        c.env("SLURM_CONF", &self.conf).stdin(Stdio::null());
        c
    }

    /// Runs a client command; panics with its output and the daemons'
    /// logs when it fails.
    pub fn run(&self, program: &str, args: &[&str]) -> String {
        let out: Output = self
            .cmd(program)
            .args(args)
            .output()
            .unwrap_or_else(|e| panic!("{program}: {e}"));
        self.expect(
            out.status.success(),
            &format!(
                "`{program} {}` to succeed: {}: {}{}",
                args.join(" "),
                out.status,
                String::from_utf8_lossy(&out.stdout),
                String::from_utf8_lossy(&out.stderr)
            ),
        );
        String::from_utf8_lossy(&out.stdout).trim().to_string()
    }

    /// Submits a batch job running `script` (sh) with extra sbatch
    /// arguments; its output goes to a file of the cluster's folder.
    /// Returns the job id.
    pub fn sbatch(&self, args: &[&str], script: &str) -> String {
        let out = self.dir.path().join("log/job-%j.out");
        let out = out.display().to_string();
        let mut all = vec!["--parsable", "--output", &out];
        all.extend_from_slice(args);
        all.extend_from_slice(&["--wrap", script]);
        self.run("sbatch", &all)
    }

    /// What the job printed.
    pub fn job_output(&self, job: &str) -> String {
        fs::read_to_string(self.dir.path().join(format!("log/job-{job}.out"))).unwrap_or_default()
    }

    /// One field of `scontrol show job -o`, e.g. `JobState`.
    pub fn job_field(&self, job: &str, field: &str) -> String {
        let line = self.run("scontrol", &["show", "job", "-o", job]);
        field_of(&line, field)
    }

    /// Waits (30 s at most) for the job to reach a state in `states`.
    pub fn wait_job(&self, job: &str, states: &[&str]) -> String {
        let mut last = String::new();
        let ok = poll(Duration::from_secs(30), || {
            last = self.job_field(job, "JobState");
            states.contains(&last.as_str())
        });
        self.expect(ok, &format!("job {job} to be {states:?} (it is {last})"));
        last
    }

    /// Waits (30 s at most) until the job has ended and the node has no
    /// job left, its Epilog done; returns the job's final state.
    pub fn wait_ended(&self, job: &str) -> String {
        let state = self.wait_job(
            job,
            &["COMPLETED", "FAILED", "CANCELLED", "TIMEOUT", "NODE_FAIL"],
        );
        let mut last = String::new();
        let ok = poll(Duration::from_secs(30), || {
            last = self.node_state();
            !last.contains("comp") && !last.contains("alloc") && !last.contains("mix")
        });
        self.expect(ok, &format!("the node to finish job {job} (it is {last})"));
        state
    }

    /// Waits as [`Cluster::wait_ended`] and asserts that the job completed
    /// with exit code 0; returns what it printed.
    pub fn wait_success(&self, job: &str) -> String {
        let state = self.wait_ended(job);
        let out = self.job_output(job);
        assert_eq!(state, "COMPLETED", "job {job}:\n{out}");
        assert_eq!(self.job_field(job, "ExitCode"), "0:0", "job {job}:\n{out}");
        out
    }

    /// The node's state as `sinfo` writes it in long form (`idle`,
    /// `allocated`, `drained`, `completing` ...); empty when unknown.
    pub fn node_state(&self) -> String {
        self.cmd("sinfo")
            .args(["-h", "-N", "-n", &self.node, "-o", "%T"])
            .output()
            .map(|o| String::from_utf8_lossy(&o.stdout).trim().to_string())
            .unwrap_or_default()
    }

    /// One field of `scontrol show node -o`, e.g. `State`, `Reason`.
    pub fn node_field(&self, field: &str) -> String {
        let line = self.run("scontrol", &["show", "node", "-o", &self.node]);
        field_of(&line, field)
    }

    /// Panics with `what` and the tail of every daemon log when `ok` is false.
    pub fn expect(&self, ok: bool, what: &str) {
        if ok {
            return;
        }
        let mut logs = String::new();
        for log in ["slurmctld.log", "slurmd.log", "munged.log", "slurmd.out"] {
            let text =
                fs::read_to_string(self.dir.path().join("log").join(log)).unwrap_or_default();
            let tail: Vec<&str> = text.lines().rev().take(40).collect();
            logs += &format!("\n--- {log} (last lines) ---\n");
            for l in tail.into_iter().rev() {
                logs += l;
                logs += "\n";
            }
        }
        panic!("timed out or failed waiting for {what}{logs}");
    }
}

/// `Key=value` of a `-o` line of scontrol (values of Reason may hold spaces:
/// such a field runs to the next ` Word=`).
fn field_of(line: &str, field: &str) -> String {
    let key = format!("{field}=");
    let Some(start) = line
        .match_indices(&key)
        .find(|(i, _)| *i == 0 || line.as_bytes()[i - 1] == b' ')
        .map(|(i, _)| i + key.len())
    else {
        return String::new();
    };
    let rest = &line[start..];
    let mut end = rest.len();
    for (i, _) in rest.match_indices(' ') {
        let word = rest[i + 1..].split(' ').next().unwrap_or("");
        if word.split_once('=').is_some_and(|(k, _)| {
            !k.is_empty() && k.chars().all(|c| c.is_ascii_alphanumeric() || c == '_')
        }) {
            end = i;
            break;
        }
    }
    rest[..end].to_string()
}

/// SIGTERM, 10 s to exit, then SIGKILL.
fn stop(mut child: Child, what: &str) {
    let _ = Command::new("kill")
        .arg("-TERM")
        .arg(child.id().to_string())
        .status();
    let exited = poll(Duration::from_secs(10), || {
        matches!(child.try_wait(), Ok(Some(_)))
    });
    if !exited {
        eprintln!("{what} ignored SIGTERM for 10 s: killed");
        let _ = child.kill();
        let _ = child.wait();
    }
}

impl Drop for Cluster {
    fn drop(&mut self) {
        if self.slurmd.is_some() && self.slurmctld.is_some() {
            // Jobs first, so their Epilogs run and no slurmstepd stays.
            let _ = self.cmd("scancel").args(["--user", "root"]).status();
            let _ = poll(Duration::from_secs(15), || {
                let q = self
                    .cmd("squeue")
                    .args(["-h", "-t", "running,completing,configuring"])
                    .output();
                q.map(|o| o.stdout.is_empty()).unwrap_or(true)
            });
        }
        for (c, what) in [
            (self.slurmd.take(), "slurmd"),
            (self.slurmctld.take(), "slurmctld"),
            (self.munged.take(), "munged"),
        ] {
            if let Some(c) = c {
                stop(c, what);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::field_of;

    #[test]
    fn a_field_runs_to_the_next_key() {
        let l = "NodeName=vm Arch=x86_64 State=IDLE+DRAIN Reason=ibtune: job 5: apply x failed (exit 3) [root@2026] Comment=(null)";
        assert_eq!(field_of(l, "State"), "IDLE+DRAIN");
        assert_eq!(
            field_of(l, "Reason"),
            "ibtune: job 5: apply x failed (exit 3) [root@2026]"
        );
        assert_eq!(field_of(l, "NodeName"), "vm");
        assert_eq!(field_of(l, "Missing"), "");
    }
}
