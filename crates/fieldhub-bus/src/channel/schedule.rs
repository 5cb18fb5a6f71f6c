//! Scheduling: when a channel decides and what an attempt costs. `ideal`
//! channels send every eligible frame at once; `timed` channels carry one
//! frame at a time for its exact bit time. Failed attempts (corruption, no
//! ACK) raise error counters and retransmit. A lossless port without room
//! holds its channel's next frame, never the bus thread.

use fieldhub_proto::fate::DropReason;

use super::arbiter::Arbiter;
use super::faults::{decide_fate, Fate, Held};
use super::{Channel, Transmitted};
use crate::config::Timing;
use crate::fault::{ack_error_frame, Position};
use crate::member::Member;
use crate::port_id::PortId;
use crate::tx_queue::Pending;

/// An error frame on the wire: 6-bit flag, 8-bit delimiter, 3-bit
/// intermission. A failed attempt keeps the bus (and the sender) busy for it,
/// which also paces a permanently failing node (no ACK, a short) in `ideal`
/// timing instead of spinning the bus thread.
const ERROR_FRAME_BITS: u64 = 6 + 8 + 3;

/// What becomes of a frame that started on the wire.
#[derive(Clone, Copy, Debug)]
pub(super) enum Outcome {
    Deliver { copies: u8 },
    Drop,
    Delay(u64),
    Corrupt,
    NoAck,
}

/// A frame that won arbitration, with its fate decided at its start.
#[derive(Clone, Debug)]
pub(super) struct Attempt {
    pub(super) sender: PortId,
    pub(super) pending: Pending,
    pub(super) outcome: Outcome,
}

/// Whether the bus time of a finished attempt's frame has already passed
/// (`timed`: it finishes at its end of frame) or not (`ideal`: no time passes).
#[derive(Clone, Copy, Debug)]
pub(super) enum Occupied {
    FrameOver,
    FrameStillToCome,
}

/// The frame a `timed` channel is carrying and when it ends.
#[derive(Clone, Debug)]
pub(super) struct OnWire {
    pub(super) attempt: Attempt,
    pub(super) end_ns: u64,
}

/// First and last re-check interval while a lossless port holds a channel.
pub(super) const HOLD_RECHECK_MIN_NS: u64 = 50_000;
pub const HOLD_RECHECK_MAX_NS: u64 = 5_000_000;

impl Channel {
    /// When a lossless port has no room, the bus time to look again: the
    /// channel holds its next frame until then (only this channel waits; the
    /// bus thread goes on). `None` when every lossless port has room.
    pub(super) fn hold_for_lossless(&mut self, now_ns: u64) -> Option<u64> {
        let full = match self.members.any_lossless() {
            true => self.members.find(Member::lacks_room),
            false => None,
        };
        let Some(full) = full else {
            if self.held_by.take().is_some() {
                self.hold_recheck_ns = HOLD_RECHECK_MIN_NS;
            }
            return None;
        };
        if !self.members[full].wait_for_room() {
            // Room came between the two looks.
            return self.hold_for_lossless(now_ns);
        }
        let recheck = now_ns + self.hold_recheck_ns;
        if self.held_by.replace(self.members[full].port_id).is_some() {
            self.hold_recheck_ns = (self.hold_recheck_ns * 2).min(HOLD_RECHECK_MAX_NS);
        }
        Some(recheck)
    }

    /// `ideal`: every eligible frame goes now, in arbitration order.
    pub(super) fn service_ideal(&mut self, now_ns: u64, sent: &mut Vec<Transmitted>) -> Option<u64> {
        loop {
            let (winner, wake) = self.arbitrate(now_ns);
            if self.header_alone(now_ns, sent).is_some() {
                continue;
            }
            let Some(index) = winner else { return wake };
            if let Some(recheck) = self.hold_for_lossless(now_ns) {
                return Some(recheck);
            }
            if let Some(attempt) = self.begin(index, now_ns) {
                // No time passes on an ideal bus, but a failed attempt still
                // costs its sender the frame's time before it retries.
                self.finish(attempt, now_ns, Occupied::FrameStillToCome, sent);
            }
        }
    }

