//! The web monitor's two ways into the bus, applied as control requests:
//! monitors (a tap on channels, [`crate::monitor`]) and frames sent from
//! the page.
//!
//! A sent frame leaves the channel's *send port*: a port of the hub's own,
//! like a gateway route's sending end, added the first time something is
//! sent on the channel. It queues at most [`GATEWAY_QUEUE`] frames (a full
//! queue refuses the request), competes in arbitration like any port, and
//! passes the channel's timing and fault rules; it receives nothing and does
//! not acknowledge, so it never makes a lone sender's frame succeed.

use fieldhub_proto::Frame;
use serde_json::{json, Value};

use super::Bus;
use crate::config::{Arbitration, Protocol};
use crate::member::{Member, GATEWAY_QUEUE};
use crate::monitor::MonitorTap;
use crate::port_id::PortId;
use crate::request::{ControlError, ControlResult};
use crate::tx_queue::Pending;

/// Most monitors one hub serves at once (each holds a bounded queue).
pub const MAX_MONITORS: usize = 64;

impl Bus {
    /// Start offering `channels`' frames (all channels when empty) to `tap`.
    pub(super) fn open_monitor(&mut self, channels: &[String], mut tap: MonitorTap) -> ControlResult {
        self.close_monitors();
        if self.monitors.len() >= MAX_MONITORS {
            return Err(ControlError::Conflict(format!("the hub serves at most {MAX_MONITORS} monitors at once")));
        }
        let ids = if channels.is_empty() {
            self.channels.iter().filter(|c| !c.removed).map(|c| c.id).collect()
        } else {
            channels.iter().map(|name| self.channel_index(name)).collect::<Result<Vec<_>, _>>()?
        };
        let answer: Vec<Value> =
            ids.iter().map(|&id| json!({ "id": id, "name": self.channels[id as usize].name() })).collect();
        tap.set_channels(ids);
        self.monitors.push(tap);
        Ok(json!({ "channels": answer }))
    }

    /// Forget monitors whose feed is gone (their WebSocket closed).
    pub(super) fn close_monitors(&mut self) {
        self.monitors.retain(|m| !m.is_closed());
    }

    /// The names of the ports `ids`, open or departed, as `{"7": "ecu"}`;
    /// ids the bus does not know (or has forgotten) are left out.
    pub(super) fn port_names_json(&self, ids: &[PortId]) -> Value {
        let named = ids.iter().filter_map(|&id| {
            let name = self.port_names.get(&id).map(String::as_str).or_else(|| self.departed.name(id))?;
            Some((u32::from(id).to_string(), Value::from(name)))
        });
        Value::Object(named.collect())
    }

    /// Queue `frame` on `channel`'s send port.
    pub(super) fn send_frame(&mut self, channel: &str, frame: Frame) -> ControlResult {
        let index = self.channel_index(channel)?;
        let arrived_ns = self.clock.now();
        let target = &mut self.channels[index as usize];
        if let Some((what, fix)) = target.config.protocol.refuses(frame.kind()) {
            return Err(ControlError::Invalid(format!("channel '{channel}' {what} {frame:?}{fix}")));
        }
        if target.config.protocol == Protocol::Lin {
            return Err(ControlError::Invalid(format!(
                "channel '{channel}' is a LIN channel: its slaves publish responses from their ports"
            )));
        }
        if target.config.arbitration != Arbitration::Can {
            let rule = target.config.arbitration.name();
            return Err(ControlError::Invalid(format!(
                "channel '{channel}' gives bus time to named ports (arbitration = \"{rule}\"); send from a port that has a turn"
            )));
        }
        let port_id = PortId::send(index);
        if target.member_mut(port_id).is_none() {
            target.members.push(Member::gateway(port_id));
        }
        let Some(port) = target.member_mut(port_id) else {
            return Err(ControlError::Conflict(format!("channel '{channel}' has no send port")));
        };
        if port.tx.len() >= GATEWAY_QUEUE {
            return Err(ControlError::Conflict(format!(
                "{GATEWAY_QUEUE} frames already wait to be sent on channel '{channel}'"
            )));
        }
        let text = fieldhub_proto::text::format_cansend(&frame);
        port.tx.push(Pending { frame, arrival: self.next_arrival, hops: 0, arrived_ns });
        self.next_arrival += 1;
        self.dirty[index as usize] = true;
        Ok(json!({ "channel": channel, "frame": text }))
    }
}

#[cfg(test)]
mod tests {
    use fieldhub_proto::wire::PortOptions;
    use fieldhub_proto::Frame;

    use super::super::harness::Harness;
    use crate::monitor::{monitor, MONITOR_QUEUE};
    use crate::port_id::PortId;
    use crate::request::ControlRequest;

    const CONFIG: &str = r#"
        [[channel]]
        name = "can0"
        [[channel]]
        name = "can1"
        [[channel]]
        name = "lonely"
        timing = "timed"
        no_ack = true
    "#;

    fn can(id: u32, data: &[u8]) -> Frame {
        Frame::can(id, false, data).unwrap()
    }

