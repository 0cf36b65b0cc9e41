//! Writes the index of the two folders whose files are their own entries,
//! so that adding one is adding its file (ARCHITECTURE.md counts it):
//!
//! - `src/report/format/*.rs`, one output format each: the file's name is
//!   the word of `--format`, and its `word!(PLACE, "HELP")` line says where
//!   the word stands in `--format`'s list and its help line. Written to
//!   `$OUT_DIR/formats.rs`, included by `report/format/mod.rs`: the `mod`
//!   lines, the `Format` vocabulary in PLACE order, and `output`, one arm
//!   per format calling its file's `render`.
//! - `src/probe/workload/*.rs`: `$OUT_DIR/workloads.rs`, included by
//!   `probe/workload/mod.rs`, is a `pub mod` line per file; and
//!   `$OUT_DIR/served.rs`, included by `probe/executor/served.rs`, is
//!   `serve_paired`: one arm per `impl Served for TYPE` (its
//!   `const WORD: StreamWorkload = StreamWorkload::NAME;`), so a server
//!   answers a paired workload once its file says it can.
//!
//! The generated files name each source by its absolute path (`#[path]`):
//! a `mod` line in an included file is otherwise looked for in `$OUT_DIR`.
//! Open them under `target/*/build/ibprobe-*/out/` to read what was made.

use std::fmt::Write as _;
use std::fs;
use std::path::{Path, PathBuf};

fn main() {
    let src = PathBuf::from(env("CARGO_MANIFEST_DIR")).join("src");
    let out = PathBuf::from(env("OUT_DIR"));
    let formats = src.join("report/format");
    let workloads = src.join("probe/workload");
    for dir in [&formats, &workloads] {
        println!("cargo:rerun-if-changed={}", dir.display());
    }
    write(&out.join("formats.rs"), &format_index(&files(&formats)));
    let wl = files(&workloads);
    write(&out.join("workloads.rs"), &mod_lines(&wl, "pub "));
    write(&out.join("served.rs"), &served_index(&wl));
}

fn env(name: &str) -> String {
    std::env::var(name).unwrap_or_else(|_| panic!("cargo sets {name} for a build script"))
}

fn write(path: &Path, text: &str) {
    let text =
        format!("// Written by ibprobe/build.rs; edit the folder's files, not this.\n{text}");
    fs::write(path, text).unwrap_or_else(|e| panic!("writing {}: {e}", path.display()));
}

/// A module file of a folder: its name (the module's) and its text.
struct Source {
    stem: String,
    path: PathBuf,
    text: String,
}

/// The `.rs` files of `dir` but `mod.rs`, by name; each is watched.
fn files(dir: &Path) -> Vec<Source> {
    let list = fs::read_dir(dir).unwrap_or_else(|e| panic!("listing {}: {e}", dir.display()));
    let mut out: Vec<Source> = list
        .map(|e| e.expect("a folder entry").path())
        .filter(|p| p.extension().is_some_and(|x| x == "rs"))
        .filter(|p| p.file_name().is_some_and(|n| n != "mod.rs"))
        .map(|path| {
            println!("cargo:rerun-if-changed={}", path.display());
            let text = fs::read_to_string(&path)
                .unwrap_or_else(|e| panic!("reading {}: {e}", path.display()));
            let stem = path
                .file_stem()
                .expect("a .rs file")
                .to_string_lossy()
                .into_owned();
            Source { stem, path, text }
        })
        .collect();
    out.sort_by(|a, b| a.stem.cmp(&b.stem));
    out
}

/// A `mod` line per file, naming its path (see the module doc).
fn mod_lines(files: &[Source], vis: &str) -> String {
    let mut out = String::new();
    for f in files {
        let path = f.path.to_str().expect("a UTF-8 source path");
        writeln!(out, "#[path = {path:?}]\n{vis}mod {};", f.stem).unwrap();
    }
    out
}

/// `table` -> `Table`, `per_cpu` -> `PerCpu`: a word's variant.
fn variant(stem: &str) -> String {
    stem.split(['_', '-'])
        .map(|w| {
            let mut c = w.chars();
            c.next()
                .map_or(String::new(), |f| f.to_uppercase().chain(c).collect())
        })
        .collect()
}

