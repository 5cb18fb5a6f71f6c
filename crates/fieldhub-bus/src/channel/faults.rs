//! Fault rules applied on a channel: deciding a frame's fate at a position,
//! and holding frames a `delay` rule keeps back until they are due.

use std::cmp::Reverse;

use fieldhub_proto::fate::DropReason;
use fieldhub_proto::{Frame, FrameMeta};

use super::{Channel, Transmitted, MAX_HELD};
use crate::fault::{transform, Action, FaultRule, Position};
use crate::port_id::PortId;
use crate::tx_queue::Pending;

/// What a chain of fault rules decided for a frame at one position.
#[derive(Clone, Debug)]
pub(super) enum Fate {
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
pub(super) fn decide_fate(
    rules: &mut [FaultRule],
    at: Position,
    frame: &Frame,
    sender: PortId,
    receiver: Option<PortId>,
    now_ns: u64,
) -> Fate {
    let mut frame = frame.clone();
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
pub(super) enum Held {
    /// Not yet on the bus; `bus_rules` says whether bus-position rules still apply.
    ToBus { sender: PortId, pending: Pending, bus_rules: bool },
    /// Sequenced already; one receiver gets it late.
    ToPort { port_id: PortId, frame: Frame, meta: FrameMeta },
}

#[derive(Debug)]
pub(super) struct Delayed {
    pub(super) due_ns: u64,
    /// Keeps frames due at the same time in the order they were held.
    pub(super) order: u64,
    pub(super) held: Held,
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

impl Channel {
    /// Carry out a bus-position decision for a frame released by a delay.
    pub(super) fn apply_bus_fate(
        &mut self,
        fate: Fate,
        sender: PortId,
        pending: Pending,
        now_ns: u64,
        sent: &mut Vec<Transmitted>,
    ) {
        // The frame left its FIFO when it was held: it is counted here, as
        // sent or as dropped, and its sender told of a drop.
        let off_the_bus = |channel: &mut Channel| {
            if let Some(member) = channel.member_mut(sender) {
                member.dropped(DropReason::FaultRule, 1);
            }
        };
        match fate {
            Fate::Drop => off_the_bus(self),
            Fate::Delay(ns) => self.hold(now_ns.saturating_add(ns), Held::ToBus { sender, pending, bus_rules: false }),
            Fate::Corrupt => {
                self.destroyed_on_wire(sender, now_ns, sent);
                off_the_bus(self);
            }
            Fate::Deliver { frame, copies } => {
                if let Some(member) = self.member_mut(sender) {
                    member.counters.tx_frames += 1;
                }
                for _ in 0..=copies {
                    self.transmit(sender, Pending { frame: frame.clone(), ..pending }, now_ns, sent);
                }
            }
        }
    }

    /// Send frames whose delay has passed.
    pub(super) fn release_held(&mut self, now_ns: u64, sent: &mut Vec<Transmitted>) {
        while self.held.peek().is_some_and(|Reverse(h)| h.due_ns <= now_ns) {
            let Some(Reverse(delayed)) = self.held.pop() else { break };
            match delayed.held {
                Held::ToBus { sender, pending, bus_rules } => {
                    let fate = if bus_rules {
                        decide_fate(&mut self.rules, Position::Bus, &pending.frame, sender, None, now_ns)
                    } else {
                        Fate::Deliver { frame: pending.frame.clone(), copies: 0 }
                    };
                    self.apply_bus_fate(fate, sender, pending, now_ns, sent);
                }
                Held::ToPort { port_id, frame, meta } => {
                    if let Some(member) = self.member_mut(port_id) {
                        member.deliver(&frame, meta);
                    }
                }
            }
        }
    }

    pub(super) fn hold(&mut self, due_ns: u64, held: Held) {
        if self.held.len() >= MAX_HELD {
            // No room to hold it: the frame is lost to the fault, and whoever
            // it was for is told (the contract has no silent loss).
            self.held_overflow += 1;
            match held {
                Held::ToBus { sender, .. } => {
                    if let Some(member) = self.member_mut(sender) {
                        member.dropped(DropReason::FaultRule, 1);
                    }
                }
                Held::ToPort { port_id, .. } => {
                    if let Some(member) = self.member_mut(port_id) {
                        member.missed_one();
                    }
                }
            }
            return;
        }
        self.held_order += 1;
        self.held.push(Reverse(Delayed { due_ns, order: self.held_order, held }));
    }
}
