//! The map of `ARCHITECTURE.md`, enforced: which top-level module of a
//! crate may use which, no import cycle between the files of a folder,
//! clap only where the map allows it, no `try_parse_from` outside tests.
//!
//! How: every `.rs` file of a crate's `src/` is read as text (comments
//! dropped, `#[cfg(test)]` modules dropped), and each `crate::a::...`
//! path makes an edge from the file's top-level module to `a`; each
//! `super::b` path in `folder/x.rs` makes an edge `x -> b` between the
//! files of that folder. A rule change is a change of the tables below
//! and of ARCHITECTURE.md, in the same commit.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("..")
}

/// Every `.rs` file under `dir`, with its text minus comments and
/// `#[cfg(test)]` modules.
fn sources(dir: &Path) -> Vec<(PathBuf, String)> {
    let mut out = Vec::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        for e in std::fs::read_dir(&d).unwrap() {
            let p = e.unwrap().path();
            if p.is_dir() {
                stack.push(p);
            } else if p.extension().is_some_and(|x| x == "rs") {
                let text = std::fs::read_to_string(&p).unwrap();
                out.push((p, code_only(&text)));
            }
        }
    }
    out.sort();
    out
}

/// The code of a file: `//` comments and everything from `#[cfg(test)]`
/// on (test modules sit at the end of a file in this workspace) dropped.
fn code_only(text: &str) -> String {
    let mut out = String::new();
    for line in text.lines() {
        if line.trim_start().starts_with("#[cfg(test)]") {
            break;
        }
        let code = match line.find("//") {
            // A `//` inside a string (e.g. "http://") is kept.
            Some(i) if line[..i].matches('"').count() % 2 == 0 => &line[..i],
            _ => line,
        };
        out.push_str(code);
        out.push('\n');
    }
    out
}

/// The identifiers that follow `prefix` in `code` (`crate::` -> `spec`).
fn after<'a>(code: &'a str, prefix: &str) -> BTreeSet<&'a str> {
    let mut out = BTreeSet::new();
    for (i, _) in code.match_indices(prefix) {
        let before = code[..i].chars().last();
        if before.is_some_and(|c| c.is_alphanumeric() || c == '_') {
            continue;
        }
        let rest = &code[i + prefix.len()..];
        let end = rest
            .find(|c: char| !(c.is_alphanumeric() || c == '_'))
            .unwrap_or(rest.len());
        if end > 0 {
            out.insert(&rest[..end]);
        }
    }
    out
}

/// The top-level module of a file under `src` (`verbs/setup.rs` -> `verbs`).
fn top(src: &Path, file: &Path) -> String {
    let rel = file.strip_prefix(src).unwrap();
    let first = rel
        .components()
        .next()
        .unwrap()
        .as_os_str()
        .to_string_lossy();
    first.trim_end_matches(".rs").to_string()
}

/// Checks a crate against its layer table: `(module, modules it may use)`.
fn check_layers(krate: &str, rules: &[(&str, &[&str])]) {
    let src = root().join(krate).join("src");
    let allowed: BTreeMap<&str, &[&str]> = rules.iter().copied().collect();
    let mut bad = Vec::new();
    for (file, code) in sources(&src) {
        let from = top(&src, &file);
        if from == "lib" || from == "main" {
            continue;
        }
        let Some(ok) = allowed.get(from.as_str()) else {
            bad.push(format!(
                "{}: module {from} is not in the map",
                file.display()
            ));
            continue;
        };
        // Only modules count (items of lib.rs itself, e.g. a VERSION
        // constant, are the crate's root, usable from anywhere).
        let is_module = |m: &str| src.join(format!("{m}.rs")).exists() || src.join(m).is_dir();
        for to in after(&code, "crate::") {
            if to != from && is_module(to) && !ok.contains(&to) {
                bad.push(format!("{}: {from} uses crate::{to}", file.display()));
            }
        }
    }
    assert!(
        bad.is_empty(),
        "{krate}: imports outside the map:\n{}",
        bad.join("\n")
    );
}

