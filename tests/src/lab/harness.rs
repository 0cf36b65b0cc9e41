//! A small test runner for lab tests (`harness = false` test targets).
//!
//! Why it exists: libtest runs each test on its own thread with no shared
//! setup, so every test would boot its own guest (~20 s each under TCG).
//! Here tests come in groups, and a group boots one guest for all its
//! tests, then stops it. The output and command-line subset follow libtest
//! (`test NAME ... ok`, the `test result:` line, filters, `--list`,
//! `--exact`, `--skip`, `--ignored`, `--include-ignored`), so `cargo test`
//! and `scripts/test-all` treat these binaries like any other.
//!
//! Lab tests count as ignored unless `--include-ignored` (or `--ignored`) is
//! given: plain `cargo test` runs every test that needs no lab, and
//! `scripts/test-all` (the README's test command) runs these too. There, a
//! lab that cannot start FAILS each of its tests with "lab unavailable:
//! <reason>", so it is never skipped silently and never mistaken for a
//! failure of the code under test.

use super::{Lab, LabConfig, LabError};
use std::panic::{self, AssertUnwindSafe};
use std::process::ExitCode;
use std::sync::Mutex;
use std::time::Instant;

enum Body {
    WithLab(Box<dyn FnOnce(&Lab)>),
    Plain(Box<dyn FnOnce()>),
}

/// Tests that share one lab (or, for [`Group::standalone`], none).
pub struct Group {
    name: &'static str,
    lab: Option<LabConfig>,
    needs_lab: bool,
    tests: Vec<(&'static str, Body)>,
}

impl Group {
    /// A group whose tests all run in one lab booted with `config`.
    pub fn with_lab(name: &'static str, config: LabConfig) -> Self {
        Group {
            name,
            lab: Some(config),
            needs_lab: true,
            tests: Vec::new(),
        }
    }

    /// A group of tests that start (or fail to start) labs of their own.
    pub fn standalone(name: &'static str) -> Self {
        Group {
            name,
            lab: None,
            needs_lab: true,
            tests: Vec::new(),
        }
    }

    /// A group of tests that need no guest (the lab script's own argument
    /// and environment checks): they run under plain `cargo test` too.
    pub fn offline(name: &'static str) -> Self {
        Group {
            needs_lab: false,
            ..Self::standalone(name)
        }
    }

    /// Adds a test that runs in the group's lab. Tests run in the order added.
    pub fn test(mut self, name: &'static str, f: impl FnOnce(&Lab) + 'static) -> Self {
        assert!(
            self.lab.is_some(),
            "{}::{name}: a standalone group has no lab; use .check()",
            self.name
        );
        self.tests.push((name, Body::WithLab(Box::new(f))));
        self
    }

