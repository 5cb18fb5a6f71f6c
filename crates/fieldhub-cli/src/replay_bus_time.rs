//! `fieldhub replay --synchronized`: the replay as a participant of a hub in
//! virtual time (docs/virtual-time.md), sending each frame at a bus time
//! instead of a wall-clock time.
//!
//! A log's timestamp is when the frame was stamped: its end of frame on a
//! timed channel, its arrival on an ideal one. So a frame is sent its own
//! duration on the target channel before the time it should be stamped
//! with; on an idle bus it is then stamped exactly as recorded, and a log a
//! virtual-time hub recorded comes out byte for byte. The frames are sorted
//! by that send time first: a long frame on a slow channel goes out before
//! a short one on a fast channel that was stamped earlier.
//!
//! Leaving discards what the hub still queues for a port, so the replay
//! steps on until its ports have received each of its own frames back
//! (they are opened with `receive_own`).

use std::collections::HashMap;

use anyhow::{bail, Context};
use fieldhub_client::{Client, Frame, Port};
use fieldhub_log::Record;
use fieldhub_proto::bits::FrameBits;

use crate::HubSelect;

/// Bus time is in nanoseconds.
const MS: u64 = 1_000_000;
/// How far past its last frame's planned end the replay waits for its own
/// frames to come back before it gives up (bus time, not wall time).
const CONFIRM_WITHIN_NS: u64 = 60_000 * MS;

/// When frames are due.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Anchor {
    /// The first frame at the bus time the replay joined; the rest at their
    /// offsets from it.
    Joined,
    /// Every frame at its recorded time: the file's timestamps are bus
    /// times (a log a hub in virtual time recorded).
    Recorded,
}

/// One frame and the bus time it goes out at.
#[derive(Debug)]
struct Planned {
    send_ns: u64,
    channel: String,
    frame: Frame,
}

/// A timed channel's bitrates, `None` for an ideal one (no duration).
type Timing = Option<(u32, u32)>;

/// Each hub channel's timing, from the control API.
fn channel_timing(hub: &HubSelect) -> anyhow::Result<HashMap<String, Timing>> {
    let base = hub.http_base().context("replay --synchronized reads the channels' bit timing")?;
    let answer = crate::ctl::call(&base, "GET", "/api/v1/channels", None)?;
    let list = answer.get("channels").unwrap_or(&answer).as_array().cloned().unwrap_or_default();
    let mut timing = HashMap::new();
    for channel in list {
        let Some(name) = channel["name"].as_str() else { continue };
        let rate = |key: &str| channel[key].as_u64().and_then(|r| u32::try_from(r).ok()).filter(|r| *r > 0);
        let timed = channel["timing"] == "timed";
        let bitrates = match (timed, rate("bitrate")) {
            (true, Some(bitrate)) => Some((bitrate, rate("data_bitrate").unwrap_or(bitrate))),
            _ => None,
        };
        timing.insert(name.to_owned(), bitrates);
    }
    Ok(timing)
}

/// The frames of `records` with their send times (relative to the file's
/// first timestamp for [`Anchor::Joined`]), in send order.
fn plan(records: Vec<Record>, targets: &HashMap<String, Port>, timing: &HashMap<String, Timing>) -> Vec<Planned> {
    let mut planned: Vec<Planned> = records
        .into_iter()
        .map(|record| {
            let target = &targets[&record.channel].channel;
            let duration = match timing.get(target).copied().flatten() {
                Some((bitrate, data_bitrate)) => FrameBits::of(&record.frame).duration_ns(bitrate, data_bitrate),
                None => 0,
            };
            Planned {
                send_ns: record.timestamp_ns.saturating_sub(duration),
                channel: record.channel,
                frame: record.frame,
            }
        })
        .collect();
    // Stable: frames due at the same time keep the file's order.
    planned.sort_by_key(|p| p.send_ns);
    planned
}

/// Play `records` `loops` times; returns the frames sent per file channel.
pub fn play(
    hub: &HubSelect,
    client: &Client,
    targets: &HashMap<String, Port>,
    records: Vec<Record>,
    anchor: Anchor,
    loops: u64,
) -> anyhow::Result<HashMap<String, u64>> {
    let timing = channel_timing(hub)?;
    let planned = plan(records, targets, &timing);
    let (Some(first), Some(last)) = (planned.first(), planned.last()) else { return Ok(HashMap::new()) };
    let (first_ns, last_ns) = (first.send_ns, last.send_ns);
    let joined = client.now().context("the replay is not a synchronised participant")?;
    if anchor == Anchor::Recorded {
        if loops > 1 {
            bail!("--recorded-bus-time plays the file once: a second loop would be due in the past");
        }
        if first_ns < joined {
            bail!(
                "bus time is already {}, later than the file's first frame is due ({}): replay it into a hub whose \
                 bus time has not passed it, or drop --recorded-bus-time to start from now",
                seconds(joined),
                seconds(first_ns)
            );
        }
    }
    let mut sent: HashMap<String, u64> = HashMap::new();
    let mut echoes = Echoes::new(targets);
    let mut planned_end = joined;
    for _ in 0..loops {
        let origin = match anchor {
            Anchor::Joined => client.now().unwrap_or(joined),
            Anchor::Recorded => 0,
        };
        for p in &planned {
            let due = match anchor {
                Anchor::Joined => origin + (p.send_ns - first_ns),
                Anchor::Recorded => p.send_ns,
            };
            let now = client.now().unwrap_or(joined);
            if due > now {
                client.step(due).context("stepping to the next frame's bus time")?;
                echoes.drain(client)?;
            }
            let port = &targets[&p.channel];
            client.send(port, &p.frame).with_context(|| format!("sending {:?} on '{}'", p.frame, port.channel))?;
            *sent.entry(p.channel.clone()).or_default() += 1;
            echoes.expect(port);
        }
        planned_end = match anchor {
            Anchor::Joined => origin + (last_ns - first_ns),
            Anchor::Recorded => last_ns,
        };
    }
    confirm(client, &mut echoes, planned_end)?;
    Ok(sent)
}

