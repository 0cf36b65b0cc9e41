//! CSV: the report's header line and its rows, fields quoted where
//! RFC 4180 needs it.

use crate::report::model::Document;

word!(3, "One header row and one row per distribution.");

/// `doc` as CSV (None: it has no CSV).
pub(super) fn render(doc: &dyn Document) -> Option<String> {
    let csv = doc.csv()?;
    let mut out = csv.header;
    out.push('\n');
    for r in &csv.rows {
        let fields: Vec<String> = r.iter().map(|f| field(f)).collect();
        out.push_str(&(fields.join(",") + "\n"));
    }
    Some(out)
}

/// Quotes a CSV field when it needs it (RFC 4180).
fn field(s: &str) -> String {
    if s.contains([',', '"', '\n', '\r']) {
        format!("\"{}\"", s.replace('"', "\"\""))
    } else {
        s.to_string()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn csv_fields_are_quoted_when_needed() {
        assert_eq!(field("shm"), "shm");
        assert_eq!(field("a,b"), "\"a,b\"");
        assert_eq!(field("say \"hi\""), "\"say \"\"hi\"\"\"");
    }
}
