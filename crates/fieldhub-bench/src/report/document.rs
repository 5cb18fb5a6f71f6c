//! The report as a document: sections of prose, tables and figures, every
//! measured value a number with its unit. The HTML, Markdown and JSON
//! renderings are all made from this one value, so they carry the same
//! figures.

use serde::Serialize;

/// One part of the methodology.
#[derive(Debug, Serialize)]
pub struct Section {
    /// Stable key: `round_trips`, `throughput`, ...
    pub id: &'static str,
    pub title: String,
    /// What the section measures and which published method it reproduces.
    pub method: String,
    /// Readings and warnings, in words.
    pub notes: Vec<String>,
    pub tables: Vec<Table>,
    pub figures: Vec<Figure>,
    /// The measurement itself, typed (keys carry their unit: `_us`, `_percent`, ...).
    pub data: serde_json::Value,
}

/// A table: a caption, column names and rows of cells.
#[derive(Debug, Serialize)]
pub struct Table {
    pub caption: String,
    pub columns: Vec<String>,
    pub rows: Vec<Vec<Cell>>,
}

/// A table cell: words, or a value with its unit.
#[derive(Clone, Debug, Serialize)]
#[serde(untagged)]
pub enum Cell {
    Text(String),
    Quantity { value: f64, unit: &'static str },
}

impl Cell {
    pub fn text(text: impl Into<String>) -> Self {
        Cell::Text(text.into())
    }

    pub fn of(value: f64, unit: &'static str) -> Self {
        Cell::Quantity { value, unit }
    }

    /// As shown to a reader: three significant digits (whole numbers for
    /// counts), a thin space, the unit.
    pub fn display(&self) -> String {
        match self {
            Cell::Text(text) => text.clone(),
            Cell::Quantity { value, unit } => format!("{}\u{202f}{unit}", number(*value)),
        }
    }
}

/// A row: the leading cells, then `micros` as times in µs.
pub fn row(lead: impl IntoIterator<Item = Cell>, micros: impl IntoIterator<Item = f64>) -> Vec<Cell> {
    lead.into_iter().chain(micros.into_iter().map(|v| Cell::of(v, "µs"))).collect()
}

/// `value` with about three significant digits.
pub fn number(value: f64) -> String {
    let magnitude = value.abs();
    if magnitude >= 100.0 || value.fract() == 0.0 {
        format!("{value:.0}")
    } else if magnitude >= 10.0 {
        format!("{value:.1}")
    } else if magnitude >= 1.0 {
        format!("{value:.2}")
    } else if magnitude >= 0.1 {
        format!("{value:.3}")
    } else {
        format!("{value:.4}")
    }
}

/// A plot: its SVG document (inline in HTML, a file next to the Markdown).
#[derive(Debug, Serialize)]
pub struct Figure {
    pub caption: String,
    /// File name of the SVG in the report directory.
    pub file: String,
    #[serde(skip)]
    pub svg: String,
}

impl Table {
    pub fn new(caption: impl Into<String>, columns: &[&str]) -> Self {
        Self { caption: caption.into(), columns: columns.iter().map(|c| (*c).to_owned()).collect(), rows: Vec::new() }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn quantities_show_three_significant_digits_and_their_unit() {
        assert_eq!(Cell::of(12.345, "µs").display(), "12.3\u{202f}µs");
        assert_eq!(Cell::of(1234.6, "frames/s").display(), "1235\u{202f}frames/s");
        assert_eq!(Cell::of(0.5, "%").display(), "0.500\u{202f}%");
        assert_eq!(Cell::of(2.345, "µs").display(), "2.35\u{202f}µs");
        assert_eq!(Cell::of(3.0, "clients").display(), "3\u{202f}clients");
        assert_eq!(Cell::of(0.01234, "MiB").display(), "0.0123\u{202f}MiB");
        assert_eq!(serde_json::to_string(&Cell::of(2.0, "µs")).unwrap(), r#"{"value":2.0,"unit":"µs"}"#);
    }
}
