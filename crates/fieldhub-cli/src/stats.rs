//! `fieldhub stats`: channel and port statistics of a running hub.
//! A channel's `FRAMES` are its data, remote and LIN frames (what its ids
//! and load count); `ERRORS` its error frames, the bus's own and clients'.
//!
//! The report is composed first and written at once; a reader that stops
//! early (`fieldhub stats | head`) ends the command quietly (`crate::output`).

use std::fmt::Write as _;

use fieldhub_proto::stats::FederationStats;

use crate::HubSelect;

#[derive(clap::Args)]
pub struct StatsArgs {
    #[command(flatten)]
    hub: HubSelect,
    /// Print the statistics document as JSON. Each identifier is its number without flag bits
    /// (`"id": 291`) with `extended`, `remote` and `error` beside it (the control API's
    /// `/api/v1/stats` has the SocketCAN form, flags inside the number).
    #[arg(long)]
    json: bool,
    /// Identifiers to list per channel (most frequent first).
    #[arg(long, default_value = "10", value_name = "N")]
    top_ids: usize,
}

pub fn run(args: StatsArgs) -> anyhow::Result<()> {
    let client = args.hub.connect("stats")?;
    let stats = client.stats()?;
    let cannelloni = cannelloni(&args.hub);
    let mut out = String::new();
    if args.json {
        let mut document = json_document(&stats)?;
        if let Some(endpoints) = cannelloni {
            document["cannelloni"] = endpoints;
        }
        writeln!(out, "{}", serde_json::to_string_pretty(&document)?)?;
        return crate::output::text(&out);
    }
    writeln!(out, "hub {}", stats.hub)?;
    if let Some(time) = &stats.time {
        writeln!(
            out,
            "virtual time {:.6} s, {:.1}x real time, {} participants, {}",
            time.now_ns as f64 / 1e9,
            time.real_time_factor,
            time.participants,
            time.state
        )?;
    }
    writeln!(
        out,
        "{:<16} {:<6} {:>9} {:>9} {:<6} {:>12} {:>8} {:>7} {:>7}",
        "CHANNEL", "PROTO", "BITRATE", "DATA", "TIMING", "FRAMES", "ERRORS", "LOAD1s", "LOAD10s"
    )?;
    for c in &stats.channels {
        writeln!(
            out,
            "{:<16} {:<6} {:>9} {:>9} {:<6} {:>12} {:>8} {:>6.1}% {:>6.1}%",
            c.name, c.protocol, c.bitrate, c.data_bitrate, c.timing, c.frames, c.error_frames, c.load_1s, c.load_10s
        )?;
        if !c.tx_dropped_by_reason.is_empty() {
            writeln!(out, "    dropped off the bus: {}", by_reason(&c.tx_dropped_by_reason))?;
        }
        if let Some(f) = &c.federation {
            out.push_str(&federation_lines(f));
        }
        for id in c.ids.iter().take(args.top_ids) {
            writeln!(out, "    id {:>10} {:>12} frames {:>10.1} /s", identifier(id.id), id.frames, id.rate_hz)?;
        }
    }
    writeln!(out)?;
    writeln!(
        out,
        "{:<24} {:<16} {:>12} {:>12} {:>10} {:>10} {:>8}",
        "PORT", "CHANNEL", "TX", "RX", "RX-DROP", "TX-DROP", "PENDING"
    )?;
    for p in &stats.ports {
        writeln!(
            out,
            "{:<24} {:<16} {:>12} {:>12} {:>10} {:>10} {:>8}",
            p.name, p.channel, p.tx_frames, p.rx_frames, p.rx_dropped, p.tx_dropped, p.tx_pending
        )?;
        if !p.tx_dropped_by_reason.is_empty() {
            writeln!(out, "    dropped off the bus: {}", by_reason(&p.tx_dropped_by_reason))?;
        }
    }
    if !stats.routes.is_empty() {
        writeln!(out)?;
        for r in &stats.routes {
            writeln!(out, "route {} -> {}: {} routed, {} dropped", r.from, r.to, r.routed, r.dropped)?;
        }
    }
    if let Some(endpoints) = cannelloni {
        write_cannelloni(&mut out, &endpoints)?;
    }
    if !stats.auth_refused.is_empty() {
        writeln!(out, "\nrefused for their credentials: {}", by_reason(&stats.auth_refused))?;
    }
    if let Some(timer) = stats.timer.as_ref().filter(|t| t.deadlines > 0) {
        out.push_str(&timer_lines(timer));
    }
    if let Some(o) = &stats.omitted {
        writeln!(
            out,
            "\nleft out to fit one STATS message: {} channels, {} ids, {} ports, {} routes \
             (GET /api/v1/stats on the hub's HTTP address has them all)",
            o.channels, o.ids, o.ports, o.routes
        )?;
    }
    crate::output::text(&out)
}

