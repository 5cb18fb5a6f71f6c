//! Drawing `fieldhub top`'s terminal view with ratatui: a title line, one
//! line per channel (its load, frame rate and error counters), the
//! identifiers in the chosen order with their data (bytes changed since the
//! last refresh in reverse video, as cansniffer marks them) and a footer
//! naming the keys.
//!
//! It only draws what it is given: the figures are `top_model.rs`'s and the
//! hub's `STATS`, so a redraw (a key, a resize) changes no figure.

use fieldhub_proto::stats::{ChannelStats, HubStats};
use ratatui::layout::{Constraint, Layout};
use ratatui::style::{Modifier, Style};
use ratatui::text::{Line, Span};
use ratatui::widgets::{Paragraph, Row, Table};

use crate::top_model::{IdRow, Sniffer, SortBy};

/// One channel's line: the hub's figures (load, frames, frames dropped off
/// the bus, its ports' worst error counters and states) and the error frames
/// top saw.
pub struct ChannelLine {
    text: String,
    /// Whether a port on it is error passive or bus off.
    troubled: bool,
}

impl ChannelLine {
    /// The line of `channel`, whose frames per second is `rate` (`None` at
    /// the first refresh) and on which top saw `error_frames`; the error
    /// states are those of the channel's ports in `stats`.
    pub fn of(stats: &HubStats, channel: &ChannelStats, rate: Option<f64>, error_frames: u64) -> Self {
        let ports = stats.ports.iter().filter(|p| p.channel == channel.name);
        let (mut tec, mut rec, mut passive, mut bus_off) = (0, 0, 0, 0);
        for port in ports {
            tec = tec.max(port.tec);
            rec = rec.max(port.rec);
            match port.error_state.as_str() {
                "passive" => passive += 1,
                "bus_off" => bus_off += 1,
                _ => {}
            }
        }
        let rate = rate.map_or_else(|| "-".to_owned(), |r| format!("{r:.1}"));
        let dropped: u64 = channel.tx_dropped_by_reason.values().sum();
        let mut text = format!(
            "{}  {} {} bit/s  load {:.1}% (10 s {:.1}%)  {} frames/s  {} frames  \
             error frames {}  dropped {}  TEC/REC {}/{}",
            channel.name,
            channel.protocol,
            channel.bitrate,
            channel.load_1s,
            channel.load_10s,
            rate,
            channel.frames,
            error_frames,
            dropped,
            tec,
            rec
        );
        // Said only when it happens, so a healthy channel's line stays short.
        if passive > 0 {
            text.push_str(&format!("  {passive} error passive"));
        }
        if bus_off > 0 {
            text.push_str(&format!("  {bus_off} bus off"));
        }
        Self { text, troubled: passive + bus_off > 0 }
    }
}

/// What one screen shows.
pub struct Screen<'a> {
    pub hub: &'a str,
    pub interval_ms: u64,
    /// The channels' names, by the index the sniffer's rows carry.
    pub names: &'a [String],
    pub channels: &'a [ChannelLine],
    pub sniffer: &'a Sniffer,
    pub sort: SortBy,
}

/// The identifiers table's columns: heading, width, and the order its key chooses.
const COLUMNS: [(&str, u16, Option<SortBy>); 6] = [
    ("CHANNEL", 9, None),
    ("ID", 10, Some(SortBy::Id)),
    ("COUNT", 10, Some(SortBy::Count)),
    ("RATE/s", 9, Some(SortBy::Rate)),
    ("PERIOD ms", 10, Some(SortBy::Period)),
    ("JITTER ms", 10, None),
];

pub fn draw(frame: &mut ratatui::Frame<'_>, screen: &Screen<'_>) {
    let [title, channels, table, footer] = Layout::vertical([
        Constraint::Length(1),
        Constraint::Length(screen.channels.len() as u16 + 1),
        Constraint::Min(0),
        Constraint::Length(1),
    ])
    .areas(frame.area());
    frame.render_widget(
        Paragraph::new(format!("fieldhub top  hub {}  (every {} ms)", screen.hub, screen.interval_ms))
            .style(Style::new().add_modifier(Modifier::BOLD)),
        title,
    );
    let lines: Vec<Line<'_>> = screen
        .channels
        .iter()
        .map(|c| {
            let style = if c.troubled { Style::new().add_modifier(Modifier::BOLD) } else { Style::new() };
            Line::styled(c.text.as_str(), style)
        })
        .collect();
    frame.render_widget(Paragraph::new(lines), channels);
    frame.render_widget(identifiers(screen), table);
    frame.render_widget(Paragraph::new(keys(screen.sort)), footer);
}

fn identifiers<'a>(screen: &'a Screen<'a>) -> Table<'a> {
    let bold = Style::new().add_modifier(Modifier::BOLD);
    // The heading of the column the rows are sorted by is underlined.
    let header = Row::new(
        COLUMNS
            .iter()
            .map(|&(name, _, sort)| {
                Span::styled(
                    name,
                    if sort == Some(screen.sort) { bold.add_modifier(Modifier::UNDERLINED) } else { bold },
                )
            })
            .chain([Span::styled("DATA", bold)]),
    );
    let rows = screen.sniffer.rows(screen.sort).into_iter().map(|row| id_row(screen, row));
    let widths = COLUMNS.iter().map(|&(_, width, _)| Constraint::Length(width)).chain([Constraint::Min(0)]);
    Table::new(rows, widths).header(header)
}

fn id_row<'a>(screen: &Screen<'a>, row: &IdRow) -> Row<'a> {
    let figure = |v: Option<f64>| v.map_or_else(|| "-".to_owned(), |v| format!("{v:.1}"));
    let data: Vec<Span<'a>> = row
        .data()
        .map(|(byte, changed)| {
            let style = if changed { Style::new().add_modifier(Modifier::REVERSED) } else { Style::new() };
            Span::styled(format!("{byte:02X} "), style)
        })
        .collect();
    Row::new([
        Line::raw(screen.names.get(row.channel).cloned().unwrap_or_default()),
        Line::raw(crate::stats::identifier(row.id)),
        Line::raw(row.count.to_string()),
        Line::raw(format!("{:.1}", row.rate_hz)),
        Line::raw(figure(row.period_ms())),
        Line::raw(figure(row.jitter_ms())),
        Line::from(data),
    ])
}

/// The footer: the sort keys, the current order in reverse video, and how to leave.
fn keys(sort: SortBy) -> Line<'static> {
    let mut spans = vec![Span::raw("sort: ")];
    for (key, by, name) in SortBy::KEYS {
        let style = if by == sort { Style::new().add_modifier(Modifier::REVERSED) } else { Style::new() };
        spans.push(Span::styled(format!("[{key}] {name}"), style));
        spans.push(Span::raw("  "));
    }
    spans.push(Span::raw("  [q] Esc Ctrl-C quit"));
    Line::from(spans)
}
