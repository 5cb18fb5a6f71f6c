//! One channel: its sequencer and the ports attached to it.
//!
//! [`Channel::transmit`] is the whole data path of a frame once it is on the
//! bus: take the next sequence number and timestamp, then hand a copy to every
//! attached port (the sender's own port only as a TX confirmation, and only
//! if it asked for one). Members are visited in one fixed order, and every
//! member's queue is FIFO, so all receivers see the channel's single order.

use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use fieldhub_proto::wire::PortOptions;
use fieldhub_proto::{Frame, FrameMeta};

use crate::config::Protocol;
use crate::queues::{ClientId, Outbound, Outbox, Refused};

/// How long a port that holds the bus waits before it looks for room again.
const HOLD_POLL: Duration = Duration::from_micros(50);

/// A port attached to a channel, as the fan-out sees it.
pub struct Member {
    pub client: ClientId,
    /// The client's local handle for the port.
    pub port: u16,
    /// Hub-wide port id.
    pub port_id: u32,
    pub options: PortOptions,
    outbox: Outbox,
    /// Frames dropped since the last `RX_OVERFLOW` report was queued.
    unreported_drops: u32,
    /// Frames dropped for this port since it was opened.
    pub rx_dropped: u64,
}

impl Member {
    pub fn new(client: ClientId, port: u16, port_id: u32, options: PortOptions, outbox: Outbox) -> Self {
        Self { client, port, port_id, options, outbox, unreported_drops: 0, rx_dropped: 0 }
    }

    /// Queue a frame for this member under its overflow policy. Returns
    /// false if the frame was dropped.
    fn deliver(&mut self, frame: Frame, meta: FrameMeta, stopping: &AtomicBool) -> bool {
        // Report drops only when the frame will fit behind the report: a
        // report per refused frame would fill the reply reserve.
        if self.outbox.has_frame_room() {
            self.report_drops();
        }
        let mut item = Outbound::Frame { port: self.port, frame, meta };
        loop {
            match self.outbox.try_frame(item) {
                Ok(()) => return true,
                // The client is gone; its Detach is on its way to the bus.
                Err(Refused::Gone) => return false,
                Err(Refused::Full) if !self.options.contains(PortOptions::BLOCK_ON_OVERFLOW) => {
                    self.unreported_drops = self.unreported_drops.saturating_add(1);
                    self.rx_dropped += 1;
                    return false;
                }
                Err(Refused::Full) => {
                    // SYNC POINT with Hub::shutdown's store: a hub that is
                    // stopping must not wait on a reader that never reads.
                    if stopping.load(Ordering::Acquire) {
                        return false;
                    }
                    std::thread::sleep(HOLD_POLL);
                    item = Outbound::Frame { port: self.port, frame, meta };
                }
            }
        }
    }

    /// Queue an `RX_OVERFLOW` report for drops not yet reported; if even the
    /// reserve is full they wait for the next chance.
    pub fn report_drops(&mut self) {
        if self.unreported_drops > 0 {
            let report = Outbound::RxOverflow { port: self.port, dropped: self.unreported_drops };
            if self.outbox.try_control(report).is_ok() {
                self.unreported_drops = 0;
            }
        }
    }
}

/// One bus.
pub struct Channel {
    pub id: u16,
    pub name: String,
    pub protocol: Protocol,
    /// Sequence number of the last frame; the first frame gets 1.
    last_seq: u64,
    last_timestamp_ns: u64,
    pub members: Vec<Member>,
}

impl Channel {
    pub fn new(id: u16, name: String, protocol: Protocol) -> Self {
        Self { id, name, protocol, last_seq: 0, last_timestamp_ns: 0, members: Vec::new() }
    }

