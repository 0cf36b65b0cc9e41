//! Profile errors that point at `file:line:column` and say how to fix it.

use std::ops::Range;
use std::path::{Path, PathBuf};

/// A 1-based line and column in a profile file.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
pub struct SourcePos {
    /// Line, from 1.
    pub line: usize,
    /// Column in characters, from 1.
    pub column: usize,
}

impl SourcePos {
    /// Converts a byte offset in `text` to a line and column.
    pub fn of(text: &str, offset: usize) -> SourcePos {
        let offset = offset.min(text.len());
        let mut line = 1;
        let mut line_start = 0;
        for (i, b) in text.bytes().enumerate().take(offset) {
            if b == b'\n' {
                line += 1;
                line_start = i + 1;
            }
        }
        let column = text
            .get(line_start..offset)
            .map(|s| s.chars().count())
            .unwrap_or(0)
            + 1;
        SourcePos { line, column }
    }
}

/// Why a profile was refused.
#[derive(Debug, thiserror::Error)]
pub enum ProfileError {
    /// The file could not be read.
    #[error("{}: {message} (give a profile file, or a name from profiles/ such as thesis-2hca)", path.display())]
    Io {
        /// The file.
        path: PathBuf,
        /// The OS error.
        message: String,
    },
    /// The profile is wrong at a position.
    #[error("{}:{}:{}: {message}\n  fix: {fix}", path.display(), pos.line, pos.column)]
    At {
        /// The file.
        path: PathBuf,
        /// Where.
        pos: SourcePos,
        /// What is wrong.
        message: String,
        /// What to do.
        fix: String,
    },
}

impl ProfileError {
    /// An error at a byte span of `text`.
    pub fn at(path: &Path, text: &str, span: Range<usize>, message: String, fix: String) -> Self {
        ProfileError::At {
            path: path.to_path_buf(),
            pos: SourcePos::of(text, span.start),
            message,
            fix,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn positions() {
        let t = "ab\ncde\n";
        assert_eq!(SourcePos::of(t, 0), SourcePos { line: 1, column: 1 });
        assert_eq!(SourcePos::of(t, 4), SourcePos { line: 2, column: 2 });
        assert_eq!(SourcePos::of(t, 999), SourcePos { line: 3, column: 1 });
    }
}
