//! The bus side of virtual time ([`super::virtual_time`] says how and why):
//! participants joining and announcing their steps, frames held until the
//! step ends (and refused past what the hub holds of a participant), each
//! advance of bus time. Observers' ports are `time_observers.rs`, stall
//! reports `stall_reports.rs`, the control API's hold `time_control.rs`.

use fieldhub_proto::fate::DropReason;
use fieldhub_proto::wire::ErrorCode;
use fieldhub_proto::Frame;
use tracing::info;

use super::Bus;
use crate::credit::{PARTICIPANT_CREDITS, PARTICIPANT_TRANSIT, TX_CREDITS};
use crate::inbox::ClientId;
use crate::outbox::Outbound;
use crate::port_id::PortId;

impl Bus {
    /// A synchronised participant attached: it stands at the current bus
    /// time and learns it from its first `GRANT`. `ahead`: it may step
    /// ahead (`AHEAD`).
    pub(super) fn join_time(&mut self, client: ClientId, ahead: bool) {
        let Some(vt) = self.virtual_time.as_mut() else { return };
        let Some(name) = self.clients.get(&client).map(|c| c.name.clone()) else { return };
        let now_ns = vt.join(client, &name, ahead);
        info!(client, name, now_ns, "participant joined virtual time");
        // Its sends are part of its step: none may wait for bus time. The
        // bus refuses its frames past PARTICIPANT_CREDITS (`stage_frame`).
        if let Some(owner) = self.clients.get(&client) {
            owner.credit.set_limit(PARTICIPANT_TRANSIT);
        }
        self.reply(client, Outbound::Grant { now_ns });
    }

    /// `STEP`: the participant is done up to `until_ns`. A refused step is
    /// a non-fatal error; the participant's step stays as it was.
    pub(super) fn on_step(&mut self, client: ClientId, until_ns: u64) {
        let refused = match self.virtual_time.as_mut() {
            None => "STEP on a hub in real time; it needs [hub] time = \"virtual\"".to_owned(),
            Some(vt) => match vt.announce(client, until_ns) {
                Ok(()) => return self.refuse_past_step(client, until_ns),
                Err(why) => why.to_string(),
            },
        };
        let error = Outbound::Error { code: ErrorCode::TimeMode, request: 0, fatal: false, text: refused };
        self.reply(client, error);
    }

    /// In virtual time a frame waits for the end of the step it was sent
    /// in, so that the order it is queued in does not depend on when the
    /// bus happened to read it. A participant's frame past the most the hub
    /// holds of it ([`PARTICIPANT_CREDITS`]) is refused instead: waiting
    /// for room would wait for bus time, which waits for its step.
    pub(super) fn stage_frame(&mut self, client: ClientId, port: u16, frame: Frame) {
        let owned = self.clients.get(&client).and_then(|c| c.ports.get(port as usize).copied().flatten());
        // Refused now, not when bus time moves: a sender that is not a
        // participant hears the frame is placed as soon as it is staged.
        if owned.is_some_and(|owned| self.refuses_as_it_comes(client, owned, &frame)) {
            return;
        }
        let Some(vt) = self.virtual_time.as_ref() else { return };
        if let Some(owned) = owned.filter(|_| vt.is_participant(client)) {
            let held = self.queued_of(client) + vt.holds(client);
            if held >= PARTICIPANT_CREDITS as usize {
                return self.refuse_past_credit(client, owned);
            }
        }
        if let Some(vt) = self.virtual_time.as_mut() {
            vt.stage(client, port, owned.map(|o| o.port_id), frame);
        }
    }

    /// Off the bus with `TX_DROPPED queue_full`, counted on its port, its
    /// credit returned: the frame of a participant that has
    /// [`PARTICIPANT_CREDITS`] frames waiting in the hub.
    pub(super) fn refuse_past_credit(&mut self, client: ClientId, owned: super::OwnedPort) {
        let Some(owner) = self.clients.get(&client) else { return };
        owner.credit.release();
        let channel = &mut self.channels[owned.channel as usize];
        if let Some(member) = channel.members.get_mut(owned.member).filter(|m| m.port_id == owned.port_id) {
            member.dropped(DropReason::QueueFull, 1);
        }
    }

    /// Frames of `client` in its ports' transmit FIFOs. Between advances
    /// they do not change: bus time stands still.
    pub(super) fn queued_of(&self, client: ClientId) -> usize {
        let Some(owner) = self.clients.get(&client) else { return 0 };
        owner.ports.iter().flatten().map(|owned| self.fifo_len(owned)).sum()
    }

    /// Frames waiting in the transmit FIFO of `owned` (0 if it is off its channel).
    fn fifo_len(&self, owned: &super::OwnedPort) -> usize {
        let channel = &self.channels[owned.channel as usize];
        channel.members.get(owned.member).filter(|m| m.port_id == owned.port_id).map_or(0, |m| m.tx.len())
    }

