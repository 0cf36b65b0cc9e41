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
//!
//! A guest that stops answering during a test (the lab kills it: a
//! [`LabError`] panic, e.g. from `Lab::sh`) is the lab's failure, not the
//! test's. On this project's 2-core VM, emulated guests have locked up
//! (soft lockups, a CPU's timer not firing) on busy days, about once a
//! CI run, in tests as plain as `ibv_devices`. So the group boots a new
//! guest and runs that test again, once; a second lab failure fails it
//! with both reasons. At most [`REBOOTS`] new guests per group; the tests
//! after it run in the new guest. A guest that hangs while booting is
//! likewise booted once more (from the same budget). A test's own
//! failures are never retried.

use super::{Lab, LabConfig, LabError};
use std::panic::{self, AssertUnwindSafe};
use std::process::ExitCode;
use std::sync::Mutex;
use std::time::Instant;

enum Body {
    WithLab(Box<dyn Fn(&Lab)>),
    Plain(Box<dyn FnOnce()>),
}

/// New guests a group may boot after lab failures during its tests.
pub const REBOOTS: u32 = 2;

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
    /// A test that hits a lab failure runs again in a new guest (see the
    /// module's docs), so it must be safe to run twice.
    pub fn test(mut self, name: &'static str, f: impl Fn(&Lab) + 'static) -> Self {
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

/// What the panic hook saw for the test that is running, and whether it
/// was a lab failure (a [`LabError`] payload).
static LAST_PANIC: Mutex<Option<(String, bool)>> = Mutex::new(None);

/// Why a test failed: the message, and whether the lab failed under it.
struct Failure {
    msg: String,
    lab: bool,
}

fn install_panic_hook() {
    panic::set_hook(Box::new(|info| {
        let payload = info.payload();
        let lab = payload.is::<LabError>();
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
        *LAST_PANIC.lock().unwrap_or_else(|p| p.into_inner()) = Some((format!("{msg}{at}"), lab));
    }));
}

fn run_one(f: impl FnOnce()) -> Result<(), Failure> {
    match panic::catch_unwind(AssertUnwindSafe(f)) {
        Ok(()) => Ok(()),
        Err(_) => {
            let (msg, lab) = LAST_PANIC
                .lock()
                .unwrap_or_else(|p| p.into_inner())
                .take()
                .unwrap_or_else(|| ("panicked".into(), false));
            Err(Failure { msg, lab })
        }
    }
}

/// Boots a group's guest, saying so on stderr (see [`boot_with`]).
fn boot(group: &str, cfg: &LabConfig, reboots: &mut u32) -> Result<Lab, LabError> {
    let t0 = Instant::now();
    eprintln!("lab: group {group}: booting ({})", cfg.describe());
    let lab = boot_with(group, reboots, || Lab::start(cfg))?;
    eprintln!(
        "lab: group {group}: guest ready in {:.1} s",
        t0.elapsed().as_secs_f64()
    );
    Ok(lab)
}

/// Starts a guest with `start`. One that hangs while booting (a soft
/// lockup under TCG: seen at stage 2's first perf event open, in a CI
/// run of 2026-11-27) is the lab's failure and not deterministic: one new
/// boot, taken from `reboots`. A boot that fails otherwise (a module
/// missing) would fail again and is not retried.
fn boot_with<T>(
    group: &str,
    reboots: &mut u32,
    mut start: impl FnMut() -> Result<T, LabError>,
) -> Result<T, LabError> {
    match start() {
        Err(first) if first.is_boot_hang() && *reboots > 0 => {
            *reboots -= 1;
            eprintln!(
                "lab: group {group}: the guest hung while booting; booting a new one. The failure: {first}"
            );
            start().map_err(|second| LabError {
                status: second.status,
                message: format!("{first}\na new boot, again: {second}"),
            })
        }
        other => other,
    }
}

/// Stops a group's guest and checks nothing of it is left; what went
/// wrong is a failure of the group. A guest the lab killed (`dead`) may
/// fail to power off: only what it left behind counts then.
fn retire(group: &str, lab: Lab, dead: bool, failures: &mut Vec<(String, String)>) {
    let dir = lab.dir().to_path_buf();
    if let Err(e) = lab.stop() {
        if !dead {
            failures.push((
                format!("{group}::(stop)"),
                format!("stopping the lab failed: {e}"),
            ));
        }
    }
    let left = super::qemu_processes(&dir.to_string_lossy());
    if !left.is_empty() || dir.exists() {
        failures.push((
            format!("{group}::(cleanup)"),
            format!(
                "after stop: QEMU pids {left:?} still running, lab folder exists: {}",
                dir.exists()
            ),
        ));
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
        let mut reboots = REBOOTS;
        let mut lab = g.lab.as_ref().map(|cfg| boot(g.name, cfg, &mut reboots));
        for (t, body) in tests {
            let name = format!("{}::{t}", g.name);
            let t0 = Instant::now();
            let unavailable = |e: &LabError| Failure {
                msg: format!("lab unavailable (not a failure of the code under test): {e}"),
                lab: false,
            };
            let result = match (body, &g.lab) {
                (Body::Plain(f), _) => match &lab {
                    Some(Err(e)) => Err(unavailable(e)),
                    _ => run_one(f),
                },
                (Body::WithLab(_), None) => {
                    unreachable!("Group::test refuses lab tests in standalone groups")
                }
                (Body::WithLab(f), Some(cfg)) => {
                    let first = match &lab {
                        Some(Ok(l)) => run_one(|| f(l)),
                        Some(Err(e)) => Err(unavailable(e)),
                        None => unreachable!("a lab group boots its lab"),
                    };
                    match first {
                        // The guest stopped answering under this test: a
                        // new guest, and the test once more in it.
                        Err(first) if first.lab && reboots > 0 => {
                            reboots -= 1;
                            eprintln!(
                                "lab: group {}: the guest failed during {t}; booting a new one and running {t} again. The failure: {}",
                                g.name, first.msg
                            );
                            if let Some(Ok(dead)) = lab.take() {
                                retire(g.name, dead, true, &mut failures);
                            }
                            let fresh = boot(g.name, cfg, &mut reboots);
                            let again = match &fresh {
                                Ok(l) => run_one(|| f(l)),
                                Err(e) => Err(Failure {
                                    msg: format!("no new guest: {e}"),
                                    lab: true,
                                }),
                            };
                            lab = Some(fresh);
                            again.map_err(|second| Failure {
                                msg: format!(
                                    "{}\nin a new guest, again: {}",
                                    first.msg, second.msg
                                ),
                                lab: second.lab,
                            })
                        }
                        other => other,
                    }
                }
            };
            let secs = t0.elapsed().as_secs_f64();
            match result {
                Ok(()) => {
                    println!("test {name} ... ok ({secs:.1} s)");
                    passed += 1;
                }
                Err(f) => {
                    println!("test {name} ... FAILED ({secs:.1} s)");
                    failures.push((name, f.msg));
                }
            }
        }
        if let Some(Ok(lab)) = lab {
            retire(g.name, lab, false, &mut failures);
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

#[cfg(test)]
mod tests {
    use super::*;

    fn err(status: i32, message: &str) -> LabError {
        LabError {
            status: Some(status),
            message: message.into(),
        }
    }

    /// Runs `boot_with` over the scripted results; returns its result,
    /// the starts made and the reboots left.
    fn script(
        results: Vec<Result<u32, LabError>>,
        reboots: u32,
    ) -> (Result<u32, LabError>, usize, u32) {
        let mut results = results.into_iter();
        let (mut starts, mut left) = (0, reboots);
        let r = boot_with("g", &mut left, || {
            starts += 1;
            results.next().expect("started more often than scripted")
        });
        (r, starts, left)
    }

    #[test]
    fn a_boot_that_hung_is_booted_once_more_from_the_budget() {
        let (r, starts, left) = script(vec![Err(err(6, "hung at: stage2")), Ok(7)], 2);
        assert_eq!((r.unwrap(), starts, left), (7, 2, 1));
    }

    #[test]
    fn a_second_hang_fails_with_both_reasons() {
        let (r, starts, left) = script(vec![Err(err(6, "first")), Err(err(6, "second"))], 2);
        let e = r.unwrap_err();
        assert_eq!((starts, left, e.status), (2, 1, Some(6)));
        assert!(
            e.message.contains("first") && e.message.contains("a new boot, again: second"),
            "{e}"
        );
    }

    #[test]
    fn other_boot_failures_and_an_empty_budget_are_not_retried() {
        let (r, starts, left) = script(vec![Err(err(4, "modprobe rdma_rxe failed"))], 2);
        assert_eq!((r.unwrap_err().status, starts, left), (Some(4), 1, 2));
        let (r, starts, left) = script(vec![Err(err(6, "hung"))], 0);
        assert_eq!((r.unwrap_err().status, starts, left), (Some(6), 1, 0));
    }
}
