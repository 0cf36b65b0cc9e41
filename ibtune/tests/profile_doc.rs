//! `profiles/README.md` is the profile schema a user reads: every section
//! and key the parser accepts has its row there, and the page names no key
//! the parser refuses. The parser's own list comes from its refusal of an
//! unknown key (`expected one of ...`), so nothing here restates it.

use std::collections::BTreeSet;
use std::process::Command;

use ibtools_tests::fixture;

/// The keys the parser expects at the place of `bogus` in `text`.
fn expected(text: &str) -> BTreeSet<String> {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_ibtune"));
    cmd.arg("--root").arg(fixture("thesis-2s-mlx5")).arg("plan");
    ibtools_tests::doc_table::keys_expected_by(cmd, text)
}

/// The doc's sections (`### \`[name]\`` or `[[name]]`) and, per section,
/// the keys of its table rows (`| \`key\` |`).
fn documented() -> Vec<(String, BTreeSet<String>)> {
    let doc = std::fs::read_to_string(
        std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../profiles/README.md"),
    )
    .unwrap();
    let schema = &doc[doc.find("## Schema").expect("a ## Schema section")..];
    let mut out: Vec<(String, BTreeSet<String>)> = Vec::new();
    for line in schema.lines() {
        if let Some(h) = line.strip_prefix("### `[") {
            let name = h.trim_start_matches('[');
            let name = &name[..name.find(']').unwrap()];
            out.push((name.to_string(), BTreeSet::new()));
        } else if let (Some(last), Some(row)) = (out.last_mut(), line.strip_prefix("| `")) {
            let key = &row[..row.find('`').unwrap()];
            if !key.starts_with('[') && !key.starts_with('"') {
                last.1.insert(key.to_string());
            }
        }
    }
    out
}

#[test]
fn the_schema_page_lists_exactly_the_keys_the_parser_takes() {
    let doc = documented();
    let sections: BTreeSet<String> = doc.iter().map(|(s, _)| s.clone()).collect();
    assert_eq!(
        sections,
        expected("[profile]\nname = \"x\"\n[bogus]\n"),
        "profiles/README.md's sections"
    );
    for (section, keys) in &doc {
        let text = match section.as_str() {
            "profile" => "[profile]\nname = \"x\"\nbogus = 1\n".to_string(),
            // Free-form tables: any sysctl name is a key.
            "sysctl" => continue,
            s if ["cpuset", "irq", "hugepages"].contains(&s) => {
                format!("[profile]\nname = \"x\"\n[[{s}]]\nbogus = 1\n")
            }
            s => format!("[profile]\nname = \"x\"\n[{s}]\nbogus = 1\n"),
        };
        assert_eq!(
            keys,
            &expected(&text),
            "profiles/README.md's [{section}] keys"
        );
    }
}
