//! Issue 14, host side: `--root` is a jail, reads are bounded, journals and
//! profiles are checked, one host lock per root.
//!
//! Every test builds its hostile trees itself in a temp dir: a copy of the
//! `thesis-2s-mlx5` fixture as the root, and next to it an `outside/`
//! sentinel tree that no command may touch (checked by content AND mtime of
//! every entry). Each command runs as a child process with a deadline (a
//! hang fails the test) and the peak RSS of the children is bounded.

use ibtools_tests::{assert_same_tree, copy_tree, fixture, profile, snapshot};
use ibtune::host::HostRoot;
use nix::sys::resource::{getrusage, UsageWho};
use std::collections::BTreeMap;
use std::fs;
use std::os::unix::fs::{symlink, MetadataExt};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

const THESIS: &str = "thesis-2s-mlx5";
/// Longest any single command may run before it counts as a hang.
const DEADLINE: Duration = Duration::from_secs(60);
/// Bound on the peak RSS of any ibtune child, in KiB.
const MAX_RSS_KIB: i64 = 64 * 1024;

fn ibtune_bin() -> PathBuf {
    assert_cmd::cargo::cargo_bin("ibtune")
}

/// One finished command.
struct Ran {
    code: i32,
    out: String,
    err: String,
}

/// Runs `ibtune ARGS` with a deadline; kills it and fails on a hang.
fn run(args: &[&str]) -> Ran {
    let dir = tempfile::tempdir().unwrap();
    let (o, e) = (dir.path().join("out"), dir.path().join("err"));
    let mut child = Command::new(ibtune_bin())
        .args(args)
        .stdin(Stdio::null())
        .stdout(fs::File::create(&o).unwrap())
        .stderr(fs::File::create(&e).unwrap())
        .spawn()
        .expect("spawning ibtune");
    let start = Instant::now();
    let status = loop {
        if let Some(s) = child.try_wait().unwrap() {
            break s;
        }
        if start.elapsed() > DEADLINE {
            let _ = child.kill();
            let _ = child.wait();
            panic!("ibtune {args:?} hung (killed after {DEADLINE:?})");
        }
        std::thread::sleep(Duration::from_millis(5));
    };
    let code = status
        .code()
        .unwrap_or_else(|| panic!("ibtune {args:?} died by a signal: {status:?}"));
    Ran {
        code,
        out: fs::read_to_string(o).unwrap_or_default(),
        err: fs::read_to_string(e).unwrap_or_default(),
    }
}

/// Peak RSS of every child reaped so far, in KiB (Linux reports KiB).
fn children_peak_rss_kib() -> i64 {
    getrusage(UsageWho::RUSAGE_CHILDREN).unwrap().max_rss()
}

/// What the sentinel check compares: per entry, its kind, bytes (files)
/// or target (links), and mtime in ns.
type Sentinel = BTreeMap<PathBuf, (String, Vec<u8>, i128)>;

fn sentinel(dir: &Path) -> Sentinel {
    fn walk(base: &Path, d: &Path, out: &mut Sentinel) {
        let m = fs::symlink_metadata(d).unwrap();
        let mtime = m.mtime() as i128 * 1_000_000_000 + m.mtime_nsec() as i128;
        let rel = d.strip_prefix(base).unwrap().to_path_buf();
        let ft = m.file_type();
        if ft.is_symlink() {
            let t = fs::read_link(d).unwrap();
            out.insert(
                rel,
                (
                    "link".into(),
                    t.into_os_string().into_encoded_bytes(),
                    mtime,
                ),
            );
        } else if ft.is_dir() {
            out.insert(rel, ("dir".into(), Vec::new(), mtime));
            for e in fs::read_dir(d).unwrap() {
                walk(base, &e.unwrap().path(), out);
            }
        } else {
            out.insert(rel, ("file".into(), fs::read(d).unwrap(), mtime));
        }
    }
    let mut out = Sentinel::new();
    walk(dir, dir, &mut out);
    out
}

