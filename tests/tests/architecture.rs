//! The map of `ARCHITECTURE.md`, enforced: which top-level module of a
//! crate may use which, no import cycle between the files of any crate,
//! clap only where the map allows it, no `try_parse_from` outside tests.
//!
//! How: every `.rs` file of a crate's `src/` is read as text (comments
//! dropped, `#[cfg(test)]` modules dropped). For the layers, each
//! `crate::a::...` path makes an edge from the file's top-level module to
//! `a`. For cycles, every path that names something of the crate makes an
//! edge from the file to the file that defines it (see `import_graph`),
//! and a strongly connected set of files fails the test. A rule change is
//! a change of the tables below and of ARCHITECTURE.md, in the same commit.

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
            ("spec", &[]),
            ("sys", &[]),
            ("clock", &["sys"]),
            ("transport", &["clock", "spec", "sys"]),
            ("verbs", &["clock", "spec", "sys", "transport"]),
            ("probe", &["clock", "spec", "sys", "transport", "verbs"]),
            ("report", &["clock", "probe", "spec", "transport"]),
            (
                "cli",
                &[
                    "clock",
                    "probe",
                    "report",
                    "spec",
                    "sys",
                    "transport",
                    "verbs",
                ],
            ),
        ],
    );
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
            ("limits", &[]),
            ("sys", &[]),
            ("expo", &[]),
            ("config", &["limits"]),
            ("targets", &["config", "limits"]),
            ("collect", &["config", "expo", "limits"]),
            ("http", &["expo", "limits"]),
            ("engine", &["collect", "config", "limits", "targets"]),
            ("localize", &["collect", "limits", "targets"]),
            ("planner", &["config", "localize", "targets"]),
            (
                "daemon",
                &[
                    "collect", "config", "engine", "expo", "http", "limits", "sys", "targets",
                ],
            ),
        ],
    );
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

// The file-level import graph of a crate, and its cycles.
//
// A node is a file of `src/`; an edge `f -> g` is a path in `f` that names
// something `g` defines or re-exports: `crate::a::b::X` goes to the file of
// the longest module prefix (`a/b.rs`, `a/b/mod.rs`, else `a.rs` or
// `a/mod.rs`, else `lib.rs`), and so do `super::`, `self::`, a child
// module's name (`pub use cpulist::CpuSet` in `host/mod.rs`) and a module
// brought in by `use` (`use crate::host; host::root::X` goes to
// `host/root.rs`; naming the module `host` is an edge to `host/mod.rs`).
// `use` groups count element by element. `mod x;` alone is not an edge: declaring a
// child is not using it. A `main.rs` next to a `lib.rs` is its own crate
// root (`crate::` there is `main.rs`).

/// A file's graph: importing file -> imported file -> the first path that
/// says so, as written (for the failure message). Files relative to `src/`.
type Graph = BTreeMap<String, BTreeMap<String, String>>;

/// A file's module path from its crate root: `host/root.rs` -> `host::root`,
/// `host/mod.rs` -> `host`, `lib.rs` and `main.rs` -> the root.
fn module_of(rel: &str) -> Vec<String> {
    let mut parts: Vec<String> = rel
        .trim_end_matches(".rs")
        .split('/')
        .map(str::to_string)
        .collect();
    let last = parts.last().map(String::as_str);
    let is_root = parts.len() == 1 && matches!(last, Some("lib" | "main"));
    if is_root || last == Some("mod") {
        parts.pop();
    }
    parts
}