    /// Adds a test that needs no shared lab.
    pub fn check(mut self, name: &'static str, f: impl FnOnce() + 'static) -> Self {
        self.tests.push((name, Body::Plain(Box::new(f))));
        self
    }
}

#[derive(Default)]
struct Args {
    list: bool,
    include_ignored: bool,
    exact: bool,
    filters: Vec<String>,
    skip: Vec<String>,
}

fn parse_args() -> Args {
    let mut a = Args::default();
    let mut it = std::env::args().skip(1);
    while let Some(arg) = it.next() {
        match arg.as_str() {
            "--list" => a.list = true,
            "--include-ignored" | "--ignored" => a.include_ignored = true,
            "--exact" => a.exact = true,
            "--skip" => a.skip.extend(it.next()),
            // Accepted for libtest compatibility; these tests always run one
            // at a time and print as they go.
            "--test-threads" | "--format" | "--color" | "-Z" | "--logfile" => {
                it.next();
            }
            s if s.starts_with('-') => {}
            s => a.filters.push(s.to_string()),
        }
    }
    a
}

impl Args {
    fn selects(&self, name: &str) -> bool {
        let hit = |f: &String| {
            if self.exact {
                name == f
            } else {
                name.contains(f.as_str())
            }
        };
        (self.filters.is_empty() || self.filters.iter().any(hit))
            && !self.skip.iter().any(|s| name.contains(s.as_str()))
    }
}

/// What the panic hook saw for the test that is running.
static LAST_PANIC: Mutex<Option<String>> = Mutex::new(None);

fn install_panic_hook() {
    panic::set_hook(Box::new(|info| {
        let payload = info.payload();
        let msg = if let Some(e) = payload.downcast_ref::<LabError>() {
            format!("lab failed during the test (not a failure of the code under test): {e}")
        } else if let Some(s) = payload.downcast_ref::<&str>() {
            s.to_string()
        } else if let Some(s) = payload.downcast_ref::<String>() {
            s.clone()
        } else {
            "panic with a non-string payload".to_string()
        };
        let at = info
            .location()
            .map(|l| format!(" (at {}:{})", l.file(), l.line()))
            .unwrap_or_default();
        *LAST_PANIC.lock().unwrap_or_else(|p| p.into_inner()) = Some(format!("{msg}{at}"));
    }));
}

fn run_one(f: impl FnOnce()) -> Result<(), String> {
    match panic::catch_unwind(AssertUnwindSafe(f)) {
        Ok(()) => Ok(()),
        Err(_) => Err(LAST_PANIC
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .take()
            .unwrap_or_else(|| "panicked".into())),
    }
}

/// Runs the groups as one test binary; returns the exit code libtest would.
pub fn run(groups: Vec<Group>) -> ExitCode {
    let args = parse_args();
    let total: usize = groups.iter().map(|g| g.tests.len()).sum();
    let selected: Vec<(String, &'static str)> = groups
        .iter()
        .flat_map(|g| {
            g.tests
                .iter()
                .map(move |(t, _)| (format!("{}::{t}", g.name), g.name))
        })
        .filter(|(n, _)| args.selects(n))
        .collect();
    let filtered_out = total - selected.len();
    if args.list {
        for (n, _) in &selected {
            println!("{n}: test");
        }
        return ExitCode::SUCCESS;
    }
    let started = Instant::now();
    println!("\nrunning {} tests", selected.len());
    let (mut passed, mut ignored) = (0usize, 0usize);
    let mut failures: Vec<(String, String)> = Vec::new();
    install_panic_hook();
    for g in groups {
        let tests: Vec<_> = g
            .tests
            .into_iter()
            .filter(|(t, _)| args.selects(&format!("{}::{t}", g.name)))
            .collect();
        if tests.is_empty() {
            continue;
        }
        if g.needs_lab && !args.include_ignored {
            for (t, _) in &tests {
                println!(
                    "test {}::{t} ... ignored, needs the Soft-RoCE lab (scripts/test-all runs it; or pass --include-ignored)",
                    g.name
                );
            }
            ignored += tests.len();
            continue;
        }
        let lab = match &g.lab {
            None => None,
            Some(cfg) => {
                let t0 = Instant::now();
                eprintln!("lab: group {}: booting ({})", g.name, cfg.describe());
                match Lab::start(cfg) {
                    Ok(lab) => {
                        eprintln!(
                            "lab: group {}: guest ready in {:.1} s",
                            g.name,
                            t0.elapsed().as_secs_f64()
                        );
                        Some(Ok(lab))
                    }
                    Err(e) => Some(Err(e)),
                }
            }
        };
        for (t, body) in tests {
            let name = format!("{}::{t}", g.name);
            let t0 = Instant::now();
            let result = match (&lab, body) {
                (Some(Err(e)), _) => Err(format!(
                    "lab unavailable (not a failure of the code under test): {e}"
                )),
                (Some(Ok(lab)), Body::WithLab(f)) => run_one(|| f(lab)),
                (None, Body::Plain(f)) | (Some(Ok(_)), Body::Plain(f)) => run_one(f),
                (None, Body::WithLab(_)) => {
                    unreachable!("Group::test refuses lab tests in standalone groups")
                }
            };
            let secs = t0.elapsed().as_secs_f64();
            match result {
                Ok(()) => {
                    println!("test {name} ... ok ({secs:.1} s)");
                    passed += 1;
                }
                Err(msg) => {
                    println!("test {name} ... FAILED ({secs:.1} s)");
                    failures.push((name, msg));
                }
            }
        }
        if let Some(Ok(lab)) = lab {
            let dir = lab.dir().to_path_buf();
            if let Err(e) = lab.stop() {
                failures.push((
                    format!("{}::(stop)", g.name),
                    format!("stopping the lab failed: {e}"),
                ));
            }
            let left = super::qemu_processes(&dir.to_string_lossy());
            if !left.is_empty() || dir.exists() {
                failures.push((
                    format!("{}::(cleanup)", g.name),
                    format!(
                        "after stop: QEMU pids {left:?} still running, lab folder exists: {}",
                        dir.exists()
                    ),
                ));
            }
        }
    }
    if !failures.is_empty() {
        println!("\nfailures:\n");
        for (n, msg) in &failures {
            println!("---- {n} ----\n{msg}\n");
        }
        println!("failures:");
        for (n, _) in &failures {
            println!("    {n}");
        }
    }
    println!(
        "\ntest result: {}. {passed} passed; {} failed; {ignored} ignored; 0 measured; {filtered_out} filtered out; finished in {:.2}s\n",
        if failures.is_empty() { "ok" } else { "FAILED" },
        failures.len(),
        started.elapsed().as_secs_f64()
    );
    if failures.is_empty() {
        ExitCode::SUCCESS
    } else {
        ExitCode::from(101)
    }
}