    #[test]
    fn a_monitor_sees_every_frame_of_its_channels_only() {
        let mut h = Harness::new(CONFIG);
        let (a, b) = (h.connect("a"), h.connect("b"));
        let pa = h.open(&a, "can0", "a", PortOptions::empty());
        let pb = h.open(&b, "can1", "b", PortOptions::empty());
        let (tap, feed) = monitor();
        let opened = h.control(ControlRequest::Monitor { channels: vec!["can0".into()], tap }).unwrap();
        assert_eq!(opened["channels"][0]["name"], "can0");
        h.send(&a, pa, can(0x100, &[1]));
        h.send(&b, pb, can(0x200, &[2]));
        h.send(&a, pa, can(0x101, &[3]));
        h.step();
        let seen: Vec<u32> = std::iter::from_fn(|| feed.try_take()).map(|t| t.frame.id()).collect();
        assert_eq!(seen, [0x100, 0x101]);
    }

    #[test]
    fn a_full_monitor_drops_while_a_lossless_port_gets_every_frame_in_order() {
        let mut h = Harness::new(CONFIG);
        let (tx, rx) = (h.connect("tx"), h.connect("rx"));
        let port = h.open(&tx, "can0", "tx", PortOptions::empty());
        h.open(&rx, "can0", "rx", PortOptions::BLOCK_ON_OVERFLOW);
        let (tap, feed) = monitor();
        h.control(ControlRequest::Monitor { channels: vec![], tap }).unwrap();
        let total = MONITOR_QUEUE + 100;
        let mut got = Vec::new();
        for i in 0..total {
            h.send(&tx, port, can(0x10, &(i as u32).to_le_bytes()));
            h.step();
            got.extend(h.frames(&rx));
        }
        assert_eq!(got.len(), total, "the monitor never held the channel");
        assert!(got.iter().enumerate().all(|(i, (_, meta))| meta.seq == i as u64 + 1));
        assert_eq!(feed.dropped(), 100, "the monitor's overflow is counted");
    }

    #[test]
    fn a_closed_monitor_is_forgotten_at_the_next_request_or_frame() {
        let mut h = Harness::new(CONFIG);
        let (tap, feed) = monitor();
        h.control(ControlRequest::Monitor { channels: vec![], tap }).unwrap();
        assert_eq!(h.bus.monitors.len(), 1);
        drop(feed);
        h.control(ControlRequest::Channels).unwrap();
        assert!(h.bus.monitors.is_empty(), "at a control request");
        let (tap, feed) = monitor();
        h.control(ControlRequest::Monitor { channels: vec![], tap }).unwrap();
        drop(feed);
        let tx = h.connect("tx");
        let port = h.open(&tx, "can0", "tx", PortOptions::empty());
        h.send(&tx, port, can(0x1, &[]));
        h.step();
        assert!(h.bus.monitors.is_empty(), "at the next frame");
    }

    #[test]
    fn a_port_that_sent_and_left_is_still_named_for_the_monitor() {
        let mut h = Harness::new(CONFIG);
        let (tap, feed) = monitor();
        h.control(ControlRequest::Monitor { channels: vec![], tap }).unwrap();
        let (brief, stays) = (h.connect("brief"), h.connect("stays"));
        let gone = h.open(&brief, "can0", "brief-visitor", PortOptions::empty());
        h.open(&stays, "can0", "stays", PortOptions::empty());
        h.send(&brief, gone, can(0x100, &[1]));
        h.step();
        h.bus.handle(crate::inbox::Inbound::Detach { client: brief.id, reason: "done".into() });
        let sender = feed.try_take().unwrap().sender.unwrap();
        let never = PortId::client(999).unwrap();
        let named = h.control(ControlRequest::PortNames { ids: vec![sender, PortId::client(2).unwrap(), never] });
        assert_eq!(named.unwrap(), serde_json::json!({ "1": "brief-visitor", "2": "stays" }));
    }

    #[test]
    fn a_sent_frame_reaches_every_port_from_the_channels_send_port() {
        let mut h = Harness::new(CONFIG);
        let rx = h.connect("rx");
        h.open(&rx, "can0", "rx", PortOptions::empty());
        let answer = h.control(ControlRequest::Send { channel: "can0".into(), frame: can(0x123, &[0xAB]) }).unwrap();
        assert_eq!(answer["frame"], "123#AB");
        h.step();
        let got = h.frames(&rx);
        assert_eq!(got.len(), 1);
        assert_eq!(got[0].0.data(), [0xAB]);
        assert_eq!(got[0].1.sender, u32::from(PortId::send(0)));
        assert!(h.control(ControlRequest::Send { channel: "nope".into(), frame: can(1, &[]) }).is_err());
        let fd = Frame::can_fd(0x1, fieldhub_proto::FrameFlags::empty(), &[0; 12]).unwrap();
        assert!(h.control(ControlRequest::Send { channel: "can0".into(), frame: fd }).is_err(), "FD on classic CAN");
    }

    #[test]
    fn the_send_port_does_not_acknowledge() {
        let mut h = Harness::new(CONFIG);
        let tx = h.connect("tx");
        let port = h.open(&tx, "lonely", "tx", PortOptions::RECEIVE_OWN);
        h.control(ControlRequest::Send { channel: "lonely".into(), frame: can(0x7, &[]) }).unwrap();
        h.advance(1_000_000);
        h.frames(&tx);
        h.send(&tx, port, can(0x8, &[]));
        h.advance(10_000_000);
        let got = h.frames(&tx);
        assert!(got.iter().all(|(f, _)| f.is_error()), "a lone sender still gets no ACK: {got:?}");
        assert!(!got.is_empty());
    }
}
