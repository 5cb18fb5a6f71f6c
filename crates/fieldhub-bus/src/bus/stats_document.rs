//! The `STATS` document within its size limit.
//!
//! A hub with thousands of ports or tracked ids produces more JSON than one
//! `STATS` message carries (`MAX_STATS_LEN`). Cutting the bytes would leave
//! invalid JSON, so lists are cut instead, from their ends, and the
//! document says how many entries it left out (`omitted`). The control
//! API's `GET /api/v1/stats` has no such limit and always has them all.

use fieldhub_proto::stats::{HubStats, OmittedStats};

/// `stats` as JSON of at most `limit` bytes: whole when it fits, else with
/// each channel's `ids` cut to its first ten (then none), then as many
/// ports, routes and channels as fit.
pub(super) fn within(mut stats: HubStats, limit: usize) -> String {
    let whole = json(&stats);
    if whole.len() <= limit {
        return whole;
    }
    let mut omitted = OmittedStats::default();
    // `fieldhub stats` shows ten ids per channel by default.
    for keep_ids in [10, 0] {
        for channel in &mut stats.channels {
            omitted.ids += cut(&mut channel.ids, keep_ids);
        }
        stats.omitted = Some(omitted.clone());
        if json(&stats).len() <= limit {
            return json(&stats);
        }
    }
    fit(&mut stats, &mut omitted, limit, |s| &mut s.ports, |o| &mut o.ports);
    fit(&mut stats, &mut omitted, limit, |s| &mut s.routes, |o| &mut o.routes);
    fit(&mut stats, &mut omitted, limit, |s| &mut s.channels, |o| &mut o.channels);
    json(&stats)
}

fn json(stats: &HubStats) -> String {
    serde_json::to_string(stats).unwrap_or_else(|e| format!("{{\"error\":\"statistics: {e}\"}}"))
}

/// Drop entries from the end of `list` until its entries beyond `keep` are gone.
fn cut<T>(list: &mut Vec<T>, keep: usize) -> u32 {
    let gone = list.len().saturating_sub(keep);
    list.truncate(keep);
    gone as u32
}

/// Keep the longest prefix of one list of `stats` with which the document
/// fits, counting the rest in `omitted`. Each entry is serialized once: the
/// document with `k` entries is the one without any plus the first `k`
/// entries and their commas (the count of those left out is written at its
/// largest, so the estimate never falls short).
fn fit<T: Clone + serde::Serialize>(
    stats: &mut HubStats,
    omitted: &mut OmittedStats,
    limit: usize,
    list: impl Fn(&mut HubStats) -> &mut Vec<T>,
    count: impl Fn(&mut OmittedStats) -> &mut u32,
) {
    let mut entries = std::mem::take(list(stats));
    *count(omitted) = entries.len() as u32;
    stats.omitted = Some(omitted.clone());
    let mut room = limit.saturating_sub(json(stats).len());
    let mut keep = 0;
    for (i, entry) in entries.iter().enumerate() {
        let len = serde_json::to_string(entry).map_or(usize::MAX, |text| text.len()) + usize::from(i > 0);
        if len > room {
            break;
        }
        room -= len;
        keep += 1;
    }
    *count(omitted) = (entries.len() - keep) as u32;
    entries.truncate(keep);
    *list(stats) = entries;
    stats.omitted = Some(omitted.clone());
}

#[cfg(test)]
mod tests {
    use super::*;
    use fieldhub_proto::limits::MAX_STATS_LEN;
    use fieldhub_proto::stats::{ChannelStats, IdStats, PortStats};

    fn port(n: usize) -> PortStats {
        PortStats { name: format!("ecu-{n}.port"), channel: "can0".into(), ..Default::default() }
    }

    #[test]
    fn a_document_that_fits_is_whole() {
        let stats = HubStats { hub: "h".into(), ports: (0..10).map(port).collect(), ..Default::default() };
        let text = within(stats.clone(), MAX_STATS_LEN);
        assert_eq!(serde_json::from_str::<HubStats>(&text).unwrap(), stats);
        assert!(!text.contains("omitted"));
    }

    #[test]
    fn thousands_of_ports_give_valid_json_within_the_limit_saying_how_many_were_left_out() {
        let stats = HubStats { hub: "h".into(), ports: (0..5000).map(port).collect(), ..Default::default() };
        let text = within(stats, MAX_STATS_LEN);
        assert!(text.len() <= MAX_STATS_LEN, "{} bytes", text.len());
        let read: HubStats = serde_json::from_str(&text).unwrap();
        let omitted = read.omitted.expect("the cut is reported");
        assert!(omitted.ports > 0);
        assert_eq!(read.ports.len() + omitted.ports as usize, 5000, "kept and omitted add up");
        assert_eq!(read.ports[0].name, "ecu-0.port", "the list is cut from its end");
        assert!(
            MAX_STATS_LEN - text.len() < 2 * serde_json::to_string(&read.ports[0]).unwrap().len(),
            "as many as fit"
        );
    }

    #[test]
    fn ids_are_cut_to_the_first_ten_before_any_port_goes() {
        let ids = (0..4096).map(|id| IdStats { id, frames: 1, rate_hz: 0.5 }).collect::<Vec<_>>();
        let channels =
            (0..64).map(|n| ChannelStats { name: format!("can{n}"), ids: ids.clone(), ..Default::default() });
        let stats = HubStats {
            hub: "h".into(),
            channels: channels.collect(),
            ports: (0..100).map(port).collect(),
            ..Default::default()
        };
        let read: HubStats = serde_json::from_str(&within(stats, MAX_STATS_LEN)).unwrap();
        assert!(read.channels.iter().all(|c| c.ids.len() == 10));
        assert_eq!(read.ports.len(), 100);
        assert_eq!(read.omitted.unwrap().ids, 64 * (4096 - 10));
    }

    #[test]
    fn a_tiny_limit_still_gives_valid_json() {
        let stats = HubStats { hub: "h".into(), ports: (0..50).map(port).collect(), ..Default::default() };
        let read: HubStats = serde_json::from_str(&within(stats, 200)).unwrap();
        assert_eq!(read.ports.len() + read.omitted.unwrap().ports as usize, 50);
    }
}
