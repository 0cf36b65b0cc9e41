//! The output formats: one renderer per format, each serving every
//! command's report (a [`Document`], `report/model.rs`, data only); a
//! format a report has no data for is refused by name.
//!
//! # How a format is added: one file
//!
//! Every other file here is a format named as users write it (`table.rs`
//! is `--format table`), with
//! - a `word!(PLACE, "HELP");` line: the word's place in `--format`'s list
//!   (`--help`, error messages, `Format::ALL`) and its help line;
//! - `pub(super) fn render(doc: &dyn Document) -> Option<String>` (None:
//!   the document has no data for it).
//!
//! `ibprobe/build.rs` writes `formats.rs` (in `OUT_DIR`, included below)
//! from the folder: a `mod` line per file, the [`Format`] vocabulary in
//! PLACE order, and `output`, sending each word to its file's `render`.
//! `loopback`, `client` and `stream` offer a new word by themselves;
//! `sweep`, `host`, `compare` and `loggp` list theirs in `cli/args.rs`.

/// A format file's word (see the module doc): expands to nothing, read
/// by `build.rs`; the compiler checks here that both are literals.
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
