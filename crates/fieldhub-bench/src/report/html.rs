//! The report as one self-contained HTML page: no scripts, no external
//! files; every plot an inline `<svg>` inside its `<figure>`, every value
//! cell a number with its unit (`<td class="q" data-unit=…>`).

use std::fmt::Write;

use super::document::{Cell, Section};
use super::Report;

const STYLE: &str = "body{font-family:sans-serif;max-width:1000px;margin:2em auto;padding:0 1em;color:#222}\
table{border-collapse:collapse;margin:1em 0;font-size:.9em}th,td{border:1px solid #ccc;padding:.25em .5em}\
td.q{text-align:right;white-space:nowrap}caption{font-weight:bold;text-align:left;padding:.3em 0}\
figure{margin:1em 0}figcaption{font-size:.9em;color:#555}p.method{color:#444}p.warning{color:#a00;font-weight:bold}";

/// The whole page.
pub fn render(report: &Report) -> String {
    let mut page = String::new();
    let _ = write!(
        page,
        "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\"><title>{}</title><style>{STYLE}</style></head><body>\n\
         <h1>{}</h1>\n<p>{}</p>\n<nav><ol>",
        escape(&report.title),
        escape(&report.title),
        escape(&report.summary)
    );
    for section in &report.sections {
        let _ = write!(page, "<li><a href=\"#{}\">{}</a></li>", section.id, escape(&section.title));
    }
    page.push_str("</ol></nav>\n");
    for section in &report.sections {
        render_section(&mut page, section);
    }
    page.push_str("</body></html>\n");
    page
}

fn render_section(page: &mut String, section: &Section) {
    let _ = write!(
        page,
        "<section id=\"{}\">\n<h2>{}</h2>\n<p class=\"method\">{}</p>\n",
        section.id,
        escape(&section.title),
        escape(&section.method)
    );
    for note in &section.notes {
        let class = if note.starts_with("Warning") { " class=\"warning\"" } else { "" };
        let _ = writeln!(page, "<p{class}>{}</p>", escape(note));
    }
    for table in &section.tables {
        let _ = write!(page, "<table><caption>{}</caption>\n<thead><tr>", escape(&table.caption));
        for column in &table.columns {
            let _ = write!(page, "<th>{}</th>", escape(column));
        }
        page.push_str("</tr></thead>\n<tbody>\n");
        for row in &table.rows {
            page.push_str("<tr>");
            for cell in row {
                match cell {
                    Cell::Text(_) => {
                        let _ = write!(page, "<td>{}</td>", escape(&cell.display()));
                    }
                    Cell::Quantity { unit, .. } => {
                        let _ = write!(
                            page,
                            "<td class=\"q\" data-unit=\"{}\">{}</td>",
                            escape(unit),
                            escape(&cell.display())
                        );
                    }
                }
            }
            page.push_str("</tr>\n");
        }
        page.push_str("</tbody></table>\n");
    }
    for figure in &section.figures {
        let _ = write!(
            page,
            "<figure id=\"{}\">\n{}\n<figcaption>{}</figcaption></figure>\n",
            figure.file.trim_end_matches(".svg"),
            strip_xml_declaration(&figure.svg),
            escape(&figure.caption)
        );
    }
    page.push_str("</section>\n");
}

/// An SVG document as an element to inline: without an XML declaration.
fn strip_xml_declaration(svg: &str) -> &str {
    match svg.find("<svg") {
        Some(at) => &svg[at..],
        None => svg,
    }
}

pub(super) fn escape(text: &str) -> String {
    text.replace('&', "&amp;").replace('<', "&lt;").replace('>', "&gt;").replace('"', "&quot;")
}