/// A temp dir with `root/` (a fixture copy), `outside/` (the sentinel
/// tree) and room for state folders.
struct Scene {
    tmp: tempfile::TempDir,
}

impl Scene {
    fn new() -> Scene {
        let tmp = tempfile::tempdir().unwrap();
        copy_tree(&fixture(THESIS), &tmp.path().join("root")).unwrap();
        let out = tmp.path().join("outside");
        fs::create_dir(&out).unwrap();
        for f in ["irqfile", "irqbalance", "hard", "secret"] {
            fs::write(out.join(f), format!("sentinel {f}\n")).unwrap();
        }
        // Look-alikes of what apply writes, so a jail break would succeed.
        copy_tree(&fixture(THESIS).join("sys/fs/cgroup"), &out.join("cgroup")).unwrap();
        copy_tree(&fixture(THESIS).join("etc"), &out.join("etc")).unwrap();
        Scene { tmp }
    }
    fn root(&self) -> PathBuf {
        self.tmp.path().join("root")
    }
    fn outside(&self) -> PathBuf {
        self.tmp.path().join("outside")
    }
    fn r(&self, p: &str) -> PathBuf {
        self.root().join(p)
    }
    /// Replaces a root entry (file, dir or link) by nothing.
    fn clear(&self, p: &str) {
        let p = self.r(p);
        match fs::symlink_metadata(&p) {
            Ok(m) if m.is_dir() => fs::remove_dir_all(&p).unwrap(),
            Ok(_) => fs::remove_file(&p).unwrap(),
            Err(_) => {}
        }
    }
    fn link(&self, p: &str, target: impl AsRef<Path>) {
        self.clear(p);
        symlink(target, self.r(p)).unwrap();
    }
    fn fifo(&self, p: &str) {
        self.clear(p);
        nix::unistd::mkfifo(&self.r(p), nix::sys::stat::Mode::from_bits_truncate(0o644)).unwrap();
    }
    fn sparse(&self, p: &str, len: u64) {
        self.clear(p);
        fs::File::create(self.r(p)).unwrap().set_len(len).unwrap();
    }
    fn dir(&self, p: &str) {
        self.clear(p);
        fs::create_dir(self.r(p)).unwrap();
    }
}

