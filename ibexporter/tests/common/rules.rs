//! The shipped Prometheus rules (`deploy/prometheus/rules/`): where they
//! are, what they say (parsed), and edited copies for tests that need a
//! shorter `for:` or an alert that can no longer fire.

use serde::Deserialize;
use serde_norway::Value;
use std::collections::BTreeMap;
use std::fs;
use std::path::{Path, PathBuf};

/// `deploy/prometheus/rules/`.
pub fn rules_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../deploy/prometheus/rules")
}

/// The `*.yml` files directly in `dir`, sorted.
pub fn yml_files(dir: &Path) -> Vec<PathBuf> {
    let mut out: Vec<PathBuf> = fs::read_dir(dir)
        .unwrap_or_else(|e| panic!("listing {}: {e}", dir.display()))
        .map(|e| e.expect("a directory entry").path())
        .filter(|p| p.is_file() && p.extension().is_some_and(|x| x == "yml"))
        .collect();
    out.sort();
    out
}

/// Every rule file shipped (`deploy/prometheus/rules/*.yml`).
pub fn rule_files() -> Vec<PathBuf> {
    yml_files(&rules_dir())
}

/// Every `promtool test rules` file (`deploy/prometheus/rules/tests/*.yml`).
pub fn unit_test_files() -> Vec<PathBuf> {
    yml_files(&rules_dir().join("tests"))
}

/// One rule of a rule file.
#[derive(Debug, Deserialize)]
pub struct Rule {
    /// The alert's name (alerting rules).
    pub alert: Option<String>,
    /// The recorded series' name (recording rules).
    pub record: Option<String>,
    /// The PromQL expression.
    pub expr: String,
    /// Labels added to the alert or series.
    #[serde(default)]
    pub labels: BTreeMap<String, String>,
    /// Annotations of an alert.
    #[serde(default)]
    pub annotations: BTreeMap<String, String>,
}

#[derive(Debug, Deserialize)]
struct Group {
    rules: Vec<Rule>,
}

#[derive(Debug, Deserialize)]
struct RuleFile {
    groups: Vec<Group>,
}

/// Every rule of `file`, in order.
pub fn rules_of(file: &Path) -> Vec<Rule> {
    let text = fs::read_to_string(file).unwrap_or_else(|e| panic!("{}: {e}", file.display()));
    let parsed: RuleFile = serde_norway::from_str(&text)
        .unwrap_or_else(|e| panic!("{}: not a rule file: {e}", file.display()));
    parsed.groups.into_iter().flat_map(|g| g.rules).collect()
}

/// Every rule of every shipped rule file.
pub fn all_rules() -> Vec<Rule> {
    rule_files().iter().flat_map(|f| rules_of(f)).collect()
}

/// Copies the rule files into `dir/rules/` and the unit-test files into
/// `dir/rules/tests/` (so their `../x.rules.yml` paths still hold), calling
/// `edit(alert name, rule)` on every alerting rule of the copies (a YAML
/// mapping: set `for`, `expr` ...). Returns (rule files, unit-test files)
/// of the copy.
pub fn edited_copy(
    dir: &Path,
    edit: impl Fn(&str, &mut serde_norway::Mapping),
) -> (Vec<PathBuf>, Vec<PathBuf>) {
    let rules = dir.join("rules");
    let tests = rules.join("tests");
    fs::create_dir_all(&tests).expect("creating the copy's directories");
    let mut rule_out = Vec::new();
    for f in rule_files() {
        let text = fs::read_to_string(&f).unwrap();
        let mut v: Value = serde_norway::from_str(&text).unwrap();
        for g in v["groups"].as_sequence_mut().into_iter().flatten() {
            for r in g["rules"].as_sequence_mut().into_iter().flatten() {
                let Some(m) = r.as_mapping_mut() else {
                    continue;
                };
                let Some(name) = m.get("alert").and_then(Value::as_str).map(String::from) else {
                    continue;
                };
                edit(&name, m);
            }
        }
        let out = rules.join(f.file_name().unwrap());
        fs::write(&out, serde_norway::to_string(&v).unwrap()).unwrap();
        rule_out.push(out);
    }
    let mut test_out = Vec::new();
    for f in unit_test_files() {
        let out = tests.join(f.file_name().unwrap());
        fs::copy(&f, &out).unwrap();
        test_out.push(out);
    }
    (rule_out, test_out)
}
