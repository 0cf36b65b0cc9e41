//! The Slurm Prolog and Epilog of `deploy/slurm/` run by a real Slurm
//! (Debian's slurmctld, slurmd and munge; `ibtools_tests::slurm`): a job
//! that asks for a profile (`--constraint=ibtune:NAME`) finds it applied
//! and the host is as found after it ends, completed or cancelled, also
//! across a slurmd restart; a failing apply drains the node with the
//! reason and leaves the host as found.
//!
//! The fixture test works on a copy of the thesis host (`IBTUNE_ROOT`);
//! the live one changes this host (a cpuset, a sysctl) and is ignored with
//! the reason, as `real_kernel.rs` is (`scripts/test-all` runs it). Both
//! need root and Slurm: without them they say SKIPPED, and fail under
//! `CI=true`.

use ibtools_tests::slurm::{poll, unavailable, Cluster, Setup};
use ibtools_tests::{assert_same_tree, copy_tree, fixture, profile, snapshot, Immutable};
use std::fs;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

/// True (after saying why) when this host cannot run a Slurm cluster;
/// under CI that is a failure, not a skip.
fn skipped(test: &str) -> bool {
    let Some(why) = unavailable() else {
        return false;
    };
    ibtools_tests::skip(test, &why)
}

/// What a site installs for the shipped scripts: its settings file
/// (`IBTUNE_SLURM_CONFIG`), a profile folder, and the Prolog and Epilog
/// as slurm.conf names them: two-line wrappers that point the shipped
/// scripts at the settings file (slurmd gives a Prolog an environment of
/// its own making, not slurmd's), as `ibtune-slurm.default` describes.
struct Site {
    prolog: PathBuf,
    epilog: PathBuf,
    state: PathBuf,
    profiles: PathBuf,
}

fn site(dir: &Path, root: Option<&Path>, profiles: &[(&str, &str)]) -> Site {
    let deploy = Path::new(env!("CARGO_MANIFEST_DIR")).join("../deploy/slurm");
    let state = dir.join("state");
    let profile_dir = dir.join("profiles");
    fs::create_dir(&profile_dir).unwrap();
    for (name, text) in profiles {
        fs::write(profile_dir.join(format!("{name}.toml")), text).unwrap();
    }
    let conf = dir.join("ibtune-slurm");
    let mut text = format!(
        "IBTUNE='{}'\nIBTUNE_PROFILE_DIRS='{}'\nIBTUNE_STATE_DIR='{}'\n",
        env!("CARGO_BIN_EXE_ibtune"),
        profile_dir.display(),
        state.display()
    );
    if let Some(r) = root {
        text += &format!("IBTUNE_ROOT='{}'\n", r.display());
    }
    fs::write(&conf, text).unwrap();
    let wrap = |name: &str| {
        let p = dir.join(name);
        let script = deploy.join(name).canonicalize().unwrap();
        fs::write(
            &p,
            format!(
                "#!/bin/sh\nIBTUNE_SLURM_CONFIG='{}' exec '{}'\n",
                conf.display(),
                script.display()
            ),
        )
        .unwrap();
        use std::os::unix::fs::PermissionsExt;
        fs::set_permissions(&p, fs::Permissions::from_mode(0o755)).unwrap();
        p
    };
    Site {
        prolog: wrap("ibtune-prolog"),
        epilog: wrap("ibtune-epilog"),
        state,
        profiles: profile_dir,
    }
}

/// `ibtune [--root R] --state-dir S verify PROFILE`, as a job runs it.
fn verify_line(site: &Site, root: Option<&Path>, name: &str) -> String {
    format!(
        "'{}' {} --state-dir '{}' verify --watch 0 '{}'",
        env!("CARGO_BIN_EXE_ibtune"),
        root.map(|r| format!("--root '{}'", r.display()))
            .unwrap_or_default(),
        site.state.display(),
        site.profiles.join(format!("{name}.toml")).display()
    )
}

