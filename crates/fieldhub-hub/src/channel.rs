//! One channel: its sequencer, its arbitration and the ports on it.
//!
//! Frames wait in their port's transmit FIFO ([`crate::tx_queue`]) until the
//! channel decides. At each decision point the oldest frame of every port
//! competes and the one with the lowest arbitration field wins, with ISO
//! 11898 precedence ([`arbitration_key`]); ties between identical fields go to
//! the frame that arrived first. In `ideal` timing a decision point is every
//! service call, and every eligible frame goes out in arbitration order.
//!
//! [`Channel::transmit`] is the data path of a frame once it won: take the
//! next sequence number and timestamp, then hand a copy to every attached port
//! (the sender's own port only as a TX confirmation, and only if it asked for
//! one). Members are visited in one fixed order, and every member's queue is
//! FIFO, so all receivers see the channel's single order.

use std::sync::atomic::AtomicBool;

use fieldhub_proto::{Frame, FrameMeta};

use crate::config::ChannelConfig;
use crate::id_counter::IdCounter;
use crate::member::Member;
use crate::tx_queue::Pending;

/// A frame that has been put on a channel, as gateway routes see it.
#[derive(Clone, Copy, Debug)]
pub struct Transmitted {
    pub channel: u16,
    pub frame: Frame,
    pub hops: u8,
}

/// The arbitration field of `frame` as a number: lower wins. Bit order is the
/// order on the wire — base identifier, then SRR/RTR, IDE, the 18 identifier
/// extension bits and RTR — with dominant = 0, so a base-format frame beats
/// an extended one with the same base bits (its IDE is dominant) and a data
/// frame beats a remote frame with the same identifier (RTR dominant). CAN FD
/// frames send RRS (dominant) where classic frames send RTR.
pub fn arbitration_key(frame: &Frame) -> u32 {
    let rtr = u32::from(frame.is_remote());
    if frame.is_extended() {
        let base = frame.id() >> 18;
        let extension = frame.id() & 0x3_FFFF;
        (base << 21) | (1 << 20) | (1 << 19) | (extension << 1) | rtr
    } else {
        (frame.id() << 21) | (rtr << 20)
    }
}

/// One bus.
pub struct Channel {
    pub id: u16,
    pub config: ChannelConfig,
    /// Sequence number of the last frame; the first frame gets 1.
    last_seq: u64,
    last_timestamp_ns: u64,
    pub members: Vec<Member>,
    /// Frames put on the channel.
    pub frames: u64,
    pub ids: IdCounter,
}

impl Channel {
    pub fn new(id: u16, config: ChannelConfig) -> Self {
        Self {
            id,
            config,
            last_seq: 0,
            last_timestamp_ns: 0,
            members: Vec::new(),
            frames: 0,
            ids: IdCounter::default(),
        }
    }

    pub fn name(&self) -> &str {
        &self.config.name
    }

    /// Decide and transmit everything that may go at bus time `now_ns`.
    /// Transmitted frames are appended to `sent` (for gateway routes).
    /// Returns the bus time at which the channel wants to be served again.
    pub fn service(&mut self, now_ns: u64, stopping: &AtomicBool, sent: &mut Vec<Transmitted>) -> Option<u64> {
        loop {
            let mut winner: Option<(u32, u64, usize)> = None;
            let mut wake_at: Option<u64> = None;
            for (index, member) in self.members.iter_mut().enumerate() {
                if !member.plugged {
                    // A node without a cable cannot send: its frames are lost.
                    member.discard_pending();
                    continue;
                }
                match member.tx.offer(now_ns) {
                    Ok(Some(pending)) => {
                        let rank = (arbitration_key(&pending.frame), pending.arrival, index);
                        if winner.is_none_or(|best| rank < best) {
                            winner = Some(rank);
                        }
                    }
                    Ok(None) => {}
                    Err(ready_at) => wake_at = Some(wake_at.map_or(ready_at, |w| w.min(ready_at))),
                }
            }
            let Some((_, _, index)) = winner else { return wake_at };
            let member = &mut self.members[index];
            let Some(pending) = member.tx.take(now_ns) else { return wake_at };
            member.sent_one();
            let sender = member.port_id;
            self.transmit(sender, pending, now_ns, stopping, sent);
        }
    }

