//! JSON: the command's own document (its schema is its serde type),
//! pretty-printed.

use crate::report::model::Document;

word!(2, "The `ibprobe.report/1` JSON document.");

/// `doc` as JSON (None: it has no JSON document).
pub(super) fn render(doc: &dyn Document) -> Option<String> {
    Some(doc.json()?.pretty() + "\n")
}