/// No cycle between the files of any folder of `krate` (`super::x` edges).
fn check_no_cycles(krate: &str) {
    let src = root().join(krate).join("src");
    let mut edges: BTreeMap<(PathBuf, String), BTreeSet<String>> = BTreeMap::new();
    for (file, code) in sources(&src) {
        let dir = file.parent().unwrap().to_path_buf();
        let name = file.file_stem().unwrap().to_string_lossy().to_string();
        if name == "mod" || name == "lib" || name == "main" {
            continue;
        }
        let deps = after(&code, "super::")
            .into_iter()
            .filter(|d| dir.join(format!("{d}.rs")).exists() || dir.join(d).is_dir())
            .map(str::to_string)
            .collect();
        edges.insert((dir, name), deps);
    }
    fn reaches(
        edges: &BTreeMap<(PathBuf, String), BTreeSet<String>>,
        dir: &Path,
        from: &str,
        target: &str,
        seen: &mut BTreeSet<String>,
    ) -> bool {
        let Some(next) = edges.get(&(dir.to_path_buf(), from.to_string())) else {
            return false;
        };
        next.iter().any(|n| {
            n == target || (seen.insert(n.clone()) && reaches(edges, dir, n, target, seen))
        })
    }
    let mut cycles = Vec::new();
    for (dir, name) in edges.keys() {
        if reaches(&edges, dir, name, name, &mut BTreeSet::new()) {
            cycles.push(format!("{}/{name}.rs", dir.display()));
        }
    }
    assert!(
        cycles.is_empty(),
        "{krate}: files in an import cycle: {cycles:?}"
    );
}

/// Files of `krate` that mention `needle` in code, outside `allowed`
/// (paths relative to the crate's `src/`, a folder ends with `/`).
fn mentions_outside(krate: &str, needle: &str, allowed: &[&str]) -> Vec<String> {
    let src = root().join(krate).join("src");
    sources(&src)
        .into_iter()
        .filter(|(_, code)| code.contains(needle))
        .map(|(f, _)| f.strip_prefix(&src).unwrap().to_string_lossy().to_string())
        .filter(|rel| {
            !allowed
                .iter()
                .any(|a| rel == a || (a.ends_with('/') && rel.starts_with(a)))
        })
        .collect()
}

#[test]
fn ibprobe_follows_its_map() {
    check_layers(
        "ibprobe",
        &[
            ("words", &["spec"]),
            ("stats", &[]),
            ("spec", &["words"]),
            ("sys", &[]),
            ("counters", &["stats"]),
            ("clock", &["sys", "words"]),
            ("transport", &["clock", "spec", "sys"]),
            ("verbs", &["clock", "spec", "sys", "transport"]),
            (
                "probe",
                &[
                    "clock",
                    "counters",
                    "spec",
                    "stats",
                    "sys",
                    "transport",
                    "verbs",
                ],
            ),
            (
                "report",
                &[
                    "clock",
                    "counters",
                    "probe",
                    "spec",
                    "stats",
                    "transport",
                    "words",
                ],
            ),
            (
                "cli",
                &[
                    "clock",
                    "counters",
                    "probe",
                    "report",
                    "spec",
                    "stats",
                    "sys",
                    "transport",
                    "verbs",
                ],
            ),
        ],
    );
    check_no_cycles("ibprobe");
    assert_eq!(
        mentions_outside("ibprobe", "clap", &["cli/"]),
        Vec::<String>::new(),
        "clap outside ibprobe/src/cli"
    );
}

#[test]
fn ibexporter_follows_its_map() {
    check_layers(
        "ibexporter",
        &[
            ("sys", &[]),
            ("expo", &[]),
            ("config", &[]),
            ("targets", &["config"]),
            ("collect", &["config", "expo"]),
            ("http", &["expo"]),
            ("engine", &["collect", "config", "targets"]),
            ("planner", &["config", "targets"]),
            (
                "daemon",
                &[
                    "collect", "config", "engine", "expo", "http", "sys", "targets",
                ],
            ),
        ],
    );
    check_no_cycles("ibexporter");
    assert_eq!(
        mentions_outside("ibexporter", "clap", &["main.rs"]),
        Vec::<String>::new(),
        "clap outside ibexporter/src/main.rs"
    );
}

#[test]
fn no_argv_is_built_at_run_time() {
    for krate in ["ibprobe", "ibexporter", "ibtune"] {
        assert_eq!(
            mentions_outside(krate, "try_parse_from", &[]),
            Vec::<String>::new(),
            "{krate}: try_parse_from outside tests"
        );
    }
}

#[test]
fn the_checker_sees_what_it_checks() {
    // Self-test: the helpers find edges, cycles and mentions in text.
    let code = code_only("use crate::spec::X; // crate::cli\nfn f() { super::b::g(); }\n#[cfg(test)]\nuse crate::cli;");
    assert_eq!(after(&code, "crate::"), BTreeSet::from(["spec"]));
    assert_eq!(after(&code, "super::"), BTreeSet::from(["b"]));
    assert!(code_only("let u = \"http://x\";").contains("http://x"));
}
