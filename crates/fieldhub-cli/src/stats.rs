//! `fieldhub stats`: channel and port statistics of a running hub.

use crate::HubSelect;

#[derive(clap::Args)]
pub struct StatsArgs {
    #[command(flatten)]
    hub: HubSelect,
    /// Print the statistics document as JSON.
    #[arg(long)]
    json: bool,
    /// Identifiers to list per channel (most frequent first).
    #[arg(long, default_value = "10", value_name = "N")]
    top_ids: usize,
}

pub fn run(args: StatsArgs) -> anyhow::Result<()> {
    let client = args.hub.connect("stats")?;
    let stats = client.stats()?;
    if args.json {
        println!("{}", serde_json::to_string_pretty(&stats)?);
        return Ok(());
    }
    println!("hub {}", stats.hub);
    println!(
        "{:<16} {:<6} {:>9} {:>9} {:<6} {:>12} {:>7} {:>7}",
        "CHANNEL", "PROTO", "BITRATE", "DATA", "TIMING", "FRAMES", "LOAD1s", "LOAD10s"
    );
    for c in &stats.channels {
        println!(
            "{:<16} {:<6} {:>9} {:>9} {:<6} {:>12} {:>6.1}% {:>6.1}%",
            c.name, c.protocol, c.bitrate, c.data_bitrate, c.timing, c.frames, c.load_1s, c.load_10s
        );
        for id in c.ids.iter().take(args.top_ids) {
            println!("    id {:>8X} {:>12} frames {:>10.1} /s", id.id, id.frames, id.rate_hz);
        }
    }
    println!();
    println!(
        "{:<24} {:<16} {:>12} {:>12} {:>10} {:>10} {:>8}",
        "PORT", "CHANNEL", "TX", "RX", "RX-DROP", "TX-DROP", "PENDING"
    );
    for p in &stats.ports {
        println!(
            "{:<24} {:<16} {:>12} {:>12} {:>10} {:>10} {:>8}",
            p.name, p.channel, p.tx_frames, p.rx_frames, p.rx_dropped, p.tx_dropped, p.tx_pending
        );
    }
    if !stats.routes.is_empty() {
        println!();
        for r in &stats.routes {
            println!("route {} -> {}: {} routed, {} dropped", r.from, r.to, r.routed, r.dropped);
        }
    }
    Ok(())
}
