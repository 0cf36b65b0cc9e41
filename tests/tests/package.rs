//! The Debian packages of `scripts/package`, on this host: built (from the
//! debug binaries `cargo test --workspace` already built, so CI compiles
//! nothing twice; run alone, build them first),
//! linted by `lintian` (no error), installed with `dpkg -i`, used (man
//! pages found by `man -w`, the installed units verified by
//! `systemd-analyze verify`, the binaries run from /usr/bin), then purged,
//! after which the package's folders list exactly the files they listed
//! before.
//!
//! Why it exists: a package is only known to install, work and leave
//! nothing behind when the real dpkg, man-db and systemd have done it.
//! It changes this host (root), so it is ignored by plain `cargo test` and
//! run by `scripts/test-all`; a guard purges the packages if any step
//! fails.

use std::collections::BTreeSet;
use std::fs;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::time::Instant;

use ibtools_tests::run_ok as run;

const PACKAGES: [&str; 3] = ["ibprobe", "ibtune", "ibexporter"];

/// Where a package of ours puts or leaves files, and where Debian's tools
/// record what it enabled: compared before install and after purge.
const WATCHED: &[&str] = &[
    "/usr/bin",
    "/usr/share/man/man1",
    "/usr/share/doc",
    "/usr/share/bash-completion/completions",
    "/usr/share/zsh/vendor-completions",
    "/usr/share/fish/vendor_completions.d",
    "/usr/share/ibtune",
    "/usr/share/ibexporter",
    "/lib/systemd/system",
    "/etc/systemd/system",
    "/etc/ibexporter",
    "/etc/ibtune",
    "/var/lib/ibtune",
    "/var/lib/systemd/deb-systemd-helper-enabled",
];

fn workspace() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("..")
}

/// The target folder this test binary was built in (target/debug/deps/..).
fn target_dir() -> PathBuf {
    let exe = std::env::current_exe().expect("current exe");
    exe.ancestors()
        .nth(3)
        .expect("target/<profile>/deps/<test>")
        .to_path_buf()
}

fn text(out: &Output) -> String {
    String::from_utf8_lossy(&out.stdout).into_owned() + &String::from_utf8_lossy(&out.stderr)
}

/// Every path under the watched folders (names and kinds, not bytes).
fn listing() -> BTreeSet<String> {
    fn walk(dir: &Path, set: &mut BTreeSet<String>) {
        let Ok(entries) = fs::read_dir(dir) else {
            return;
        };
        for e in entries.flatten() {
            let p = e.path();
            let ft = e.file_type().expect("file type");
            let kind = if ft.is_symlink() {
                "link"
            } else if ft.is_dir() {
                "dir"
            } else {
                "file"
            };
            set.insert(format!("{} ({kind})", p.display()));
            if ft.is_dir() {
                walk(&p, set);
            }
        }
    }
    let mut set = BTreeSet::new();
    for d in WATCHED {
        if Path::new(d).exists() {
            set.insert(format!("{d} (dir)"));
        }
        walk(Path::new(d), &mut set);
    }
    set
}

fn installed(pkg: &str) -> bool {
    Command::new("dpkg-query")
        .args(["-W", "-f=${Status}", pkg])
        .output()
        .map(|o| String::from_utf8_lossy(&o.stdout).contains("install ok installed"))
        .unwrap_or(false)
}

/// Purges our packages when dropped, so a failed step leaves the host as
/// it was.
struct PurgeOnDrop;

impl Drop for PurgeOnDrop {
    fn drop(&mut self) {
        let _ = Command::new("dpkg").arg("--purge").args(PACKAGES).output();
    }
}

