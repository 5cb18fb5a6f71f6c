//! The bus side of virtual time ([`super::virtual_time`] says how and why):
//! participants joining and announcing their steps, frames held until the
//! step ends, each advance of bus time, observers that hold nothing back,
//! stalled participants reported with what holds them.

use std::time::Instant;

use fieldhub_proto::stats::TimeStats;
use fieldhub_proto::wire::{ErrorCode, PortOptions};
use fieldhub_proto::Frame;
use serde_json::{json, Value};
use tracing::{info, warn};

use super::virtual_time::{Lingering, RunLimit};
use super::Bus;
use crate::credit::{PARTICIPANT_CREDITS, TX_CREDITS};
use crate::inbox::ClientId;
use crate::member::Receiver;
use crate::outbox::Outbound;
use crate::port_id::PortId;
use crate::request::{ControlError, ControlResult, TimeCommand};

impl Bus {
    /// A synchronised participant attached: it stands at the current bus
    /// time and learns it from its first `GRANT`.
    pub(super) fn join_time(&mut self, client: ClientId) {
        let Some(vt) = self.virtual_time.as_mut() else { return };
        let Some(name) = self.clients.get(&client).map(|c| c.name.clone()) else { return };
        let now_ns = vt.join(client, &name);
        info!(client, name, now_ns, "participant joined virtual time");
        // Its sends are part of its step: none may wait for bus time.
        if let Some(owner) = self.clients.get(&client) {
            owner.credit.set_limit(PARTICIPANT_CREDITS);
        }
        self.reply(client, Outbound::Grant { now_ns });
    }

    /// `STEP`: the participant is done up to `until_ns`. A refused step is
    /// a non-fatal error; the participant's step stays as it was.
    pub(super) fn on_step(&mut self, client: ClientId, until_ns: u64) {
        let refused = match self.virtual_time.as_mut() {
            None => "STEP on a hub in real time; it needs [hub] time = \"virtual\"".to_owned(),
            Some(vt) => match vt.announce(client, until_ns) {
                Ok(()) => return,
                Err(why) => why.to_string(),
            },
        };
        let error = Outbound::Error { code: ErrorCode::TimeMode, request: 0, fatal: false, text: refused };
        self.reply(client, error);
    }

    /// In virtual time a frame waits for the end of the step it was sent
    /// in, so that the order it is queued in does not depend on when the
    /// bus happened to read it.
    pub(super) fn stage_frame(&mut self, client: ClientId, port: u16, frame: Frame) {
        let port_id = self
            .clients
            .get(&client)
            .and_then(|c| c.ports.get(port as usize).copied().flatten())
            .map(|owned| owned.port_id);
        if let Some(vt) = self.virtual_time.as_mut() {
            vt.stage(client, port, port_id, frame);
        }
    }

