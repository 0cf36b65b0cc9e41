//! The output formats: one renderer per format, each serving every
//! command's report.
//!
//! Why it exists: a report is data (`report/model.rs`: a [`Document`] of
//! blocks, tables, warnings, a CSV, a JSON document); how a text table,
//! Markdown, CSV, JSON or perftest's line is written is said once, in
//! this folder's file of that format. A command's report is data only; a
//! format a report has no data for is refused by name. Field meanings are
//! in `report/README.md`.

mod csv;
mod json;
mod markdown;
mod perftest;
mod table;

pub use perftest::{perftest_row, PERFTEST_HEADER, PERFTEST_LINE};

use super::model::{Document, ReportError};

crate::words::vocabulary! {
    /// An output format (`--format`). Each command offers those its
    /// report has (`cli/args.rs`).
    Format, "format" {
        Table = "table", "Human-readable table (hyperfine-like), with warnings.";
        Json = "json", "The `ibprobe.report/1` JSON document.";
        Csv = "csv", "One header row and one row per distribution.";
        Markdown = "markdown", "A Markdown table, for issues and wikis.";
        Perftest = "perftest", "perftest's (ib_send_lat) header and result line, for its parsers.";
    }
}

/// `doc` in `format`, or None when it has no data for that format.
fn output(doc: &dyn Document, format: Format) -> Option<String> {
    match format {
        Format::Table => Some(table::render(doc)),
        Format::Json => json::render(doc),
        Format::Csv => csv::render(doc),
        Format::Markdown => Some(markdown::render(doc)),
        Format::Perftest => perftest::render(doc),
    }
}

/// Renders `doc` as `format` (every format ends with a newline); a
/// format `doc` has no data for is refused with the ones it has.
pub fn render(doc: &dyn Document, format: Format) -> Result<String, ReportError> {
    output(doc, format).ok_or_else(|| {
        let has: Vec<&str> = Format::ALL
            .iter()
            .filter(|f| **f != format && output(doc, **f).is_some())
            .map(|f| f.name())
            .collect();
        let (last, rest) = has.split_last().unwrap_or((&"table", &[]));
        ReportError::Format(format!(
            "--format {format} has no {}; use {} or {last}",
            doc.noun(),
            rest.join(", ")
        ))
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn format_names_parse_and_unknown_names_say_what_is_accepted() {
        assert_eq!("JSON".parse::<Format>(), Ok(Format::Json));
        assert_eq!("markdown".parse::<Format>(), Ok(Format::Markdown));
        let e = "xml".parse::<Format>().unwrap_err().0;
        assert!(e.contains("xml") && e.contains("perftest"), "{e}");
    }
}
