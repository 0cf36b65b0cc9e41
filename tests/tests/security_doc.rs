//! SECURITY.md's promises are each checked by a test that exists.
//!
//! The section "Promises and the tests that check them" is a table whose
//! last column names tests as `` `path/to/file.rs::test_name` ``. This
//! test fails when a row names no test, when a named file is missing, or
//! when the file has no `fn test_name(` carrying a `#[test]` (or
//! `#[tokio::test]`) attribute, or a proptest block: a renamed or deleted
//! test cannot leave a promise behind that nothing checks.

use std::path::{Path, PathBuf};

use ibtools_tests::doc_table::{missing_test, rows, test_refs};

fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("..")
}

const SECTION: &str = "## Promises and the tests that check them";

#[test]
fn every_promise_names_a_test_that_exists() {
    let doc = std::fs::read_to_string(root().join("SECURITY.md")).unwrap();
    let rows = rows(&doc, SECTION, "promise");
    assert!(
        rows.len() >= 30,
        "the promise table has {} rows; did its header or format change?",
        rows.len()
    );
    let mut problems = Vec::new();
    for cells in &rows {
        let promise = cells.first().cloned().unwrap_or_default();
        let tests = test_refs(cells.last().map_or("", String::as_str));
        if tests.is_empty() {
            problems.push(format!("{promise:?} names no test"));
        }
        for t in tests {
            if let Some(p) = missing_test(&root(), &t) {
                problems.push(format!("{promise:?}: {p}"));
            }
        }
    }
    assert!(problems.is_empty(), "SECURITY.md:\n{}", problems.join("\n"));
}
