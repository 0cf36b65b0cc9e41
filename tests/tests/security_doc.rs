//! SECURITY.md's promises are each checked by a test that exists.
//!
//! The section "Promises and the tests that check them" is a table whose
//! last column names tests as `` `path/to/file.rs::test_name` ``. This
//! test fails when a row names no test, when a named file is missing, or
//! when the file has no `fn test_name(` carrying a `#[test]` (or
//! `#[tokio::test]`) attribute, or a proptest block: a renamed or deleted
//! test cannot leave a promise behind that nothing checks.

use std::path::{Path, PathBuf};

fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("..")
}

const SECTION: &str = "## Promises and the tests that check them";

/// The table rows of the section: (promise, the test references).
fn rows(doc: &str) -> Vec<(String, Vec<String>)> {
    let start = doc
        .find(SECTION)
        .unwrap_or_else(|| panic!("SECURITY.md has no section {SECTION:?}"));
    let body = &doc[start + SECTION.len()..];
    let body = &body[..body.find("\n## ").unwrap_or(body.len())];
    let mut out = Vec::new();
    for line in body.lines() {
        let line = line.trim();
        if !line.starts_with('|') || line.starts_with("|---") || line.starts_with("| promise") {
            continue;
        }
        let cells: Vec<&str> = line.trim_matches('|').split('|').map(str::trim).collect();
        let promise = cells.first().copied().unwrap_or_default().to_string();
        let tests = cells
            .last()
            .copied()
            .unwrap_or_default()
            .split('`')
            .skip(1)
            .step_by(2)
            .map(str::to_string)
            .collect();
        out.push((promise, tests));
    }
    out
}

/// Whether `text` defines a test function `name`: `fn name(` right below
/// a test attribute (other attributes and doc comments may sit between),
/// or inside a `proptest!` block.
fn defines_test(text: &str, name: &str) -> bool {
    let lines: Vec<&str> = text.lines().collect();
    let needle = format!("fn {name}(");
    lines.iter().enumerate().any(|(i, l)| {
        // The attributes and doc comments right above the `fn`.
        let attributed = lines[..i]
            .iter()
            .rev()
            .map(|a| a.trim())
            .take_while(|a| a.starts_with("#[") || a.starts_with("//"))
            .any(|a| a.starts_with("#[test]") || a.starts_with("#[tokio::test"));
        let in_proptest = text[..text.find(&needle).unwrap_or(0)].contains("proptest!");
        l.contains(&needle) && (attributed || in_proptest)
    })
}

#[test]
fn every_promise_names_a_test_that_exists() {
    let doc = std::fs::read_to_string(root().join("SECURITY.md")).unwrap();
    let rows = rows(&doc);
    assert!(
        rows.len() >= 30,
        "the promise table has {} rows; did its header or format change?",
        rows.len()
    );
    let mut problems = Vec::new();
    for (promise, tests) in &rows {
        if tests.is_empty() {
            problems.push(format!("{promise:?} names no test"));
        }
        for t in tests {
            let Some((file, name)) = t.split_once("::") else {
                problems.push(format!(
                    "{promise:?}: {t:?} is not `path/file.rs::test_name`"
                ));
                continue;
            };
            let path = root().join(file);
            match std::fs::read_to_string(&path) {
                Ok(text) if defines_test(&text, name) => {}
                Ok(_) => problems.push(format!("{promise:?}: {file} has no test `{name}`")),
                Err(e) => problems.push(format!("{promise:?}: {file}: {e}")),
            }
        }
    }
    assert!(problems.is_empty(), "SECURITY.md:\n{}", problems.join("\n"));
}

#[test]
fn the_checker_tells_a_missing_test() {
    let text = "#[test]\nfn here() {}\nfn helper() {}\n";
    assert!(defines_test(text, "here"));
    assert!(!defines_test(text, "helper"));
    assert!(!defines_test(text, "gone"));
    let doc = format!(
        "{SECTION}\n\n| promise | tests |\n|---|---|\n| a | `x.rs::here` and `y.rs::there` |\n\n## Next\n| b | `z.rs::no` |\n"
    );
    assert_eq!(
        rows(&doc),
        vec![(
            "a".to_string(),
            vec!["x.rs::here".to_string(), "y.rs::there".to_string()]
        )]
    );
}
