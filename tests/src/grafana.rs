//! The queries of a Grafana dashboard (`dashboards/*.json`), extracted
//! with its variables substituted, so tests can run them on a real
//! Prometheus.
//!
//! Why it exists: a dashboard is only right if every panel's query
//! returns data from a real exporter; `ibexporter/tests/dashboards.rs`
//! checks every dashboard that way and the tail-latency recipe
//! (`ibexporter/tests/recipes.rs`) its own. Query variables stand for
//! `.*` (their `allValue`), custom variables for each of their options,
//! Grafana's built-ins for the fixed values of [`BUILTINS`].

use serde_json::Value;
use std::collections::BTreeMap;

/// Values Grafana's built-in variables get when the queries are extracted.
pub const BUILTINS: &[(&str, &str)] = &[
    ("__rate_interval", "1m"),
    ("__interval", "1m"),
    ("__interval_ms", "60000"),
    ("__range", "5m"),
    ("__range_s", "300"),
    ("__range_ms", "300000"),
];

/// Variable name -> its (text, value) options used for extraction.
pub type Subs = BTreeMap<String, Vec<(String, String)>>;

/// Every panel, the panels of collapsed rows included (rows themselves too).
pub fn all_panels(dash: &Value) -> Vec<&Value> {
    let mut out = Vec::new();
    for p in dash["panels"].as_array().into_iter().flatten() {
        out.push(p);
        for inner in p["panels"].as_array().into_iter().flatten() {
            out.push(inner);
        }
    }
    out
}

/// The dashboard's template variables.
pub fn variables(dash: &Value) -> Vec<&Value> {
    dash["templating"]["list"]
        .as_array()
        .map(|l| l.iter().collect())
        .unwrap_or_default()
}

/// The query text of a variable (`query` is a string or `{query: ...}`).
pub fn variable_query(v: &Value) -> String {
    match &v["query"] {
        Value::String(s) => s.clone(),
        Value::Object(o) => o
            .get("query")
            .and_then(Value::as_str)
            .unwrap_or_default()
            .to_string(),
        _ => String::new(),
    }
}

/// A panel's id and title, for messages.
pub fn panel_name(p: &Value) -> String {
    format!("panel {} {:?}", p["id"], p["title"].as_str().unwrap_or(""))
}

/// What each variable stands for when queries are extracted: query
/// variables match everything (`.*`, as their `allValue`), custom variables
/// take each of their options, built-ins get fixed values.
pub fn substitutions(dash: &Value) -> Subs {
    let mut subs = Subs::new();
    for (k, v) in BUILTINS {
        subs.insert(k.to_string(), vec![(v.to_string(), v.to_string())]);
    }
    for v in variables(dash) {
        let name = v["name"].as_str().unwrap_or_default().to_string();
        let opts = match v["type"].as_str() {
            Some("custom") => v["options"]
                .as_array()
                .into_iter()
                .flatten()
                .map(|o| {
                    (
                        o["text"].as_str().unwrap_or_default().to_string(),
                        o["value"].as_str().unwrap_or_default().to_string(),
                    )
                })
                .collect(),
            Some("constant") | Some("textbox") => {
                let q = variable_query(v);
                vec![(q.clone(), q)]
            }
            _ => vec![(".*".to_string(), ".*".to_string())],
        };
        subs.insert(name, opts);
    }
    subs
}

/// One variable reference in a query: `$name`, `${name}`, `${name:fmt}` or
/// `[[name]]`, as a byte range and the name and format.
pub fn variable_refs(expr: &str) -> Vec<(usize, usize, String, Option<String>)> {
    let b = expr.as_bytes();
    let ident = |c: u8| c.is_ascii_alphanumeric() || c == b'_';
    let mut out = Vec::new();
    let mut i = 0;
    while i < b.len() {
        if b[i] == b'$' && i + 1 < b.len() && b[i + 1] == b'{' {
            if let Some(end) = expr[i..].find('}') {
                let inner = &expr[i + 2..i + end];
                let (name, fmt) = match inner.split_once(':') {
                    Some((n, f)) => (n.to_string(), Some(f.to_string())),
                    None => (inner.to_string(), None),
                };
                out.push((i, i + end + 1, name, fmt));
                i += end + 1;
                continue;
            }
        } else if b[i] == b'$' && i + 1 < b.len() && ident(b[i + 1]) {
            let mut j = i + 1;
            while j < b.len() && ident(b[j]) {
                j += 1;
            }
            out.push((i, j, expr[i + 1..j].to_string(), None));
            i = j;
            continue;
        } else if b[i..].starts_with(b"[[") {
            if let Some(end) = expr[i..].find("]]") {
                let inner = &expr[i + 2..i + end];
                if !inner.is_empty() && inner.bytes().all(ident) {
                    out.push((i, i + end + 2, inner.to_string(), None));
                    i += end + 2;
                    continue;
                }
            }
        }
        i += 1;
    }
    out
}

