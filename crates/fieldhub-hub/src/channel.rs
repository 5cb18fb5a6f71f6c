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

use std::cmp::Reverse;
use std::collections::BinaryHeap;

use fieldhub_proto::{Frame, FrameMeta};

use crate::bus_load::BusLoad;
use crate::config::{ChannelConfig, Timing};
use crate::confinement::{state_change_frame, ErrorState};
use crate::fault::{ack_error_frame, corruption_error_frame, transform, Action, FaultRule, Position};
use crate::id_counter::IdCounter;
use crate::member::Member;
use crate::tx_queue::Pending;
use fieldhub_proto::bits::FrameBits;

/// A frame that has been put on a channel, as gateway routes see it.
#[derive(Clone, Copy, Debug)]
pub struct Transmitted {
    pub channel: u16,
    pub frame: Frame,
    pub hops: u8,
    pub timestamp_ns: u64,
}

/// The arbitration field of `frame` as a number: lower wins. Bit order is the
/// order on the wire — base identifier, then SRR/RTR, IDE, the 18 identifier
/// extension bits and RTR — with dominant = 0, so a base-format frame beats
/// an extended one with the same base bits (its IDE is dominant) and a data
/// frame beats a remote frame with the same identifier (RTR dominant). CAN FD
/// frames send RRS (dominant) where classic frames send RTR, so a classic and
/// an FD frame with the same identifier tie: they first differ at FDF/r0,
/// after arbitration — the older one goes first.
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

/// An error frame on the wire: 6-bit flag, 8-bit delimiter, 3-bit
/// intermission. A failed attempt keeps the bus (and the sender) busy for it,
/// which also paces a permanently failing node (no ACK, a short) in `ideal`
/// timing instead of spinning the bus thread.
const ERROR_FRAME_BITS: u64 = 6 + 8 + 3;

fn earliest(a: Option<u64>, b: Option<u64>) -> Option<u64> {
    match (a, b) {
        (Some(a), Some(b)) => Some(a.min(b)),
        (a, b) => a.or(b),
    }
}

/// What becomes of a frame that started on the wire.
#[derive(Clone, Copy, Debug)]
enum Outcome {
    Deliver { copies: u8 },
    Drop,
    Delay(u64),
    Corrupt,
    NoAck,
}

/// A frame that won arbitration, with its fate decided at its start.
#[derive(Clone, Copy, Debug)]
struct Attempt {
    sender: u32,
    pending: Pending,
    outcome: Outcome,
}

/// Whether the bus time of a finished attempt's frame has already passed
/// (`timed`: it finishes at its end of frame) or not (`ideal`: no time passes).
#[derive(Clone, Copy, Debug)]
enum Occupied {
    FrameOver,
    FrameStillToCome,
}

/// The frame a `timed` channel is carrying and when it ends.
#[derive(Clone, Copy, Debug)]
struct OnWire {
    attempt: Attempt,
    end_ns: u64,
}

/// Most frames `delay` rules may hold at once on one channel.
pub const MAX_HELD: usize = 64 * 1024;

/// What a chain of fault rules decided for a frame at one position.
#[derive(Clone, Copy, Debug)]
enum Fate {
    /// Deliver this (possibly changed) frame, plus `copies` duplicates.
    Deliver {
        frame: Frame,
        copies: u8,
    },
    Drop,
    /// Hold the frame back this many nanoseconds.
    Delay(u64),
    Corrupt,
}

/// Evaluate the rules of one position, in order: drop, delay and corrupt end
/// the chain; flip and modify change the frame for the rules after them;
/// duplicates add up.
fn decide_fate(
    rules: &mut [FaultRule],
    at: Position,
    frame: Frame,
    sender: u32,
    receiver: Option<u32>,
    now_ns: u64,
) -> Fate {
    let mut frame = frame;
    let mut copies = 0u8;
    for rule in rules.iter_mut().filter(|r| r.at == at) {
        match rule.decide(&frame, sender, receiver, now_ns) {
            None => {}
            Some(Action::Drop) => return Fate::Drop,
            Some(Action::Delay { ms }) => return Fate::Delay((ms * 1e6) as u64),
            Some(Action::Corrupt) => return Fate::Corrupt,
            Some(Action::Duplicate { copies: extra }) => copies = copies.saturating_add(extra),
            Some(action) => frame = transform(&action, &frame).unwrap_or(frame),
        }
    }
    Fate::Deliver { frame, copies }
}

