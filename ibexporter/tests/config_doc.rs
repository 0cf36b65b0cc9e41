//! `docs/config.md` is the config reference a user reads: every section
//! and key the parser accepts has its row there, and the page names no key
//! the parser refuses. The parser's own list comes from its refusal of an
//! unknown key (`expected one of ...`), so nothing here restates it.

use std::collections::BTreeSet;
use std::process::Command;

/// The keys `--check-config` expects where `bogus` stands in `text`.
fn expected(text: &str) -> BTreeSet<String> {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_ibexporter"));
    cmd.arg("--check-config");
    ibtools_tests::doc_table::keys_expected_by(cmd, text)
}

/// Each section of the page (`Top level`, `[local]`, `[[targets.static]]`,
/// ...) with the keys its table rows name (every `` `key` `` of a row's
/// first cell).
fn documented() -> Vec<(String, BTreeSet<String>)> {
    let doc = std::fs::read_to_string(
        std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("docs/config.md"),
    )
    .unwrap();
    let mut out: Vec<(String, BTreeSet<String>)> = Vec::new();
    for line in doc.lines() {
        if line.starts_with("## Top level") {
            out.push((String::new(), BTreeSet::new()));
        } else if let Some(h) = line.strip_prefix("## `[").or(line.strip_prefix("### `[")) {
            let name = h.trim_start_matches('[');
            out.push((name[..name.find(']').unwrap()].to_string(), BTreeSet::new()));
        } else if let (Some(last), true) = (out.last_mut(), line.starts_with("| `")) {
            let first = line.split('|').nth(1).unwrap_or_default();
            last.1
                .extend(first.split('`').skip(1).step_by(2).map(str::to_string));
        }
    }
    out
}

#[test]
fn the_config_page_lists_exactly_the_keys_the_parser_takes() {
    let doc = documented();
    let (top, sections): (Vec<_>, Vec<_>) = doc.iter().partition(|(s, _)| s.is_empty());
    let mut top_level: BTreeSet<String> = top.first().expect("a ## Top level section").1.clone();
    top_level.extend(
        sections
            .iter()
            .filter(|(s, _)| !s.contains('.'))
            .map(|(s, _)| s.clone()),
    );
    assert_eq!(
        top_level,
        expected("bogus = 1\n"),
        "docs/config.md's top level and sections"
    );
    for (section, keys) in &sections {
        // A nested table (`[[targets.static]]`) is a key of its parent.
        let mut keys = keys.clone();
        keys.extend(
            sections
                .iter()
                .filter_map(|(s, _)| s.strip_prefix(&format!("{section}.")).map(str::to_string)),
        );
        let text = match section.split_once('.') {
            Some(_) => format!("[[{section}]]\nbogus = 1\n"),
            None => format!("[{section}]\nbogus = 1\n"),
        };
        assert_eq!(keys, expected(&text), "docs/config.md's [{section}] keys");
    }
    assert!(sections.len() >= 8, "{sections:?}");
}