/// A hostile variant: its name, and what it does to the scene.
type Variant = (&'static str, Box<dyn Fn(&Scene)>);

/// The hostile variants.
fn variants() -> Vec<Variant> {
    vec![
        (
            "irq files as absolute links to an outside file",
            Box::new(|s: &Scene| {
                for irq in [41, 42, 43, 91] {
                    s.link(
                        &format!("proc/irq/{irq}/smp_affinity_list"),
                        s.outside().join("irqfile"),
                    );
                }
            }),
        ),
        (
            "irq files as '..' links climbing out",
            Box::new(|s: &Scene| {
                for irq in [41, 44, 92] {
                    // From root/proc/irq/N, four '..' reach the temp dir.
                    s.link(
                        &format!("proc/irq/{irq}/smp_affinity_list"),
                        "../../../../outside/irqfile",
                    );
                }
            }),
        ),
        (
            "cgroup folder as an absolute link to an outside folder",
            Box::new(|s: &Scene| {
                s.link("sys/fs/cgroup", s.outside().join("cgroup"));
            }),
        ),
        (
            "cgroup folder as a '..' link",
            Box::new(|s: &Scene| {
                s.link("sys/fs/cgroup", "../../../outside/cgroup");
            }),
        ),
        (
            "/etc files and folders linked outside",
            Box::new(|s: &Scene| {
                s.link("etc/sysconfig/irqbalance", s.outside().join("irqbalance"));
                s.link("etc/tuned", s.outside().join("etc/tuned"));
            }),
        ),
        (
            "FIFOs where files belong",
            Box::new(|s: &Scene| {
                for p in [
                    "proc/cmdline",
                    "proc/interrupts",
                    "proc/irq/45/smp_affinity_list",
                    "etc/sysconfig/irqbalance",
                    "sys/fs/cgroup/cgroup.subtree_control",
                ] {
                    s.fifo(p);
                }
            }),
        ),
        (
            "links to /dev/zero and /proc/self",
            Box::new(|s: &Scene| {
                s.link("proc/cmdline", "/dev/zero");
                s.link("proc/interrupts", "/dev/zero");
                s.link("proc/irq/46/smp_affinity_list", "/dev/zero");
                s.link(
                    "sys/kernel/mm/transparent_hugepage/enabled",
                    "/proc/self/fd/0",
                );
            }),
        ),
        (
            "200 MB sparse files",
            Box::new(|s: &Scene| {
                for p in [
                    "proc/interrupts",
                    "proc/cmdline",
                    "proc/irq/47/smp_affinity_list",
                ] {
                    s.sparse(p, 200 << 20);
                }
            }),
        ),
        (
            "directories where files belong",
            Box::new(|s: &Scene| {
                for p in [
                    "proc/cmdline",
                    "proc/irq/93/smp_affinity_list",
                    "etc/sysconfig/irqbalance",
                    "sys/fs/cgroup/cgroup.subtree_control",
                ] {
                    s.dir(p);
                }
            }),
        ),
        (
            "a hard link to an outside file",
            Box::new(|s: &Scene| {
                s.clear("proc/irq/94/smp_affinity_list");
                fs::hard_link(
                    s.outside().join("hard"),
                    s.r("proc/irq/94/smp_affinity_list"),
                )
                .unwrap();
            }),
        ),
        (
            "a character device inside the root (when mknod is allowed)",
            Box::new(|s: &Scene| {
                use nix::sys::stat::{makedev, mknod, Mode, SFlag};
                s.clear("proc/irq/95/smp_affinity_list");
                // /dev/zero's numbers; without CAP_MKNOD the variant is
                // skipped, visibly (the file stays cleared).
                if let Err(e) = mknod(
                    &s.r("proc/irq/95/smp_affinity_list"),
                    SFlag::S_IFCHR,
                    Mode::from_bits_truncate(0o644),
                    makedev(1, 5),
                ) {
                    ibtools_tests::skip(
                        "hostile_trees_write_nothing_outside_the_root_and_never_hang (a character device inside the root)",
                        &format!("mknod is refused here ({e}; needs CAP_MKNOD)"),
                    );
                }
            }),
        ),
    ]
}

#[test]
fn hostile_trees_write_nothing_outside_the_root_and_never_hang() {
    let prof = profile("thesis-2hca");
    let prof = prof.to_str().unwrap();
    let start = Instant::now();
    let mut commands = 0;
    for (name, build) in variants() {
        let s = Scene::new();
        build(&s);
        let before = sentinel(&s.outside());
        let top: Vec<_> = fs::read_dir(s.tmp.path())
            .unwrap()
            .map(|e| e.unwrap().file_name())
            .collect();
        let root = s.root();
        let root = root.to_str().unwrap();
        let state = s.tmp.path().join("state");
        let st = state.to_str().unwrap();
        let common = ["--root", root, "--state-dir", st, "--lock-wait", "5s"];
        for cmd in [
            vec!["show"],
            vec!["show", "--json"],
            vec!["plan", prof],
            vec!["apply", prof],
            vec!["verify", prof],
            vec!["revert"],
            vec!["revert"],
        ] {
            let args: Vec<&str> = common.iter().copied().chain(cmd.iter().copied()).collect();
            let r = run(&args);
            commands += 1;
            // Any verdict but a crash: 0-4 (errors are fine, hostile input).
            assert!(
                (0..=4).contains(&r.code),
                "{name}: {cmd:?} exit {}: {}{}",
                r.code,
                r.out,
                r.err
            );
            assert!(
                !r.err.contains("panicked"),
                "{name}: {cmd:?} panicked: {}",
                r.err
            );
            assert_eq!(
                sentinel(&s.outside()),
                before,
                "{name}: `ibtune {}` changed the outside tree",
                cmd.join(" ")
            );
        }
        let top_after: Vec<_> = fs::read_dir(s.tmp.path())
            .unwrap()
            .map(|e| e.unwrap().file_name())
            .collect();
        let new: Vec<_> = top_after
            .iter()
            .filter(|n| !top.contains(n) && *n != "state")
            .collect();
        assert!(
            new.is_empty(),
            "{name}: new entries next to the root: {new:?}"
        );
        let rss = children_peak_rss_kib();
        assert!(
            rss < MAX_RSS_KIB,
            "{name}: a child reached {rss} KiB RSS (bound {MAX_RSS_KIB} KiB)"
        );
    }
    eprintln!(
        "hostile corpus: {} variants, {commands} commands in {:.1} s, peak child RSS {} KiB",
        variants().len(),
        start.elapsed().as_secs_f64(),
        children_peak_rss_kib()
    );
}

#[test]
fn fifo_and_device_errors_name_the_path() {
    let s = Scene::new();
    s.fifo("proc/irq/41/smp_affinity_list");
    let root = HostRoot::new(s.root()).unwrap();
    let e = root
        .read("/proc/irq/41/smp_affinity_list")
        .unwrap_err()
        .to_string();
    assert!(
        e.contains("/proc/irq/41/smp_affinity_list") && e.contains("FIFO"),
        "{e}"
    );
    let e = root
        .write("/proc/irq/41/smp_affinity_list", b"1\n")
        .unwrap_err()
        .to_string();
    assert!(e.contains("/proc/irq/41/smp_affinity_list"), "{e}");
    s.sparse("proc/cmdline", 200 << 20);
    let e = root.read("/proc/cmdline").unwrap_err().to_string();
    assert!(e.contains("/proc/cmdline") && e.contains("16 MiB"), "{e}");
    s.dir("proc/irq/42/smp_affinity_list");
    let e = root
        .read("/proc/irq/42/smp_affinity_list")
        .unwrap_err()
        .to_string();
    assert!(e.contains("a directory"), "{e}");
    // Jailed: an absolute link to an outside file reads the root's copy
    // of that path (absent here), never the outside file.
    s.link("proc/cmdline", s.outside().join("secret"));
    let e = root.read("/proc/cmdline").unwrap_err();
    assert_eq!(e.source.kind(), std::io::ErrorKind::NotFound, "{e}");
    // ... and a '..' link stops at the root: root/outside/secret is read
    // once it exists inside the root.
    fs::create_dir(s.r("outside")).unwrap();
    fs::write(s.r("outside/secret"), "inside\n").unwrap();
    s.link("proc/cmdline", "../../../outside/secret");
    assert_eq!(root.read("/proc/cmdline").unwrap(), "inside\n");
    s.link("proc/cmdline", s.outside().join("secret"));
    assert!(root.read("/proc/cmdline").is_err());
    // Directory creation and listing through a link stay inside too.
    s.link("sys/fs/cgroup", s.outside().join("cgroup"));
    assert!(root.list("/sys/fs/cgroup").is_empty());
    assert!(root.mkdir("/sys/fs/cgroup/x").is_err());
    assert!(!s.outside().join("cgroup/x").exists());
}

/// This machine's real /sys and /proc through the same code: the kernel's
/// own sysfs links (relative, inside /sys) are followed.
#[test]
fn the_real_host_still_reads() {
    let root = HostRoot::live();
    // /sys/class/net/lo is a relative link into /sys/devices/virtual.
    let lo = fs::read_link("/sys/class/net/lo").expect("this machine has /sys/class/net/lo");
    assert!(lo.is_relative(), "{lo:?}");
    assert!(root.is_dir("/sys/class/net/lo"));
    assert!(root.read("/sys/class/net/lo/address").is_ok());
    assert!(root.list("/sys/class/net").contains(&"lo".to_string()));
    assert!(!root.read("/proc/interrupts").unwrap().is_empty());
    assert!(!root.list("/sys/devices/system/cpu").is_empty());

    let r = run(&["--root", "/", "show", "--json"]);
    assert_eq!(r.code, 0, "show on this machine: {}", r.err);
    let v: serde_json::Value = serde_json::from_str(&r.out).unwrap();
    assert!(
        !v["host"]["cpus"]["list"].as_array().unwrap().is_empty(),
        "{}",
        r.out
    );
    assert!(
        !v["host"]["numa_nodes"].as_array().unwrap().is_empty(),
        "{}",
        r.out
    );
    assert!(v["host"]["kernel_release"].is_string(), "{}", r.out);

    // plan (read-only) with a profile any Linux host can take.
    let dir = tempfile::tempdir().unwrap();
    let p = dir.path().join("any.toml");
    fs::write(
        &p,
        "[profile]\nname = \"any\"\n[sysctl]\n\"vm.swappiness\" = 10\n[cpu]\nthp = \"madvise\"\n",
    )
    .unwrap();
    let r = run(&["--root", "/", "plan", p.to_str().unwrap()]);
    assert_eq!(r.code, 0, "plan on this machine: {}{}", r.out, r.err);
    assert!(r.out.contains("swappiness"), "{}", r.out);
}

// ------------------------------------------------------------ journals

/// Writes a journal: a begin line (unless `begin` is false), then `lines`.
fn journal(state: &Path, begin: bool, lines: &[String]) {
    fs::create_dir_all(state).unwrap();
    let mut text = String::new();
    if begin {
        text.push_str("{\"record\":\"begin\",\"profile\":\"thesis-2hca\",\"profile_path\":\"p\",\"root\":\"/\",\"time\":1}\n");
    }
    for l in lines {
        text.push_str(l);
        text.push('\n');
    }
    fs::write(state.join("journal.jsonl"), text).unwrap();
}

fn file_record(path: &str) -> String {
    serde_json::json!({
        "record": "file", "key": "k", "path": path,
        "original": "pwned\n", "restore": "raw", "restart": null
    })
    .to_string()
}

#[test]
fn traversal_journals_are_refused_and_write_nothing() {
    let s = Scene::new();
    let root = s.root();
    let before_root = snapshot(&root);
    let before_out = sentinel(&s.outside());
    let cases: Vec<(String, bool, Vec<String>, &str)> = vec![
        ("dotdot".into(), true, vec![file_record("/../../outside/secret")], "'..'"),
        ("relative".into(), true, vec![file_record("outside/secret")], "not absolute"),
        ("inner dotdot".into(), true, vec![file_record("/proc/../../../outside/secret")], "'..'"),
        ("NUL".into(), true, vec![file_record("/proc/cmdline\u{0}x")], "control character"),
        ("newline".into(), true, vec![file_record("/proc/cmdline\n/x")], "control character"),
        ("dot".into(), true, vec![file_record("/proc/./cmdline")], "normalised"),
        ("dir record".into(), true, vec![serde_json::json!({"record":"dir","key":"d","path":"/sys/../../x","cgroup":true}).to_string()], "'..'"),
        ("controller".into(), true, vec![serde_json::json!({"record":"controller","key":"c","path":"../x","controller":"cpuset","original":""}).to_string()], "not absolute"),
        ("hold pidfile".into(), true, vec![serde_json::json!({"record":"hold","key":"h","pidfile":"/run/other.pid"}).to_string()], "pidfile"),
        ("missing begin".into(), false, vec![file_record("/proc/cmdline")], "no begin record"),
    ];
    for (name, begin, lines, words) in cases {
        let state = s
            .tmp
            .path()
            .join(format!("state-{}", name.replace(' ', "-")));
        // A good record first, so "nothing written" means nothing at all.
        let mut all = vec![file_record("/proc/cmdline")];
        all.extend(lines);
        if !begin {
            all.truncate(1);
        }
        journal(&state, begin, &all);
        let journal_before = fs::read(state.join("journal.jsonl")).unwrap();
        let r = run(&[
            "--root",
            root.to_str().unwrap(),
            "--state-dir",
            state.to_str().unwrap(),
            "revert",
        ]);
        assert_eq!(
            r.code, 2,
            "{name}: revert must refuse with exit 2: {}{}",
            r.out, r.err
        );
        assert!(r.err.contains(words), "{name}: {}", r.err);
        assert!(!r.out.contains("nothing to revert"), "{name}: {}", r.out);
        if begin {
            assert!(
                r.err.contains("line 3"),
                "{name}: the error names the line: {}",
                r.err
            );
        }
        assert_same_tree(&before_root, &snapshot(&root), &name);
        assert_eq!(
            sentinel(&s.outside()),
            before_out,
            "{name}: outside changed"
        );
        assert_eq!(
            fs::read(state.join("journal.jsonl")).unwrap(),
            journal_before,
            "{name}: the journal is kept as it was"
        );
    }
}

// ------------------------------------------------------------ host lock

#[test]
fn two_applies_on_one_root_never_interleave() {
    let prof = profile("thesis-2hca");
    let prof = prof.to_str().unwrap();
    let s = Scene::new();
    let root = s.root();
    let rt = root.to_str().unwrap();
    let pristine = snapshot(&root);
    let start = Instant::now();
    let (mut waited, mut refused) = (0, 0);
    for i in 0..20 {
        let a = s.tmp.path().join(format!("state-a-{i}"));
        let b = s.tmp.path().join(format!("state-b-{i}"));
        // Half the rounds wait for the lock, half refuse at once.
        let wait = if i % 2 == 0 { "30s" } else { "0s" };
        let runs: Vec<Ran> = std::thread::scope(|sc| {
            let hs: Vec<_> = [&a, &b]
                .iter()
                .map(|st| {
                    let st = st.to_str().unwrap().to_string();
                    sc.spawn(move || {
                        run(&[
                            "--root",
                            rt,
                            "--state-dir",
                            &st,
                            "--lock-wait",
                            wait,
                            "apply",
                            prof,
                        ])
                    })
                })
                .collect();
            hs.into_iter().map(|h| h.join().unwrap()).collect()
        });
        let codes: Vec<i32> = runs.iter().map(|r| r.code).collect();
        for r in &runs {
            assert!(
                r.code == 0 || r.code == 5,
                "round {i}: apply exit {}: {}{}",
                r.code,
                r.out,
                r.err
            );
            if r.code == 5 {
                assert!(r.err.contains("--lock-wait"), "{}", r.err);
            }
        }
        assert!(
            codes.contains(&0),
            "round {i}: one apply must succeed: {codes:?}"
        );
        if codes.contains(&5) {
            refused += 1;
        } else {
            waited += 1;
        }
        for st in [&a, &b] {
            let r = run(&["--root", rt, "--state-dir", st.to_str().unwrap(), "revert"]);
            assert_eq!(r.code, 0, "round {i}: revert: {}{}", r.out, r.err);
        }
        assert_same_tree(
            &pristine,
            &snapshot(&root),
            &format!("round {i}: residue after both reverts"),
        );
    }
    eprintln!(
        "20 rounds of two concurrent applies: {waited} waited, {refused} refused (exit 5), 0 residue, {:.1} s",
        start.elapsed().as_secs_f64()
    );
}

#[test]
fn a_held_lock_gives_exit_5_and_changes_nothing() {
    use nix::fcntl::{Flock, FlockArg};
    let s = Scene::new();
    let root = s.root();
    let pristine = snapshot(&root);
    let held = Flock::lock(
        fs::File::open(&root).unwrap(),
        FlockArg::LockExclusiveNonblock,
    )
    .unwrap();
    let st = s.tmp.path().join("state");
    let t = Instant::now();
    // ibtune on this root and state dir, waiting `wait` for the lock.
    let waiting = |wait: &str, command: &[&str]| {
        let mut args = vec!["--root", root.to_str().unwrap()];
        args.extend(["--state-dir", st.to_str().unwrap(), "--lock-wait", wait]);
        args.extend(command);
        run(&args)
    };
    let thesis = profile("thesis-2hca");
    let r = waiting("300ms", &["apply", thesis.to_str().unwrap()]);
    assert_eq!(r.code, 5, "{}{}", r.out, r.err);
    assert!(t.elapsed() >= Duration::from_millis(300), "it waited");
    assert!(
        r.err.contains("--lock-wait") && r.err.contains("300ms"),
        "{}",
        r.err
    );
    assert_same_tree(&pristine, &snapshot(&root), "apply while locked");
    let r = waiting("0s", &["revert"]);
    assert_eq!(r.code, 5, "{}{}", r.out, r.err);
    drop(held);
    let r = run(&["--lock-wait", "soon", "show"]);
    assert_eq!(r.code, 2, "a bad --lock-wait is a usage error: {}", r.err);
}

// ------------------------------------------------------------ point 8

#[test]
fn garbage_proc_interrupts_is_a_warning() {
    let s = Scene::new();
    let p = s.r("proc/interrupts");
    let mut t = fs::read_to_string(&p).unwrap();
    t.push_str("this is not an interrupt line\n 41: 1 2 garbage\n");
    fs::write(&p, t).unwrap();
    let root = s.root();
    let rt = root.to_str().unwrap();
    let r = run(&["--root", rt, "show"]);
    assert_eq!(r.code, 0, "{}", r.err);
    assert!(
        r.out.contains("/proc/interrupts line"),
        "show warns: {}",
        r.out
    );
    let r = run(&["--root", rt, "show", "--json"]);
    assert!(r.out.contains("host_read_problem"), "{}", r.out);
    let prof = profile("thesis-2hca");
    let r = run(&["--root", rt, "plan", prof.to_str().unwrap()]);
    assert_eq!(r.code, 0, "{}", r.err);
    assert!(
        r.err.contains("warning: /proc/interrupts line"),
        "plan warns: {}",
        r.err
    );
    // The untouched fixture has no such warning.
    let r = run(&[
        "--root",
        fixture(THESIS).to_str().unwrap(),
        "plan",
        prof.to_str().unwrap(),
    ]);
    assert!(!r.err.contains("warning"), "{}", r.err);
}

/// A profile with `line` added to a valid one; plan, apply and verify all
/// refuse it at load with file:line:col and change nothing.
fn refused_everywhere(extra: &str, pos: &str, words: &str) {
    let s = Scene::new();
    let root = s.root();
    let rt = root.to_str().unwrap();
    let pristine = snapshot(&root);
    let p = s.tmp.path().join("bad.toml");
    fs::write(&p, format!("[profile]\nname = \"bad\"\n{extra}")).unwrap();
    let pt = p.to_str().unwrap();
    let st = s.tmp.path().join("state");
    for cmd in ["plan", "apply", "verify"] {
        let r = run(&["--root", rt, "--state-dir", st.to_str().unwrap(), cmd, pt]);
        assert_eq!(r.code, 2, "{cmd}: {}{}", r.out, r.err);
        assert!(r.err.contains(&format!("{pt}:{pos}:")), "{cmd}: {}", r.err);
        assert!(r.err.contains(words), "{cmd}: {}", r.err);
        assert!(
            r.err.len() < 1000,
            "{cmd}: the value is not echoed whole: {}",
            r.err.len()
        );
    }
    assert_same_tree(&pristine, &snapshot(&root), "a refused profile");
}

#[test]
fn oversized_cpuset_name_is_refused_by_plan_as_by_apply() {
    let long = "a".repeat(5000);
    refused_everywhere(
        &format!("[[cpuset]]\nname = \"{long}\"\ncpus = [4]\n"),
        "4:8",
        "5000 characters",
    );
}

#[test]
fn control_characters_in_profile_values_are_refused() {
    refused_everywhere(
        "[tuned]\nbase = \"latency-performance\"\n[tuned.settings]\n\"cpu.x\" = \"1\\n[main]\\ninclude=/evil\"\n",
        "6:11",
        "control character",
    );
    refused_everywhere(
        "[tuned]\nbase = \"../../../../outside/x\"\n",
        "4:8",
        "tuned.base",
    );
    refused_everywhere("[cpu]\ngovernor = \"x\\n\"\n", "4:12", "governor");
    refused_everywhere(
        "[sysctl]\n\"vm.swappiness\" = \"0\\n1\"\n",
        "4:19",
        "control character",
    );
}

// ------------------------------------------- files named outside the root

/// The files ibtune reads outside `--root` (the profile, the journal and
/// the holder's pidfile in the state folder) are bounded like the host's:
/// a FIFO or a device in their place is refused at once, naming the path.
#[test]
fn profile_journal_and_pidfile_are_regular_files_only() {
    let s = Scene::new();
    let rt = s.root();
    let rt = rt.to_str().unwrap();
    let mkfifo =
        |p: &Path| nix::unistd::mkfifo(p, nix::sys::stat::Mode::from_bits_truncate(0o644)).unwrap();
    // Profiles: a FIFO (would wait for a writer for ever) and /dev/zero
    // (never ends).
    let fifo = s.tmp.path().join("fifo.toml");
    mkfifo(&fifo);
    let zero = s.tmp.path().join("zero.toml");
    symlink("/dev/zero", &zero).unwrap();
    for (p, kind) in [(&fifo, "a FIFO"), (&zero, "a character device")] {
        for cmd in ["plan", "verify", "apply"] {
            let r = run(&["--root", rt, "--state-dir", rt, cmd, p.to_str().unwrap()]);
            assert_eq!(r.code, 2, "{cmd} {}: {}{}", p.display(), r.out, r.err);
            assert!(
                r.err.contains(p.to_str().unwrap()) && r.err.contains(kind),
                "{cmd}: the error names the profile and its type: {}",
                r.err
            );
        }
    }
    // A journal that is a FIFO or /dev/zero: revert refuses, exit 2.
    let pristine = snapshot(&s.root());
    for (name, make) in [
        ("fifo", Box::new(|p: &Path| mkfifo(p)) as Box<dyn Fn(&Path)>),
        (
            "zero",
            Box::new(|p: &Path| symlink("/dev/zero", p).unwrap()),
        ),
    ] {
        let state = s.tmp.path().join(format!("state-{name}"));
        fs::create_dir(&state).unwrap();
        make(&state.join("journal.jsonl"));
        let r = run(&[
            "--root",
            rt,
            "--state-dir",
            state.to_str().unwrap(),
            "revert",
        ]);
        assert_eq!(r.code, 2, "journal {name}: {}{}", r.out, r.err);
        assert!(
            r.err.contains("journal.jsonl") && r.err.contains("not a regular file"),
            "journal {name}: {}",
            r.err
        );
        assert!(!r.out.contains("nothing to revert"), "{}", r.out);
        assert_same_tree(&pristine, &snapshot(&s.root()), name);
    }
    // The holder's pidfile: stop_holder reads it before signalling anyone.
    let pf = s.tmp.path().join("hold.pid");
    mkfifo(&pf);
    let e = ibtune::tune::hold::stop_holder(&pf)
        .unwrap_err()
        .to_string();
    assert!(e.contains("hold.pid") && e.contains("a FIFO"), "{e}");
    fs::remove_file(&pf).unwrap();
    symlink("/dev/zero", &pf).unwrap();
    let e = ibtune::tune::hold::stop_holder(&pf)
        .unwrap_err()
        .to_string();
    assert!(e.contains("a character device"), "{e}");
}