/// The import graph of one crate's files (`code_only` text, paths relative
/// to `src/`).
fn import_graph(files: &[(String, String)]) -> Graph {
    let has_lib = files.iter().any(|(rel, _)| rel == "lib.rs");
    let tree = |pick_main: bool| -> BTreeMap<Vec<String>, String> {
        files
            .iter()
            .filter(|(rel, _)| (rel == "main.rs") == pick_main)
            .map(|(rel, _)| (module_of(rel), rel.clone()))
            .collect()
    };
    let (lib_tree, main_tree) = if has_lib {
        (tree(false), tree(true))
    } else {
        let all = files
            .iter()
            .map(|(rel, _)| (module_of(rel), rel.clone()))
            .collect();
        (all, BTreeMap::new())
    };
    files
        .iter()
        .map(|(rel, code)| {
            let modules = if has_lib && rel == "main.rs" {
                &main_tree
            } else {
                &lib_tree
            };
            (rel.clone(), file_edges(rel, code, modules))
        })
        .collect()
}

/// One path as written from where it starts: its segments (`crate`,
/// `host`, `CpuSet`), the `as` name it is bound to, and where it stands.
struct Written {
    segs: Vec<String>,
    alias: Option<String>,
    at: usize,
}

/// The edges of one file, given its crate's module tree.
fn file_edges(
    rel: &str,
    code: &str,
    modules: &BTreeMap<Vec<String>, String>,
) -> BTreeMap<String, String> {
    let code = blank_literals(code);
    let here = module_of(rel);
    let inline = inline_modules(&code);
    let module_at = |pos: usize| -> Vec<String> {
        let mut m = here.clone();
        m.extend(
            inline
                .iter()
                .filter(|(span, _)| span.contains(&pos))
                .map(|(_, name)| name.clone()),
        );
        m
    };
    let written = written_paths(&code);
    // Names bound to modules of this crate (`use crate::host;`,
    // `use super::{self as up}`), found to a fixed point so that one alias
    // may lead through another.
    let mut aliases: BTreeMap<String, Vec<String>> = BTreeMap::new();
    loop {
        let before = aliases.len();
        for w in &written {
            let Some(abs) = resolve(&w.segs, &module_at(w.at), &aliases, modules) else {
                continue;
            };
            if modules.contains_key(&abs) && !abs.is_empty() {
                let name = w
                    .alias
                    .clone()
                    .unwrap_or_else(|| abs.last().unwrap().clone());
                aliases.insert(name, abs);
            }
        }
        if aliases.len() == before {
            break;
        }
    }
    let mut edges = BTreeMap::new();
    for w in &written {
        let Some(abs) = resolve(&w.segs, &module_at(w.at), &aliases, modules) else {
            continue;
        };
        let target = (0..=abs.len())
            .rev()
            .find_map(|k| modules.get(&abs[..k]))
            .expect("the crate root is a module");
        if target != rel {
            edges
                .entry(target.clone())
                .or_insert_with(|| w.segs.join("::"));
        }
    }
    edges
}

/// A written path as a module path from the crate root, when it names
/// something of this crate: `crate::`/`$crate::`, `super::` (any number),
/// `self::`, a child module of `at`, or a name bound to a module.
fn resolve(
    segs: &[String],
    at: &[String],
    aliases: &BTreeMap<String, Vec<String>>,
    modules: &BTreeMap<Vec<String>, String>,
) -> Option<Vec<String>> {
    let (first, rest) = segs.split_first()?;
    let mut abs = match first.as_str() {
        "crate" => rest.to_vec(),
        "self" => [at, rest].concat(),
        "super" => {
            let mut base = at.to_vec();
            let mut rest = segs;
            while rest.first().is_some_and(|s| s == "super") {
                base.pop()?;
                rest = &rest[1..];
            }
            [base.as_slice(), rest].concat()
        }
        name => {
            let child = [at, &[name.to_string()]].concat();
            if modules.contains_key(&child) {
                [at, segs].concat()
            } else {
                [aliases.get(name)?.as_slice(), rest].concat()
            }
        }
    };
    if abs.last().is_some_and(|s| s == "self") {
        abs.pop();
    }
    Some(abs)
}

