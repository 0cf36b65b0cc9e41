//! Shared helpers for the workspace's integration tests: where the fixture
//! host trees are, how to copy one, and how to snapshot a tree so a test
//! can assert "byte-identical after revert".
//!
//! Why it exists: every tuning test works on a throw-away copy of a
//! fixture and compares whole trees; doing that one way keeps the
//! comparisons honest (symlinks, empty dirs and file bytes all count).

pub mod doc_table;
pub mod examples;
pub mod grafana;
pub mod lab;
pub mod mesh;
pub mod netns;
pub mod prom;
pub mod recipe;
pub mod skip;
pub mod slurm;
pub mod systemd;
pub mod victoria;

pub use skip::{chrt_fifo_allowed, is_root, root_or_skip, skip};

use std::collections::BTreeMap;
use std::fs;
use std::io;
use std::path::{Path, PathBuf};

/// The fixture host trees under `tests/fixtures/`.
pub const FIXTURES: &[&str] = &["this-host", "thesis-2s-mlx5", "roce-1s", "amd-4node"];

/// Path of a fixture tree.
pub fn fixture(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("fixtures")
        .join(name)
}

/// Path of a shipped profile.
pub fn profile(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../profiles")
        .join(format!("{name}.toml"))
}

/// Copies a tree (files, directories, symlinks as links) to `to`, which must not exist.
pub fn copy_tree(from: &Path, to: &Path) -> io::Result<()> {
    fs::create_dir(to)?;
    for e in fs::read_dir(from)? {
        let e = e?;
        let src = e.path();
        let dst = to.join(e.file_name());
        let ft = e.file_type()?;
        if ft.is_symlink() {
            std::os::unix::fs::symlink(fs::read_link(&src)?, &dst)?;
        } else if ft.is_dir() {
            copy_tree(&src, &dst)?;
        } else {
            fs::copy(&src, &dst)?;
        }
    }
    Ok(())
}

/// A throw-away copy of a fixture; removed on drop.
pub struct FixtureCopy {
    _dir: tempfile::TempDir,
    /// The copy's root.
    pub root: PathBuf,
    /// A state directory for the journal, outside the copy.
    pub state: PathBuf,
}

/// Copies fixture `name` into a new temporary directory, in memory
/// (`/dev/shm`) where there is one.
///
/// Why in memory: the crash tests copy and snapshot a fixture of ~800
/// files three times per apply step; on this project's ext4 VM disk each
/// `openat`/`mkdir` took 0.3-1.5 ms, and `tune_fixtures`'
/// `crash_at_every_step_then_revert_restores` ran 37 s alone against 8 s
/// on tmpfs (the suite's longest host-side test).
pub fn fixture_copy(name: &str) -> FixtureCopy {
    let dir = scratch_dir();
    let root = dir.path().join("root");
    copy_tree(&fixture(name), &root).expect("copy fixture");
    let state = dir.path().join("state");
    FixtureCopy {
        _dir: dir,
        root,
        state,
    }
}

/// A new temporary directory: under `/dev/shm` (tmpfs on Debian) when it
/// takes one, else under the usual temporary directory.
pub fn scratch_dir() -> tempfile::TempDir {
    tempfile::Builder::new()
        .prefix("ibtools-test.")
        .tempdir_in("/dev/shm")
        .or_else(|_| tempfile::tempdir())
        .expect("a temporary directory")
}

/// One entry of a tree snapshot.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Entry {
    /// A directory.
    Dir,
    /// A file and its bytes.
    File(Vec<u8>),
    /// A symlink and its target.
    Link(PathBuf),
}

/// Every path under a root with its content.
pub type Tree = BTreeMap<PathBuf, Entry>;

/// Snapshots a tree.
pub fn snapshot(root: &Path) -> Tree {
    let mut t = Tree::new();
    walk(root, root, &mut t);
    t
}

fn walk(root: &Path, dir: &Path, t: &mut Tree) {
    for e in fs::read_dir(dir).expect("read_dir") {
        let e = e.expect("entry");
        let p = e.path();
        let rel = p.strip_prefix(root).expect("prefix").to_path_buf();
        let ft = e.file_type().expect("file type");
        if ft.is_symlink() {
            t.insert(rel, Entry::Link(fs::read_link(&p).expect("readlink")));
        } else if ft.is_dir() {
            t.insert(rel, Entry::Dir);
            walk(root, &p, t);
        } else {
            t.insert(rel, Entry::File(fs::read(&p).expect("read")));
        }
    }
}

/// Lists how two snapshots differ (empty when identical), for assert messages.
pub fn diff(a: &Tree, b: &Tree) -> Vec<String> {
    let mut out = Vec::new();
    for (k, v) in a {
        match b.get(k) {
            None => out.push(format!("removed {}", k.display())),
            Some(w) if w != v => out.push(format!(
                "changed {}: {:?} -> {:?}",
                k.display(),
                show(v),
                show(w)
            )),
            _ => {}
        }
    }
    for k in b.keys().filter(|k| !a.contains_key(*k)) {
        out.push(format!("added {}", k.display()));
    }
    out
}