/// On a copy of the thesis host: (a) a job asking for `thesis-2hca` runs
/// `ibtune verify` inside and exits 0, and the tree is byte-identical
/// after; (b) a running job, slurmd restarted under it, then cancelled:
/// reverted by the Epilog; (c) an apply that fails part way drains the
/// node with ibtune's reason, the job is requeued held, the tree as found.
/// A job that asks for no profile runs no ibtune.
#[test]
fn a_profile_job_is_applied_before_and_reverted_after_also_cancelled_and_a_failed_apply_drains() {
    if skipped("a_profile_job_is_applied_before_and_reverted_after_also_cancelled_and_a_failed_apply_drains") {
        return;
    }
    // Under /tmp, not /dev/shm: (c) needs chattr, which tmpfs refuses.
    let tmp = tempfile::tempdir().unwrap();
    let root = tmp.path().join("root");
    copy_tree(&fixture("thesis-2s-mlx5"), &root).unwrap();
    let text = fs::read_to_string(profile("thesis-2hca")).unwrap();
    let site = site(tmp.path(), Some(&root), &[("thesis-2hca", &text)]);
    let mut cluster = Cluster::start(&Setup {
        features: "ibtune:thesis-2hca",
        prolog: &site.prolog,
        epilog: &site.epilog,
    });
    let pristine = snapshot(&root);
    let marker = site.state.join("slurm-job");
    let verify = verify_line(&site, Some(&root), "thesis-2hca");

    // No ibtune:NAME constraint: nothing applied (the job would see drift).
    let job = cluster.sbatch(&[], &format!("{verify}; test $? -eq 1"));
    cluster.wait_success(&job);
    assert_same_tree(&pristine, &snapshot(&root), "a job without a profile");
    assert!(!marker.exists());

    // (a) applied before the job's first command, reverted after its end.
    let job = cluster.sbatch(&["--constraint=ibtune:thesis-2hca"], &verify);
    let out = cluster.wait_success(&job);
    assert!(
        out.contains("ok: host matches profile thesis-2hca"),
        "{out}"
    );
    assert_same_tree(&pristine, &snapshot(&root), "after a completed job");
    assert!(!marker.exists(), "the Epilog left {}", marker.display());

    // (b) slurmd restarted while the job runs, then the job cancelled.
    let started = tmp.path().join("started");
    let job = cluster.sbatch(
        &["--constraint=ibtune:thesis-2hca"],
        &format!("{verify} && touch '{}' && sleep 120", started.display()),
    );
    cluster.expect(
        poll(Duration::from_secs(30), || started.exists()),
        "the cancelled job to start",
    );
    assert!(
        !ibtools_tests::diff(&pristine, &snapshot(&root)).is_empty(),
        "the profile is not applied while the job runs"
    );
    // Past the batch launch: slurmd is then only the job's bystander.
    std::thread::sleep(Duration::from_millis(500));
    cluster.restart_slurmd();
    assert_eq!(cluster.job_field(&job, "JobState"), "RUNNING");
    cluster.run("scancel", &[&job]);
    assert_eq!(cluster.wait_ended(&job), "CANCELLED");
    assert_same_tree(&pristine, &snapshot(&root), "after a cancelled job");
    assert!(!marker.exists(), "the Epilog left {}", marker.display());

    // (c) the apply fails at an IRQ it cannot write: rolled back, drained.
    let irq = root.join("proc/irq/91/smp_affinity_list");
    let Some(_guard) = Immutable::set(&irq) else {
        let why = "chattr +i is refused here (a filesystem without the attribute)";
        ibtools_tests::skip("a_profile_job_is_applied_before_and_reverted_after_also_cancelled_and_a_failed_apply_drains", why);
        return;
    };
    let job = cluster.sbatch(&["--constraint=ibtune:thesis-2hca"], "true");
    let mut state = String::new();
    let drained = poll(Duration::from_secs(30), || {
        state = cluster.node_field("State");
        state.contains("DRAIN")
    });
    cluster.expect(drained, &format!("the node to drain (it is {state})"));
    let reason = cluster.node_field("Reason");
    assert!(
        reason.contains(&format!(
            "ibtune: job {job}: ibtune apply thesis-2hca failed (exit 3)"
        )),
        "{reason}"
    );
    assert!(reason.contains("smp_affinity_list"), "{reason}");
    cluster.wait_job(&job, &["PENDING"]);
    assert_eq!(
        cluster.job_field(&job, "Reason"),
        "launch_failed_requeued_held"
    );
    assert_same_tree(&pristine, &snapshot(&root), "after a failed apply");
    assert!(!marker.exists(), "a failed apply left {}", marker.display());
}

/// The shipped scripts run by hand, with the environment slurmd gives them
/// and stand-ins first on PATH (through the settings file): `ibtune`
/// records its arguments and exits with the code in `rc` (0 without it),
/// `scontrol` records the drain, `squeue` prints the file `squeue-says`.
/// Needs no Slurm and no root.
struct StandIns {
    dir: tempfile::TempDir,
    conf: PathBuf,
}

