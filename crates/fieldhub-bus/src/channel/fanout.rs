//! Fan-out: a frame that won goes on the channel — the next sequence
//! number and timestamp, then a copy to every port on the sender's segment in
//! one fixed order (receiver-position fault rules applied per port).

use std::cmp::Reverse;

use fieldhub_proto::bits::FrameBits;
use fieldhub_proto::{Frame, FrameMeta};

use super::faults::{decide_fate, Delayed, Fate, Held};
use super::{Channel, Transmitted, MAX_HELD};
use crate::confinement::{state_change_frame, ErrorState};
use crate::fault::{corruption_error_frame, Position};
use crate::port_id::PortId;
use crate::tx_queue::Pending;

impl Channel {
    /// Tell port `index` its controller changed error state, with the
    /// SocketCAN error frame a Linux driver would send.
    pub fn report_state_change(&mut self, index: usize, before: ErrorState, at: u64) {
        if let Some(frame) = state_change_frame(before, &self.members[index].errors) {
            let meta = self.next_meta(None, at);
            self.members[index].deliver(&frame, meta);
        }
    }

    /// Put an error frame on the bus in place of a destroyed frame.
    pub(super) fn destroyed_on_wire(&mut self, sender: PortId, now_ns: u64, sent: &mut Vec<Transmitted>) {
        let meta = self.next_meta(None, now_ns);
        let error = corruption_error_frame();
        let segment = self.members.iter().find(|m| m.port_id == sender).map_or(0, |m| m.segment);
        for member in self.members.iter_mut().filter(|m| m.plugged && m.segment == segment) {
            if member.port_id != sender {
                member.errors.receive_error();
            }
            member.deliver(&error, meta);
        }
        self.error_frames += 1;
        self.keep_own(sent, error, meta.timestamp_ns);
    }

    /// Keep a frame the bus made itself (sender 0) in `sent` for whoever
    /// taps the channel, if anything does.
    pub(super) fn keep_own(&self, sent: &mut Vec<Transmitted>, frame: Frame, timestamp_ns: u64) {
        if self.tapped {
            sent.push(Transmitted { channel: self.id, sender: None, frame, hops: 0, timestamp_ns });
        }
    }

    /// Put a LIN frame the bus made itself (a header nobody answered, a
    /// collision) on the bus at its end `at`: sender 0, to every port,
    /// counted as a frame.
    pub(super) fn bus_made(&mut self, header: Frame, at: u64, sent: &mut Vec<Transmitted>) {
        self.tell_lin_news(at, false);
        let meta = self.next_meta(None, at);
        for member in self.members.iter_mut().filter(|m| m.plugged) {
            member.deliver(&header, meta);
        }
        self.frames += 1;
        self.ids.count(header.socketcan_id(), meta.timestamp_ns);
        // A LIN header or collision: nominal bits only.
        let bits = FrameBits::of(&header);
        let busy_ns = bits.duration_ns(self.config.bitrate, self.config.bitrate);
        self.load.add(meta.timestamp_ns, bits.total, busy_ns);
        self.keep_own(sent, header, meta.timestamp_ns);
    }

    /// The next sequence number and timestamp, for a frame of `sender`
    /// (`None`: the bus's own, sender 0 on the wire).
    pub(super) fn next_meta(&mut self, sender: Option<PortId>, now_ns: u64) -> FrameMeta {
        self.last_seq += 1;
        // Receivers rely on timestamps that never go backwards within a
        // channel, even if the wall clock does.
        self.last_timestamp_ns = now_ns.max(self.last_timestamp_ns);
        let sender = sender.map_or(0, u32::from);
        FrameMeta { channel: self.id, sender, seq: self.last_seq, timestamp_ns: self.last_timestamp_ns }
    }

    /// Put a frame that won arbitration on the bus at `now_ns` and fan it
    /// out, applying receiver-position fault rules per port.
    pub fn transmit(
        &mut self,
        sender: PortId,
        pending: Pending,
        now_ns: u64,
        sent: &mut Vec<Transmitted>,
    ) -> FrameMeta {
        self.tell_lin_news(now_ns, false);
        let meta = self.next_meta(Some(sender), now_ns);
        // A tapped channel's frame goes to `sent` first and is fanned out
        // from there: one move of it on every frame's way instead of three
        // (into a local, a `Transmitted`, the Vec), which perf showed as most
        // of this function's time. Untapped, it is fanned out where it lies.
        let frame = if self.tapped {
            let at = sent.len();
            sent.push(Transmitted {
                channel: self.id,
                sender: Some(sender),
                frame: pending.frame,
                hops: pending.hops,
                timestamp_ns: meta.timestamp_ns,
            });
            &sent[at].frame
        } else {
            &pending.frame
        };
        let segment = self.members.iter().find(|m| m.port_id == sender).map_or(0, |m| m.segment);
        let Channel { members, rules, held, held_order, held_overflow, .. } = self;
        for member in members.iter_mut().filter(|m| m.plugged && m.segment == segment) {
            if member.port_id == sender {
                if member.receives_own() {
                    member.deliver(&frame.clone().with_echo(true), meta);
                }
                continue;
            }
            if rules.is_empty() {
                member.deliver(frame, meta);
                member.errors.received();
                continue;
            }
            match decide_fate(rules, Position::Receiver, frame, sender, Some(member.port_id), now_ns) {
                Fate::Drop => {}
                Fate::Delay(ns) => {
                    if held.len() >= MAX_HELD {
                        *held_overflow += 1;
                        member.missed_one();
                    } else {
                        *held_order += 1;
                        let port_id = member.port_id;
                        let delayed = Delayed {
                            due_ns: now_ns.saturating_add(ns),
                            order: *held_order,
                            held: Held::ToPort { port_id, frame: frame.clone(), meta },
                        };
                        held.push(Reverse(delayed));
                    }
                }
                Fate::Corrupt => {
                    member.errors.receive_error();
                    member.deliver(&corruption_error_frame(), meta);
                }
                Fate::Deliver { frame, copies } => {
                    for _ in 0..=copies {
                        member.deliver(&frame, meta);
                    }
                    member.errors.received();
                }
            }
        }
        match frame.is_error() {
            true => self.error_frames += 1,
            false => self.frames += 1,
        }
        self.ids.count(frame.socketcan_id(), meta.timestamp_ns);
        let (bits, busy_ns) = self.config.rates().busy(frame);
        self.load.add(meta.timestamp_ns, bits.total, busy_ns);
        meta
    }
}
