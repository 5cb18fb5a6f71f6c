//! The bus side of a relayed channel (`federation/`): a channel another hub
//! sequences. Its ports' frames are not arbitrated here; each is queued in
//! its port's transmit FIFO as usual (so it holds its client's transmit
//! credit, and a `PING` waits for it) and handed to the federation's uplink.
//! The owner's committed events come back as [`Inbound::Committed`] and are
//! fanned out here in the owner's order; a frame of a local port leaves its
//! FIFO (returning the credit, echoing to the sender) only then — or, when
//! the owner's bus dropped it, with [`Inbound::CommitDropped`], its sender
//! told why (`TX_DROPPED`). What the channel's clients must know of it (its
//! owner gone or back, a gap) reaches every client port as `CHANNEL_STATE`
//! ([`Inbound::FederationState`]).
//!
//! Invariants:
//! - A relayed channel transmits nothing but committed events, in the order
//!   they are applied: one total order with the owner and every relay.
//! - A port's frames are committed or dropped in the order it sent them (the
//!   owner forwards each relay port's frames through one FIFO), so such a
//!   frame of a local port is the oldest in its FIFO; older ones the owner
//!   neither committed nor reported dropped are counted as dropped
//!   (`owner_lost`), never delivered.
//! - A port opened while the channel waits for its owner is told so at once.
//!
//! [`Inbound::Committed`]: crate::inbox::Inbound::Committed
//! [`Inbound::CommitDropped`]: crate::inbox::Inbound::CommitDropped
//! [`Inbound::FederationState`]: crate::inbox::Inbound::FederationState

use std::sync::atomic::Ordering;

use crossbeam_channel::Sender;
use fieldhub_proto::fate::{ChannelCondition, DropReason};
use fieldhub_proto::Frame;
use tracing::{info, warn};

use super::Bus;
use crate::federation::{BusLink, Uplinked, RELAY_CREDITS};
use crate::inbox::ClientId;
use crate::outbox::Outbound;
use crate::port_id::PortId;
use crate::tx_queue::Pending;

impl Bus {
    /// Make `link`'s channel federated: its figures join `STATS`, and a
    /// relayed channel's frames go to its uplink. Called before the bus
    /// thread starts, so no relayed frame is ever sequenced here.
    pub fn federate(&mut self, link: BusLink) {
        self.relays[link.channel as usize] = link.uplink;
        self.federation[link.channel as usize] = Some(link.status);
    }

    /// Hand a local port's frame to the owner hub. Without the federation
    /// (the hub is stopping) the frame stays in the FIFO and leaves with
    /// its port, as frames of a port closed before transmission do.
    pub(super) fn uplink(&mut self, channel: u16, port_id: PortId, arrival: u64, frame: Frame) {
        if let Some(uplink) = &self.relays[channel as usize] {
            let round = self.federation[channel as usize].as_ref().map_or(0, |s| s.round.load(Ordering::Relaxed));
            if uplink.send(Uplinked { channel, port_id: port_id.into(), arrival, frame, round }).is_err() {
                self.relays[channel as usize] = None;
                warn!(channel = self.channels[channel as usize].name(), "the federation link of a channel ended");
            }
        }
    }

    /// Put a frame the owner committed on the relayed channel: one of a
    /// local port when `origin` names it (its number, as `Uplinked` gave it
    /// out), else one of another hub's ports, sent from [`PortId::REMOTE`].
    pub(super) fn on_committed(&mut self, channel: u16, origin: Option<(u32, u64)>, frame: Frame) {
        let now_ns = self.round_ns.unwrap_or_else(|| self.clock.now());
        let Some(ch) = self.channels.get_mut(channel as usize).filter(|c| !c.removed) else { return };
        let mut sender = PortId::REMOTE;
        let mut pending = Pending { frame, arrival: self.next_arrival, hops: 0, arrived_ns: now_ns };
        if let Some((port_id, arrival)) = origin.and_then(|(id, arrival)| Some((PortId::from_wire(id)?, arrival))) {
            if let Some(member) = ch.member_mut(port_id) {
                while member.tx.oldest_arrival().is_some_and(|oldest| oldest < arrival) {
                    member.drop_oldest(now_ns, DropReason::OwnerLost);
                }
                if member.tx.oldest_arrival() == Some(arrival) {
                    if let Some(own) = member.tx.take(now_ns) {
                        member.sent_one();
                        pending = own;
                        sender = port_id;
                    }
                }
            }
        }
        if sender == PortId::REMOTE {
            self.next_arrival += 1;
        }
        ch.transmit(sender, pending, now_ns, &mut self.sent);
    }

