//! Every file a tool reads goes through a bounded reader.
//!
//! Why it exists: an unbounded read of a path (`std::fs::read_to_string`,
//! `File::open` then `read_to_end`) blocks for ever on a FIFO and grows
//! without end on `/dev/zero`; the bounded readers (`ibhost::file`:
//! `read_small`, `read_small_text`, `read_pseudo`; ibtune's `host/root.rs`)
//! refuse both at once. This test lists every read API used in the tool
//! crates' `src/` outside them and fails on one that is not in [`ALLOWED`],
//! naming file:line and what to use instead.
//!
//! What counts as a read: a line (comments aside) containing one of
//! [`READS`]; `File::open(` only as a whole word (not `SchedFile::open(`).
//! Exempt: `#[cfg(test)]` items (from the attribute to the end of the item
//! it annotates, found by counting braces outside string and character
//! literals) and the `tests` crate (test harness code that reads the
//! repository's own files and the lab's captures; no tool runs it).

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

/// The crates whose `src/` is scanned: every crate a tool is built from.
const CRATES: [&str; 7] = [
    "ibhost",
    "ibnoise",
    "ibprobe",
    "ibexporter",
    "ibtune",
    "ibstats",
    "ibdoc",
];

/// What a read looks like in the source.
const READS: [&str; 5] = [
    "read_to_string(",
    "read_to_end(",
    "fs::read(",
    "File::open(",
    "OpenOptions::new(",
];

/// The places that are legitimately different: (file, how many matching
/// lines it has, why each is bounded). The count is exact: a new read in
/// one of these files fails too, and so does a stale entry.
const ALLOWED: [(&str, usize, &str); 10] = [
    (
        "ibhost/src/file.rs",
        2,
        "the bounded reader itself (O_NONBLOCK open, regular-file check on the descriptor, size cap)",
    ),
    (
        "ibtune/src/host/root.rs",
        3,
        "ibtune's own bounded reader under --root (O_NOFOLLOW, O_NONBLOCK, type and size checks)",
    ),
    (
        "ibtune/src/host/kernel.rs",
        1,
        "/dev/cpu_dma_latency opened by host/root.rs as a character device, read through .take(64)",
    ),
    (
        "ibtune/src/tune/journal.rs",
        5,
        "ibtune's state directory: the journal opened for append, its lock file, directory fsyncs; no content read",
    ),
    (
        "ibtune/src/tune/hold.rs",
        1,
        "the log of the holder process ibtune itself started, in the directory it created, for an error message",
    ),
    (
        "ibnoise/src/timerlat.rs",
        1,
        "the tracer's trace_pipe: a stream opened O_NONBLOCK and read in bounded chunks for the run's length",
    ),
    (
        "ibnoise/src/counters/sched.rs",
        1,
        "/proc/thread-self/sched held open and re-read with pread into a fixed buffer each sample",
    ),
    (
        "ibnoise/src/counters/interrupts.rs",
        1,
        "/proc/interrupts held open and re-read with pread into a fixed buffer each sample",
    ),
    (
        "ibnoise/src/counters/mod.rs",
        1,
        "/dev/cpu/N/msr: a device read 8 bytes at a time with pread",
    ),
    (
        "ibprobe/src/report/hdrlog.rs",
        1,
        "inflating a report's histogram in memory, through .take(the checked payload length + 1)",
    ),
];

/// (line number, line) of each read in `text` outside `#[cfg(test)]` items.
fn reads_in(text: &str) -> Vec<(usize, String)> {
    let mut found = Vec::new();
    let mut lines = text.lines().enumerate();
    while let Some((i, line)) = lines.next() {
        let code = line.trim_start();
        if code.starts_with("#[cfg(test)]") {
            skip_item(code, &mut lines);
            continue;
        }
        if code.starts_with("//") {
            continue;
        }
        if READS.iter().any(|r| contains_word(code, r)) {
            found.push((i + 1, code.to_string()));
        }
    }
    found
}

/// Whether `line` contains `pat` not preceded by an identifier character.
fn contains_word(line: &str, pat: &str) -> bool {
    line.match_indices(pat).any(|(at, _)| {
        !pat.contains("::")
            || !line[..at]
                .chars()
                .next_back()
                .is_some_and(|c| c.is_alphanumeric() || c == '_')
    })
}