/// A frame a `delay` rule holds back.
#[derive(Debug)]
enum Held {
    /// Not yet on the bus; `bus_rules` says whether bus-position rules still apply.
    ToBus { sender: u32, pending: Pending, bus_rules: bool },
    /// Sequenced already; one receiver gets it late.
    ToPort { port_id: u32, frame: Frame, meta: FrameMeta },
}

#[derive(Debug)]
struct Delayed {
    due_ns: u64,
    /// Keeps frames due at the same time in the order they were held.
    order: u64,
    held: Held,
}

impl PartialEq for Delayed {
    fn eq(&self, other: &Self) -> bool {
        (self.due_ns, self.order) == (other.due_ns, other.order)
    }
}
impl Eq for Delayed {}
impl PartialOrd for Delayed {
    fn partial_cmp(&self, other: &Self) -> Option<std::cmp::Ordering> {
        Some(self.cmp(other))
    }
}
impl Ord for Delayed {
    fn cmp(&self, other: &Self) -> std::cmp::Ordering {
        (self.due_ns, self.order).cmp(&(other.due_ns, other.order))
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
    /// Frames put on the channel (error frames included).
    pub frames: u64,
    pub ids: IdCounter,
    pub load: BusLoad,
    /// Fault rules, evaluated in order.
    pub rules: Vec<FaultRule>,
    held: BinaryHeap<Reverse<Delayed>>,
    held_order: u64,
    /// Frames a `delay` rule could not hold because too many were held.
    pub held_overflow: u64,
    /// Stuck dominant: every transmission fails until cleared.
    pub shorted: bool,
    /// `timed`: the frame on the wire.
    on_wire: Option<OnWire>,
    /// `timed`: bus time at which the last frame (or error frame) ended.
    bus_free_at: u64,
    /// Removed through the control API; the slot is free for a new channel.
    pub removed: bool,
    /// A lossless port without room holds the channel: its hub-wide port id.
    pub held_by: Option<u32>,
    /// How long to wait before looking for that port's room again (grows
    /// while the hold lasts; an outbox that can tell the bus comes sooner).
    hold_recheck_ns: u64,
}

/// First and last re-check interval while a lossless port holds a channel.
const HOLD_RECHECK_MIN_NS: u64 = 50_000;
const HOLD_RECHECK_MAX_NS: u64 = 5_000_000;

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
            load: BusLoad::default(),
            rules: Vec::new(),
            held: BinaryHeap::new(),
            held_order: 0,
            held_overflow: 0,
            shorted: false,
            on_wire: None,
            bus_free_at: 0,
            removed: false,
            held_by: None,
            hold_recheck_ns: HOLD_RECHECK_MIN_NS,
        }
    }

    pub fn name(&self) -> &str {
        &self.config.name
    }

    /// Decide and transmit everything that may go by bus time `now_ns`.
    /// Transmitted frames are appended to `sent` (for gateway routes and
    /// recordings). Returns the bus time at which the channel wants to be
    /// served again.
    pub fn service(&mut self, now_ns: u64, sent: &mut Vec<Transmitted>) -> Option<u64> {
        self.release_held(now_ns, sent);
        let wake = match self.config.timing {
            Timing::Ideal => self.service_ideal(now_ns, sent),
            Timing::Timed => self.service_timed(now_ns, sent),
        };
        earliest(wake, self.held.peek().map(|Reverse(h)| h.due_ns))
    }

    /// When a lossless port has no room, the bus time to look again: the
    /// channel holds its next frame until then (only this channel waits; the
    /// bus thread goes on). `None` when every lossless port has room.
    fn hold_for_lossless(&mut self, now_ns: u64) -> Option<u64> {
        let Some(full) = self.members.iter().position(|m| m.lacks_room()) else {
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
    fn service_ideal(&mut self, now_ns: u64, sent: &mut Vec<Transmitted>) -> Option<u64> {
        loop {
            let (winner, wake) = self.arbitrate(now_ns);
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
    fn service_timed(&mut self, now_ns: u64, sent: &mut Vec<Transmitted>) -> Option<u64> {
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
                match self.arbitrate(at) {
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
            let end_ns =
                at + FrameBits::of(&attempt.pending.frame).duration_ns(self.config.bitrate, self.data_bitrate());
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

    fn data_bitrate(&self) -> u32 {
        self.config.effective_data_bitrate()
    }

    /// The port whose oldest frame wins arbitration at bus time `at` among
    /// frames that had arrived by then, and otherwise the earliest time a
    /// frame becomes eligible.
    fn arbitrate(&mut self, at: u64) -> (Option<usize>, Option<u64>) {
        let mut winner: Option<(u32, u64, usize)> = None;
        let mut wake_at: Option<u64> = None;
        let mut recovered: Vec<usize> = Vec::new();
        for (index, member) in self.members.iter_mut().enumerate() {
            if !member.plugged {
                // A node without a cable cannot send: its frames are lost.
                member.discard_pending();
                continue;
            }
            if let Some(until) = member.errors.bus_off_until {
                if at < until {
                    wake_at = earliest(wake_at, Some(until).filter(|&u| u != u64::MAX));
                    continue;
                }
                member.errors.recover();
                recovered.push(index);
            }
            if at < member.retry_at {
                wake_at = earliest(wake_at, Some(member.retry_at));
                continue;
            }
            match member.tx.offer(at) {
                Ok(Some(pending)) if pending.arrived_ns > at => wake_at = earliest(wake_at, Some(pending.arrived_ns)),
                Ok(Some(pending)) => {
                    let rank = (arbitration_key(&pending.frame), pending.arrival, index);
                    if winner.is_none_or(|best| rank < best) {
                        winner = Some(rank);
                    }
                }
                Ok(None) => {}
                Err(ready_at) => wake_at = earliest(wake_at, Some(ready_at)),
            }
        }
        // Recovery is rare; the Vec above does not allocate until it happens.
        for index in recovered {
            self.report_state_change(index, ErrorState::BusOff, at);
        }
        (winner.map(|(_, _, index)| index), wake_at)
    }

    /// Take the winner's frame and decide, at its start of frame `at`, what
    /// will become of it: sender-position rules, a short, a missing ACK,
    /// bus-position rules. `None` when the frame never reaches the wire.
    fn begin(&mut self, index: usize, at: u64) -> Option<Attempt> {
        let pending = self.members[index].tx.take(at)?;
        let sender = self.members[index].port_id;
        let outcome = |outcome| Some(Attempt { sender, pending, outcome });
        if self.shorted {
            return outcome(Outcome::Corrupt);
        }
        if self.config.no_ack && !self.has_listener(index) {
            return outcome(Outcome::NoAck);
        }
        let (frame, copies) = match decide_fate(&mut self.rules, Position::Sender, pending.frame, sender, None, at) {
            Fate::Drop => {
                self.members[index].sent_one();
                return None;
            }
            Fate::Delay(ns) => {
                self.members[index].sent_one();
                self.hold(at + ns, Held::ToBus { sender, pending, bus_rules: true });
                return None;
            }
            Fate::Corrupt => return outcome(Outcome::Corrupt),
            Fate::Deliver { frame, copies } => (frame, copies),
        };
        let pending = Pending { frame, ..pending };
        let outcome = match decide_fate(&mut self.rules, Position::Bus, frame, sender, None, at) {
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
    fn finish(&mut self, attempt: Attempt, at: u64, occupied: Occupied, sent: &mut Vec<Transmitted>) -> u64 {
        let Attempt { sender, pending, outcome } = attempt;
        let index = self.members.iter().position(|m| m.port_id == sender);
        let leaves = |channel: &mut Channel| {
            if let Some(i) = index {
                let before = channel.members[i].errors.state();
                channel.members[i].sent_one();
                channel.members[i].errors.transmitted();
                channel.report_state_change(i, before, at);
            }
        };
        let error_ns = ERROR_FRAME_BITS * 1_000_000_000 / u64::from(self.config.bitrate.max(1));
        // When a failed sender may try again: after the frame and the error frame.
        let retry_at = |channel: &Channel| match occupied {
            Occupied::FrameOver => at + error_ns,
            Occupied::FrameStillToCome => {
                at + FrameBits::of(&pending.frame).duration_ns(channel.config.bitrate, channel.data_bitrate())
                    + error_ns
            }
        };
        match outcome {
            Outcome::Deliver { copies } => {
                leaves(self);
                for _ in 0..=copies {
                    self.transmit(sender, pending, at, sent);
                }
                at
            }
            Outcome::Drop => {
                leaves(self);
                at
            }
            Outcome::Delay(ns) => {
                leaves(self);
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

    /// Carry out a bus-position decision for a frame released by a delay.
    fn apply_bus_fate(&mut self, fate: Fate, sender: u32, pending: Pending, now_ns: u64, sent: &mut Vec<Transmitted>) {
        match fate {
            Fate::Drop => {}
            Fate::Delay(ns) => self.hold(now_ns + ns, Held::ToBus { sender, pending, bus_rules: false }),
            Fate::Corrupt => self.destroyed_on_wire(sender, now_ns, sent),
            Fate::Deliver { frame, copies } => {
                for _ in 0..=copies {
                    self.transmit(sender, Pending { frame, ..pending }, now_ns, sent);
                }
            }
        }
    }

    /// Send frames whose delay has passed.
    fn release_held(&mut self, now_ns: u64, sent: &mut Vec<Transmitted>) {
        while self.held.peek().is_some_and(|Reverse(h)| h.due_ns <= now_ns) {
            let Some(Reverse(delayed)) = self.held.pop() else { break };
            match delayed.held {
                Held::ToBus { sender, pending, bus_rules } => {
                    let fate = if bus_rules {
                        decide_fate(&mut self.rules, Position::Bus, pending.frame, sender, None, now_ns)
                    } else {
                        Fate::Deliver { frame: pending.frame, copies: 0 }
                    };
                    self.apply_bus_fate(fate, sender, pending, now_ns, sent);
                }
                Held::ToPort { port_id, frame, meta } => {
                    if let Some(member) = self.member_mut(port_id) {
                        member.deliver(frame, meta);
                    }
                }
            }
        }
    }

    fn hold(&mut self, due_ns: u64, held: Held) {
        if self.held.len() >= MAX_HELD {
            self.held_overflow += 1;
            return;
        }
        self.held_order += 1;
        self.held.push(Reverse(Delayed { due_ns, order: self.held_order, held }));
    }

    /// Whether any other port on the sender's segment would acknowledge.
    fn has_listener(&self, sender_index: usize) -> bool {
        let sender = &self.members[sender_index];
        self.members.iter().enumerate().any(|(i, m)| {
            i != sender_index
                && m.plugged
                && m.is_client()
                && m.segment == sender.segment
                && m.errors.bus_off_until.is_none()
        })
    }

    /// A failed transmission: the sender's error counter rises and it will
    /// retransmit from `retry_at` — unless that took it to bus-off, which
    /// drops its queue. Without an ACK the sender alone sees an ACK error
    /// frame (and, per ISO 11898-1, stops counting once error-passive).
    #[allow(clippy::too_many_arguments)]
    fn retry(
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
            let meta = self.next_meta(0, at);
            self.members[index].deliver(ack_error_frame(), meta);
            sent.push(Transmitted {
                channel: self.id,
                frame: ack_error_frame(),
                hops: 0,
                timestamp_ns: meta.timestamp_ns,
            });
            self.frames += 1;
        }
        let before = self.members[index].errors.state();
        let member = &mut self.members[index];
        member.retry_at = retry_at;
        member.tx.push_front(pending);
        let bus_off = if no_ack {
            member.errors.ack_error(at, bitrate, auto)
        } else {
            member.errors.transmit_error(at, bitrate, auto)
        };
        if bus_off {
            // A bus-off controller drops what it had queued.
            member.discard_pending();
        }
        self.report_state_change(index, before, at);
    }

    /// Tell port `index` its controller changed error state, with the
    /// SocketCAN error frame a Linux driver would send.
    pub fn report_state_change(&mut self, index: usize, before: ErrorState, at: u64) {
        if let Some(frame) = state_change_frame(before, &self.members[index].errors) {
            let meta = self.next_meta(0, at);
            self.members[index].deliver(frame, meta);
        }
    }

    /// Put an error frame on the bus in place of a destroyed frame.
    fn destroyed_on_wire(&mut self, sender: u32, now_ns: u64, sent: &mut Vec<Transmitted>) {
        let meta = self.next_meta(0, now_ns);
        let error = corruption_error_frame();
        let segment = self.members.iter().find(|m| m.port_id == sender).map_or(0, |m| m.segment);
        for member in self.members.iter_mut().filter(|m| m.plugged && m.segment == segment) {
            if member.port_id != sender {
                member.errors.receive_error();
            }
            member.deliver(error, meta);
        }
        self.frames += 1;
        sent.push(Transmitted { channel: self.id, frame: error, hops: 0, timestamp_ns: meta.timestamp_ns });
    }

    fn next_meta(&mut self, sender: u32, now_ns: u64) -> FrameMeta {
        self.last_seq += 1;
        // Receivers rely on timestamps that never go backwards within a
        // channel, even if the wall clock does.
        self.last_timestamp_ns = now_ns.max(self.last_timestamp_ns);
        FrameMeta { channel: self.id, sender, seq: self.last_seq, timestamp_ns: self.last_timestamp_ns }
    }

    /// Put a frame that won arbitration on the bus at `now_ns` and fan it
    /// out, applying receiver-position fault rules per port.
    pub fn transmit(&mut self, sender: u32, pending: Pending, now_ns: u64, sent: &mut Vec<Transmitted>) -> FrameMeta {
        let meta = self.next_meta(sender, now_ns);
        let frame = pending.frame;
        let segment = self.members.iter().find(|m| m.port_id == sender).map_or(0, |m| m.segment);
        let Channel { members, rules, held, held_order, held_overflow, .. } = self;
        for member in members.iter_mut().filter(|m| m.plugged && m.segment == segment) {
            if member.port_id == sender {
                if member.receives_own() {
                    member.deliver(frame.with_echo(true), meta);
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
                    } else {
                        *held_order += 1;
                        let port_id = member.port_id;
                        let delayed = Delayed {
                            due_ns: now_ns + ns,
                            order: *held_order,
                            held: Held::ToPort { port_id, frame, meta },
                        };
                        held.push(Reverse(delayed));
                    }
                }
                Fate::Corrupt => {
                    member.errors.receive_error();
                    member.deliver(corruption_error_frame(), meta);
                }
                Fate::Deliver { frame, copies } => {
                    for _ in 0..=copies {
                        member.deliver(frame, meta);
                    }
                    member.errors.received();
                }
            }
        }
        self.frames += 1;
        self.ids.count(frame.socketcan_id(), meta.timestamp_ns);
        let bits = FrameBits::of(&frame);
        let busy_ns = bits.duration_ns(self.config.bitrate, self.config.effective_data_bitrate());
        self.load.add(meta.timestamp_ns, bits.total, busy_ns);
        sent.push(Transmitted { channel: self.id, frame, hops: pending.hops, timestamp_ns: meta.timestamp_ns });
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
        let queued = self
            .members
            .iter()
            .filter(|m| m.is_client() && m.client == client)
            .filter_map(|m| m.tx.oldest_arrival())
            .min();
        // A frame on the wire of a timed channel is not sequenced yet either.
        let on_wire = self.on_wire.as_ref().filter(|w| {
            self.members.iter().any(|m| m.is_client() && m.client == client && m.port_id == w.attempt.sender)
        });
        earliest(queued, on_wire.map(|w| w.attempt.pending.arrival))
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use fieldhub_proto::wire::PortOptions;

    use super::*;
    use crate::config::Protocol;
    use crate::credit::TxCredit;
    use crate::outbox::{test_outbox, Outbound, QueueOutbox, OUTBOX_FRAMES};
    use crate::tx_queue::TxQueue;

    fn channel() -> Channel {
        Channel::new(0, ChannelConfig::new("can0", Protocol::Can))
    }

    fn member(port_id: u32, options: PortOptions) -> (Member, Arc<QueueOutbox>) {
        let (tx, rx) = test_outbox();
        let credit = Arc::new(TxCredit::for_current_thread());
        (Member::client(port_id, 0, port_id, options, tx, credit, TxQueue::new(None)), rx)
    }

    fn frames(rx: &QueueOutbox) -> Vec<Frame> {
        rx.drain()
            .into_iter()
            .filter_map(|item| match item {
                Outbound::Frame { frame, .. } => Some(frame),
                _ => None,
            })
            .collect()
    }

    fn offer(channel: &mut Channel, port_id: u32, frame: Frame, arrival: u64) {
        channel.member_mut(port_id).unwrap().tx.push(Pending { frame, arrival, hops: 0, arrived_ns: 0 });
    }

    #[test]
    fn sequence_numbers_start_at_one_and_sender_gets_echo_only_if_asked() {
        let mut channel = channel();
        let (a, rx_a) = member(1, PortOptions::RECEIVE_OWN);
        let (b, rx_b) = member(2, PortOptions::empty());
        channel.members.extend([a, b]);
        let frame = Frame::can(0x10, false, &[1]).unwrap();
        let mut sent = Vec::new();
        let first = channel.transmit(1, Pending { frame, arrival: 0, hops: 0, arrived_ns: 0 }, 100, &mut sent);
        let second = channel.transmit(2, Pending { frame, arrival: 1, hops: 0, arrived_ns: 0 }, 50, &mut sent);
        assert_eq!((first.seq, second.seq), (1, 2));
        assert_eq!(second.timestamp_ns, 100, "timestamps never go backwards");
        assert_eq!(frames(&rx_a).iter().map(Frame::is_echo).collect::<Vec<_>>(), [true, false]);
        assert_eq!(frames(&rx_b).len(), 1);
        assert_eq!(sent.len(), 2);
    }

    #[test]
    fn lower_id_wins_arbitration_with_iso_precedence() {
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
        channel.service(0, &mut Vec::new());
        let order = frames(&rx);
        assert_eq!(order, [candidates[3], candidates[1], candidates[4], candidates[2], candidates[0]]);
    }

    #[test]
    fn each_port_offers_only_its_oldest_frame_so_priority_inversion_happens() {
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
        channel.service(0, &mut Vec::new());
        assert_eq!(frames(&rx), [middle, low, urgent]);
    }

    #[test]
    fn identical_arbitration_fields_go_oldest_first() {
        let mut channel = channel();
        let (listener, rx) = member(9, PortOptions::empty());
        let (a, _) = member(1, PortOptions::empty());
        let (b, _) = member(2, PortOptions::empty());
        channel.members.extend([listener, a, b]);
        let from_b = Frame::can(0x10, false, &[2]).unwrap();
        let from_a = Frame::can(0x10, false, &[1]).unwrap();
        offer(&mut channel, 2, from_b, 0);
        offer(&mut channel, 1, from_a, 1);
        channel.service(0, &mut Vec::new());
        assert_eq!(frames(&rx), [from_b, from_a]);
    }

    #[test]
    fn full_receiver_drops_counts_and_reports_before_its_next_frame() {
        let mut channel = channel();
        let (slow, rx_slow) = member(1, PortOptions::empty());
        channel.members.push(slow);
        let frame = Frame::can(0x10, false, &[]).unwrap();
        let mut sent = Vec::new();
        for arrival in 0..OUTBOX_FRAMES as u64 + 3 {
            channel.transmit(9, Pending { frame, arrival, hops: 0, arrived_ns: 0 }, 0, &mut sent);
        }
        assert_eq!(channel.members[0].counters.rx_dropped, 3);
        assert_eq!(rx_slow.drain().len().min(10), 10);
        channel.transmit(9, Pending { frame, arrival: 0, hops: 0, arrived_ns: 0 }, 0, &mut sent);
        let tail: Vec<Outbound> = rx_slow.drain();
        let report_at = tail.iter().position(|i| matches!(i, Outbound::RxOverflow { dropped: 3, .. }));
        assert_eq!(report_at, Some(tail.len() - 2), "the report precedes the next frame");
    }
}