/// Step on until every frame sent has come back on its port.
fn confirm(client: &Client, echoes: &mut Echoes, planned_end: u64) -> anyhow::Result<()> {
    crate::replay::confirm(client)?;
    let give_up = planned_end + CONFIRM_WITHIN_NS;
    loop {
        echoes.drain(client)?;
        if echoes.missing() == 0 {
            return Ok(());
        }
        let now = client.now().unwrap_or(planned_end);
        if now >= give_up {
            bail!(
                "{} replayed frames were not on the bus by bus time {} (a minute past the last one's): \
                 they may have lost arbitration all along, or a fault rule held them",
                echoes.missing(),
                seconds(now)
            );
        }
        client.step(now + MS).context("stepping until the replayed frames are on the bus")?;
    }
}

/// Own frames sent and received back, per port.
struct Echoes {
    /// port id → (sent, received back)
    counts: HashMap<u32, (u64, u64)>,
}

impl Echoes {
    fn new(targets: &HashMap<String, Port>) -> Self {
        Self { counts: targets.values().map(|p| (p.port_id, (0, 0))).collect() }
    }

    fn expect(&mut self, port: &Port) {
        self.counts.entry(port.port_id).or_default().0 += 1;
    }

    fn drain(&mut self, client: &Client) -> anyhow::Result<()> {
        while let Some(rx) = client.try_recv()? {
            if let Some(count) = self.counts.get_mut(&rx.meta.sender) {
                count.1 += 1;
            }
        }
        Ok(())
    }

    fn missing(&self) -> u64 {
        self.counts.values().map(|(sent, back)| sent.saturating_sub(*back)).sum()
    }
}

fn seconds(ns: u64) -> String {
    format!("{}.{:06} s", ns / 1_000_000_000, ns % 1_000_000_000 / 1_000)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn port(channel: &str, port_id: u32) -> Port {
        Port { handle: 0, channel: channel.into(), channel_id: 0, port_id, channel_fd: false }
    }

    fn record(ms: u64, channel: &str, frame: Frame) -> Record {
        Record { timestamp_ns: ms * MS, channel: channel.into(), frame, direction: None }
    }

    #[test]
    fn a_frame_on_a_timed_channel_is_sent_its_duration_before_its_stamp_and_on_an_ideal_one_at_it() {
        let frame = Frame::can(0x123, false, &[1, 2, 3, 4, 5, 6, 7, 8]).unwrap();
        let targets = HashMap::from([("can0".into(), port("can0", 1)), ("can1".into(), port("can1", 2))]);
        let timing = HashMap::from([("can0".into(), Some((500_000, 500_000))), ("can1".into(), None)]);
        let planned =
            plan(vec![record(10, "can0", frame.clone()), record(10, "can1", frame.clone())], &targets, &timing);
        let duration = FrameBits::of(&frame).duration_ns(500_000, 500_000);
        assert!(duration > 0);
        let by_channel: HashMap<&str, u64> = planned.iter().map(|p| (p.channel.as_str(), p.send_ns)).collect();
        assert_eq!(by_channel["can0"], 10 * MS - duration);
        assert_eq!(by_channel["can1"], 10 * MS);
    }

    #[test]
    fn frames_go_in_order_of_send_time_and_ties_keep_the_files_order() {
        let long = Frame::can(0x1, false, &[0; 8]).unwrap();
        let short = Frame::can(0x2, false, &[]).unwrap();
        let targets = HashMap::from([("slow".into(), port("slow", 1)), ("fast".into(), port("fast", 2))]);
        let timing =
            HashMap::from([("slow".into(), Some((125_000, 125_000))), ("fast".into(), Some((1_000_000, 1_000_000)))]);
        // Stamped 0.1 ms apart, but the long frame on the slow channel started
        // long before the short frame on the fast one.
        let records = vec![
            Record { timestamp_ns: 5 * MS, channel: "fast".into(), frame: short.clone(), direction: None },
            Record { timestamp_ns: 5 * MS + 100_000, channel: "slow".into(), frame: long, direction: None },
            Record { timestamp_ns: 5 * MS, channel: "fast".into(), frame: short, direction: None },
        ];
        let planned = plan(records, &targets, &timing);
        let order: Vec<&str> = planned.iter().map(|p| p.channel.as_str()).collect();
        assert_eq!(order, ["slow", "fast", "fast"]);
    }
}