    /// Put a frame that won arbitration on the bus at `now_ns` and fan it out.
    pub fn transmit(
        &mut self,
        sender: u32,
        pending: Pending,
        now_ns: u64,
        stopping: &AtomicBool,
        sent: &mut Vec<Transmitted>,
    ) -> FrameMeta {
        self.last_seq += 1;
        // Receivers rely on timestamps that never go backwards within a
        // channel, even if the wall clock does.
        self.last_timestamp_ns = now_ns.max(self.last_timestamp_ns);
        let meta = FrameMeta { channel: self.id, sender, seq: self.last_seq, timestamp_ns: self.last_timestamp_ns };
        let frame = pending.frame;
        let segment = self.members.iter().find(|m| m.port_id == sender).map_or(0, |m| m.segment);
        for member in self.members.iter_mut().filter(|m| m.plugged && m.segment == segment) {
            if member.port_id == sender {
                if member.receives_own() {
                    member.deliver(frame.with_echo(true), meta, stopping);
                }
            } else {
                member.deliver(frame, meta, stopping);
            }
        }
        self.frames += 1;
        self.ids.count(frame.socketcan_id(), meta.timestamp_ns);
        sent.push(Transmitted { channel: self.id, frame, hops: pending.hops });
        meta
    }

    /// The member with hub-wide port id `port_id`.
    pub fn member_mut(&mut self, port_id: u32) -> Option<&mut Member> {
        self.members.iter_mut().find(|m| m.port_id == port_id)
    }

    /// Remove the member with hub-wide port id `port_id`, discarding the
    /// frames it had not sent yet.
    pub fn detach(&mut self, port_id: u32) -> Option<Member> {
        let at = self.members.iter().position(|m| m.port_id == port_id)?;
        let mut member = self.members.remove(at);
        member.discard_pending();
        Some(member)
    }