/// Consumes the item a `#[cfg(test)]` on `first` annotates: up to its
/// first `;` if that comes before any `{`, else to the `}` that closes it.
fn skip_item<'a>(first: &str, lines: &mut impl Iterator<Item = (usize, &'a str)>) {
    let mut depth = 0i64;
    let mut opened = false;
    let mut line = first["#[cfg(test)]".len()..].to_string();
    loop {
        let mut chars = line.chars().peekable();
        let mut in_str = false;
        while let Some(c) = chars.next() {
            match c {
                '\\' if in_str => {
                    chars.next();
                }
                '"' => in_str = !in_str,
                '\'' if !in_str => {
                    // A char literal ('{', '\'') or a lifetime ('a).
                    let rest: String = chars.clone().take(3).collect();
                    if rest.chars().nth(1) == Some('\'') {
                        chars.nth(1);
                    } else if rest.starts_with('\\') {
                        chars.nth(2);
                    }
                }
                '/' if !in_str && chars.peek() == Some(&'/') => break,
                '{' if !in_str => {
                    depth += 1;
                    opened = true;
                }
                '}' if !in_str => depth -= 1,
                ';' if !in_str && !opened => return,
                _ => {}
            }
        }
        if opened && depth <= 0 {
            return;
        }
        match lines.next() {
            Some((_, l)) => line = l.to_string(),
            None => return,
        }
    }
}

/// Every `*.rs` under `dir`, sorted.
fn rust_files(dir: &Path, out: &mut Vec<PathBuf>) {
    let mut entries: Vec<_> = std::fs::read_dir(dir)
        .unwrap_or_else(|e| panic!("{}: {e}", dir.display()))
        .map(|e| e.unwrap().path())
        .collect();
    entries.sort();
    for p in entries {
        if p.is_dir() {
            rust_files(&p, out);
        } else if p.extension().is_some_and(|x| x == "rs") {
            out.push(p);
        }
    }
}

/// The workspace's members as its `Cargo.toml` lists them.
fn workspace_members(root: &Path) -> Vec<String> {
    let manifest = std::fs::read_to_string(root.join("Cargo.toml")).unwrap();
    let line = manifest
        .lines()
        .find(|l| l.trim_start().starts_with("members"))
        .expect("a members = [...] line in the workspace Cargo.toml");
    line.split('"')
        .skip(1)
        .step_by(2)
        .map(String::from)
        .collect()
}

#[test]
fn every_file_read_goes_through_a_bounded_reader() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).parent().unwrap();
    // A new crate is scanned too: every member is in CRATES or is `tests`.
    for m in workspace_members(root) {
        assert!(
            CRATES.contains(&m.as_str()) || m == "tests",
            "workspace member {m} is not scanned: add it to CRATES"
        );
    }
    let mut by_file: BTreeMap<String, Vec<(usize, String)>> = BTreeMap::new();
    for c in CRATES {
        let mut files = Vec::new();
        rust_files(&root.join(c).join("src"), &mut files);
        assert!(!files.is_empty(), "{c}/src has no Rust files");
        for f in files {
            let text = std::fs::read_to_string(&f).unwrap();
            let rel = f.strip_prefix(root).unwrap().display().to_string();
            let reads = reads_in(&text);
            if !reads.is_empty() {
                by_file.insert(rel, reads);
            }
        }
    }
    let mut problems = Vec::new();
    for (file, reads) in &by_file {
        match ALLOWED.iter().find(|(f, _, _)| f == file) {
            Some((_, n, why)) if reads.len() != *n => problems.push(format!(
                "{file}: {} reads where ALLOWED says {n} ({why}): {}; a new one goes through ibhost::file, a removed one updates ALLOWED",
                reads.len(),
                reads.iter().map(|(l, _)| l.to_string()).collect::<Vec<_>>().join(", ")
            )),
            Some(_) => {}
            None => {
                for (line, code) in reads {
                    problems.push(format!(
                        "{file}:{line}: `{code}` reads a file outside the bounded readers; use ibhost::file::read_small_text (a file an operator names: config, list, report) or ibhost::file::read_pseudo (/proc, /sys, tracefs), or add the file to ALLOWED with why it is bounded"
                    ));
                }
            }
        }
    }
    for (file, n, _) in ALLOWED {
        if !by_file.contains_key(file) {
            problems.push(format!(
                "{file}: ALLOWED says {n} reads, it has none; remove the entry"
            ));
        }
    }
    assert!(problems.is_empty(), "\n{}", problems.join("\n"));
}

/// The scanner finds a read in plain code, and only there.
#[test]
fn the_scanner_finds_reads_and_skips_test_items_and_comments() {
    let src = r#"
use std::fs::File;
// std::fs::read_to_string in a comment
fn load(p: &Path) -> String {
    std::fs::read_to_string(p).unwrap()
}
fn sched() { SchedFile::open(); let f = File::open("x"); }
#[cfg(test)]
fn helper() { let _ = std::fs::read("x"); let c = '{'; }
#[cfg(test)]
use std::fs::read_to_string;
#[cfg(test)]
mod tests {
    fn t() {
        let s = "}";
        let _ = std::fs::read_to_string("x");
    }
}
fn after() { let mut b = Vec::new(); f.read_to_end(&mut b); }
"#;
    let found: Vec<usize> = reads_in(src).into_iter().map(|(l, _)| l).collect();
    assert_eq!(found, vec![5, 7, 19], "{:?}", reads_in(src));
}
