//! The one error of this crate: what was wrong in an LDF text, where
//! (line and column, both from 1) and what to do.

/// Why an LDF text was refused.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("line {line}, column {column}: {message}")]
pub struct LdfError {
    pub line: u32,
    pub column: u32,
    pub message: String,
}

impl LdfError {
    pub(crate) fn at(pos: Pos, message: impl Into<String>) -> Self {
        Self { line: pos.line, column: pos.column, message: message.into() }
    }
}

/// A place in the text: line and column, both counted from 1.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Pos {
    pub line: u32,
    pub column: u32,
}