impl StandIns {
    fn new() -> StandIns {
        use std::os::unix::fs::PermissionsExt;
        let dir = tempfile::tempdir().unwrap();
        let d = dir.path();
        let bin = d.join("bin");
        fs::create_dir(&bin).unwrap();
        fs::create_dir(d.join("profiles")).unwrap();
        let d_ = d.display();
        for (name, body) in [
            (
                "ibtune",
                format!("printf '%s\\n' \"$*\" >> '{d_}/calls'\nexit $(cat '{d_}/rc' 2>/dev/null || echo 0)"),
            ),
            ("scontrol", format!("printf '%s|' \"$@\" > '{d_}/drained'")),
            ("squeue", format!("cat '{d_}/squeue-says' 2>/dev/null")),
        ] {
            let p = bin.join(name);
            fs::write(&p, format!("#!/bin/sh\n{body}\n")).unwrap();
            fs::set_permissions(&p, fs::Permissions::from_mode(0o755)).unwrap();
        }
        let conf = d.join("conf");
        fs::write(
            &conf,
            format!(
                "PATH='{}':$PATH\nIBTUNE=ibtune\nIBTUNE_PROFILE_DIRS='{d_}/profiles'\nIBTUNE_STATE_DIR='{d_}/state'\n",
                bin.display()
            ),
        )
        .unwrap();
        StandIns { dir, conf }
    }

    fn path(&self, name: &str) -> PathBuf {
        self.dir.path().join(name)
    }

    /// Runs `ibtune-prolog` or `ibtune-epilog` for job `job`.
    fn run(&self, script: &str, job: &str, constraints: &str) -> std::process::Output {
        Command::new(
            Path::new(env!("CARGO_MANIFEST_DIR"))
                .join("../deploy/slurm")
                .join(script),
        )
        .env_clear()
        .env("IBTUNE_SLURM_CONFIG", &self.conf)
        .env("SLURM_JOB_ID", job)
        .env("SLURMD_NODENAME", "nowhere")
        .env("SLURM_JOB_CONSTRAINTS", constraints)
        .output()
        .unwrap()
    }

    /// What the stand-in ibtune was asked, one call a line; then forgotten.
    fn calls(&self) -> String {
        let c = fs::read_to_string(self.path("calls")).unwrap_or_default();
        let _ = fs::remove_file(self.path("calls"));
        c
    }

    /// The drain the stand-in scontrol was asked for; then forgotten.
    fn drained(&self) -> String {
        let d = fs::read_to_string(self.path("drained")).unwrap_or_default();
        let _ = fs::remove_file(self.path("drained"));
        d
    }
}

/// The Prolog runs as root on what a job asked: a profile name that is
/// not a bare name (a path, `..`, a shell word), or two names, is refused
/// before ibtune runs and the node drained with the reason; a job that
/// asks for nothing runs no ibtune.
#[test]
fn the_prolog_refuses_a_profile_name_that_is_not_a_bare_name() {
    let s = StandIns::new();
    fs::write(s.path("evil.toml"), "[profile]\nname = \"evil\"\n").unwrap();
    for (asked, says) in [
        ("ibtune:../evil", "profile name '../evil' refused"),
        ("ibtune:/tmp/evil", "profile name '/tmp/evil' refused"),
        (
            "ibtune:a;touch$IFS/x",
            "refused: only letters, digits, - and _",
        ),
        ("[ibtune:a|ibtune:b]", "asks for two profiles, a and b"),
        ("ibtune:missing", "no profile missing.toml in"),
    ] {
        let out = s.run("ibtune-prolog", "7", asked);
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(1), "{asked}: {err}");
        assert!(err.contains("ibtune: job 7: "), "{asked}: {err}");
        assert!(err.contains(says), "{asked}: {err}");
        assert_eq!(s.calls(), "", "{asked}: ibtune was run");
        let drain = s.drained();
        assert!(
            drain.starts_with("update|nodename=nowhere|state=drain|reason=ibtune: job 7: ")
                && drain.contains(says),
            "{asked}: the node is not drained with the reason: {drain:?}"
        );
    }
    for asked in ["", "gpu&ib", "ibtunex:a"] {
        let out = s.run("ibtune-prolog", "7", asked);
        assert!(
            out.status.success(),
            "{asked:?}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        assert_eq!(s.calls(), "", "{asked:?}: ibtune was run");
        assert_eq!(s.drained(), "", "{asked:?}: the node was drained");
    }
}