/// A format file's `word!(PLACE, "HELP")`: PLACE and HELP as written (the
/// string literal with its quotes, copied as it is).
fn format_word(f: &Source) -> (u32, String) {
    let fail = |why: &str| -> ! {
        panic!(
            "{}: {why}; every file of report/format/ is a format and says `word!(PLACE, \"HELP\");` (see report/format/mod.rs)",
            f.path.display()
        )
    };
    let at = f
        .text
        .lines()
        .position(|l| l.trim_start().starts_with("word!("))
        .unwrap_or_else(|| fail("no `word!(` line"));
    let rest: String = f.text.lines().skip(at).collect::<Vec<_>>().join("\n");
    let rest = rest.trim_start()["word!(".len()..].trim_start();
    let digits = rest
        .find(|c: char| !c.is_ascii_digit())
        .unwrap_or(rest.len());
    let place = rest[..digits]
        .parse()
        .unwrap_or_else(|_| fail("PLACE is not a number"));
    let rest = rest[digits..].trim_start();
    let rest = rest
        .strip_prefix(',')
        .unwrap_or_else(|| fail("no `,` after PLACE"))
        .trim_start();
    if !rest.starts_with('"') {
        fail("HELP is not a string literal");
    }
    // The literal ends at the first quote not escaped by a backslash.
    let mut escaped = false;
    let end = rest[1..]
        .char_indices()
        .find(|&(_, c)| {
            let closes = c == '"' && !escaped;
            escaped = c == '\\' && !escaped;
            closes
        })
        .map(|(i, _)| i + 2)
        .unwrap_or_else(|| fail("HELP's string literal does not end"));
    (place, rest[..end].to_string())
}

fn format_index(files: &[Source]) -> String {
    let mut words: Vec<(u32, String, &Source)> = files
        .iter()
        .map(|f| {
            let (place, help) = format_word(f);
            (place, help, f)
        })
        .collect();
    words.sort_by_key(|w| w.0);
    for pair in words.windows(2) {
        assert!(
            pair[0].0 != pair[1].0,
            "report/format/{}.rs and {}.rs both say place {}: each format has its own place in --format's list",
            pair[0].2.stem,
            pair[1].2.stem,
            pair[0].0
        );
    }
    let mut out = mod_lines(files, "");
    out.push_str(
        "\nibhost::vocabulary! {\n    \
         /// An output format (`--format`), one per file of `report/format/`.\n    \
         /// Each command offers those its report has (`cli/args.rs`).\n    \
         Format, \"format\" {\n",
    );
    for (_, help, f) in &words {
        let word = f.stem.replace('_', "-");
        writeln!(out, "        {} = {word:?}, {help};", variant(&f.stem)).unwrap();
    }
    out.push_str(
        "    }\n}\n\n/// `doc` in `format`, or None when it has no data for that format.\n\
         fn output(doc: &dyn Document, format: Format) -> Option<String> {\n    match format {\n",
    );
    for (_, _, f) in &words {
        writeln!(
            out,
            "        Format::{} => {}::render(doc),",
            variant(&f.stem),
            f.stem
        )
        .unwrap();
    }
    out.push_str("    }\n}\n");
    out
}

/// The type of a workload file's `impl Served for TYPE` and the word of
/// its `const WORD: StreamWorkload = StreamWorkload::NAME;` (None: the
/// file serves nothing).
fn served_by(f: &Source) -> Option<(String, String)> {
    let line = f
        .text
        .lines()
        .find(|l| l.trim_start().starts_with("impl") && l.contains(" Served for "))?;
    let ty = line
        .split(" Served for ")
        .nth(1)
        .expect("split on a found pattern");
    let ty: String = ty
        .chars()
        .take_while(|c| c.is_alphanumeric() || *c == '_')
        .collect();
    let word = f
        .text
        .lines()
        .find_map(|l| l.trim().strip_prefix("const WORD: StreamWorkload = StreamWorkload::"))
        .and_then(|w| w.strip_suffix(';'))
        .unwrap_or_else(|| {
            panic!(
                "{}: `impl Served for {ty}` without `const WORD: StreamWorkload = StreamWorkload::NAME;` on one line",
                f.path.display()
            )
        });
    Some((ty, word.to_string()))
}

fn served_index(files: &[Source]) -> String {
    let mut out = String::from(
        "/// Answers the paired workload `word` names for a client on another\n\
         /// host: [`serve_one`] with the type whose file serves it.\n\
         pub fn serve_paired<R: ReplyTo>(\n    word: StreamWorkload,\n    end: &mut dyn SlotEnd,\n    \
         asked: &Asked<'_>,\n    cpu: Option<usize>,\n    client: &mut R,\n\
         ) -> Result<Answered, ServeError<R::Error>> {\n    match word {\n",
    );
    for f in files {
        if let Some((ty, word)) = served_by(f) {
            writeln!(
                out,
                "        StreamWorkload::{word} => serve_one::<crate::probe::workload::{}::{ty}, R>(end, asked, cpu, client),",
                f.stem
            )
            .unwrap();
        }
    }
    out.push_str("    }\n}\n");
    out
}