/// Every path of `code` that starts at an identifier followed by `::`,
/// with `use` groups expanded (`a::{b, c::d}` -> `a::b`, `a::c::d`).
fn written_paths(code: &str) -> Vec<Written> {
    let b = code.as_bytes();
    let is_ident = |c: u8| c.is_ascii_alphanumeric() || c == b'_';
    let mut out = Vec::new();
    let mut i = 0;
    while i < b.len() {
        let starts = is_ident(b[i]) && !b[i].is_ascii_digit() && (i == 0 || !is_ident(b[i - 1]));
        if !starts {
            i += 1;
            continue;
        }
        let mut j = i;
        while j < b.len() && is_ident(b[j]) {
            j += 1;
        }
        // Bytes, not `str` slices: `i` may follow a multi-byte character.
        let after_colons = b[..i].trim_ascii_end().ends_with(b"::");
        if after_colons || !b[j..].trim_ascii_start().starts_with(b"::") {
            i = j;
            continue;
        }
        let mut found = Vec::new();
        let mut end = i;
        parse_tree(b, &mut end, Vec::new(), &mut found);
        out.extend(
            found
                .into_iter()
                .map(|(segs, alias)| Written { segs, alias, at: i }),
        );
        i = end.max(j);
    }
    out
}

/// Parses one path tree at `b[*i..]` (`a::b::{c as d, e::*}`) into its
/// leaves, each with its `as` name.
fn parse_tree(
    b: &[u8],
    i: &mut usize,
    mut prefix: Vec<String>,
    out: &mut Vec<(Vec<String>, Option<String>)>,
) {
    let skip_ws = |i: &mut usize| {
        while *i < b.len() && b[*i].is_ascii_whitespace() {
            *i += 1;
        }
    };
    let ident = |i: &mut usize| -> Option<String> {
        let s = *i;
        while *i < b.len() && (b[*i].is_ascii_alphanumeric() || b[*i] == b'_') {
            *i += 1;
        }
        (*i > s).then(|| String::from_utf8_lossy(&b[s..*i]).into_owned())
    };
    loop {
        skip_ws(i);
        match b.get(*i) {
            Some(b'{') => {
                *i += 1;
                loop {
                    skip_ws(i);
                    if b.get(*i).is_none_or(|&c| c == b'}') {
                        *i += 1;
                        return;
                    }
                    let before = *i;
                    parse_tree(b, i, prefix.clone(), out);
                    skip_ws(i);
                    if b.get(*i) == Some(&b',') {
                        *i += 1;
                    } else if *i == before {
                        return;
                    }
                }
            }
            Some(b'*') => {
                *i += 1;
                out.push((prefix, None));
                return;
            }
            _ => {}
        }
        // `$crate::` in a macro is `crate::`.
        if b.get(*i) == Some(&b'$') {
            *i += 1;
        }
        let Some(id) = ident(i) else {
            if !prefix.is_empty() {
                out.push((prefix, None));
            }
            return;
        };
        prefix.push(id);
        let mut k = *i;
        skip_ws(&mut k);
        if b[k..].starts_with(b"::") {
            *i = k + 2;
            continue;
        }
        let mut alias = None;
        if b[k..].starts_with(b"as") && b.get(k + 2).is_some_and(u8::is_ascii_whitespace) {
            let mut a = k + 2;
            skip_ws(&mut a);
            if let Some(name) = ident(&mut a) {
                alias = Some(name);
                *i = a;
            }
        }
        out.push((prefix, alias));
        return;
    }
}

