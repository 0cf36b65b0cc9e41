//! One grammar across the three tools: `docs/options.md` lists every
//! option of ibtune, ibprobe and ibexporter once, with the one kind of
//! value it takes, and each tool's own option table (`TOOL --generate-docs
//! DIR` writes `flags.tsv` from its clap definition) agrees with it. Every
//! option whose value is a `DURATION` goes through the one duration parser
//! (it refuses a bare number with the question of its unit).

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::Command;

use ibtools_tests::doc_table::rows;

const TOOLS: [&str; 3] = ["ibtune", "ibprobe", "ibexporter"];

fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("..")
}

/// The three binaries, built (or found up to date) in this target folder.
fn binaries() -> PathBuf {
    ibtools_tests::build_tools()
}

/// Every option of every command: (long name, value name, command path).
fn options(bin: &Path) -> Vec<(String, String, String)> {
    let dir = tempfile::tempdir().unwrap();
    let mut out = Vec::new();
    for t in TOOLS {
        let gen = dir.path().join(t);
        let st = Command::new(bin.join(t))
            .arg("--generate-docs")
            .arg(&gen)
            .output()
            .unwrap();
        assert!(st.status.success(), "{t} --generate-docs: {st:?}");
        let table = std::fs::read_to_string(gen.join("flags.tsv")).unwrap();
        for line in table.lines().skip(1) {
            let f: Vec<&str> = line.split('\t').collect();
            out.push((f[1].to_string(), f[3].to_string(), f[0].to_string()));
        }
    }
    out
}

#[test]
fn every_option_has_one_meaning_and_one_kind_of_value() {
    let bin = binaries();
    let doc = std::fs::read_to_string(root().join("docs/options.md")).unwrap();
    let mut listed: BTreeMap<String, String> = BTreeMap::new();
    for r in rows(&doc, "| option |", "option") {
        let name = r[0]
            .split('`')
            .nth(1)
            .expect("`--name` in the first cell")
            .to_string();
        assert!(
            listed.insert(name.clone(), r[1].clone()).is_none(),
            "{name} listed twice"
        );
    }
    let mut problems = Vec::new();
    let opts = options(&bin);
    for (long, value, cmd) in &opts {
        match listed.get(&format!("--{long}")) {
            None => problems.push(format!("{cmd} --{long}: not in docs/options.md")),
            Some(v) if v != value => problems.push(format!(
                "{cmd} --{long} takes {value}, docs/options.md says {v}: one name, one kind of value"
            )),
            _ => {}
        }
    }
    for name in listed.keys() {
        if !opts.iter().any(|(l, ..)| format!("--{l}") == *name) {
            problems.push(format!(
                "docs/options.md lists {name}, which no command has"
            ));
        }
    }
    assert!(problems.is_empty(), "{}", problems.join("\n"));
    assert!(
        listed.len() > 80,
        "only {} options read: did the table's format change?",
        listed.len()
    );
}

/// Each DURATION option, in each command that has it, refuses `7` with the
/// one parser's question: no duration is parsed two ways.
#[test]
fn every_duration_goes_through_the_one_parser() {
    let bin = binaries();
    let mut checked = 0;
    for (long, value, cmd) in options(&bin) {
        if value != "DURATION" {
            continue;
        }
        let mut words = cmd.split(' ');
        let tool = words.next().unwrap();
        let out = Command::new(bin.join(tool))
            .args(words)
            .arg(format!("--{long}"))
            .arg("7")
            .output()
            .unwrap();
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(
            out.status.code() == Some(2) && err.contains("7 what? write 7s, 7ms or 7us"),
            "{cmd} --{long} 7: {err}"
        );
        checked += 1;
    }
    assert!(checked >= 20, "only {checked} duration options found");
}