/// The cannelloni endpoints' counters (`GET /api/v1/cannelloni`, docs/cannelloni.md),
/// which the bus's `STATS` does not carry: UDP sequence gaps and malformed
/// packets per peer. `None` when the hub has no endpoint, or no control API
/// this URL reaches (a unix-socket hub).
fn cannelloni(hub: &HubSelect) -> Option<serde_json::Value> {
    let base = hub.http_base().ok()?;
    let endpoints = crate::ctl::call(&base, "GET", "/api/v1/cannelloni", None).ok()?;
    endpoints.as_array().is_some_and(|list| !list.is_empty()).then_some(endpoints)
}

fn write_cannelloni(out: &mut String, endpoints: &serde_json::Value) -> std::fmt::Result {
    writeln!(out)?;
    writeln!(
        out,
        "{:<28} {:<16} {:>10} {:>12} {:>12} {:>9} {:>6} {:>9}",
        "CANNELLONI PEER", "CHANNEL", "PACKETS", "FRAMES-IN", "FRAMES-OUT", "SEQ-GAPS", "LATE", "MALFORMED"
    )?;
    let n = |v: &serde_json::Value, key: &str| v[key].as_u64().unwrap_or(0);
    for endpoint in endpoints.as_array().into_iter().flatten() {
        let channel = endpoint["channel"].as_str().unwrap_or("");
        let gone = &endpoint["gone"];
        let peers = endpoint["peers"].as_array().into_iter().flatten();
        let named = peers.map(|p| (p["peer"].as_str().unwrap_or("").to_owned(), p));
        let gone_peers = n(endpoint, "gone_peers");
        let folded = (gone_peers > 0).then(|| (format!("({gone_peers} gone)"), gone));
        for (peer, p) in named.chain(folded) {
            writeln!(
                out,
                "{:<28} {:<16} {:>10} {:>12} {:>12} {:>9} {:>6} {:>9}",
                peer,
                channel,
                n(p, "packets_in"),
                n(p, "frames_in"),
                n(p, "frames_out"),
                n(p, "seq_gaps"),
                n(p, "seq_late"),
                n(p, "malformed")
            )?;
        }
        let refused = n(endpoint, "refused");
        if refused > 0 {
            let listen = endpoint["listen"].as_str().unwrap_or("");
            writeln!(out, "    {listen}: {refused} packets from senders that are no peer, dropped")?;
        }
    }
    Ok(())
}

/// The statistics document with every identifier split into its number
/// and its flags, for a reader (`jq`) that should not need SocketCAN's bits.
fn json_document(stats: &fieldhub_proto::stats::HubStats) -> serde_json::Result<serde_json::Value> {
    use fieldhub_proto::frame::{CAN_EFF_FLAG, CAN_ERR_FLAG, CAN_RTR_FLAG};
    let mut document = serde_json::to_value(stats)?;
    let channels = document["channels"].as_array_mut().into_iter().flatten();
    for id in channels.flat_map(|channel| channel["ids"].as_array_mut().into_iter().flatten()) {
        let socketcan = id["id"].as_u64().unwrap_or_default() as u32;
        let (extended, error) = (socketcan & CAN_EFF_FLAG != 0, socketcan & CAN_ERR_FLAG != 0);
        let bits = if extended || error { 0x1FFF_FFFF } else { 0x7FF };
        id["id"] = (socketcan & bits).into();
        id["extended"] = extended.into();
        id["remote"] = (socketcan & CAN_RTR_FLAG != 0).into();
        id["error"] = error.into();
    }
    Ok(document)
}

/// A statistics identifier (SocketCAN form) as cansend writes it: 3 hex
/// digits for an 11-bit id, 8 for a 29-bit one, `R` after a remote
/// frame's, `ERR` and the error class bits for error frames.
pub(crate) fn identifier(socketcan_id: u32) -> String {
    use fieldhub_proto::frame::{CAN_EFF_FLAG, CAN_ERR_FLAG, CAN_RTR_FLAG};
    if socketcan_id & CAN_ERR_FLAG != 0 {
        return format!("ERR {:X}", socketcan_id & 0x1FFF_FFFF);
    }
    let remote = if socketcan_id & CAN_RTR_FLAG != 0 { "R" } else { "" };
    if socketcan_id & CAN_EFF_FLAG != 0 {
        format!("{:08X}{remote}", socketcan_id & 0x1FFF_FFFF)
    } else {
        format!("{:03X}{remote}", socketcan_id & 0x7FF)
    }
}

/// `bus_off 3, fault_rule 1`: counts by name (drops by reason, refusals by transport).
/// A federated channel's lines under its row: its role and counters, and
/// on a relay whose owner is not reachable, what its clients were told.
fn federation_lines(f: &FederationStats) -> String {
    let mut lines = format!(
        "    federated: {} (owner {}), epoch {}, last seq {}, gaps recovered {}, desyncs {}, stale {}\n",
        f.role, f.owner, f.epoch, f.last_seq, f.gaps_recovered, f.desyncs, f.stale
    );
    if let Some(told) = &f.waiting {
        lines.push_str(&format!("    owner not reachable: {told}\n"));
    }
    lines
}