/// `code` with the insides of string and char literals and `/* */`
/// comments blanked (same length), so that braces and paths in text count
/// for nothing.
fn blank_literals(code: &str) -> String {
    let mut b = code.as_bytes().to_vec();
    let mut i = 0;
    let blank = |b: &mut Vec<u8>, from: usize, to: usize| {
        let to = to.min(b.len());
        for c in &mut b[from.min(to)..to] {
            *c = b' ';
        }
    };
    while i < b.len() {
        match b[i] {
            b'/' if b.get(i + 1) == Some(&b'*') => {
                let end = code[i + 2..].find("*/").map_or(b.len(), |e| i + 2 + e + 2);
                blank(&mut b, i, end);
                i = end;
            }
            b'r' if matches!(b.get(i + 1), Some(b'"' | b'#'))
                && (i == 0 || !b[i - 1].is_ascii_alphanumeric()) =>
            {
                let hashes = b[i + 1..].iter().take_while(|&&c| c == b'#').count();
                if b.get(i + 1 + hashes) != Some(&b'"') {
                    i += 1;
                    continue;
                }
                let close = format!("\"{}", "#".repeat(hashes));
                let from = i + 2 + hashes;
                let end = code[from..].find(&close).map_or(b.len(), |e| from + e);
                blank(&mut b, from, end);
                i = end + close.len();
            }
            b'"' => {
                let mut j = i + 1;
                while j < b.len() && b[j] != b'"' {
                    j += if b[j] == b'\\' { 2 } else { 1 };
                }
                blank(&mut b, i + 1, j);
                i = j + 1;
            }
            b'\'' => {
                // A char literal ('x', '\n', '\u{7f}'); else a lifetime.
                let end = if b.get(i + 1) == Some(&b'\\') {
                    b[i + 2..]
                        .iter()
                        .position(|&c| c == b'\'')
                        .map(|e| i + 2 + e)
                } else {
                    let len = code[i + 1..].chars().next().map_or(1, char::len_utf8);
                    (b.get(i + 1 + len) == Some(&b'\'')).then_some(i + 1 + len)
                };
                match end {
                    Some(e) => {
                        blank(&mut b, i + 1, e);
                        i = e + 1;
                    }
                    None => i += 1,
                }
            }
            _ => i += 1,
        }
    }
    String::from_utf8_lossy(&b).into_owned()
}

/// The inline modules of `code` (`mod peer { ... }`): where each spans,
/// and its name.
fn inline_modules(code: &str) -> Vec<(std::ops::Range<usize>, String)> {
    let b = code.as_bytes();
    let mut out = Vec::new();
    for (at, _) in code.match_indices("mod ") {
        if at > 0 && (b[at - 1].is_ascii_alphanumeric() || b[at - 1] == b'_') {
            continue;
        }
        let rest = code[at + 4..].trim_start();
        let name_len = rest
            .find(|c: char| !(c.is_ascii_alphanumeric() || c == '_'))
            .unwrap_or(rest.len());
        if name_len == 0 || !rest[name_len..].trim_start().starts_with('{') {
            continue;
        }
        let open = at + 4 + (code[at + 4..].len() - rest.len()) + name_len;
        let open = open + code[open..].find('{').unwrap();
        let mut depth = 0usize;
        let mut close = b.len();
        for (k, &c) in b.iter().enumerate().skip(open) {
            match c {
                b'{' => depth += 1,
                b'}' => {
                    depth -= 1;
                    if depth == 0 {
                        close = k;
                        break;
                    }
                }
                _ => {}
            }
        }
        out.push((open..close, rest[..name_len].to_string()));
    }
    out
}

/// The strongly connected components of more than one file (Tarjan).
fn cycles(graph: &Graph) -> Vec<Vec<String>> {
    struct Walk<'g> {
        graph: &'g Graph,
        index: BTreeMap<&'g str, usize>,
        low: BTreeMap<&'g str, usize>,
        stack: Vec<&'g str>,
        on_stack: BTreeSet<&'g str>,
        out: Vec<Vec<String>>,
    }
    impl<'g> Walk<'g> {
        fn visit(&mut self, v: &'g str) {
            let n = self.index.len();
            self.index.insert(v, n);
            self.low.insert(v, n);
            self.stack.push(v);
            self.on_stack.insert(v);
            for w in self.graph.get(v).into_iter().flat_map(BTreeMap::keys) {
                if !self.index.contains_key(w.as_str()) {
                    self.visit(w);
                    let lw = self.low[w.as_str()];
                    let lv = self.low.get_mut(v).unwrap();
                    *lv = (*lv).min(lw);
                } else if self.on_stack.contains(w.as_str()) {
                    let iw = self.index[w.as_str()];
                    let lv = self.low.get_mut(v).unwrap();
                    *lv = (*lv).min(iw);
                }
            }
            if self.low[v] == self.index[v] {
                let mut scc = Vec::new();
                while let Some(w) = self.stack.pop() {
                    self.on_stack.remove(w);
                    scc.push(w.to_string());
                    if w == v {
                        break;
                    }
                }
                if scc.len() > 1 {
                    scc.sort();
                    self.out.push(scc);
                }
            }
        }
    }
    let mut walk = Walk {
        graph,
        index: BTreeMap::new(),
        low: BTreeMap::new(),
        stack: Vec::new(),
        on_stack: BTreeSet::new(),
        out: Vec::new(),
    };
    for v in graph.keys() {
        if !walk.index.contains_key(v.as_str()) {
            walk.visit(v);
        }
    }
    walk.out.sort();
    walk.out
}