    /// `timed`: the channel carries one frame at a time for its exact
    /// duration; a decision point is the end of the previous frame (or the
    /// arrival of a frame on an idle bus). The schedule runs in bus time, so
    /// it stays exact even when the bus thread wakes late.
    pub(super) fn service_timed(&mut self, now_ns: u64, sent: &mut Vec<Transmitted>) -> Option<u64> {
        loop {
            if let Some(end_ns) = self.on_wire.as_ref().map(|w| w.end_ns) {
                if now_ns < end_ns {
                    return Some(end_ns);
                }
                let Some(attempt) = self.on_wire.take() else { continue };
                self.bus_free_at = self.finish(attempt.attempt, end_ns, Occupied::FrameOver, sent);
                continue;
            }
            let mut at = self.bus_free_at;
            let index = loop {
                let decision = self.arbitrate(at);
                if let Some(end) = self.header_alone(at, sent) {
                    // A LIN frame of the bus's own (a header nobody
                    // answered, a collision) kept the bus until its end.
                    self.bus_free_at = end;
                    at = end;
                    continue;
                }
                match decision {
                    (Some(index), _) => break index,
                    (None, Some(next)) if next <= now_ns => at = next.max(at),
                    (None, wake) => return wake,
                }
            };
            if let Some(recheck) = self.hold_for_lossless(now_ns) {
                // The frame starts once the hold ends, not in the past.
                self.bus_free_at = self.bus_free_at.max(now_ns);
                return Some(recheck);
            }
            let Some(attempt) = self.begin(index, at) else { continue };
            let end_ns = at + self.config.rates().duration_ns(&attempt.pending.frame);
            self.on_wire = Some(OnWire { attempt, end_ns });
        }
    }

    /// Switch between `ideal` and `timed` at bus time `now_ns`: a frame on the
    /// wire is completed first, so nothing is lost or reordered.
    pub fn set_timing(&mut self, timing: Timing, now_ns: u64, sent: &mut Vec<Transmitted>) {
        if let Some(on_wire) = self.on_wire.take() {
            let end = on_wire.end_ns.min(now_ns).max(self.bus_free_at);
            self.finish(on_wire.attempt, end, Occupied::FrameOver, sent);
        }
        self.bus_free_at = now_ns;
        self.config.timing = timing;
    }

    /// Take the winner's frame and decide, at its start of frame `at`, what
    /// will become of it: sender-position rules, a short, a missing ACK,
    /// bus-position rules. `None` when the frame never reaches the wire.
    pub(super) fn begin(&mut self, index: usize, at: u64) -> Option<Attempt> {
        let mut pending = match self.arbiter.take_answer() {
            // A LIN slave's standing response answers, or its repeated
            // wake-up pulse goes; its FIFO stays as it is.
            Some(frame) => Pending::standing(frame, at),
            None => self.members[index].tx.take(at)?,
        };
        self.arbiter.carry(&mut pending.frame);
        // A standing response's answer took no transmit credit.
        let credit = usize::from(!pending.is_standing());
        self.arbiter.started(at, &pending.frame);
        let sender = self.members[index].port_id;
        if self.shorted {
            return Some(Attempt { sender, pending, outcome: Outcome::Corrupt });
        }
        if self.config.no_ack && !self.has_listener(index) {
            return Some(Attempt { sender, pending, outcome: Outcome::NoAck });
        }
        if self.rules.is_empty() {
            // The common case: no fault rules, so nothing can change the
            // frame — spare it the copies through two rule passes.
            return Some(Attempt { sender, pending, outcome: Outcome::Deliver { copies: 0 } });
        }
        let (frame, copies) = match decide_fate(&mut self.rules, Position::Sender, &pending.frame, sender, None, at) {
            Fate::Drop => {
                self.members[index].release_credit(credit);
                self.members[index].dropped(DropReason::FaultRule, 1);
                return None;
            }
            Fate::Delay(ns) => {
                // Counted as sent when it reaches the bus (`apply_bus_fate`).
                self.members[index].release_credit(credit);
                self.hold(at + ns, Held::ToBus { sender, pending, bus_rules: true });
                return None;
            }
            Fate::Corrupt => return Some(Attempt { sender, pending, outcome: Outcome::Corrupt }),
            Fate::Deliver { frame, copies } => (frame, copies),
        };
        let outcome = decide_fate(&mut self.rules, Position::Bus, &frame, sender, None, at);
        let pending = Pending { frame, ..pending };
        let outcome = match outcome {
            Fate::Drop => Outcome::Drop,
            Fate::Delay(ns) => Outcome::Delay(ns),
            Fate::Corrupt => Outcome::Corrupt,
            Fate::Deliver { frame, copies: more } => {
                return Some(Attempt {
                    sender,
                    pending: Pending { frame, ..pending },
                    outcome: Outcome::Deliver { copies: copies.saturating_add(more) },
                })
            }
        };
        Some(Attempt { sender, pending, outcome })
    }

