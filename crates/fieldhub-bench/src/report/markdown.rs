//! The report as Markdown: the same sections, tables and notes as the HTML
//! page, each plot a link to its SVG file in the report directory.

use std::fmt::Write;

use super::document::Section;
use super::Report;

/// The whole document.
pub fn render(report: &Report) -> String {
    let mut doc = format!("# {}\n\n{}\n", report.title, report.summary);
    for section in &report.sections {
        render_section(&mut doc, section);
    }
    doc
}

fn render_section(doc: &mut String, section: &Section) {
    let _ = write!(doc, "\n## {}\n\n{}\n", section.title, section.method);
    for note in &section.notes {
        let _ = write!(doc, "\n{note}\n");
    }
    for table in &section.tables {
        let columns: Vec<String> = table.columns.iter().map(|c| escape(c)).collect();
        let _ = write!(doc, "\n**{}**\n\n| {} |\n|", escape(&table.caption), columns.join(" | "));
        doc.push_str(&"---|".repeat(table.columns.len()));
        doc.push('\n');
        for row in &table.rows {
            let cells: Vec<String> = row.iter().map(|c| escape(&c.display())).collect();
            let _ = writeln!(doc, "| {} |", cells.join(" | "));
        }
    }
    for figure in &section.figures {
        let _ = write!(doc, "\n![{}]({})\n", figure.caption, figure.file);
    }
}

/// `text` safe inside a table row: pipes escaped.
fn escape(text: &str) -> String {
    text.replace('|', "\\|")
}