/// One way round a cycle, from its first file back to it (shortest, inside
/// the cycle): `a.rs -(crate::b::X)-> b.rs -(crate::a::Y)-> a.rs`.
fn way_round(graph: &Graph, scc: &[String]) -> String {
    let start = &scc[0];
    let mut came_from: BTreeMap<&String, (&String, &String)> = BTreeMap::new();
    let mut queue = std::collections::VecDeque::from([start]);
    'search: while let Some(v) = queue.pop_front() {
        for (w, path) in &graph[v] {
            if !scc.contains(w) || came_from.contains_key(w) {
                continue;
            }
            came_from.insert(w, (v, path));
            if w == start {
                break 'search;
            }
            queue.push_back(w);
        }
    }
    let mut steps = Vec::new();
    let mut at = start;
    while let Some((from, path)) = came_from.get(at) {
        steps.push(format!(" -({path})-> {at}"));
        at = from;
        if at == start {
            break;
        }
    }
    steps.reverse();
    format!("{start}{}", steps.concat())
}

/// Every import cycle of one crate, as "N files: ...; one way round: ...".
fn import_cycles(krate: &str) -> Vec<String> {
    let src = root().join(krate).join("src");
    let files: Vec<(String, String)> = sources(&src)
        .into_iter()
        .map(|(f, code)| {
            (
                f.strip_prefix(&src).unwrap().to_string_lossy().to_string(),
                code,
            )
        })
        .collect();
    let graph = import_graph(&files);
    cycles(&graph)
        .iter()
        .map(|scc| {
            format!(
                "{} files: {}; one way round: {}",
                scc.len(),
                scc.join(", "),
                way_round(&graph, scc)
            )
        })
        .collect()
}

/// The workspace's member crates, from the root `Cargo.toml`.
fn workspace_crates() -> Vec<String> {
    let manifest = std::fs::read_to_string(root().join("Cargo.toml")).unwrap();
    let line = manifest
        .lines()
        .find(|l| l.trim_start().starts_with("members"))
        .expect("a members line in Cargo.toml");
    line.split('"')
        .skip(1)
        .step_by(2)
        .map(str::to_string)
        .collect()
}

#[test]
fn no_crate_has_an_import_cycle() {
    let crates = workspace_crates();
    for known in [
        "ibhost",
        "ibstats",
        "ibnoise",
        "ibtune",
        "ibprobe",
        "ibexporter",
        "ibdoc",
        "tests",
    ] {
        assert!(
            crates.iter().any(|c| c == known),
            "{known} missing from {crates:?}"
        );
    }
    let mut found = Vec::new();
    for krate in &crates {
        let cycles = import_cycles(krate);
        eprintln!("{krate}: {} import cycle(s)", cycles.len());
        found.extend(cycles.into_iter().map(|c| format!("{krate}/src: {c}")));
    }
    assert!(
        found.is_empty(),
        "files that import, through others, themselves; import a thing from the file \
         that defines it, or move it to the lower layer (ARCHITECTURE.md):\n{}",
        found.join("\n")
    );
}

