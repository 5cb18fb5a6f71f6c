//! Where each key of a configuration file is written, so an error names the
//! line of the field at fault (`line 12: channel[1].data_bitrate`), not the
//! line of its table.
//!
//! The text is read a second time, with `toml_edit`, which keeps positions;
//! the typed configuration (`config.rs`) is read with `toml` and serde.

use toml_edit::{ImDocument, Item};

/// Positions in one configuration text; empty for a configuration built in
/// code.
pub struct ConfigSource<'a> {
    text: &'a str,
    doc: Option<ImDocument<&'a str>>,
}

impl<'a> ConfigSource<'a> {
    /// Positions in `text` (which `toml` has already parsed).
    pub fn parse(text: &'a str) -> Self {
        Self { text, doc: ImDocument::parse(text).ok() }
    }

    /// No positions: messages name fields without lines.
    pub fn none() -> Self {
        Self { text: "", doc: None }
    }

    /// `line N: [[kind]][index].key`, the line of the key — or of its table
    /// when the key is not written (a default at fault) — else without line.
    /// A dotted key (`lin.ldf`) is looked up in the sub-table.
    pub fn table_field(&self, kind: &str, index: usize, key: &str) -> String {
        let table = self.doc.as_ref().and_then(|doc| doc.get(kind)).and_then(Item::as_array_of_tables);
        let table = table.and_then(|tables| tables.get(index));
        let nested = key.split_once('.').and_then(|(sub, inner)| {
            let sub = table?.get(sub)?.as_table_like()?;
            sub.key(inner).and_then(|k| k.span())
        });
        let span = nested.or_else(|| table.and_then(|t| t.key(key).and_then(|k| k.span()).or_else(|| t.span())));
        self.with_line(span, format!("{kind}[{index}].{key}"))
    }

    /// `line N: hub.key` when the key is written in `[hub]`.
    pub fn hub_field(&self, key: &str) -> String {
        self.section_field("hub", key)
    }

    /// `line N: section.key` when the key is written in `[section]`.
    pub fn section_field(&self, section: &str, key: &str) -> String {
        let table = self.doc.as_ref().and_then(|doc| doc.get(section)).and_then(Item::as_table);
        let span = table.and_then(|t| t.key(key)).and_then(|k| k.span());
        self.with_line(span, format!("{section}.{key}"))
    }

    fn with_line(&self, span: Option<std::ops::Range<usize>>, field: String) -> String {
        match span {
            Some(span) => {
                let line = self.text[..span.start.min(self.text.len())].matches('\n').count() + 1;
                format!("line {line}: {field}")
            }
            None => field,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const TEXT: &str = "[hub]\nname = \"x\"\n\n[[channel]]\nname = \"a\"\n\n[[channel]]\nname = \"b\"\n\nbitrate = 5\n";

    #[test]
    fn a_written_key_is_found_on_its_own_line() {
        let source = ConfigSource::parse(TEXT);
        assert_eq!(source.table_field("channel", 1, "bitrate"), "line 10: channel[1].bitrate");
        assert_eq!(source.hub_field("name"), "line 2: hub.name");
    }

    #[test]
    fn a_key_not_written_is_placed_at_its_table() {
        let source = ConfigSource::parse(TEXT);
        assert_eq!(source.table_field("channel", 0, "bitrate"), "line 4: channel[0].bitrate");
        assert_eq!(source.hub_field("listen"), "hub.listen");
        assert_eq!(ConfigSource::none().table_field("port", 2, "rate"), "port[2].rate");
    }

    #[test]
    fn a_key_of_a_sub_table_is_found_on_its_own_line() {
        let text = "[[channel]]\nname = \"body\"\n\n[channel.lin]\nschedule_table = \"x\"\nldf = \"b.ldf\"\n";
        let source = ConfigSource::parse(text);
        assert_eq!(source.table_field("channel", 0, "lin.ldf"), "line 6: channel[0].lin.ldf");
    }
}