    /// Advance bus time if every participant is done with its step: queue
    /// the staged frames in their fixed order, serve the channels at every
    /// deadline up to the target and at the target, then grant the
    /// participants whose boundary it is. Returns whether time moved.
    ///
    /// The bus calls it after every round of input, so a port an observer
    /// opened in the round is made lossy here before any frame reaches it.
    ///
    /// Frames stamped ahead are one more deadline: those due at a bus time
    /// before the target are queued there, after a serve at that time (as
    /// the window ending there would serve) and then served again. Those
    /// due at the target wait for the next advance, where they join the
    /// frames staged then. After each serve the ports of participants
    /// stepping ahead are looked at: a frame that woke one may move the
    /// target earlier (`bus/ahead.rs`).
    pub(super) fn advance_virtual_time(&mut self) -> bool {
        self.observers_lossy();
        let Some(mut target) = self.virtual_time.as_ref().and_then(|vt| vt.target()) else { return false };
        self.return_lingering();
        let start = self.clock.now();
        self.queue_staged();
        let mut next = self.step();
        target = self.woken(start, true, target);
        loop {
            let held = self.virtual_time.as_ref().and_then(|vt| vt.next_held()).filter(|&at| at < target);
            let Some(at) = [next.filter(|&at| at <= target), held].into_iter().flatten().min() else { break };
            let at = at.max(self.clock.now());
            if let Some(vt) = self.virtual_time.as_mut() {
                vt.move_clock(at);
            }
            next = self.step();
            let queued_then = at == start;
            target = self.woken(at, queued_then, target);
            if held.is_some_and(|held| held <= at) && at < target {
                self.queue_staged();
                next = self.step();
                target = self.woken(at, true, target);
            }
        }
        let Some(vt) = self.virtual_time.as_mut() else { return false };
        vt.move_clock(target);
        self.step();
        target = self.woken(target, false, target);
        self.retire_lingering();
        let granted = self.virtual_time.as_mut().map(|vt| vt.grant(target)).unwrap_or_default();
        for &client in &granted {
            self.unwatch(client);
            if let Some(text) = self.queue_full(client) {
                let error = Outbound::Error { code: ErrorCode::TxQueueFull, request: 0, fatal: false, text };
                self.reply(client, error);
            }
            self.reply(client, Outbound::Grant { now_ns: target });
        }
        if let Some(vt) = self.virtual_time.as_mut() {
            vt.granted_done(granted);
        }
        true
    }

    /// What to tell a participant about to be granted whose frames waiting
    /// in the hub are more than a real-time transmit queue holds
    /// ([`TX_CREDITS`]): its channel carries less than it sends. `None`
    /// while they fit. Counted in its ports' FIFOs, so when it is told
    /// depends on bus time only.
    fn queue_full(&self, client: ClientId) -> Option<String> {
        let owner = self.clients.get(&client)?;
        let queued = self.queued_of(client);
        if queued <= TX_CREDITS as usize {
            return None;
        }
        // The first of the fullest ports, in handle order.
        let owned = owner.ports.iter().flatten().rev().max_by_key(|owned| self.fifo_len(owned))?;
        let waiting = self.fifo_len(owned);
        let port = self.port_names.get(&owned.port_id).map_or("?", String::as_str);
        let channel = self.channels[owned.channel as usize].name();
        Some(format!(
            "{queued} frames of this participant wait in the hub (more than the {TX_CREDITS} of a real-time transmit \
             queue; {waiting} on port '{port}' of channel '{channel}'): the channel carries less than is sent, so \
             lower-priority frames wait. They go on the bus in arbitration order in the coming steps; send with \
             timeout 0 reports the queue full meanwhile. Past {PARTICIPANT_CREDITS} waiting frames the hub refuses \
             further frames (TX_DROPPED queue_full)"
        ))
    }

    /// The step's frames, in (port name, order sent) order — never in the
    /// order the bus read them — into their ports' FIFOs at the current bus time.
    /// Frames held for this bus time join them (`virtual_time/ahead.rs`).
    fn queue_staged(&mut self) {
        let now_ns = self.clock.now();
        let Some(vt) = self.virtual_time.as_mut() else { return };
        let mut staged = vt.take_all_staged();
        vt.take_due(now_ns, &mut staged);
        let names = &self.port_names;
        let name = |port_id: Option<PortId>| port_id.and_then(|id| names.get(&id)).map_or("", String::as_str);
        staged.sort_unstable_by(|a, b| name(a.port_id).cmp(name(b.port_id)).then(a.order.cmp(&b.order)));
        for s in staged.drain(..) {
            self.queue_frame(s.client, s.port, s.frame);
        }
        if let Some(vt) = self.virtual_time.as_mut() {
            // Hand the emptied buffer back: no allocation per step.
            vt.staged = staged;
        }
    }

    /// `client`'s `port` (every port: `None`) closes, or the client leaves,
    /// before bus time moves on; the bus releases the ports right after.
    /// A participant's frames of its unfinished step go with it, their
    /// transmit credit returned. An observer's frames are not lost: its
    /// ports with frames waiting linger ([`Bus::linger`]).
    pub(super) fn discard_staged(&mut self, client: ClientId, port: Option<u16>) {
        let Some(vt) = self.virtual_time.as_mut() else { return };
        if !vt.is_participant(client) {
            return self.linger(client, port);
        }
        let discarded = vt.discard(client, port) + vt.discard_held(client, port);
        if let Some(owner) = self.clients.get(&client) {
            (0..discarded).for_each(|_| owner.credit.release());
        }
    }
}