    /// `channel` changes hands. Taken over (no `uplink`), its waiting
    /// frames arbitrate here from the next round: those the old owner never
    /// committed are sent after all. Handed to a newer owner, every frame
    /// waiting in its FIFOs goes to the new owner, in arrival order, as if
    /// just sent: the frames this hub sequenced under the old epoch are
    /// not sent again.
    pub(super) fn on_federation_role(&mut self, channel: u16, uplink: Option<Sender<Uplinked>>) {
        let index = channel as usize;
        if self.channels.get(index).is_none_or(|c| c.removed) {
            return;
        }
        self.relays[index] = uplink;
        self.dirty[index] = true;
        self.uplink_waiting(channel);
    }

    /// A relayed channel's new owner gets every frame still waiting: those
    /// handed to the old one died with it, uncommitted.
    pub(super) fn on_federation_resend(&mut self, channel: u16, round: u64) {
        if let Some(status) = self.federation.get(channel as usize).and_then(Option::as_ref) {
            status.round.store(round, Ordering::Relaxed);
            self.uplink_waiting(channel);
        }
    }

    /// Hand every frame waiting in `channel`'s FIFOs to its uplink, in
    /// arrival order (nothing when the channel is sequenced here).
    fn uplink_waiting(&mut self, channel: u16) {
        let Some(ch) = self.channels.get(channel as usize).filter(|c| !c.removed) else { return };
        if self.relays[channel as usize].is_none() {
            return;
        }
        let mut waiting: Vec<(u64, PortId, Frame)> =
            ch.members.iter().flat_map(|m| m.tx.iter().map(|p| (p.arrival, m.port_id, p.frame.clone()))).collect();
        waiting.sort_unstable_by_key(|&(arrival, ..)| arrival);
        for (arrival, port_id, frame) in waiting {
            self.uplink(channel, port_id, arrival, frame);
        }
    }

    /// The owner's bus dropped a frame of a local port for `reason`: it
    /// leaves its FIFO (older ones the owner never reported are lost with
    /// it) and its sender is told.
    pub(super) fn on_commit_dropped(&mut self, channel: u16, (port_id, arrival): (u32, u64), reason: DropReason) {
        let now_ns = self.round_ns.unwrap_or_else(|| self.clock.now());
        let Some(ch) = self.channels.get_mut(channel as usize).filter(|c| !c.removed) else { return };
        let Some(member) = PortId::from_wire(port_id).and_then(|id| ch.member_mut(id)) else { return };
        while member.tx.oldest_arrival().is_some_and(|oldest| oldest < arrival) {
            member.drop_oldest(now_ns, DropReason::OwnerLost);
        }
        if member.tx.oldest_arrival() == Some(arrival) {
            member.drop_oldest(now_ns, reason);
        }
    }

    /// A port of `client` just opened on `channel`: on a relayed channel its
    /// frames hold their credit for a round trip to the owner, so the
    /// client's window grows to [`RELAY_CREDITS`] (never shrinks: a
    /// participant of virtual time has more).
    pub(super) fn widen_for_relay(&mut self, channel: u16, client: ClientId) {
        if self.relays.get(channel as usize).is_none_or(Option::is_none) {
            return;
        }
        if let Some(owner) = self.clients.get(&client).filter(|c| c.credit.limit() < RELAY_CREDITS) {
            owner.credit.set_limit(RELAY_CREDITS);
        }
    }