/// A crate of `(file, code)` pairs, as `sources` would read it.
fn synthetic(files: &[(&str, &str)]) -> Graph {
    let files: Vec<(String, String)> = files
        .iter()
        .map(|(f, c)| (f.to_string(), code_only(c)))
        .collect();
    import_graph(&files)
}

#[test]
fn the_cycle_finder_sees_a_cycle_through_a_re_export() {
    // The shape ibtune once had: a low file takes a type through a folder's
    // `mod.rs` re-export while a file of that folder calls the low file.
    let cyclic = [
        ("lib.rs", "pub mod host;\npub mod sys;\n"),
        (
            "host/mod.rs",
            "pub mod cpulist;\npub mod root;\npub use cpulist::CpuSet;\npub use root::Root;\n",
        ),
        ("host/cpulist.rs", "pub struct CpuSet;\n"),
        (
            "host/root.rs",
            "use crate::sys::openat2;\npub struct Root;\n",
        ),
        ("sys.rs", "use crate::host::CpuSet;\npub fn openat2() {}\n"),
    ];
    let graph = synthetic(&cyclic);
    let found = cycles(&graph);
    assert_eq!(
        found,
        vec![vec!["host/mod.rs", "host/root.rs", "sys.rs"]],
        "{graph:?}"
    );
    assert_eq!(
        way_round(&graph, &found[0]),
        "host/mod.rs -(root::Root)-> host/root.rs -(crate::sys::openat2)-> sys.rs \
         -(crate::host::CpuSet)-> host/mod.rs"
    );
    // Taken from where it is defined, the type no longer closes the loop.
    let mut fixed = cyclic;
    fixed[4].1 = "use crate::host::cpulist::CpuSet;\npub fn openat2() {}\n";
    assert_eq!(cycles(&synthetic(&fixed)), Vec::<Vec<String>>::new());
}

#[test]
fn the_graph_follows_every_kind_of_path() {
    let graph = synthetic(&[
        ("lib.rs", "pub mod a;\npub mod b;\npub mod c;\n"),
        (
            "a/mod.rs",
            "mod x;\nmod y;\nuse crate::{b::{self as bee, Thing}, c};\n\
             fn f() { bee::g(); c::inner::h(); x::k(); }\n\
             mod inline { use super::y::Z; }\n",
        ),
        ("a/x.rs", "use super::super::b::Other;\n"),
        (
            "a/y.rs",
            "pub struct Z;\nuse self::nothing;\nconst B: char = '{';\nconst S: &str = \"é\";é::x();\n",
        ),
        (
            "b.rs",
            "macro_rules! m { () => { $crate::a::x::K }; }\nlet s = \"crate::c::\";\n",
        ),
        ("c/mod.rs", "pub mod inner;\n"),
        (
            "c/inner.rs",
            "/* crate::b */ fn h() {}\n#[cfg(test)]\nmod tests { use crate::a; }\n",
        ),
    ]);
    let edges = |f: &str| graph[f].keys().cloned().collect::<Vec<_>>();
    // A group, a module alias (`bee::g`), a path through a child module
    // (`c::inner::h`), a child (`x::k`), `super::` out of an inline module.
    // Naming a module (`c`) is an edge to its file too.
    assert_eq!(
        edges("a/mod.rs"),
        ["a/x.rs", "a/y.rs", "b.rs", "c/inner.rs", "c/mod.rs"]
    );
    assert_eq!(edges("a/x.rs"), ["b.rs"]);
    assert_eq!(edges("b.rs"), ["a/x.rs"]);
    // Strings, comments, tests and a path to the file itself are no edges.
    assert!(edges("a/y.rs").is_empty() && edges("c/inner.rs").is_empty());
    assert_eq!(graph["a/x.rs"]["b.rs"], "super::super::b::Other");
    // a/mod.rs -> a/x.rs -> b.rs -> a/x.rs: one cycle of two files.
    assert_eq!(cycles(&graph), vec![vec!["a/x.rs", "b.rs"]]);
}