/// The record of the job whose profile is applied: while that job runs,
/// another job's Prolog refuses (drain) and leaves it; once it is gone
/// (its Epilog never ran), the Prolog reverts it before applying. Only
/// the recorded job's Epilog reverts. A failed apply forgets the record,
/// except with exit 4 (host not as found), where the Epilog still reverts.
#[test]
fn the_prolog_and_epilog_keep_to_the_job_that_applied() {
    let s = StandIns::new();
    fs::write(s.path("profiles/good.toml"), "[profile]\nname = \"good\"\n").unwrap();
    fs::create_dir(s.path("state")).unwrap();
    let record = s.path("state/slurm-job");
    let state = s.path("state");
    let ibtune = |what: &str| format!("--state-dir {} --lock-wait 30s {what}\n", state.display());
    let apply = ibtune(&format!("apply {}", s.path("profiles/good.toml").display()));

    fs::write(&record, "6 old\n").unwrap();
    fs::write(s.path("squeue-says"), "RUNNING\n").unwrap();
    let out = s.run("ibtune-prolog", "7", "ibtune:good");
    assert_eq!(out.status.code(), Some(1));
    assert!(s
        .drained()
        .contains("reason=ibtune: job 7: job 6 still holds profile old on this node"));
    assert_eq!(s.calls(), "");
    assert_eq!(fs::read_to_string(&record).unwrap(), "6 old\n");

    fs::remove_file(s.path("squeue-says")).unwrap();
    let out = s.run("ibtune-prolog", "7", "ibtune:good");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert_eq!(s.calls(), format!("{}{apply}", ibtune("revert")));
    assert_eq!(fs::read_to_string(&record).unwrap(), "7 good\n");

    assert!(s.run("ibtune-epilog", "8", "").status.success());
    assert_eq!(s.calls(), "", "another job's Epilog reverted");
    assert!(s.run("ibtune-epilog", "7", "ibtune:good").status.success());
    assert_eq!(s.calls(), ibtune("revert"));
    assert!(!record.exists());

    for (rc, kept) in [("3", false), ("5", false), ("4", true)] {
        fs::write(s.path("rc"), rc).unwrap();
        let out = s.run("ibtune-prolog", "9", "ibtune:good");
        assert_eq!(out.status.code(), Some(1));
        assert_eq!(s.calls(), apply);
        assert!(s.drained().contains(&format!(
            "reason=ibtune: job 9: ibtune apply good failed (exit {rc})"
        )));
        assert_eq!(record.exists(), kept, "exit {rc}");
    }
    fs::remove_file(s.path("rc")).unwrap();
    assert!(s.run("ibtune-epilog", "9", "ibtune:good").status.success());
    assert_eq!(s.calls(), ibtune("revert"));
    assert!(!record.exists());
}

/// `ibtune revert` on drop, so a failing assertion leaves no cpuset or
/// sysctl behind on this host.
struct RevertOnDrop(PathBuf);

impl Drop for RevertOnDrop {
    fn drop(&mut self) {
        let _ = Command::new(env!("CARGO_BIN_EXE_ibtune"))
            .arg("--state-dir")
            .arg(&self.0)
            .arg("revert")
            .output();
    }
}

/// The same on this host's kernel: an exclusive, isolated cpuset on the
/// last CPU and a sysctl (no `[[irq]]`: no HCA here), applied by the
/// Prolog, verified inside the job, reverted by the Epilog.
#[test]
#[ignore = "needs root and Slurm: creates a cpuset cgroup and sets vm.swappiness on this host"]
fn a_profile_job_on_the_live_kernel_leaves_the_host_as_found() {
    if skipped("a_profile_job_on_the_live_kernel_leaves_the_host_as_found") {
        return;
    }
    use ibtune::host::{discover, CgroupMode, HostRoot};
    let host = discover(&HostRoot::live()).unwrap();
    assert_ne!(
        host.cgroup.mode,
        CgroupMode::None,
        "no cpuset cgroup controller mounted"
    );
    let last = host.cpus.online.iter().next_back().unwrap();
    assert!(last > 0, "needs at least 2 CPUs");
    let swappiness = || fs::read_to_string("/proc/sys/vm/swappiness").unwrap();
    let before = swappiness();
    let want = if before.trim() == "13" { 14 } else { 13 };
    let name = format!("slurm{}", std::process::id());
    let text = format!(
        "[profile]\nname = \"{name}\"\n[[cpuset]]\nname = \"{name}\"\ncpus = [{last}]\nexclusive = true\nisolated = true\n[sysctl]\n\"vm.swappiness\" = {want}\n"
    );
    let mount = match host.cgroup.mode {
        CgroupMode::V2 => host.cgroup.v2_mount.clone().unwrap(),
        _ => host.cgroup.v1_cpuset_mount.clone().unwrap(),
    };
    let cgroup = PathBuf::from(mount).join(format!("ibtune-{name}"));
    let tmp = tempfile::tempdir().unwrap();
    let site = site(tmp.path(), None, &[("live", &text)]);
    let _guard = RevertOnDrop(site.state.clone());
    let cluster = Cluster::start(&Setup {
        features: "ibtune:live",
        prolog: &site.prolog,
        epilog: &site.epilog,
    });
    let verify = verify_line(&site, None, "live");
    let job = cluster.sbatch(
        &["--constraint=ibtune:live"],
        &format!("{verify} && cat /proc/sys/vm/swappiness"),
    );
    let out = cluster.wait_success(&job);
    assert!(
        out.contains(&format!("ok: host matches profile {name}")),
        "{out}"
    );
    assert_eq!(out.lines().last(), Some(want.to_string().as_str()), "{out}");
    assert_eq!(swappiness(), before, "vm.swappiness not restored");
    assert!(!cgroup.exists(), "{} left after the job", cgroup.display());
    assert!(!site.state.join("slurm-job").exists());
}