/// The path of another workspace package's binary (e.g. `ibprobe` from
/// ibtune's tests): next to the running test, in its target directory.
/// `cargo test --workspace` (CI) builds every package's binaries; a
/// `cargo test -p PACKAGE` run does not, and cargo holds the build lock
/// while tests run, so this names the command to run instead of building.
pub fn workspace_bin(name: &str) -> PathBuf {
    let exe = std::env::current_exe().expect("test executable");
    // target/<profile>/deps/test-xxxx -> target/<profile>
    let dir = exe.parent().and_then(Path::parent).expect("target dir");
    let bin = dir.join(name);
    assert!(
        bin.is_file(),
        "{} not found: run `cargo build --bin {name}` first (cargo test --workspace builds it)",
        bin.display()
    );
    bin
}

/// The three tools (ibprobe, ibtune, ibexporter), built (or found up to
/// date) in the running test's target folder, and that folder.
///
/// Why it builds: a `cargo test -p ibtools-tests` run does not build other
/// packages' binaries, and the tests that run the tools as a user does
/// (their options, their examples) need the ones of this checkout.
pub fn build_tools() -> PathBuf {
    let st = std::process::Command::new(env!("CARGO"))
        .current_dir(Path::new(env!("CARGO_MANIFEST_DIR")).join(".."))
        .args(["build", "-q", "--bins"])
        .args(examples::TOOLS.iter().flat_map(|t| ["-p", t]))
        .status()
        .expect("cargo build");
    assert!(st.success(), "building the three tools failed");
    let exe = std::env::current_exe().expect("test executable");
    exe.ancestors()
        .nth(2)
        .expect("target/<profile>/deps/<test>")
        .to_path_buf()
}

/// Polls `cond` every 10 ms until it holds; fails naming `what` after 10 s.
pub fn wait_until(what: &str, mut cond: impl FnMut() -> bool) {
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
    while !cond() {
        assert!(
            std::time::Instant::now() < deadline,
            "timed out waiting for {what}"
        );
        std::thread::sleep(std::time::Duration::from_millis(10));
    }
}

/// Asserts two snapshots are equal, naming the first differences.
pub fn assert_same_tree(before: &Tree, after: &Tree, what: &str) {
    let d = diff(before, after);
    assert!(
        d.is_empty(),
        "{what}: tree changed:\n{}",
        d.iter().take(10).cloned().collect::<Vec<_>>().join("\n")
    );
}

fn show(e: &Entry) -> String {
    match e {
        Entry::Dir => "dir".into(),
        Entry::Link(p) => format!("-> {}", p.display()),
        Entry::File(b) => String::from_utf8_lossy(b).chars().take(80).collect(),
    }
}

/// Ok when a checker (promtool, systemd-analyze) exited 0 and said
/// nothing beyond the lines `expected` accepts; else its status and
/// every line it printed, after `what`.
///
/// Why it exists: such checkers exit 0 on warnings and say so only in
/// their output, so "exit 0" alone would let a warning through.
pub fn quiet_success(
    what: &str,
    out: &std::process::Output,
    expected: impl Fn(&str) -> bool,
) -> Result<(), String> {
    let said = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    let quiet = said
        .lines()
        .map(str::trim)
        .all(|l| l.is_empty() || expected(l));
    if out.status.success() && quiet {
        Ok(())
    } else {
        Err(format!("{what}: {}: {}", out.status, said.trim()))
    }
}

/// Runs `cmd` and returns its output, or panics with `what`, the exit
/// status and everything it printed when it could not start or failed.
///
/// Why it exists: tests that drive real tools (dpkg, lintian, man,
/// ibtune on a live host) need the tool's own words when a step fails.
pub fn run_ok(what: &str, cmd: &mut std::process::Command) -> std::process::Output {
    let out = cmd
        .output()
        .unwrap_or_else(|e| panic!("{what}: could not start: {e} (scripts/setup installs it)"));
    assert!(
        out.status.success(),
        "{what}: {}\nstdout:\n{}\nstderr:\n{}",
        out.status,
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    out
}

/// Writes `text` to `dir/name` readable by its owner only (mode 600, as a
/// key file must be) and returns the path as a string for a command line.
pub fn private_file(dir: &Path, name: &str, text: &str) -> String {
    use std::os::unix::fs::PermissionsExt;
    let p = dir.join(name);
    fs::write(&p, text).expect("write a key file");
    fs::set_permissions(&p, fs::Permissions::from_mode(0o600)).expect("chmod 600");
    p.to_str().expect("a UTF-8 temp path").to_string()
}

/// A file the kernel refuses to change: the immutable attribute
/// (`chattr +i`) makes even root's write fail with EPERM, the way a real
/// /proc/irq write fails for an IRQ that cannot move. Removed again on
/// drop, so the temporary tree can be deleted.
pub struct Immutable<'a>(&'a Path);

impl<'a> Immutable<'a> {
    /// Sets the attribute; None where the user or the filesystem cannot
    /// (not root, tmpfs).
    pub fn set(p: &'a Path) -> Option<Self> {
        let ok = std::process::Command::new("chattr")
            .arg("+i")
            .arg(p)
            .status()
            .is_ok_and(|s| s.success());
        ok.then_some(Immutable(p))
    }
}

impl Drop for Immutable<'_> {
    fn drop(&mut self) {
        let _ = std::process::Command::new("chattr")
            .arg("-i")
            .arg(self.0)
            .status();
    }
}
