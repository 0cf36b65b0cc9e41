//! The output formats: one renderer per format, each serving every
//! command's report.
//!
//! Why it exists: a report is data (`report/model.rs`: a [`Document`] of
//! blocks, tables, warnings, a CSV, a JSON document); how a text table,
//! Markdown, CSV, JSON or perftest's line is written is said once, in
//! this folder's file of that format. A command's report is data only; a
//! format a report has no data for is refused by name. Field meanings are
//! in `report/README.md`.
//!
//! # How a format is added: one file
//!
//! Every file of this folder (but this one) is a format, and says all of
//! it: its name is the word users write (`table.rs` is `--format table`),
//! and it has
//! - a `word!(PLACE, "HELP");` line: where the word stands in `--format`'s
//!   list (`--help`, error messages, `Format::ALL`) and its help line;
//! - `pub(super) fn render(doc: &dyn Document) -> Option<String>`: the
//!   document in that format, or None when the document has no data for
//!   it (a CSV of a report without rows).
//!
//! `ibprobe/build.rs` reads the folder when it changes and writes
//! `formats.rs` (in the build's `OUT_DIR`), included below: a `mod` line
//! per file, the [`Format`] vocabulary (`crate::words::vocabulary!`) with
//! one word per file in PLACE order, and `output`, the `match` sending
//! each word to its file's `render`. `word!` itself expands to nothing:
//! it is there so that the compiler checks the line the build script
//! reads. `loopback`, `client` and `stream` then offer the new word by
//! themselves; commands that list their own formats (`sweep`, `host`,
//! `compare`, `loggp` in `cli/args.rs`) list it where they should.

/// A format file's word: `word!(PLACE, "HELP");` (see the module doc).
/// Read by `build.rs`; the compiler checks here that both are literals.
macro_rules! word {
    ($place:literal, $help:literal) => {};
}

use super::model::{Document, ReportError};

// The `mod` lines, `Format` and `output` (see the module doc).
include!(concat!(env!("OUT_DIR"), "/formats.rs"));

pub use perftest::{perftest_row, PERFTEST_HEADER, PERFTEST_LINE};

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
