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

//! The parts, in the order a frame meets them: `arbitration` picks the
//! next frame by the channel's access rule (`arbiter`), `schedule` decides when it goes and what a failed attempt
//! costs, `faults` applies fault rules and holds delayed frames, `fanout`
//! sequences it and hands it to every port.

pub mod arbiter;
mod arbitration;
mod fanout;
mod faults;
mod members;
mod schedule;
#[cfg(test)]
mod tests;

use std::cmp::Reverse;
use std::collections::BinaryHeap;

use fieldhub_proto::fate::{ChannelCondition, DropReason};
use fieldhub_proto::wire::ChannelFlags;
use fieldhub_proto::Frame;

use crate::bus_load::BusLoad;
use crate::config::{ChannelConfig, Protocol, Timing};
use crate::fault::FaultRule;
use crate::id_counter::IdCounter;
use crate::member::Member;
use crate::outbox::Outbound;
use crate::port_id::PortId;
pub use arbiter::Rates;
use arbiter::Rule;
pub use arbiter::{check_arbitration, check_route_into};
pub use arbitration::arbitration_key;
use faults::Delayed;
pub use members::Members;
pub use schedule::HOLD_RECHECK_MAX_NS;
use schedule::{OnWire, HOLD_RECHECK_MIN_NS};

/// Most frames `delay` rules may hold at once on one channel.
pub const MAX_HELD: usize = 64 * 1024;

/// A frame that has been put on a channel, as gateway routes see it.
#[derive(Clone, Debug)]
pub struct Transmitted {
    pub channel: u16,
    /// The sending port; `None` for the bus's own error frames.
    pub sender: Option<PortId>,
    pub frame: Frame,
    pub hops: u8,
    pub timestamp_ns: u64,
}

fn earliest(a: Option<u64>, b: Option<u64>) -> Option<u64> {
    match (a, b) {
        (Some(a), Some(b)) => Some(a.min(b)),
        (a, b) => a.or(b),
    }
}

/// One bus.
pub struct Channel {
    pub id: u16,
    pub config: ChannelConfig,
    /// Sequence number of the last frame; the first frame gets 1.
    last_seq: u64,
    last_timestamp_ns: u64,
    pub members: Members,
    /// Frames of ports gone from the channel that were dropped, by
    /// [`DropReason`] (`Channel::tx_dropped_by_reason` adds the present ports').
    pub departed_drops: [u64; DropReason::ALL.len()],
    /// Data, remote and LIN frames put on the channel (STATS `frames`).
    pub frames: u64,
    /// Error frames on the channel: the bus's own and clients' (STATS
    /// `error_frames`), counted apart from `frames`.
    pub error_frames: u64,
    pub ids: IdCounter,
    pub load: BusLoad,
    /// Fault rules, evaluated in order.
    pub rules: Vec<FaultRule>,
    /// The access rule (`arbitration`), chosen once from the configuration.
    arbiter: Rule,
    held: BinaryHeap<Reverse<Delayed>>,
    held_order: u64,
    /// Frames a `delay` rule could not hold because too many were held.
    pub held_overflow: u64,
    /// Stuck dominant: every transmission fails until cleared.
    pub shorted: bool,
    /// Whether anything takes this channel's transmitted frames from the
    /// round's `sent` list (gateway routes, recordings, web monitors; the
    /// bus says before each service). If nothing does, the list is left
    /// alone and a frame is fanned out where it lies: writing each frame
    /// into the list was half of `transmit`'s time in perf.
    pub tapped: bool,
    /// `timed`: the frame on the wire.
    on_wire: Option<OnWire>,
    /// `timed`: bus time at which the last frame (or error frame) ended.
    bus_free_at: u64,
    /// Removed through the control API; the slot is free for a new channel.
    pub removed: bool,
    /// A lossless port without room holds the channel: its hub-wide port id.
    pub held_by: Option<PortId>,
    /// How long to wait before looking for that port's room again (grows
    /// while the hold lasts; an outbox that can tell the bus comes sooner).
    hold_recheck_ns: u64,
}