/// Substitutes every variable of `expr`: one result per combination of the
/// options of the variables it uses (custom variables have several).
/// `overrides` replaces a variable's value (`job` -> a feed's jobs).
/// `${name:text}` takes an option's text, any other form its value.
/// Errors name the first undefined variable.
pub fn substitute(
    expr: &str,
    subs: &Subs,
    overrides: &BTreeMap<String, String>,
) -> Result<Vec<String>, String> {
    let refs = variable_refs(expr);
    let mut names: Vec<String> = Vec::new();
    for (_, _, n, _) in &refs {
        if !subs.contains_key(n) && !overrides.contains_key(n) {
            return Err(format!("undefined variable ${n}"));
        }
        if !names.contains(n) {
            names.push(n.clone());
        }
    }
    // Cartesian product over the options of the variables used.
    let mut combos: Vec<BTreeMap<String, (String, String)>> = vec![BTreeMap::new()];
    for n in &names {
        let opts: Vec<(String, String)> = match overrides.get(n) {
            Some(v) => vec![(v.clone(), v.clone())],
            None => subs[n].clone(),
        };
        if opts.is_empty() {
            return Err(format!("variable ${n} has no options"));
        }
        combos = combos
            .into_iter()
            .flat_map(|c| {
                opts.iter().map(move |o| {
                    let mut c = c.clone();
                    c.insert(n.clone(), o.clone());
                    c
                })
            })
            .collect();
    }
    Ok(combos
        .into_iter()
        .map(|c| {
            let mut s = String::new();
            let mut last = 0;
            for (start, end, n, fmt) in &refs {
                s.push_str(&expr[last..*start]);
                let (text, value) = &c[n];
                s.push_str(if fmt.as_deref() == Some("text") {
                    text
                } else {
                    value
                });
                last = *end;
            }
            s.push_str(&expr[last..]);
            s
        })
        .collect())
}

/// `label_values(selector, label)` as a query with the same answer set:
/// `count by (label) (selector)`.
pub fn label_values_query(q: &str) -> Option<String> {
    let inner = q.trim().strip_prefix("label_values(")?.strip_suffix(')')?;
    let (sel, label) = inner.rsplit_once(',')?;
    Some(format!("count by ({}) ({})", label.trim(), sel.trim()))
}

/// Every query of a dashboard as written, with where it comes from: each
/// query variable's `label_values(...)` (as its `count by` equivalent,
/// [`label_values_query`]), then each panel target's `expr`. Errors name a
/// variable whose query is not `label_values(selector, label)`.
pub fn raw_queries(dash: &Value) -> Result<Vec<(String, String)>, String> {
    let mut out = Vec::new();
    for v in variables(dash) {
        if v["type"] != "query" {
            continue;
        }
        let name = v["name"].as_str().unwrap_or_default();
        let q = variable_query(v);
        let raw = label_values_query(&q)
            .ok_or_else(|| format!("variable {name}: not label_values(selector, label): {q:?}"))?;
        out.push((format!("variable {name}"), raw));
    }
    for p in all_panels(dash) {
        for t in p["targets"].as_array().into_iter().flatten() {
            let origin = format!(
                "{} target {}",
                panel_name(p),
                t["refId"].as_str().unwrap_or("?")
            );
            out.push((origin, t["expr"].as_str().unwrap_or_default().to_string()));
        }
    }
    Ok(out)
}