    /// Put `frame` from port `sender` on the bus at time `now_ns` and fan it
    /// out. Returns the metadata it was given.
    pub fn transmit(&mut self, sender: u32, frame: Frame, now_ns: u64, stopping: &AtomicBool) -> FrameMeta {
        self.last_seq += 1;
        // Receivers rely on timestamps that never go backwards within a
        // channel, even if the wall clock does.
        self.last_timestamp_ns = now_ns.max(self.last_timestamp_ns);
        let meta = FrameMeta { channel: self.id, sender, seq: self.last_seq, timestamp_ns: self.last_timestamp_ns };
        for member in &mut self.members {
            if member.port_id == sender {
                if member.options.contains(PortOptions::RECEIVE_OWN) {
                    member.deliver(frame.with_echo(true), meta, stopping);
                }
            } else {
                member.deliver(frame, meta, stopping);
            }
        }
        meta
    }

    /// The member with hub-wide port id `port_id`.
    pub fn member_mut(&mut self, port_id: u32) -> Option<&mut Member> {
        self.members.iter_mut().find(|m| m.port_id == port_id)
    }

    /// Remove the member with hub-wide port id `port_id`, if present.
    pub fn detach(&mut self, port_id: u32) -> Option<Member> {
        let at = self.members.iter().position(|m| m.port_id == port_id)?;
        Some(self.members.remove(at))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::queues::{outbox, OUTBOX_FRAMES};
    use crossbeam_channel::Receiver;

    fn member(port_id: u32, options: PortOptions) -> (Member, Receiver<Outbound>) {
        let (tx, rx) = outbox();
        (Member::new(port_id, 0, port_id, options, tx), rx)
    }

    fn frames(rx: &Receiver<Outbound>) -> Vec<(u64, bool)> {
        rx.try_iter()
            .filter_map(|item| match item {
                Outbound::Frame { frame, meta, .. } => Some((meta.seq, frame.is_echo())),
                _ => None,
            })
            .collect()
    }

    #[test]
    fn sequence_numbers_start_at_one_and_sender_gets_echo_only_if_asked() {
        let stop = AtomicBool::new(false);
        let mut channel = Channel::new(0, "can0".into(), Protocol::Can);
        let (a, rx_a) = member(1, PortOptions::RECEIVE_OWN);
        let (b, rx_b) = member(2, PortOptions::empty());
        channel.members.extend([a, b]);
        let frame = Frame::can(0x10, false, &[1]).unwrap();
        channel.transmit(1, frame, 100, &stop);
        channel.transmit(2, frame, 50, &stop);
        assert_eq!(frames(&rx_a), [(1, true), (2, false)]);
        assert_eq!(frames(&rx_b), [(1, false)]);
    }

    #[test]
    fn timestamps_never_go_backwards() {
        let stop = AtomicBool::new(false);
        let mut channel = Channel::new(0, "can0".into(), Protocol::Can);
        let frame = Frame::can(0x10, false, &[]).unwrap();
        assert_eq!(channel.transmit(1, frame, 100, &stop).timestamp_ns, 100);
        assert_eq!(channel.transmit(1, frame, 90, &stop).timestamp_ns, 100);
    }

    #[test]
    fn full_receiver_drops_counts_and_reports_before_its_next_frame() {
        let stop = AtomicBool::new(false);
        let mut channel = Channel::new(0, "can0".into(), Protocol::Can);
        let (slow, rx_slow) = member(1, PortOptions::empty());
        channel.members.push(slow);
        let frame = Frame::can(0x10, false, &[]).unwrap();
        for _ in 0..OUTBOX_FRAMES + 3 {
            channel.transmit(9, frame, 0, &stop);
        }
        assert_eq!(channel.members[0].rx_dropped, 3);
        assert_eq!(rx_slow.try_iter().take(10).count(), 10);
        channel.transmit(9, frame, 0, &stop);
        let tail: Vec<Outbound> = rx_slow.try_iter().collect();
        let report_at = tail.iter().position(|i| matches!(i, Outbound::RxOverflow { dropped: 3, .. }));
        assert_eq!(report_at, Some(tail.len() - 2), "the report precedes the next frame");
    }
}