    /// Tell every client port on `channel` what changed (`CHANNEL_STATE`);
    /// while it waits for its owner, ports opened later are told too.
    pub(super) fn on_federation_state(&mut self, channel: u16, condition: ChannelCondition, missed: u32, text: &str) {
        let Some(ch) = self.channels.get(channel as usize) else { return };
        let text = format!("channel '{}' {text}", ch.name());
        match condition {
            ChannelCondition::Live => info!("{text}"),
            _ => warn!("{text}"),
        }
        if let Some(status) = self.federation.get(channel as usize).and_then(Option::as_ref) {
            if let Ok(mut waiting) = status.waiting.lock() {
                match condition {
                    ChannelCondition::Waiting => *waiting = Some(text.clone()),
                    ChannelCondition::Live => *waiting = None,
                    ChannelCondition::Gap | ChannelCondition::Asleep | ChannelCondition::Awake => {}
                }
            }
        }
        let ports: Vec<(ClientId, u16)> =
            ch.members.iter().filter(|m| m.is_client()).map(|m| (m.client, m.port)).collect();
        for (client, port) in ports {
            let state = Outbound::ChannelState { port, condition, missed, text: text.clone() };
            self.reply(client, state);
        }
    }

    /// A port just opened on `channel`: tell it when the channel waits for
    /// its owner, as the ports open before were told.
    pub(super) fn tell_waiting(&mut self, channel: u16, client: ClientId, port: u16) {
        let Some(status) = self.federation.get(channel as usize).and_then(Option::as_ref) else { return };
        let Some(text) = status.waiting.lock().ok().and_then(|w| w.clone()) else { return };
        let state = Outbound::ChannelState { port, condition: ChannelCondition::Waiting, missed: 0, text };
        self.reply(client, state);
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use fieldhub_proto::fate::{ChannelCondition, DropReason};
    use fieldhub_proto::wire::PortOptions;
    use fieldhub_proto::Frame;

    use super::super::harness::{Harness, TestClient};
    use crate::credit::TX_CREDITS;
    use crate::federation::{BusLink, ChannelStatus, Uplinked, RELAY_CREDITS};
    use crate::inbox::Inbound;
    use crate::monitor::monitor;
    use crate::outbox::Outbound;
    use crate::port_id::{PortId, PortKind};
    use crate::request::ControlRequest;

    /// A hub relaying `can0` from another hub: what it hands the owner comes out of the receiver.
    fn relayed() -> (Harness, crossbeam_channel::Receiver<Uplinked>) {
        let mut h = Harness::new("[[channel]]\nname = \"can0\"\n");
        let (uplink, to_owner) = crossbeam_channel::unbounded();
        let status = Arc::new(ChannelStatus::new("rack1".into(), true));
        h.bus.federate(BusLink { channel: 0, uplink: Some(uplink), status });
        (h, to_owner)
    }

    /// The `TX_DROPPED`, `CHANNEL_STATE` and `PONG` items `client` was sent, in order.
    fn told(h: &Harness, client: &TestClient) -> Vec<String> {
        h.items(client)
            .into_iter()
            .filter_map(|item| match item {
                Outbound::TxDropped { port, reason, dropped } => Some(format!("port {port}: {dropped} {reason:?}")),
                Outbound::ChannelState { port, condition, missed, text } => {
                    Some(format!("port {port}: {condition:?} {missed} {text}"))
                }
                Outbound::Pong { nonce } => Some(format!("pong {nonce}")),
                _ => None,
            })
            .collect()
    }

    #[test]
    fn a_frame_the_owners_bus_dropped_leaves_its_fifo_and_its_sender_is_told_why() {
        let (mut h, to_owner) = relayed();
        let tx = h.connect("tx");
        let port = h.open(&tx, "can0", "tx", PortOptions::empty());
        for n in 0..3 {
            h.send(&tx, port, Frame::can(0x100, false, &[n]).unwrap());
        }
        h.step();
        let uplinked: Vec<Uplinked> = to_owner.try_iter().collect();
        assert_eq!(uplinked.len(), 3, "each frame goes to the owner and waits");
        // The owner reports the second dropped by a fault rule: the first,
        // older and never reported, is lost with the owner; the third waits.
        let second = &uplinked[1];
        h.bus.handle(Inbound::CommitDropped {
            channel: 0,
            origin: (second.port_id, second.arrival),
            reason: DropReason::FaultRule,
        });
        h.bus.handle(Inbound::Ping { client: tx.id, nonce: 7 });
        h.step();
        assert_eq!(told(&h, &tx), [format!("port {port}: 1 OwnerLost"), format!("port {port}: 1 FaultRule")]);
        let third = &uplinked[2];
        h.bus.handle(Inbound::Committed {
            channel: 0,
            origin: Some((third.port_id, third.arrival)),
            frame: third.frame.clone(),
        });
        h.step();
        assert_eq!(told(&h, &tx), ["pong 7"], "the PING waited for the third frame's commit");
    }

    #[test]
    fn every_client_port_is_told_what_the_channel_does_and_one_opened_while_it_waits_at_once() {
        let (mut h, _to_owner) = relayed();
        let (a, b, c) = (h.connect("a"), h.connect("b"), h.connect("c"));
        let a1 = h.open(&a, "can0", "a1", PortOptions::empty());
        let a2 = h.open(&a, "can0", "a2", PortOptions::empty());
        let state = |condition, missed: u32, text: &str| Inbound::FederationState {
            channel: 0,
            condition,
            missed,
            text: text.into(),
        };
        h.bus.handle(state(ChannelCondition::Waiting, 0, "waits for an owner"));
        h.step();
        let waiting = "Waiting 0 channel 'can0' waits for an owner";
        assert_eq!(told(&h, &a), [format!("port {a1}: {waiting}"), format!("port {a2}: {waiting}")]);
        let b1 = h.open(&b, "can0", "b1", PortOptions::empty());
        assert_eq!(told(&h, &b), [format!("port {b1}: {waiting}")], "told as its port opens");
        h.bus.handle(state(ChannelCondition::Gap, 2, "lacks 2 events"));
        h.bus.handle(state(ChannelCondition::Live, 0, "is live"));
        h.step();
        let after = [
            format!("port {b1}: Gap 2 channel 'can0' lacks 2 events"),
            format!("port {b1}: Live 0 channel 'can0' is live"),
        ];
        assert_eq!(told(&h, &b), after);
        h.open(&c, "can0", "c1", PortOptions::empty());
        assert_eq!(told(&h, &c), [] as [String; 0], "a port opened while it is live is told nothing");
    }

    #[test]
    fn a_client_with_a_port_on_a_relayed_channel_may_have_a_round_trip_of_frames_waiting() {
        let mut h = Harness::new("[[channel]]\nname = \"can0\"\n[[channel]]\nname = \"local\"\n");
        let (uplink, to_owner) = crossbeam_channel::unbounded();
        let status = Arc::new(ChannelStatus::new("rack1".into(), true));
        h.bus.federate(BusLink { channel: 0, uplink: Some(uplink), status });
        let (relaying, local) = (h.connect("relaying"), h.connect("local"));
        h.open(&local, "local", "l", PortOptions::empty());
        assert_eq!(local.credit.limit(), TX_CREDITS, "a local channel's window");
        let port = h.open(&relaying, "can0", "r", PortOptions::empty());
        assert_eq!(relaying.credit.limit(), RELAY_CREDITS);
        // The whole window waits for the owner, none of it refused.
        for n in 0..RELAY_CREDITS {
            let frame = Frame::can(0x100, false, &n.to_le_bytes()).unwrap();
            assert!(h.send_with_credit(&relaying, port, frame), "credit {n} of the window");
        }
        assert!(!h.send_with_credit(&relaying, port, Frame::can(0x100, false, &[]).unwrap()), "the window is full");
        h.step();
        assert_eq!(to_owner.try_iter().count(), RELAY_CREDITS as usize, "each frame went to the owner and waits");
        assert_eq!(relaying.credit.in_flight(), RELAY_CREDITS);
    }

    #[test]
    fn a_frame_of_another_hub_comes_from_the_remote_sender_not_a_send_port() {
        let mut h = Harness::new("[[channel]]\nname = \"can0\"\n");
        let rx = h.connect("rx");
        h.open(&rx, "can0", "rx", PortOptions::empty());
        let (tap, feed) = monitor();
        h.control(ControlRequest::Monitor { channels: vec![], tap }).unwrap();
        h.bus.on_committed(0, None, Frame::can(0x321, false, &[1]).unwrap());
        h.step();
        let got = h.frames(&rx);
        assert_eq!(got.len(), 1);
        assert_eq!(got[0].1.sender, u32::from(PortId::REMOTE));
        assert_ne!(got[0].1.sender, u32::from(PortId::send(0)));
        let tapped = feed.try_take().unwrap();
        assert_eq!(tapped.sender.map(PortId::kind), Some(PortKind::Remote), "the monitor is told the kind");
    }
}
