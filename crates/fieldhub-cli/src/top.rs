//! `fieldhub top`: a live view of the bus, like cansniffer and canbusload —
//! per channel its load, frame rate and frames dropped off it, per
//! identifier its count, rate and period, refreshed every interval.
//!
//! On a terminal (stdout a tty, no `-n`) it is a full-screen view
//! (`top_tui.rs`: period jitter, changed bytes, sort keys). Into a pipe or
//! file, or with `-n N`, each refresh is a block of plain text after a blank
//! line (on a terminal the screen is cleared first), so `top -n 1` is a
//! snapshot a script can read. The plain figures are the hub's `STATS` (the
//! same as `fieldhub stats`); the channel's frames per second is the change
//! of its frame count between two refreshes, so the first refresh has none.

use std::collections::HashMap;
use std::fmt::Write as _;
use std::io::IsTerminal;
use std::time::{Duration, Instant};

use fieldhub_proto::stats::{ChannelStats, IdStats};

use crate::top_model::SortBy;
use crate::HubSelect;

/// Clear the screen and put the cursor home (ANSI, as `clear` does).
const CLEAR_SCREEN: &str = "\x1b[H\x1b[2J";

#[derive(clap::Args)]
pub struct TopArgs {
    #[command(flatten)]
    hub: HubSelect,
    /// Refresh every MS milliseconds.
    #[arg(short = 'i', long = "interval", value_name = "MS", default_value = "1000",
          value_parser = clap::value_parser!(u64).range(50..=3_600_000))]
    interval_ms: u64,
    /// Stop after N refreshes (default: until Ctrl-C); -n 1 prints one snapshot.
    #[arg(short = 'n', long = "iterations", value_name = "N", value_parser = clap::value_parser!(u64).range(1..))]
    iterations: Option<u64>,
    /// Order of the identifiers: rate (most frequent first), id, count (most frames first; also
    /// 'frames') or period (shortest first). On the terminal the keys i, c, r and p change it.
    #[arg(short = 's', long = "sort", value_name = "rate|id|count|period", default_value = "rate")]
    sort: SortBy,
    /// Identifiers to list per channel in plain text (the terminal view lists as many as fit).
    #[arg(long = "ids", value_name = "N", default_value = "20")]
    ids: usize,
    /// Channels to show (default: every channel of the hub).
    #[arg(value_name = "CHANNEL")]
    channels: Vec<String>,
}

pub fn run(args: TopArgs) -> anyhow::Result<()> {
    let client = args.hub.connect("top")?;
    let redraw = std::io::stdout().is_terminal();
    if redraw && args.iterations.is_none() {
        let stats = client.stats()?;
        check_channels(&stats, &args.channels)?;
        let channels = if args.channels.is_empty() {
            stats.channels.iter().map(|c| c.name.clone()).collect()
        } else {
            args.channels.clone()
        };
        let view =
            crate::top_tui::View { interval: Duration::from_millis(args.interval_ms), sort: args.sort, channels };
        return crate::top_tui::run(&client, view);
    }
    let interval = Duration::from_millis(args.interval_ms);
    let mut previous: HashMap<String, (u64, Instant)> = HashMap::new();
    let mut refresh = 0u64;
    loop {
        let stats = client.stats()?;
        let now = Instant::now();
        let mut out = String::new();
        out.push_str(if redraw {
            CLEAR_SCREEN
        } else if refresh > 0 {
            "\n"
        } else {
            ""
        });
        writeln!(out, "hub {}  (every {} ms, Ctrl-C ends)", stats.hub, args.interval_ms)?;
        check_channels(&stats, &args.channels)?;
        for channel in stats.channels.iter().filter(|c| args.channels.is_empty() || args.channels.contains(&c.name)) {
            let rate = previous.get(&channel.name).map(|&(frames, at)| {
                channel.frames.saturating_sub(frames) as f64 / now.duration_since(at).as_secs_f64().max(1e-9)
            });
            previous.insert(channel.name.clone(), (channel.frames, now));
            write_channel(&mut out, channel, rate, &args)?;
        }
        crate::output::text(&out)?;
        refresh += 1;
        if args.iterations.is_some_and(|n| refresh >= n) {
            return Ok(());
        }
        std::thread::sleep(interval);
    }
}

fn check_channels(stats: &fieldhub_proto::stats::HubStats, channels: &[String]) -> anyhow::Result<()> {
    for name in channels {
        if !stats.channels.iter().any(|c| &c.name == name) {
            anyhow::bail!("the hub has no channel '{name}' (fieldhub ctl channels lists them)");
        }
    }
    Ok(())
}

fn write_channel(out: &mut String, c: &ChannelStats, rate: Option<f64>, args: &TopArgs) -> std::fmt::Result {
    let rate = rate.map_or_else(|| "-".to_owned(), |r| format!("{r:.1}"));
    let dropped: u64 = c.tx_dropped_by_reason.values().sum();
    writeln!(out)?;
    writeln!(
        out,
        "{}  {} {} bit/s  load {:.1}% (10 s {:.1}%)  {} frames/s  {} frames  {} dropped",
        c.name, c.protocol, c.bitrate, c.load_1s, c.load_10s, rate, c.frames, dropped
    )?;
    writeln!(out, "  {:>10} {:>12} {:>10} {:>11}", "ID", "FRAMES", "RATE/s", "PERIOD ms")?;
    let mut ids: Vec<&IdStats> = c.ids.iter().collect();
    match args.sort {
        SortBy::Rate => ids.sort_by(|a, b| b.rate_hz.total_cmp(&a.rate_hz).then(a.id.cmp(&b.id))),
        SortBy::Id => ids.sort_by_key(|i| i.id),
        SortBy::Count => ids.sort_by(|a, b| b.frames.cmp(&a.frames).then(a.id.cmp(&b.id))),
        // The shortest period is the highest rate; identifiers without a rate last.
        SortBy::Period => ids.sort_by(|a, b| {
            (a.rate_hz <= 0.0).cmp(&(b.rate_hz <= 0.0)).then(b.rate_hz.total_cmp(&a.rate_hz)).then(a.id.cmp(&b.id))
        }),
    }
    for id in ids.into_iter().take(args.ids) {
        let period = if id.rate_hz > 0.0 { format!("{:.1}", 1000.0 / id.rate_hz) } else { "-".into() };
        writeln!(
            out,
            "  {:>10} {:>12} {:>10.1} {:>11}",
            crate::stats::identifier(id.id),
            id.frames,
            id.rate_hz,
            period
        )?;
    }
    Ok(())
}
