//! Timing of the two operations users wait for: `verify` and `apply`.
//!
//! No criterion: each benchmark runs 5 times to warm up, then 50 times
//! measured with `std::time::Instant`, and prints min / median / p90 / max
//! in milliseconds next to its target, with PASS (median within target) or
//! OVER TARGET. Machines are noisy, so being over target is reported, never
//! a failure: this program only fails if an operation itself fails.
//!
//! `cargo bench -p ibtune --bench tune` runs it in full; when run by
//! `cargo test --benches` (no `--bench` argument) it does one run of each,
//! as a smoke test.

use ibtune::host::{self, HostRoot};
use ibtune::profile::{self, Profile};
use ibtune::tune::engine::{self, ApplyOptions};
use ibtune::tune::journal::Journal;
use ibtune::tune::plan::Plan;
use std::fs;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

const WARMUP: usize = 5;
const RUNS: usize = 50;

fn fixtures_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../tests/fixtures")
}

fn profile_path(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../profiles")
        .join(format!("{name}.toml"))
}

fn count_files(dir: &Path) -> usize {
    fs::read_dir(dir)
        .unwrap()
        .map(|e| {
            let e = e.unwrap();
            if e.file_type().unwrap().is_dir() {
                count_files(&e.path())
            } else {
                1
            }
        })
        .sum()
}

/// The fixture host tree with the most files, and its file count.
fn largest_fixture() -> (PathBuf, usize) {
    fs::read_dir(fixtures_dir())
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.join("sys/devices/system/cpu/online").is_file())
        .map(|p| {
            let n = count_files(&p);
            (p, n)
        })
        .max_by_key(|(_, n)| *n)
        .expect("no fixture host trees")
}

fn copy_tree(from: &Path, to: &Path) {
    fs::create_dir_all(to).unwrap();
    for e in fs::read_dir(from).unwrap() {
        let e = e.unwrap();
        let dest = to.join(e.file_name());
        if e.file_type().unwrap().is_dir() {
            copy_tree(&e.path(), &dest);
        } else {
            fs::copy(e.path(), &dest).unwrap();
        }
    }
}

fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1e3
}

/// Runs `setup` then times `f` (neither setup nor dropping what `f`
/// returns is timed), `warmup` + `runs` times, and prints one line.
fn bench<S, R, F>(
    name: &str,
    target_ms: f64,
    warmup: usize,
    runs: usize,
    mut setup: impl FnMut() -> S,
    mut f: F,
) where
    F: FnMut(S) -> R,
{
    for _ in 0..warmup {
        let s = setup();
        drop(f(s));
    }
    let mut times: Vec<Duration> = (0..runs)
        .map(|_| {
            let s = setup();
            let t = Instant::now();
            let r = f(s);
            let d = t.elapsed();
            drop(r);
            d
        })
        .collect();
    times.sort();
    let pct = |p: f64| times[((times.len() - 1) as f64 * p).round() as usize];
    let median = pct(0.5);
    let verdict = if ms(median) <= target_ms {
        "PASS"
    } else {
        "OVER TARGET"
    };
    println!(
        "{name:<47} min {:>8.2} ms  median {:>8.2} ms  p90 {:>8.2} ms  max {:>8.2} ms  target {:>5.0} ms  {verdict}",
        ms(times[0]),
        ms(median),
        ms(pct(0.9)),
        ms(times[times.len() - 1]),
        target_ms,
    );
}

/// discover + load + resolve + observe: what `ibtune verify` computes.
fn verify_lib(root: &HostRoot, profile: &Path) -> Plan {
    let host = host::discover(root).expect("discover");
    let p = Profile::load(profile).expect("profile");
    let r = profile::resolve(&p, &host, root).expect("resolve");
    Plan::observe(&r, &host, root)
}

fn main() {
    let full = std::env::args().any(|a| a == "--bench");
    let (warmup, runs) = if full { (WARMUP, RUNS) } else { (0, 1) };
    let exe = PathBuf::from(env!("CARGO_BIN_EXE_ibtune"));
    let thesis_profile = profile_path("thesis-2hca");

    let (big, files) = largest_fixture();
    let big_name = big.file_name().unwrap().to_string_lossy().into_owned();
    println!(
        "ibtune benchmarks: {warmup} warm-up + {runs} measured run(s) each; PASS = median within target"
    );
    println!(
        "verify: profile thesis-2hca on the largest fixture, {big_name} ({files} files); apply: thesis-2hca on a fresh copy of thesis-2s-mlx5"
    );
    println!("binary: {}", exe.display());

    // (a) verify, library calls.
    let root = HostRoot::new(&big).unwrap();
    let plan = verify_lib(&root, &thesis_profile);
    assert!(!plan.items.is_empty(), "empty plan on {big_name}");
    bench(
        &format!("verify (library) on {big_name}"),
        50.0,
        warmup,
        runs,
        || (),
        |()| {
            let plan = verify_lib(&root, &thesis_profile);
            std::hint::black_box(plan);
        },
    );

    // (a) verify, the release binary end to end (process start included).
    bench(
        &format!("verify (CLI binary, end to end) on {big_name}"),
        50.0,
        warmup,
        runs,
        || (),
        |()| {
            let status = Command::new(&exe)
                .arg("--root")
                .arg(&big)
                .arg("verify")
                .arg(&thesis_profile)
                .stdout(Stdio::null())
                .stderr(Stdio::null())
                .status()
                .expect("running ibtune");
            // 1 = drift: the fixture is not tuned; 2 would be an error.
            assert!(
                matches!(status.code(), Some(0) | Some(1)),
                "ibtune verify failed: {status}"
            );
        },
    );

    // (b) apply on a fresh copy of the thesis fixture, fresh state dir each run.
    let thesis = fixtures_dir().join("thesis-2s-mlx5");
    let opts = ApplyOptions {
        exe: exe.clone(),
        fault: None,
    };
    let fresh = || {
        let tmp = tempfile::tempdir().unwrap();
        let root_dir = tmp.path().join("root");
        copy_tree(&thesis, &root_dir);
        let root = HostRoot::new(&root_dir).unwrap();
        (tmp, root)
    };
    bench(
        "apply (engine::apply only) on thesis-2s-mlx5",
        200.0,
        warmup,
        runs,
        || {
            let (tmp, root) = fresh();
            let plan = verify_lib(&root, &thesis_profile);
            (tmp, root, plan)
        },
        |(tmp, root, plan)| {
            let journal = Journal::open(&tmp.path().join("state")).unwrap();
            let rep = engine::apply(&plan, &root, &journal, &opts).expect("apply");
            assert!(!rep.changed.is_empty());
            (tmp, journal)
        },
    );
    bench(
        "apply (plan + engine::apply) on thesis-2s-mlx5",
        200.0,
        warmup,
        runs,
        fresh,
        |(tmp, root)| {
            let plan = verify_lib(&root, &thesis_profile);
            let journal = Journal::open(&tmp.path().join("state")).unwrap();
            let rep = engine::apply(&plan, &root, &journal, &opts).expect("apply");
            assert!(!rep.changed.is_empty());
            (tmp, journal)
        },
    );
}