impl Channel {
    pub fn new(id: u16, config: ChannelConfig) -> Self {
        Self {
            id,
            arbiter: Rule::new(&config),
            config,
            last_seq: 0,
            last_timestamp_ns: 0,
            members: Members::default(),
            frames: 0,
            error_frames: 0,
            departed_drops: [0; DropReason::ALL.len()],
            ids: IdCounter::default(),
            load: BusLoad::default(),
            rules: Vec::new(),
            held: BinaryHeap::new(),
            held_order: 0,
            held_overflow: 0,
            tapped: true,
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

    /// What the channel carries, as `PORT_OPENED` tells a client.
    pub fn flags(&self) -> ChannelFlags {
        match self.config.protocol {
            Protocol::Canfd => ChannelFlags::CANFD,
            Protocol::Can => ChannelFlags::empty(),
            Protocol::Lin => ChannelFlags::LIN,
            // spec 3.5: CANXL carries XL frames besides FD and classic ones.
            Protocol::Canxl => ChannelFlags::CANFD | ChannelFlags::CANXL,
            Protocol::Raw => ChannelFlags::RAW,
        }
    }

    /// Headers of this LIN channel's schedule that no slave answered.
    pub fn lin_no_responses(&self) -> Option<u64> {
        self.arbiter.lin_counts().map(|(none, _)| none)
    }

    /// Event-triggered headers of this LIN channel whose answers collided.
    pub fn lin_collisions(&self) -> Option<u64> {
        self.arbiter.lin_counts().map(|(_, collisions)| collisions)
    }

    /// A LIN channel's state and its sleep and wake-up counts.
    pub fn lin_power(&self) -> Option<arbiter::LinPower> {
        self.arbiter.lin_power()
    }

    /// Ask this LIN channel's master for the go-to-sleep command (`sleep`)
    /// or a wake-up pulse at bus time `now_ns`; the error says why not.
    pub fn lin_ask(&mut self, sleep: bool, now_ns: u64) -> Result<(), String> {
        let Some(master) = self.arbiter.lin() else {
            return Err("is not a LIN channel: sleep and wake-up are LIN's".into());
        };
        match sleep {
            true => master.ask_sleep(now_ns),
            false => master.ask_wake(now_ns),
        }
    }

    /// Port `port_id` sends a wake-up pulse on this LIN channel, read at bus
    /// time `now_ns`: it goes on the bus as soon as it may, never behind the
    /// port's queued frames (which a sleeping bus holds back).
    pub fn lin_pulse(&mut self, port_id: PortId, now_ns: u64) {
        if let Some(master) = self.arbiter.lin() {
            master.ask_pulse(port_id, now_ns);
        }
    }

    /// The cable of the port in member slot `at` was pulled: its queued
    /// frames, and the wake-up pulses it sent that wait to go on this LIN
    /// channel, never reach the bus; its sender is told, as `unplugged`.
    pub fn lose_unsent(&mut self, at: usize) {
        let port_id = self.members[at].port_id;
        let pulses = self.arbiter.lin().map_or(0, |master| master.forget_pulses(port_id));
        let member = &mut self.members[at];
        member.discard_pending(DropReason::Unplugged);
        member.dropped(DropReason::Unplugged, pulses);
    }

    /// Whether a wake-up pulse port `port_id` sent waits to go on this LIN
    /// channel: a port closing in virtual time lingers for it, as for the
    /// frames in its FIFO.
    pub fn lin_pulse_waits(&mut self, port_id: PortId) -> bool {
        self.arbiter.lin().is_some_and(|master| master.pulse_waits(port_id))
    }

    /// For a port `port` just opened on this channel, if it is a sleeping LIN
    /// channel: the `CHANNEL_STATE` `asleep` its other ports were sent.
    pub fn lin_asleep(&self, port: u16) -> Option<Outbound> {
        (self.lin_power()?.state == "asleep").then(|| Outbound::ChannelState {
            port,
            condition: ChannelCondition::Asleep,
            missed: 0,
            text: format!("channel '{}' is asleep: its master sends no header until a wake-up pulse", self.name()),
        })
    }

    /// Tell every client port of a LIN channel each change of its state
    /// (`CHANNEL_STATE` `asleep`, `awake`) before bus time `until` (at it
    /// too with `inclusive`): in order with the channel's frames, as every
    /// frame before `until` was delivered first.
    fn tell_lin_news(&mut self, until: u64, inclusive: bool) {
        let Some(master) = self.arbiter.lin() else { return };
        while let Some(news) = master.take_news(until, inclusive) {
            let text = format!("channel '{}' {}", self.config.name, news.text);
            for member in self.members.iter_mut() {
                member.tell_channel_state(news.condition, &text);
            }
        }
    }

    /// A LIN channel's own frame (a header nobody answered, a collision),
    /// once bus time `at` has reached its end: on the bus (fanned out) at
    /// its end, which it returns. `None` on other channels and before the end.
    fn header_alone(&mut self, at: u64, sent: &mut Vec<Transmitted>) -> Option<u64> {
        let (frame, end) = self.arbiter.lin()?.take_own_frame(at)?;
        self.bus_made(frame, end, sent);
        Some(end)
    }

    /// Decide and transmit everything that may go by bus time `now_ns`.
    /// Transmitted frames are appended to `sent` (for gateway routes,
    /// recordings and web monitors) while the channel is `tapped`. Returns the bus time at which the channel wants to be
    /// served again.
    pub fn service(&mut self, now_ns: u64, sent: &mut Vec<Transmitted>) -> Option<u64> {
        self.release_held(now_ns, sent);
        if let Some(master) = self.arbiter.lin() {
            // The hub is the LIN master: its schedule runs while a port is here.
            master.run(now_ns, self.members.iter().next().is_some());
        }
        let wake = match self.config.timing {
            Timing::Ideal => self.service_ideal(now_ns, sent),
            Timing::Timed => self.service_timed(now_ns, sent),
        };
        self.tell_lin_news(now_ns, true);
        earliest(wake, self.held.peek().map(|Reverse(h)| h.due_ns))
    }

    /// The member with hub-wide port id `port_id`.
    pub fn member_mut(&mut self, port_id: PortId) -> Option<&mut Member> {
        self.members.iter_mut().find(|m| m.port_id == port_id)
    }

    /// Tell the access rule that port `port_id` on this channel is named
    /// `name`: rules that give turns to named ports (`tdma`, `token`) find
    /// its turns by it.
    pub fn name_port(&mut self, port_id: PortId, name: &str) {
        self.arbiter.name_port(port_id, name);
    }

    /// Why port `port_id` may not send `frame` on this channel under its
    /// access rule, if it may not (it has no turn, or the frame is longer
    /// than any turn it has): such a frame is refused as it comes, so every
    /// frame the channel accepts goes out in time.
    pub fn arbitration_refuses(&self, port_id: PortId, frame: &Frame) -> Option<String> {
        let rates = self.config.rates();
        self.arbiter.refuses(port_id, frame, rates)
    }

    /// Apply a LIN standing response, or its withdrawal (a `LIN_STANDING`
    /// frame), from port `port_id`: it answers this channel's headers of
    /// its identifier from the next one on. The error says why it may not
    /// (not a LIN channel, another port stands for the identifier, nothing
    /// to withdraw).
    pub fn stand(&mut self, port_id: PortId, request: &Frame) -> Result<(), String> {
        match self.arbiter.lin() {
            Some(master) => master.stand(port_id, request),
            None => Err("sends a LIN standing response on a channel that is not a LIN channel".into()),
        }
    }

    /// Remove the member with hub-wide port id `port_id`, discarding the
    /// frames it had not sent yet.
    pub fn detach(&mut self, port_id: PortId) -> Option<Member> {
        let at = self.members.find(|m| m.port_id == port_id)?;
        // Only a port that was here: one lingering off the channel in
        // virtual time keeps its turns until its frames are on the bus.
        self.arbiter.forget_port(port_id);
        let mut member = self.members.remove(at)?;
        member.discard_on_close();
        for (sum, n) in self.departed_drops.iter_mut().zip(member.counters.tx_dropped_by_reason) {
            *sum += n;
        }
        Some(member)
    }

    /// Frames of this channel's ports, present and gone, dropped off the
    /// bus, by [`DropReason`] in the order of [`DropReason::ALL`].
    pub fn tx_dropped_by_reason(&self) -> [u64; DropReason::ALL.len()] {
        let mut sums = self.departed_drops;
        for member in self.members.iter() {
            for (sum, n) in sums.iter_mut().zip(member.counters.tx_dropped_by_reason) {
                *sum += n;
            }
        }
        sums
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
        // Nor is a frame a fault rule delays on its way to the bus: its
        // sender learns its fate when the delay ends.
        let held = self
            .held
            .iter()
            .filter_map(|Reverse(delayed)| match &delayed.held {
                faults::Held::ToBus { sender, pending, .. }
                    if self.members.iter().any(|m| m.is_client() && m.client == client && m.port_id == *sender) =>
                {
                    Some(pending.arrival)
                }
                _ => None,
            })
            .min();
        earliest(earliest(queued, on_wire.map(|w| w.attempt.pending.arrival)), held)
    }
}