/// How late the bus thread served its deadlines (real time): the count
/// over 100 µs and 1 ms, and the latest with the part the thread slept past.
fn timer_lines(t: &fieldhub_proto::stats::TimerStats) -> String {
    let mut lines = format!(
        "\nbus thread: {} deadlines served, {} more than 100 µs late ({} of them busy for more than 100 µs), {} more \
         than 1 ms, the latest {:.1} µs\n",
        t.deadlines,
        t.late_over_100us,
        t.busy_over_100us,
        t.late_over_1ms,
        t.max_late_ns as f64 / 1e3
    );
    if let Some(w) = t.worst.first() {
        let cause = match w.mostly_asleep() {
            true => "the system ran the thread late",
            false => "the thread was busy",
        };
        lines += &format!(
            "    the latest: {:.1} µs late, {:.1} µs of it asleep past its time ({cause})\n",
            w.late_ns as f64 / 1e3,
            w.woke_late_ns as f64 / 1e3
        );
    }
    lines
}

fn by_reason(counts: &std::collections::BTreeMap<String, u64>) -> String {
    counts.iter().map(|(reason, n)| format!("{reason} {n}")).collect::<Vec<_>>().join(", ")
}

#[cfg(test)]
mod tests {
    use super::{federation_lines, identifier, json_document, timer_lines};
    use fieldhub_proto::stats::{ChannelStats, FederationStats, HubStats, IdStats};

    #[test]
    fn a_relay_whose_owner_is_not_reachable_says_so_under_its_channel() {
        let relay = FederationStats { role: "relay".into(), owner: "rack1".into(), ..Default::default() };
        assert!(!federation_lines(&relay).contains("not reachable"), "{}", federation_lines(&relay));
        let waiting = FederationStats { waiting: Some("the owner rack1 is not reachable".into()), ..relay };
        let lines = federation_lines(&waiting);
        assert!(lines.starts_with("    federated: relay (owner rack1)"), "{lines}");
        assert!(lines.ends_with("    owner not reachable: the owner rack1 is not reachable\n"), "{lines}");
    }

    #[test]
    fn the_bus_threads_latest_deadline_names_whether_it_slept_or_worked_past_it() {
        use fieldhub_proto::stats::{LateDeadline, TimerStats};
        let slept = LateDeadline { due_ns: 1, late_ns: 1_500_000, woke_late_ns: 1_400_000 };
        let timer = TimerStats {
            deadlines: 9,
            late_over_100us: 2,
            busy_over_100us: 0,
            late_over_1ms: 1,
            max_late_ns: 1_500_000,
            worst: vec![slept],
        };
        let text = timer_lines(&timer);
        assert!(
            text.contains("9 deadlines served, 2 more than 100 µs late (0 of them busy for more than 100 µs), 1 more than 1 ms, the latest 1500.0 µs"),
            "{text}"
        );
        assert!(text.contains("1400.0 µs of it asleep past its time (the system ran the thread late)"), "{text}");
        let busy = TimerStats { worst: vec![LateDeadline { woke_late_ns: 0, ..slept }], ..timer };
        assert!(timer_lines(&busy).contains("(the thread was busy)"));
    }

    #[test]
    fn identifiers_read_as_cansend_writes_them_not_with_socketcan_flag_bits() {
        assert_eq!(identifier(0x123), "123");
        assert_eq!(identifier(0x8000_0000 | 0x1ABC_DEF0), "1ABCDEF0");
        assert_eq!(identifier(0x4000_0000 | 0x123), "123R");
        assert_eq!(identifier(0x8000_0000 | 0x4000_0000 | 0x42), "00000042R");
        assert_eq!(identifier(0x2000_0000 | 0x4), "ERR 4");
    }

    #[test]
    fn json_identifiers_carry_the_id_and_its_flags_apart() {
        let id = |id| IdStats { id, frames: 1, rate_hz: 0.0 };
        let ids = vec![id(0x4000_0000 | 0x123), id(0x8000_0000 | 0x1ABC_DEF0), id(0x2000_0000 | 0x4)];
        let stats = HubStats { channels: vec![ChannelStats { ids, ..Default::default() }], ..Default::default() };
        let document = json_document(&stats).unwrap();
        let split: Vec<_> = document["channels"][0]["ids"]
            .as_array()
            .unwrap()
            .iter()
            .map(|i| (i["id"].as_u64().unwrap(), i["extended"] == true, i["remote"] == true, i["error"] == true))
            .collect();
        assert_eq!(split, [(0x123, false, true, false), (0x1ABC_DEF0, true, false, false), (0x4, false, false, true)]);
    }
}