#[test]
#[ignore = "installs and purges .deb files on this host (root); scripts/test-all runs it"]
fn packages_lint_install_work_and_purge_clean() {
    if !ibtools_tests::root_or_skip(
        "packages_lint_install_work_and_purge_clean",
        "installs the packages with dpkg -i; scripts/test-all runs it as root",
    ) {
        return;
    }
    for pkg in PACKAGES {
        assert!(
            !installed(pkg),
            "{pkg} is installed on this host; the test installs and purges its own build, \
             so purge it first (dpkg --purge {pkg})"
        );
    }
    for bin in PACKAGES {
        assert!(
            target_dir().join("debug").join(bin).is_file(),
            "{}/debug/{bin} is missing: the test packages the debug binaries `cargo test \
             --workspace` builds; build them (cargo build -p ibprobe -p ibtune -p ibexporter)",
            target_dir().display()
        );
    }
    let out_dir = tempfile::tempdir().expect("tempdir");

    let t = Instant::now();
    let built = run(
        "scripts/package --debug --no-build --fast",
        Command::new(workspace().join("scripts/package"))
            .args(["--debug", "--no-build", "--fast"])
            .arg(out_dir.path())
            .env("CARGO_TARGET_DIR", target_dir())
            .current_dir(workspace()),
    );
    eprintln!(
        "scripts/package --debug --no-build --fast: {:.1} s\n{}",
        t.elapsed().as_secs_f64(),
        text(&built)
    );
    let debs: Vec<PathBuf> = PACKAGES
        .iter()
        .map(|p| {
            let deb = fs::read_dir(out_dir.path())
                .expect("out dir")
                .flatten()
                .map(|e| e.path())
                .find(|d| {
                    d.file_name()
                        .and_then(|n| n.to_str())
                        .is_some_and(|n| n.starts_with(&format!("{p}_")) && n.ends_with(".deb"))
                });
            deb.unwrap_or_else(|| panic!("scripts/package made no {p}_*.deb"))
        })
        .collect();

    let t = Instant::now();
    let lint = run(
        "lintian --fail-on error",
        Command::new("lintian")
            .args(["--fail-on", "error", "--tag-display-limit", "0"])
            .args(&debs),
    );
    eprintln!(
        "lintian: {:.1} s, no error\n{}",
        t.elapsed().as_secs_f64(),
        text(&lint)
    );

    let before = listing();
    let guard = PurgeOnDrop;
    run("dpkg -i", Command::new("dpkg").arg("-i").args(&debs));

    for page in [
        "ibprobe",
        "ibprobe-loopback",
        "ibprobe-stream",
        "ibtune",
        "ibtune-apply",
        "ibexporter",
    ] {
        let found = run(
            &format!("man -w {page}"),
            Command::new("man").args(["-w", page]),
        );
        let path = String::from_utf8_lossy(&found.stdout).trim().to_string();
        assert_eq!(path, format!("/usr/share/man/man1/{page}.1.gz"));
    }
    for (unit, instance) in [
        ("ibexporter.service", ""),
        ("ibtune-hold@.service", "0"),
        ("ibtune-profile@.service", "thesis-2hca"),
    ] {
        let path = Path::new("/lib/systemd/system").join(unit);
        let installed = fs::read_to_string(&path).unwrap_or_else(|e| panic!("{unit}: {e}"));
        assert!(
            installed.contains("ExecStart=/usr/bin/") && !installed.contains("/usr/local/"),
            "{unit} must run the packaged binaries:\n{installed}"
        );
        for doc in installed
            .lines()
            .filter_map(|l| l.strip_prefix("Documentation="))
            .flat_map(str::split_whitespace)
            .filter_map(|d| d.strip_prefix("file://"))
        {
            assert!(
                Path::new(doc).is_file(),
                "{unit}: Documentation {doc} is not installed"
            );
        }
        ibtools_tests::systemd::verify_unit(&path, &[], instance)
            .unwrap_or_else(|e| panic!("installed {unit}: {e}"));
    }
    for bin in PACKAGES {
        let exe = format!("/usr/bin/{bin}");
        let v = run(
            &format!("{exe} --version"),
            Command::new(&exe).arg("--version"),
        );
        assert_eq!(
            String::from_utf8_lossy(&v.stdout).trim(),
            format!("{bin} {}", env!("CARGO_PKG_VERSION"))
        );
        let h = run(&format!("{exe} --help"), Command::new(&exe).arg("--help"));
        assert!(String::from_utf8_lossy(&h.stdout).contains("Usage:"));
        for completion in [
            format!("/usr/share/bash-completion/completions/{bin}"),
            format!("/usr/share/zsh/vendor-completions/_{bin}"),
            format!("/usr/share/fish/vendor_completions.d/{bin}.fish"),
        ] {
            assert!(Path::new(&completion).is_file(), "{completion} missing");
        }
        // bash loads the completion and it registers for the command.
        let registered = run(
            &format!("bash completion of {bin}"),
            Command::new("bash").arg("-c").arg(format!(
                "source /usr/share/bash-completion/completions/{bin} && complete -p {bin}"
            )),
        );
        assert!(
            String::from_utf8_lossy(&registered.stdout).contains(bin),
            "{}",
            text(&registered)
        );
    }
    // A shipped profile is found by bare name in the package's folder.
    let plan = run(
        "ibtune plan thesis-2hca (installed)",
        Command::new("/usr/bin/ibtune")
            .arg("--root")
            .arg(ibtools_tests::fixture("thesis-2s-mlx5"))
            .args(["plan", "thesis-2hca"])
            .current_dir("/"),
    );
    let said = String::from_utf8_lossy(&plan.stdout);
    assert!(
        said.contains("(/usr/share/ibtune/profiles/thesis-2hca.toml)"),
        "{said}"
    );
    let conffiles = run(
        "dpkg-query Conffiles",
        Command::new("dpkg-query").args(["-W", "-f=${Conffiles}", "ibexporter"]),
    );
    assert!(
        String::from_utf8_lossy(&conffiles.stdout).contains("/etc/ibexporter/ibexporter.toml"),
        "the default config must be a conffile: {}",
        text(&conffiles)
    );
    run(
        "ibexporter --check-config (the installed conffile)",
        Command::new("/usr/bin/ibexporter")
            .args(["--check-config", "/etc/ibexporter/ibexporter.toml"]),
    );

    run(
        "dpkg --purge",
        Command::new("dpkg").arg("--purge").args(PACKAGES),
    );
    std::mem::forget(guard);
    let after = listing();
    let added: Vec<_> = after.difference(&before).collect();
    let removed: Vec<_> = before.difference(&after).collect();
    assert!(
        added.is_empty() && removed.is_empty(),
        "purge must leave the watched folders as before install\nleft behind: {added:#?}\ngone: {removed:#?}"
    );
}
