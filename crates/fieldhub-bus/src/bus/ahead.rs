//! The bus side of steps granted ahead (`spec/protocol.md` 3.11a, 6.8;
//! `virtual_time/ahead.rs` holds the frames and boundaries): frames an
//! `AHEAD` participant stamped for a later bus time, `STEP_AHEAD`, and the
//! wake filters on its ports that end its step early.
//!
//! Invariant: a participant stepping ahead sees the same frames at the same
//! grants, and the bus carries the same frames at the same bus times, as one
//! that steps every period. So a stamped frame is queued at its bus time
//! with the frames queued then, in (port name, order sent) order; and a
//! frame delivered to a watching port at bus time `t` grants it at its
//! first boundary at or after `t` — after `t` when the frame was queued at
//! `t`, as a participant stepping every period sees such a frame only at
//! its next step.

use fieldhub_proto::wire::{ErrorCode, WakeFilter};
use fieldhub_proto::Frame;

use super::Bus;
use crate::credit::PARTICIPANT_CREDITS;
use crate::inbox::ClientId;
use crate::outbox::Outbound;
use crate::wake::WakeWatch;

impl Bus {
    /// A frame of an `AHEAD` participant stamped with the bus time it is
    /// for: later than its grant, held until then; else staged with the
    /// current step's frames (and for anyone else, the stamp means nothing).
    pub(super) fn on_frame_at(&mut self, client: ClientId, port: u16, frame: Frame, at_ns: u64) {
        let later = self.virtual_time.as_ref().and_then(|vt| vt.later_than_grant(client, at_ns));
        let Some(at_ns) = later else { return self.on_frame(client, port, frame) };
        let owned = self.clients.get(&client).and_then(|c| c.ports.get(port as usize).copied().flatten());
        if owned.is_some_and(|owned| self.refuses_as_it_comes(client, owned, &frame)) {
            return;
        }
        if let Some(owned) = owned {
            let holds = self.virtual_time.as_ref().map_or(0, |vt| vt.holds(client));
            if self.queued_of(client) + holds >= PARTICIPANT_CREDITS as usize {
                return self.refuse_past_credit(client, owned);
            }
        }
        if let Some(vt) = self.virtual_time.as_mut() {
            vt.hold(client, port, owned.map(|o| o.port_id), frame, at_ns);
        }
    }

    /// `STEP_AHEAD`: done up to `until_ns` in steps of `period_ns`, its
    /// ports watching for frames matching `filters`. A refused step is a
    /// non-fatal error naming why; the participant's step stays as it was.
    pub(super) fn on_step_ahead(&mut self, client: ClientId, until_ns: u64, period_ns: u64, filters: Vec<WakeFilter>) {
        let refused = match self.virtual_time.as_mut() {
            None => "STEP_AHEAD on a hub in real time; it needs [hub] time = \"virtual\"".to_owned(),
            Some(vt) => match vt.announce_ahead(client, until_ns, period_ns) {
                Ok(()) => {
                    self.refuse_past_step(client, until_ns);
                    return self.watch(client, &filters);
                }
                Err(why) => why.to_string(),
            },
        };
        let error = Outbound::Error { code: ErrorCode::TimeMode, request: 0, fatal: false, text: refused };
        self.reply(client, error);
    }

    /// Frames `client` sent in the step it just announced, stamped later
    /// than the step's end `until_ns`: off the bus, counted as refused,
    /// their credit returned, and the participant told once which.
    pub(super) fn refuse_past_step(&mut self, client: ClientId, until_ns: u64) {
        let mut past = Vec::new();
        if let Some(vt) = self.virtual_time.as_mut() {
            vt.past_step(client, until_ns, &mut past);
        }
        let Some(first) = past.first() else { return };
        let Some(owner) = self.clients.get(&client) else { return };
        for held in &past {
            owner.credit.release();
            let owned = owner.ports.get(held.staged.port as usize).copied().flatten();
            let Some(owned) = owned.filter(|o| Some(o.port_id) == held.staged.port_id) else { continue };
            let channel = &mut self.channels[owned.channel as usize];
            if let Some(member) = channel.members.get_mut(owned.member).filter(|m| m.port_id == owned.port_id) {
                member.counters.tx_refused += 1;
            }
        }
        let text = format!(
            "{} frame(s) stamped later than the end of the step they were sent in ({until_ns} ns) were not sent; \
             the first: {:?} for {} ns. Stamp a frame within the step that STEP or STEP_AHEAD ends, or step further",
            past.len(),
            first.staged.frame,
            first.at_ns
        );
        let error = Outbound::Error { code: ErrorCode::InvalidFrame, request: 0, fatal: false, text };
        self.reply(client, error);
    }

    /// Set `filters` on every port of `client`.
    fn watch(&mut self, client: ClientId, filters: &[WakeFilter]) {
        let Some(owner) = self.clients.get(&client) else { return };
        for owned in owner.ports.iter().flatten() {
            let channel = &mut self.channels[owned.channel as usize];
            if let Some(member) = channel.members.get_mut(owned.member).filter(|m| m.port_id == owned.port_id) {
                member.wake = Some(WakeWatch::new(filters.to_vec()));
            }
        }
    }

    /// Take the filters off `client`'s ports: it is granted, or woken.
    pub(super) fn unwatch(&mut self, client: ClientId) {
        let Some(owner) = self.clients.get(&client) else { return };
        for owned in owner.ports.iter().flatten() {
            let channel = &mut self.channels[owned.channel as usize];
            if let Some(member) = channel.members.get_mut(owned.member).filter(|m| m.port_id == owned.port_id) {
                member.wake = None;
            }
        }
    }

    /// Whether a frame matching its filters was delivered to a port of
    /// `client` since the last look (every port's mark is taken).
    fn port_woke(&mut self, client: ClientId) -> bool {
        let Some(owner) = self.clients.get(&client) else { return false };
        let mut woke = false;
        for owned in owner.ports.iter().flatten() {
            let channel = &mut self.channels[owned.channel as usize];
            if let Some(member) = channel.members.get_mut(owned.member).filter(|m| m.port_id == owned.port_id) {
                woke |= member.wake.as_mut().is_some_and(WakeWatch::take_woke);
            }
        }
        woke
    }

    /// After a serve at bus time `at_ns` (`queued_then`: frames were queued
    /// at `at_ns` before it): the participants a frame woke get their
    /// boundary, and the advance's target becomes the earliest of them if
    /// that is earlier. Nothing to do while nobody steps ahead.
    pub(super) fn woken(&mut self, at_ns: u64, queued_then: bool, target: u64) -> u64 {
        let mut target = target;
        let mut index = 0;
        while let Some(client) = self.virtual_time.as_ref().and_then(|vt| vt.watchers().get(index).copied()) {
            if !self.port_woke(client) {
                index += 1;
                continue;
            }
            self.unwatch(client);
            // `wake` takes it off the watchers: the same index is the next one.
            if let Some(boundary) = self.virtual_time.as_mut().and_then(|vt| vt.wake(client, at_ns, queued_then)) {
                target = target.min(boundary);
            }
        }
        target
    }
}