    /// Advance bus time if every participant is done with its step: queue
    /// the staged frames in their fixed order, serve the channels at every
    /// deadline up to the target and at the target, then grant the
    /// participants whose boundary it is. Returns whether time moved.
    ///
    /// The bus calls it after every round of input, so a port an observer
    /// opened in the round is made lossy here before any frame reaches it.
    pub(super) fn advance_virtual_time(&mut self) -> bool {
        self.observers_lossy();
        let Some(target) = self.virtual_time.as_ref().and_then(|vt| vt.target()) else { return false };
        self.return_lingering();
        self.queue_staged();
        let mut next = self.step();
        while let Some(at) = next.filter(|&at| at <= target) {
            if let Some(vt) = self.virtual_time.as_mut() {
                vt.move_clock(at.max(vt.now()));
            }
            next = self.step();
        }
        let Some(vt) = self.virtual_time.as_mut() else { return false };
        vt.move_clock(target);
        self.step();
        self.retire_lingering();
        let granted = self.virtual_time.as_mut().map(|vt| vt.grant(target)).unwrap_or_default();
        for client in granted {
            if let Some(text) = self.queue_full(client) {
                let error = Outbound::Error { code: ErrorCode::TxQueueFull, request: 0, fatal: false, text };
                self.reply(client, error);
            }
            self.reply(client, Outbound::Grant { now_ns: target });
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
        let mut queued = 0;
        let mut fullest: Option<(usize, &str, &str)> = None;
        for owned in owner.ports.iter().flatten() {
            let channel = &self.channels[owned.channel as usize];
            let Some(member) = channel.members.get(owned.member).filter(|m| m.port_id == owned.port_id) else {
                continue;
            };
            let waiting = member.tx.len();
            queued += waiting;
            if fullest.is_none_or(|(most, ..)| waiting > most) {
                let port = self.port_names.get(&owned.port_id).map_or("?", String::as_str);
                fullest = Some((waiting, port, channel.name()));
            }
        }
        if queued <= TX_CREDITS as usize {
            return None;
        }
        let (waiting, port, channel) = fullest?;
        Some(format!(
            "{queued} frames of this participant wait in the hub (more than the {TX_CREDITS} of a real-time transmit \
             queue; {waiting} on port '{port}' of channel '{channel}'): the channel carries less than is sent, so \
             lower-priority frames wait. They go on the bus in arbitration order in the coming steps; send with \
             timeout 0 reports the queue full meanwhile. Beyond {PARTICIPANT_CREDITS} a send waits and bus time stalls"
        ))
    }

    /// The step's frames, in (port name, order sent) order — never in the
    /// order the bus read them — into their ports' FIFOs at the current bus time.
    fn queue_staged(&mut self) {
        let Some(vt) = self.virtual_time.as_mut() else { return };
        let mut staged = std::mem::take(&mut vt.staged);
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
        let discarded = vt.discard(client, port);
        if let Some(owner) = self.clients.get(&client) {
            (0..discarded).for_each(|_| owner.credit.release());
        }
    }

    /// Keep an observer's ports (`port`, or all: `None`) that have frames
    /// waiting for bus time: their staged frames join the port's transmit
    /// FIFO now, at the current bus time (refused there, with the reply a
    /// refusal gets, if the port may not send them), and a port with frames
    /// in its FIFO comes off its channel — before the bus releases it, so
    /// the release finds nothing — to return at the next advance, receiving
    /// nothing, until its frames are on the bus. Their transmit credit
    /// returns as they go, as for any port.
    fn linger(&mut self, client: ClientId, port: Option<u16>) {
        let Some(owner) = self.clients.get(&client) else { return };
        let ports: Vec<(u16, super::OwnedPort)> = (0..owner.ports.len() as u16)
            .filter(|&handle| port.is_none_or(|p| p == handle))
            .filter_map(|handle| Some((handle, owner.ports[handle as usize]?)))
            .collect();
        for (handle, owned) in ports {
            let staged = self.virtual_time.as_mut().map(|vt| vt.take_staged(client, handle)).unwrap_or_default();
            for s in staged {
                self.queue_frame(client, handle, s.frame);
            }
            let channel = &mut self.channels[owned.channel as usize];
            let waiting =
                channel.members.get(owned.member).is_some_and(|m| m.port_id == owned.port_id && !m.tx.is_empty());
            if !waiting {
                continue;
            }
            let Some(mut member) = channel.members.remove(owned.member) else { continue };
            // Its client closed it or is gone: nothing may reach it now.
            member.receiver = Receiver::Gateway;
            let lingering = Lingering { channel: owned.channel, port_id: owned.port_id, member: Some(member) };
            if let Some(vt) = self.virtual_time.as_mut() {
                vt.lingering.push(lingering);
            }
        }
    }

    /// Put lingering ports back on their channels: bus time moves now, and
    /// their frames compete with the advance's others at the current bus time.
    fn return_lingering(&mut self) {
        let Some(vt) = self.virtual_time.as_mut() else { return };
        for lingering in &mut vt.lingering {
            let index = lingering.channel as usize;
            // A channel removed meanwhile takes its ports' frames along.
            if self.channels[index].removed {
                continue;
            }
            let Some(member) = lingering.member.take() else { continue };
            self.channels[index].members.push(member);
            self.dirty[index] = true;
        }
    }

    /// Let go of lingering ports whose frames are all on the bus. A port
    /// stays while its channel is still busy (a deadline pending: a frame
    /// on the wire may fail and need its port to retransmit from); one
    /// whose channel was removed went with it.
    fn retire_lingering(&mut self) {
        let Some(vt) = self.virtual_time.as_mut() else { return };
        let (channels, deadlines) = (&mut self.channels, &self.deadlines);
        vt.lingering.retain(|lingering| {
            let index = lingering.channel as usize;
            let channel = &mut channels[index];
            if channel.removed {
                return false;
            }
            if lingering.member.is_some() {
                return true;
            }
            let sending = channel.member_mut(lingering.port_id).is_some_and(|m| !m.tx.is_empty());
            if sending || deadlines[index].is_some() {
                return true;
            }
            channel.detach(lingering.port_id);
            false
        });
    }

    /// Make the lossless ports of every observer lossy once a port has
    /// opened since the last look (the module doc's "Observers" says why).
    fn observers_lossy(&mut self) {
        let Some(vt) = self.virtual_time.as_mut() else { return };
        if vt.ports_seen == self.next_port_id {
            return;
        }
        vt.ports_seen = self.next_port_id;
        let observers: Vec<ClientId> = self.clients.keys().copied().filter(|&c| !vt.is_participant(c)).collect();
        for client in observers {
            self.make_lossy(client);
        }
    }

    /// Clear `BLOCK_ON_OVERFLOW` on `client`'s ports: from now on what a
    /// port has no room for is dropped, counted and reported to it with
    /// `RX_OVERFLOW`. A port is taken off its channel and put back, so the
    /// channel's count of lossless ports stays right.
    fn make_lossy(&mut self, client: ClientId) {
        let Some(owner) = self.clients.get_mut(&client) else { return };
        for owned in owner.ports.iter_mut().flatten() {
            let index = owned.channel as usize;
            let members = &mut self.channels[index].members;
            let lossless = members.get(owned.member).is_some_and(|m| m.port_id == owned.port_id && m.is_lossless());
            if !lossless {
                continue;
            }
            let Some(mut member) = members.remove(owned.member) else { continue };
            if let Receiver::Client { options, .. } = &mut member.receiver {
                options.remove(PortOptions::BLOCK_ON_OVERFLOW);
            }
            owned.member = members.push(member);
            // A hold for this port ends at the channel's next service.
            self.dirty[index] = true;
            if let Some(vt) = self.virtual_time.as_mut().filter(|vt| !vt.told_lossless) {
                vt.told_lossless = true;
                let port = self.port_names.get(&owned.port_id).map_or("?", String::as_str);
                warn!(
                    client,
                    name = %owner.name,
                    "lossless port '{port}' of observer '{}' cannot hold virtual time: bus time waits only for \
                     synchronised participants, so in virtual time a lossless observer's port is lossy — frames \
                     it has no room for are dropped, counted (rx_dropped) and reported to it (RX_OVERFLOW). \
                     Logged once per hub",
                    owner.name
                );
            }
        }
    }

    /// When the bus must look at stalled participants at the latest.
    pub fn stall_deadline(&self) -> Option<Instant> {
        self.virtual_time.as_ref().and_then(|vt| vt.stall_deadline())
    }

    /// Report every participant whose step timeout passed: in the log, in
    /// the time status and to the participant itself (flushed at once) —
    /// with the lossless port that holds its frames back, if one does.
    pub fn report_stalls(&mut self) {
        let Some(vt) = self.virtual_time.as_mut() else { return };
        let timeout = vt.step_timeout();
        for stall in vt.stalls() {
            let consequence = match stall.dropped {
                true => "dropped from synchronisation; bus time goes on without it",
                false => "bus time waits for it",
            };
            let waits_for = self.waits_for(stall.client);
            warn!(client = stall.client, name = %stall.name, "participant stalled: no STEP within {timeout:?} of GRANT {}; {consequence}; {waits_for}", stall.granted_ns);
            let text = format!("no STEP within {timeout:?} of GRANT {}; {consequence}; {waits_for}", stall.granted_ns);
            if let Some(vt) = self.virtual_time.as_mut() {
                vt.stalled_for(stall.client, &waits_for);
            }
            let error = Outbound::Error { code: ErrorCode::StepTimeout, request: 0, fatal: false, text };
            self.reply(stall.client, error);
            if stall.dropped {
                // It goes on as an observer, which holds nothing back, and
                // whose sends wait for credit as in real time.
                self.make_lossy(stall.client);
                if let Some(owner) = self.clients.get(&stall.client) {
                    owner.credit.set_limit(TX_CREDITS);
                }
            }
        }
        if let Some((names, held)) = self.virtual_time.as_mut().and_then(|vt| vt.awaited_too_long()) {
            let text = format!(
                "bus time has not moved for {timeout:?}: it waits for '{}' of [hub] time_participants to join \
                 (start them with the synchronized option, or remove them from time_participants)",
                names.join("', '")
            );
            warn!("{text}");
            for client in held {
                let error =
                    Outbound::Error { code: ErrorCode::StepTimeout, request: 0, fatal: false, text: text.clone() };
                self.reply(client, error);
            }
        }
        self.flush_outboxes();
    }

    /// What a stalled participant waits for, as its report names it: a
    /// send blocked on transmit credit (and what holds the credit), a
    /// lossless receiver without room, or its own step not ended.
    fn waits_for(&self, client: ClientId) -> String {
        let held = self.held_behind(client);
        let blocked = self.clients.get(&client).is_some_and(|c| c.credit.exhausted());
        match (blocked, held) {
            (true, held) => format!(
                "send blocked on credit: {PARTICIPANT_CREDITS} of its frames wait in the hub, the most a participant \
                 may queue, so its send waits for bus time to move{}",
                held.map(|why| format!("; {why}")).unwrap_or_default()
            ),
            (false, Some(why)) => format!("lossless receiver full: {why}"),
            (false, None) => "step not ended: it has not sent STEP (still computing, or hung)".to_owned(),
        }
    }

    /// Why `client`'s step may be unable to end: its frames wait on a
    /// channel that a lossless port without room holds, so its transmit
    /// credit does not come back. Names that port and its client.
    fn held_behind(&self, client: ClientId) -> Option<String> {
        let owner = self.clients.get(&client)?;
        owner.ports.iter().flatten().find_map(|owned| {
            let channel = &self.channels[owned.channel as usize];
            let holder = channel.held_by?;
            let waiting =
                channel.members.get(owned.member).is_some_and(|m| m.port_id == owned.port_id && !m.tx.is_empty());
            if !waiting {
                return None;
            }
            let port = self.port_names.get(&holder).map_or("?", String::as_str);
            let reader = channel.members.iter().find(|m| m.port_id == holder).map(|m| m.client);
            let holder = match reader.and_then(|reader| self.clients.get(&reader).map(|c| (reader, c))) {
                Some((reader, _)) if reader == client => format!("its own lossless port '{port}'"),
                Some((_, reader)) => format!("the lossless port '{port}' of '{}'", reader.name),
                None => format!("the lossless port '{port}'"),
            };
            Some(format!(
                "its frames wait on channel '{}', held by {holder}, which does not read what it receives (a \
                 participant's lossless port holds its channel until it has room)",
                channel.name()
            ))
        })
    }

    /// `GET /api/v1/time`: bus time; in virtual time also the participants
    /// and the control API's hold.
    pub(super) fn time_json(&self) -> Value {
        match &self.virtual_time {
            None => json!({"mode": "real", "now_ns": self.clock.now()}),
            Some(vt) => {
                let mut status = serde_json::to_value(vt.status()).unwrap_or_default();
                status["mode"] = json!("virtual");
                status
            }
        }
    }

    /// `POST /api/v1/time`: hold, release or step virtual time. The bus
    /// loop advances (or not) right after this request.
    pub(super) fn set_time(&mut self, command: TimeCommand) -> ControlResult {
        let Some(vt) = self.virtual_time.as_mut() else {
            return Err(ControlError::Conflict("the hub runs in real time; set [hub] time = \"virtual\"".into()));
        };
        let limit = match command {
            TimeCommand::Pause => RunLimit::Paused,
            TimeCommand::Resume => RunLimit::Running,
            TimeCommand::Step => RunLimit::SingleStep,
            TimeCommand::RunUntil { until_ns } if until_ns <= vt.now() => {
                return Err(ControlError::Invalid(format!("bus time is already {} ns, past {until_ns} ns", vt.now())));
            }
            TimeCommand::RunUntil { until_ns } => RunLimit::Until(until_ns),
        };
        vt.set_limit(limit);
        Ok(self.time_json())
    }

    /// The `time` part of `STATS`: present in virtual time only.
    pub(super) fn time_stats(&self) -> Option<TimeStats> {
        let status = self.virtual_time.as_ref()?.status();
        let state = match status.limit {
            RunLimit::Running => "running",
            RunLimit::Paused => "paused",
            RunLimit::Until(_) => "until",
            RunLimit::SingleStep => "single_step",
        };
        Some(TimeStats {
            now_ns: status.now_ns,
            real_time_factor: status.real_time_factor,
            participants: status.participants.len() as u32,
            state: state.into(),
        })
    }
}
