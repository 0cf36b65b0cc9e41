//! Docs whose tables name the tests that hold them (SECURITY.md's
//! promises, `docs/exit-codes.md`): the table read back, and every named
//! test found, so a renamed or deleted test cannot leave a promise behind
//! that nothing checks.

use std::path::Path;

/// The table rows of the section headed `section` (up to the next `## `):
/// every cell of each row, trimmed; the header row (whose first cell is
/// `header`) and the `|---|` line left out.
pub fn rows(doc: &str, section: &str, header: &str) -> Vec<Vec<String>> {
    let start = doc
        .find(section)
        .unwrap_or_else(|| panic!("no section {section:?}"));
    let body = &doc[start + section.len()..];
    let body = &body[..body.find("\n## ").unwrap_or(body.len())];
    body.lines()
        .map(str::trim)
        .filter(|l| l.starts_with('|') && !l.starts_with("|---"))
        .map(|l| {
            l.trim_matches('|')
                .split('|')
                .map(|c| c.trim().to_string())
                .collect::<Vec<_>>()
        })
        .filter(|cells| cells.first().map(String::as_str) != Some(header))
        .collect()
}

/// The `` `path/file.rs::test_name` `` references of a cell.
pub fn test_refs(cell: &str) -> Vec<String> {
    cell.split('`')
        .skip(1)
        .step_by(2)
        .filter(|t| t.contains("::"))
        .map(str::to_string)
        .collect()
}

/// Whether `text` defines a test function `name`: `fn name(` right below
/// a test attribute (other attributes and doc comments may sit between),
/// or inside a `proptest!` block.
pub fn defines_test(text: &str, name: &str) -> bool {
    let lines: Vec<&str> = text.lines().collect();
    let needle = format!("fn {name}(");
    lines.iter().enumerate().any(|(i, l)| {
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

/// What is wrong with the reference `t` (`path/file.rs::test_name`, the
/// path from the workspace root `root`), or `None` when that test exists.
pub fn missing_test(root: &Path, t: &str) -> Option<String> {
    let Some((file, name)) = t.split_once("::") else {
        return Some(format!("{t:?} is not `path/file.rs::test_name`"));
    };
    match std::fs::read_to_string(root.join(file)) {
        Ok(text) if defines_test(&text, name) => None,
        Ok(_) => Some(format!("{file} has no test `{name}`")),
        Err(e) => Some(format!("{file}: {e}")),
    }
}

/// The keys a tool expects where `bogus` stands in the TOML `text`: the
/// text is written to a file, `cmd` runs with that file as its last
/// argument, must refuse it (exit 2), and its refusal lists the keys
/// (`unknown field \`bogus\`, expected one of \`a\`, \`b\``, serde's
/// words). What a doc's table of keys is checked against.
pub fn keys_expected_by(
    mut cmd: std::process::Command,
    text: &str,
) -> std::collections::BTreeSet<String> {
    let dir = tempfile::tempdir().expect("a temporary directory");
    let file = dir.path().join("doc-check.toml");
    std::fs::write(&file, text).expect("write the TOML");
    let out = cmd.arg(&file).output().expect("run the tool");
    let err = String::from_utf8_lossy(&out.stderr).into_owned();
    assert_eq!(out.status.code(), Some(2), "{text}: {err}");
    refused_key_list(&err)
}

/// The keys listed in a refusal of the unknown key `bogus`.
pub fn refused_key_list(stderr: &str) -> std::collections::BTreeSet<String> {
    let list = stderr
        .split("unknown field `bogus`, expected ")
        .nth(1)
        .unwrap_or_else(|| panic!("no list of expected keys in {stderr}"));
    let list = list.lines().next().unwrap_or_default();
    let list = &list[..list.find(';').unwrap_or(list.len())];
    list.split('`')
        .skip(1)
        .step_by(2)
        .map(str::to_string)
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_checker_tells_a_missing_test() {
        let text = "#[test]\nfn here() {}\nfn helper() {}\n";
        assert!(defines_test(text, "here"));
        assert!(!defines_test(text, "helper"));
        assert!(!defines_test(text, "gone"));
        let doc = "## S\n\n| promise | tests |\n|---|---|\n| a | `x.rs::here` and `y.rs::there` |\n\n## Next\n| b | `z.rs::no` |\n";
        let r = rows(doc, "## S", "promise");
        assert_eq!(
            r,
            vec![vec![
                "a".to_string(),
                "`x.rs::here` and `y.rs::there`".to_string()
            ]]
        );
        assert_eq!(test_refs(&r[0][1]), ["x.rs::here", "y.rs::there"]);
        assert!(missing_test(Path::new("/nonexistent"), "x.rs::here").is_some());
        assert!(missing_test(Path::new("/"), "no-separator")
            .unwrap()
            .contains("not `path"));
    }
}