    /// Arrival number of the oldest frame any port of `client` still has
    /// waiting on this channel.
    pub fn oldest_pending_of(&self, client: u32) -> Option<u64> {
        self.members.iter().filter(|m| m.is_client() && m.client == client).filter_map(|m| m.tx.oldest_arrival()).min()
    }
}
#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use crossbeam_channel::Receiver;
    use fieldhub_proto::wire::PortOptions;

    use super::*;
    use crate::config::Protocol;
    use crate::credit::TxCredit;
    use crate::queues::{outbox, Outbound, OUTBOX_FRAMES};
    use crate::tx_queue::TxQueue;

    fn channel() -> Channel {
        Channel::new(0, ChannelConfig::new("can0", Protocol::Can))
    }

    fn member(port_id: u32, options: PortOptions) -> (Member, Receiver<Outbound>) {
        let (tx, rx) = outbox();
        let credit = Arc::new(TxCredit::for_current_thread());
        (Member::client(port_id, 0, port_id, options, tx, credit, TxQueue::new(None)), rx)
    }

    fn frames(rx: &Receiver<Outbound>) -> Vec<Frame> {
        rx.try_iter()
            .filter_map(|item| match item {
                Outbound::Frame { frame, .. } => Some(frame),
                _ => None,
            })
            .collect()
    }

    fn offer(channel: &mut Channel, port_id: u32, frame: Frame, arrival: u64) {
        channel.member_mut(port_id).unwrap().tx.push(Pending { frame, arrival, hops: 0 });
    }

    #[test]
    fn sequence_numbers_start_at_one_and_sender_gets_echo_only_if_asked() {
        let stop = AtomicBool::new(false);
        let mut channel = channel();
        let (a, rx_a) = member(1, PortOptions::RECEIVE_OWN);
        let (b, rx_b) = member(2, PortOptions::empty());
        channel.members.extend([a, b]);
        let frame = Frame::can(0x10, false, &[1]).unwrap();
        let mut sent = Vec::new();
        let first = channel.transmit(1, Pending { frame, arrival: 0, hops: 0 }, 100, &stop, &mut sent);
        let second = channel.transmit(2, Pending { frame, arrival: 1, hops: 0 }, 50, &stop, &mut sent);
        assert_eq!((first.seq, second.seq), (1, 2));
        assert_eq!(second.timestamp_ns, 100, "timestamps never go backwards");
        assert_eq!(frames(&rx_a).iter().map(Frame::is_echo).collect::<Vec<_>>(), [true, false]);
        assert_eq!(frames(&rx_b).len(), 1);
        assert_eq!(sent.len(), 2);
    }

    #[test]
    fn lower_id_wins_arbitration_with_iso_precedence() {
        let stop = AtomicBool::new(false);
        let mut channel = channel();
        let (listener, rx) = member(9, PortOptions::empty());
        channel.members.push(listener);
        let candidates = [
            Frame::can(0x123 << 18, true, &[]).unwrap(), // extended, base 0x123
            Frame::remote(0x000, false, 0).unwrap(),     // remote loses to data with the same id
            Frame::can(0x001, false, &[]).unwrap(),
            Frame::can(0x000, false, &[]).unwrap(),
            Frame::can(0x000 << 18, true, &[]).unwrap(), // extended with base 0x000
        ];
        for (i, frame) in candidates.iter().enumerate() {
            let (m, _) = member(i as u32 + 1, PortOptions::empty());
            channel.members.push(m);
            offer(&mut channel, i as u32 + 1, *frame, i as u64);
        }
        channel.service(0, &stop, &mut Vec::new());
        let order = frames(&rx);
        assert_eq!(order, [candidates[3], candidates[1], candidates[4], candidates[2], candidates[0]]);
    }

    #[test]
    fn each_port_offers_only_its_oldest_frame_so_priority_inversion_happens() {
        let stop = AtomicBool::new(false);
        let mut channel = channel();
        let (listener, rx) = member(9, PortOptions::empty());
        let (slow, _) = member(1, PortOptions::empty());
        let (fast, _) = member(2, PortOptions::empty());
        channel.members.extend([listener, slow, fast]);
        let low = Frame::can(0x700, false, &[]).unwrap();
        let urgent = Frame::can(0x001, false, &[]).unwrap();
        let middle = Frame::can(0x300, false, &[]).unwrap();
        offer(&mut channel, 1, low, 0);
        offer(&mut channel, 1, urgent, 1); // stuck behind 0x700 in port 1's FIFO
        offer(&mut channel, 2, middle, 2);
        channel.service(0, &stop, &mut Vec::new());
        assert_eq!(frames(&rx), [middle, low, urgent]);
    }

    #[test]
    fn identical_arbitration_fields_go_oldest_first() {
        let stop = AtomicBool::new(false);
        let mut channel = channel();
        let (listener, rx) = member(9, PortOptions::empty());
        let (a, _) = member(1, PortOptions::empty());
        let (b, _) = member(2, PortOptions::empty());
        channel.members.extend([listener, a, b]);
        let from_b = Frame::can(0x10, false, &[2]).unwrap();
        let from_a = Frame::can(0x10, false, &[1]).unwrap();
        offer(&mut channel, 2, from_b, 0);
        offer(&mut channel, 1, from_a, 1);
        channel.service(0, &stop, &mut Vec::new());
        assert_eq!(frames(&rx), [from_b, from_a]);
    }

    #[test]
    fn full_receiver_drops_counts_and_reports_before_its_next_frame() {
        let stop = AtomicBool::new(false);
        let mut channel = channel();
        let (slow, rx_slow) = member(1, PortOptions::empty());
        channel.members.push(slow);
        let frame = Frame::can(0x10, false, &[]).unwrap();
        let mut sent = Vec::new();
        for arrival in 0..OUTBOX_FRAMES as u64 + 3 {
            channel.transmit(9, Pending { frame, arrival, hops: 0 }, 0, &stop, &mut sent);
        }
        assert_eq!(channel.members[0].counters.rx_dropped, 3);
        assert_eq!(rx_slow.try_iter().take(10).count(), 10);
        channel.transmit(9, Pending { frame, arrival: 0, hops: 0 }, 0, &stop, &mut sent);
        let tail: Vec<Outbound> = rx_slow.try_iter().collect();
        let report_at = tail.iter().position(|i| matches!(i, Outbound::RxOverflow { dropped: 3, .. }));
        assert_eq!(report_at, Some(tail.len() - 2), "the report precedes the next frame");
    }
}
