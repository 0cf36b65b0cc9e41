//! Every example of a Markdown doc and of a `--help` runs as written
//! (`ibtools_tests::examples`: what an example is, and its marks).
//!
//! How: the blocks of one Markdown file run in order in one scratch folder
//! (with the files the doc shows, as a reader following it has them), each
//! `--help` example in its own. The folder links the repository's
//! top-level entries, so `tests/fixtures/...` and `profiles/...` resolve
//! and what an example writes stays in the folder (an example copies a
//! fixture before it changes it). The three tools built in this target
//! folder come first on `PATH`; each command runs through `bash -c`, a
//! leading `sudo` dropped (root examples run only as root). Files run side
//! by side; a block with a background example (`runs until stopped`) runs
//! while no other such block does (their ports are fixed). Examples in
//! the lab are listed with their lab spelling; `tests/tests/lab.rs`
//! (`standard_loopback::examples_in_the_lab`) runs them. Examples that
//! cannot run by design are [`examples::NOT_RUNNABLE`], each with the
//! reason its comment gives the reader.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::Mutex;
use std::time::{Duration, Instant};

use ibtools_tests::examples::{self, Block, Class, Example};

/// Held by a block with a background example while it runs: the
/// examples' servers listen on fixed ports (18515, 9427 ...).
static PORTS: Mutex<()> = Mutex::new(());

/// How long one command may run (debug binaries on a loaded 2-core host).
const TIMEOUT: Duration = Duration::from_secs(60);

fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("..")
}

/// The examples of one Markdown file (its blocks in order, and the files
/// it shows), or of one `--help` example: run in order in one folder.
struct Session {
    blocks: Vec<Block>,
    files: Vec<(String, String)>,
}

/// The example sessions of the Markdown docs, one per file; fails on an
/// untagged fenced block that holds commands (the test would miss them).
fn doc_sessions() -> Vec<Session> {
    let mut sessions = Vec::new();
    let mut untagged = Vec::new();
    for f in examples::doc_files(&root()) {
        let rel = f.strip_prefix(root()).unwrap().display().to_string();
        let text = std::fs::read_to_string(&f).unwrap();
        untagged.extend(
            examples::untagged_examples(&text)
                .into_iter()
                .map(|l| format!("{rel}:{l}")),
        );
        sessions.push(Session {
            blocks: examples::markdown(&rel, &text),
            files: examples::files(&text),
        });
    }
    assert!(
        untagged.is_empty(),
        "fenced blocks holding commands but no tag (```sh or ```console for examples, ```text for a synopsis): {untagged:?}"
    );
    sessions
}

/// A scratch folder whose top-level entries link the repository's.
fn scratch() -> tempfile::TempDir {
    let dir = ibtools_tests::scratch_dir();
    for e in std::fs::read_dir(root()).unwrap().flatten() {
        let name = e.file_name();
        if name != "target" && name != ".git" {
            std::os::unix::fs::symlink(e.path(), dir.path().join(&name)).unwrap();
        }
    }
    dir
}

/// A shell command of an example, as run here (a `sudo ` prefix dropped:
/// root examples run only as root).
fn shell(dir: &Path, bin: &Path, cmd: &str) -> Command {
    let path = format!(
        "{}:{}",
        bin.display(),
        std::env::var("PATH").unwrap_or_default()
    );
    let mut c = Command::new("bash");
    c.arg("-c")
        .arg(cmd.strip_prefix("sudo ").unwrap_or(cmd))
        .current_dir(dir)
        .env("PATH", path)
        .stdin(Stdio::null());
    c
}

