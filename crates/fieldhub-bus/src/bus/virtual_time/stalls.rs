//! Participants that do not end their step within the step timeout (wall
//! clock), and `time_participants` that never join: when to look, whom to
//! report (each once per step), and with `on_stall = "drop"` taking a
//! stalled participant out. Only a participant that has not announced its
//! step is ever reported; one that is done and waits is not.

use std::time::Instant;

use super::{Participant, VirtualTime};
use crate::config::StallPolicy;
use crate::inbox::ClientId;

/// A participant that did not finish its step within the timeout.
#[derive(Debug)]
pub struct Stall {
    pub client: ClientId,
    pub name: String,
    pub granted_ns: u64,
    /// It no longer holds time back (`on_stall = "drop"`).
    pub dropped: bool,
}

impl VirtualTime {
    /// When the next participant runs out of time for its step, or bus
    /// time, held for `time_participants` that have not joined, has waited
    /// a step timeout.
    pub fn stall_deadline(&self) -> Option<Instant> {
        self.computing().map(|p| p.granted_at + self.step_timeout).chain(self.awaiting_deadline()).min()
    }

    /// A step timeout after the earliest grant of a participant that bus
    /// time holds for `time_participants` not joined yet (once per hub).
    fn awaiting_deadline(&self) -> Option<Instant> {
        if self.awaiting.is_empty() || self.told_awaiting {
            return None;
        }
        self.participants.values().map(|p| p.granted_at + self.step_timeout).min()
    }

    /// The `time_participants` that bus time has waited a step timeout for
    /// (reported once), and the participants it holds: `None` while none.
    pub fn awaited_too_long(&mut self) -> Option<(Vec<String>, Vec<ClientId>)> {
        if self.awaiting_deadline()? > self.wall.now() {
            return None;
        }
        self.told_awaiting = true;
        Some((self.awaiting.clone(), self.participants.keys().copied().collect()))
    }

    /// Participants whose step timeout has passed, each reported once per
    /// step; with `on_stall = "drop"` they stop holding time back.
    pub fn stalls(&mut self) -> Vec<Stall> {
        let now = self.wall.now();
        let timeout = self.step_timeout;
        let dropped = self.on_stall == StallPolicy::Drop;
        let mut stalls = Vec::new();
        for (&client, participant) in self.participants.iter_mut() {
            if participant.done_until.is_none() && !participant.stalled && participant.granted_at + timeout <= now {
                participant.stalled = true;
                stalls.push(Stall {
                    client,
                    name: participant.name.clone(),
                    granted_ns: participant.granted_ns,
                    dropped,
                });
            }
        }
        if dropped {
            for stall in &stalls {
                self.participants.remove(&stall.client);
                self.dropped.insert(stall.client, stall.granted_ns);
            }
            self.reconsider_pace();
        }
        stalls
    }

    /// Keep what a stalled participant waits for, for the time status.
    pub fn stalled_for(&mut self, client: ClientId, waits_for: &str) {
        if let Some(participant) = self.participants.get_mut(&client) {
            participant.waits_for = Some(waits_for.to_owned());
        }
    }

    fn computing(&self) -> impl Iterator<Item = &Participant> {
        self.participants.values().filter(|p| p.done_until.is_none() && !p.stalled)
    }
}
