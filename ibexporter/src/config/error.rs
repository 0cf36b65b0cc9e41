//! [`ConfigError`]: one line naming file:line:col, the key, what is wrong
//! and what to do; and [`Ctx`], the text being read, which builds them.
//!
//! Why it exists: both stages (reading the TOML in `raw`, checking values
//! in `convert`) refuse input the same way, with positions counted the same
//! way.

use std::fmt::Write as _;
use std::ops::Range;
use toml::Spanned;

/// Why a configuration was refused: one line, with file, position and key.
///
/// Why it exists: the operator must be able to fix the file from this line
/// alone (`ibexporter.toml:12:9: probe.poll = "evnt": unknown polling
/// mode; use busy or event`).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{}", self.render())]
pub struct ConfigError {
    /// The file name (or the origin name given to [`parse`](super::parse)).
    pub origin: String,
    /// 1-based line and column (in characters), when known.
    pub pos: Option<(usize, usize)>,
    /// The dotted key (`probe.poll`, `targets.static[1].port`), when known.
    pub key: Option<String>,
    /// What is wrong and what to do, one line.
    pub message: String,
}

impl ConfigError {
    fn render(&self) -> String {
        let mut s = self.origin.clone();
        if let Some((l, c)) = self.pos {
            let _ = write!(s, ":{l}:{c}");
        }
        let _ = write!(s, ": {}", self.message);
        s.replace(['\n', '\r'], " ")
    }
}

/// A 1-based (line, column) of a byte offset; column counts characters.
pub(super) fn line_col(text: &str, offset: usize) -> (usize, usize) {
    let mut offset = offset.min(text.len());
    while !text.is_char_boundary(offset) {
        offset -= 1;
    }
    let before = &text[..offset];
    let line = before.matches('\n').count() + 1;
    let start = before.rfind('\n').map(|i| i + 1).unwrap_or(0);
    (line, before[start..].chars().count() + 1)
}

/// Formats a value the way it appears in TOML, for messages.
pub(super) fn q(s: &str) -> String {
    format!("{s:?}")
}

/// The text being read and its name: every error built here carries the
/// origin and the line:column of a span in `text`.
pub(super) struct Ctx<'a> {
    pub(super) origin: &'a str,
    pub(super) text: &'a str,
}

impl Ctx<'_> {
    /// `origin:line:col: key = value: message`.
    pub(super) fn bad(
        &self,
        span: Range<usize>,
        key: &str,
        value: &str,
        message: &str,
    ) -> ConfigError {
        ConfigError {
            origin: self.origin.to_string(),
            pos: Some(line_col(self.text, span.start)),
            key: Some(key.to_string()),
            message: format!("{key} = {value}: {message}"),
        }
    }

    /// [`Ctx::bad`] at the span of `v`.
    pub(super) fn bad_s<T>(
        &self,
        v: &Spanned<T>,
        key: &str,
        value: &str,
        message: &str,
    ) -> ConfigError {
        self.bad(v.span(), key, value, message)
    }

    /// A TOML syntax or shape error (`path`: the key serde was reading).
    pub(super) fn toml(&self, e: &toml::de::Error, path: Option<String>) -> ConfigError {
        // The message may quote the text it choked on: keep only its kind
        // (the position says where), so a file that is not a config (a
        // secret) is not echoed.
        let msg = ibhost::file::without_quoted(e.message().trim()).replace('\n', "; ");
        let fix = if msg.contains("unknown field") {
            "remove or rename the key; every key is documented in config.md (/usr/share/doc/ibexporter/config.md, or ibexporter/docs/config.md in the source)"
        } else if msg.contains("missing field") {
            "add the missing key"
        } else if msg.contains("invalid type") || msg.contains("invalid value") {
            "give a value of the expected type (durations are strings such as \"10s\")"
        } else if msg.contains("duplicate key") {
            "give each key once"
        } else {
            "fix the TOML syntax at this position"
        };
        let message = match &path {
            Some(p) => format!("{p}: {msg}; {fix}"),
            None => format!("{msg}; {fix}"),
        };
        ConfigError {
            origin: self.origin.to_string(),
            pos: e.span().map(|s| line_col(self.text, s.start)),
            key: path,
            message,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn line_col_counts_chars() {
        assert_eq!(line_col("ab\ncde\n", 0), (1, 1));
        assert_eq!(line_col("ab\ncde\n", 4), (2, 2));
        assert_eq!(line_col("é=1\nx", 5), (2, 1));
    }
}
