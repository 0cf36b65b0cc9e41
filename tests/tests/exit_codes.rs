//! `docs/exit-codes.md` is the table the tools use (`ibhost::exit`), and
//! every code a tool exits with is made to happen by a test that exists.

use std::path::{Path, PathBuf};

use ibtools_tests::doc_table::{missing_test, rows, test_refs};

fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("..")
}

const SECTION: &str = "## The table and the tests that hold it";

#[test]
fn the_doc_is_the_table_and_every_cell_names_a_test() {
    let doc = std::fs::read_to_string(root().join("docs/exit-codes.md")).unwrap();
    let rows = rows(&doc, SECTION, "code");
    let codes: Vec<u8> = rows.iter().map(|r| r[0].parse().unwrap()).collect();
    let table: Vec<u8> = ibhost::exit::TABLE.iter().map(|(_, c, _)| *c).collect();
    assert_eq!(
        codes, table,
        "docs/exit-codes.md lists other codes than ibhost::exit::TABLE"
    );
    let mut problems = Vec::new();
    for r in &rows {
        assert_eq!(
            r.len(),
            5,
            "code {}: not | code | meaning | ibtune | ibprobe | ibexporter |",
            r[0]
        );
        for (tool, cell) in ["ibtune", "ibprobe", "ibexporter"].iter().zip(&r[2..]) {
            let refs = test_refs(cell);
            if !cell.starts_with('-') && refs.is_empty() {
                problems.push(format!("code {} in {tool}: no test named", r[0]));
            }
            for t in refs {
                if !t.starts_with(tool) {
                    problems.push(format!(
                        "code {} in {tool}: {t} is another tool's test",
                        r[0]
                    ));
                }
                if let Some(p) = missing_test(&root(), &t) {
                    problems.push(format!("code {} in {tool}: {p}", r[0]));
                }
            }
        }
    }
    assert!(
        problems.is_empty(),
        "docs/exit-codes.md:\n{}",
        problems.join("\n")
    );
}
