//! What the store holds behind its lock ([`State`]): the series, the error
//! counts and the families' help texts, read by the text and protobuf
//! encoders. Its own file so that the encoders take it from here, not
//! through `mod.rs`, which calls them.

use std::collections::BTreeMap;
use std::time::Duration;

use super::families::{Fam, SeriesKey, FAMILIES};
use super::series::{Labels, Series};

/// `ibprobe_probe_errors_total` labels.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub(super) struct ErrorKey {
    pub(super) source: String,
    pub(super) target: String,
    pub(super) transport: String,
    pub(super) reason: String,
}

/// One `ibprobe_probe_errors_total` series.
#[derive(Debug)]
pub(super) struct ErrorCount {
    pub(super) labels: Labels,
    pub(super) count: u64,
}

/// Everything the encoders read, behind one lock.
pub(super) struct State {
    pub(super) series: BTreeMap<SeriesKey, Series>,
    pub(super) errors: BTreeMap<ErrorKey, ErrorCount>,
    /// `# HELP` text per [`Fam`].
    pub(super) helps: [String; 6],
    /// `le` label values (dtoa, as prometheus-client writes them), `+Inf` last.
    pub(super) le_labels: Vec<String>,
    /// The same bounds as doubles, `+Inf` last.
    pub(super) le_values: Vec<f64>,
    pub(super) window: Duration,
}

impl State {
    pub(super) fn help(&self, f: Fam) -> &str {
        &self.helps[FAMILIES.iter().position(|&g| g == f).unwrap_or(0)]
    }
}