/// Waits for a child until `TIMEOUT`, killing it then; its status code
/// (`None`: a signal or the timeout).
fn wait(child: &mut Child) -> Result<Option<i32>, String> {
    let start = Instant::now();
    loop {
        if let Some(st) = child.try_wait().unwrap() {
            return Ok(st.code());
        }
        if start.elapsed() > TIMEOUT {
            let _ = child.kill();
            let _ = child.wait();
            return Err(format!("ran longer than {TIMEOUT:?}"));
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// Runs a session's blocks in order in one scratch folder.
fn run_session(
    s: &Session,
    bin: &Path,
    root_ok: bool,
) -> Vec<(String, Result<Vec<String>, String>)> {
    let dir = scratch();
    for (name, text) in &s.files {
        std::fs::write(dir.path().join(name), text).unwrap();
    }
    s.blocks
        .iter()
        .map(|b| (b.at.clone(), run_block(b, dir.path(), bin, root_ok)))
        .collect()
}

/// Runs one block's examples in order in `dir`; a failure as one line
/// with the command's own output.
fn run_block(b: &Block, dir: &Path, bin: &Path, root_ok: bool) -> Result<Vec<String>, String> {
    let _ports = b
        .examples
        .iter()
        .any(|e| e.class() == Class::UntilStopped && e.not_runnable().is_none())
        .then(|| PORTS.lock().unwrap_or_else(|p| p.into_inner()));
    let mut background: Vec<(String, Child, PathBuf)> = Vec::new();
    let mut said = Vec::new();
    let result = (|| {
        for (i, e) in b.examples.iter().enumerate() {
            if e.not_runnable().is_some() {
                continue;
            }
            let exit = match e.class() {
                Class::Lab => continue,
                Class::Root(_) if !root_ok => {
                    said.push(format!(
                        "SKIPPED (needs root, not root here): {}",
                        e.command
                    ));
                    continue;
                }
                Class::Here(x) | Class::Root(x) => x,
                Class::UntilStopped => {
                    let log =
                        dir.join(format!(".bg{}-{i}.log", b.at.replace(['/', ':', ' '], "_")));
                    let cmd = format!("exec {}", e.command.trim_end_matches('&').trim());
                    let f = std::fs::File::create(&log).unwrap();
                    let child = shell(dir, bin, &cmd)
                        .stdout(f.try_clone().unwrap())
                        .stderr(f)
                        .spawn()
                        .unwrap();
                    background.push((e.command.clone(), child, log.clone()));
                    // Ready at its first output.
                    let start = Instant::now();
                    while std::fs::metadata(&log).map(|m| m.len()).unwrap_or(0) == 0 {
                        if start.elapsed() > TIMEOUT {
                            return Err(format!("`{}` said nothing in {TIMEOUT:?}", e.command));
                        }
                        std::thread::sleep(Duration::from_millis(20));
                    }
                    continue;
                }
            };
            let log = dir.join(format!(".fg{}-{i}.log", b.at.replace(['/', ':', ' '], "_")));
            let f = std::fs::File::create(&log).unwrap();
            let mut child = shell(dir, bin, &e.command)
                .stdout(f.try_clone().unwrap())
                .stderr(f)
                .spawn()
                .unwrap();
            let started = Instant::now();
            let got = wait(&mut child);
            let out = std::fs::read_to_string(&log).unwrap_or_default();
            match got {
                Ok(Some(code)) if code == exit => said.push(format!(
                    "ok {:.1}s: {}",
                    started.elapsed().as_secs_f64(),
                    e.command
                )),
                Ok(code) => {
                    return Err(format!(
                        "`{}` exited {code:?}, not {exit}:\n{}",
                        e.command,
                        tail(&out)
                    ))
                }
                Err(why) => return Err(format!("`{}` {why}:\n{}", e.command, tail(&out))),
            }
        }
        Ok(())
    })();
    // Stop the background examples: SIGTERM, and each must exit 0 (or 130, "interrupted").
    let mut stopped = Vec::new();
    for (cmd, mut child, log) in background {
        let _ = Command::new("kill")
            .args(["-TERM", &child.id().to_string()])
            .status();
        let got = wait(&mut child);
        let out = std::fs::read_to_string(&log).unwrap_or_default();
        if got != Ok(Some(0)) && got != Ok(Some(130)) {
            stopped.push(format!(
                "`{cmd}` (runs until stopped) on SIGTERM: {got:?}, not exit 0 or 130:\n{}",
                tail(&out)
            ));
        }
    }
    result?;
    if !stopped.is_empty() {
        return Err(stopped.join("\n"));
    }
    Ok(said)
}

fn tail(out: &str) -> String {
    let lines: Vec<&str> = out.lines().collect();
    lines[lines.len().saturating_sub(15)..].join("\n")
}

#[test]
fn every_example_of_a_doc_or_a_help_runs_as_written() {
    let bin = ibtools_tests::build_tools();
    let mut sessions = doc_sessions();
    sessions.extend(examples::help_blocks(&bin).into_iter().map(|b| Session {
        blocks: vec![b],
        files: Vec::new(),
    }));
    let blocks: Vec<&Block> = sessions.iter().flat_map(|s| &s.blocks).collect();
    let all: Vec<&Example> = blocks.iter().flat_map(|b| &b.examples).collect();
    assert!(all.len() > 50, "only {} examples found", all.len());

    // The list of examples not run: each still exists and says why.
    let mut problems = Vec::new();
    let commands: BTreeSet<&str> = all.iter().map(|e| e.command.as_str()).collect();
    for (c, why) in examples::NOT_RUNNABLE {
        if !commands.iter().any(|e| e.starts_with(c)) {
            problems.push(format!(
                "NOT_RUNNABLE names an example no doc or help has: `{c}`"
            ));
        }
        eprintln!("not run by design ({why}): {c}...");
    }
    for b in &blocks {
        for e in &b.examples {
            if let Some(why) = e.not_runnable() {
                if !e.comment.contains(why) {
                    problems.push(format!(
                        "{}: `{}` is not run ({why}) but its comment does not say so",
                        b.at, e.command
                    ));
                }
            }
            if e.class() == Class::Lab && e.not_runnable().is_none() {
                eprintln!("runs in the lab: {} ({}): {}", e.in_lab(), b.at, e.command);
            }
        }
    }
    eprintln!("lab substitutions: {:?}", examples::LAB_SUBSTITUTIONS);

    // Sessions side by side, one lane per core (the measuring examples
    // busy-wait: a third loop on two cores made each several times
    // slower), the longest first; a block with a background example holds
    // `PORTS` while it runs (`run_block`).
    let root_ok = ibtools_tests::is_root();
    let mut queue: Vec<&Session> = sessions.iter().collect();
    queue.sort_by_key(|s| s.blocks.iter().map(|b| b.examples.len()).sum::<usize>());
    let queue = Mutex::new(queue);
    let results = Mutex::new(Vec::new());
    let lanes = std::thread::available_parallelism().map_or(2, |n| n.get());
    let start = Instant::now();
    std::thread::scope(|s| {
        for _ in 0..lanes {
            s.spawn(|| loop {
                let Some(session) = queue.lock().unwrap().pop() else {
                    break;
                };
                let r = run_session(session, &bin, root_ok);
                results.lock().unwrap().extend(r);
            });
        }
    });
    for (at, r) in results.into_inner().unwrap() {
        match r {
            Ok(said) => {
                for l in said {
                    match l.strip_prefix("SKIPPED ") {
                        Some(why) => {
                            ibtools_tests::skip(
                                &format!("every_example_of_a_doc_or_a_help_runs_as_written ({at})"),
                                why,
                            );
                        }
                        None => eprintln!("{at}: {l}"),
                    }
                }
            }
            Err(e) => problems.push(format!("{at}: {e}")),
        }
    }
    eprintln!(
        "{} examples in {} blocks, {:.1}s",
        all.len(),
        blocks.len(),
        start.elapsed().as_secs_f64()
    );
    assert!(
        problems.is_empty(),
        "examples that fail:\n{}",
        problems.join("\n\n")
    );
}