    /// Carry out an attempt at bus time `at`. Returns when the bus is free again.
    pub(super) fn finish(&mut self, attempt: Attempt, at: u64, occupied: Occupied, sent: &mut Vec<Transmitted>) -> u64 {
        let Attempt { sender, pending, outcome } = attempt;
        let index = self.members.find(|m| m.port_id == sender);
        // The controller transmitted; whether the frame is on the bus is the
        // outcome's: `sent` counts it as sent, else the caller accounts for it.
        let leaves = |channel: &mut Channel, sent: bool| {
            if let Some(i) = index {
                let before = channel.members[i].errors.state();
                match (sent, pending.is_standing()) {
                    (true, false) => channel.members[i].sent_one(),
                    (true, true) => channel.members[i].counters.tx_frames += 1,
                    (false, false) => channel.members[i].release_credit(1),
                    // A standing response's answer took no credit.
                    (false, true) => {}
                }
                channel.members[i].errors.transmitted();
                channel.report_state_change(i, before, at);
            }
        };
        let error_ns = ERROR_FRAME_BITS * 1_000_000_000 / u64::from(self.config.bitrate.max(1));
        // When a failed sender may try again: after the frame and the error frame.
        let retry_at = |channel: &Channel| match occupied {
            Occupied::FrameOver => at + error_ns,
            Occupied::FrameStillToCome => at + channel.config.rates().duration_ns(&pending.frame) + error_ns,
        };
        match outcome {
            Outcome::Deliver { copies } => {
                leaves(self, true);
                for _ in 0..copies {
                    self.transmit(sender, pending.clone(), at, sent);
                }
                self.transmit(sender, pending, at, sent);
                at
            }
            Outcome::Drop => {
                leaves(self, false);
                if let Some(i) = index {
                    self.members[i].dropped(DropReason::FaultRule, 1);
                }
                at
            }
            Outcome::Delay(ns) => {
                // Counted as sent when it reaches the bus (`apply_bus_fate`).
                leaves(self, false);
                self.hold(at + ns, Held::ToBus { sender, pending, bus_rules: false });
                at
            }
            Outcome::Corrupt => {
                self.destroyed_on_wire(sender, at, sent);
                if let Some(index) = index {
                    let retry_at = retry_at(self);
                    self.retry(index, pending, at, retry_at, false, sent);
                }
                at + error_ns
            }
            Outcome::NoAck => {
                if let Some(index) = index {
                    let retry_at = retry_at(self);
                    self.retry(index, pending, at, retry_at, true, sent);
                }
                at + error_ns
            }
        }
    }

    /// Whether any other port on the sender's segment would acknowledge.
    pub(super) fn has_listener(&self, sender_index: usize) -> bool {
        let sender = &self.members[sender_index];
        self.members.indexed().any(|(i, m)| {
            i != sender_index
                && m.plugged
                && m.is_client()
                && !m.listen_only
                && !m.transmit_only
                && m.segment == sender.segment
                && m.errors.bus_off_until.is_none()
        })
    }

    /// A failed transmission: the sender's error counter rises and it will
    /// retransmit from `retry_at` — unless that took it to bus-off, which
    /// drops its queue. Without an ACK the sender alone sees an ACK error
    /// frame (and, per ISO 11898-1, stops counting once error-passive).
    #[allow(clippy::too_many_arguments)]
    pub(super) fn retry(
        &mut self,
        index: usize,
        pending: Pending,
        at: u64,
        retry_at: u64,
        no_ack: bool,
        sent: &mut Vec<Transmitted>,
    ) {
        let (bitrate, auto) = (self.config.bitrate, self.config.auto_bus_off_recovery);
        if no_ack {
            let meta = self.next_meta(None, at);
            self.members[index].deliver(&ack_error_frame(), meta);
            self.keep_own(sent, ack_error_frame(), meta.timestamp_ns);
            self.error_frames += 1;
        }
        let before = self.members[index].errors.state();
        let member = &mut self.members[index];
        member.retry_at = retry_at;
        if !pending.is_standing() {
            // A standing response needs no retry: it answers the next header.
            member.tx.push_front(pending);
        }
        let bus_off = if no_ack {
            member.errors.ack_error(at, bitrate, auto)
        } else {
            member.errors.transmit_error(at, bitrate, auto)
        };
        if bus_off {
            // A bus-off controller drops what it had queued.
            member.discard_pending(DropReason::BusOff);
        }
        self.report_state_change(index, before, at);
    }
}
