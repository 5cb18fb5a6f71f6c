//! Steps granted ahead (`spec/protocol.md` 3.11a, 6.8): frames an `AHEAD`
//! participant stamped for a later bus time, held until bus time reaches
//! it ([`Held`]), and the boundaries of a participant standing ahead
//! ([`Ahead`]).
//!
//! Held frames wait in one heap ordered by (bus time, order sent), so the
//! advance loop finds the next one in O(1) and takes those due in
//! O(log n) each; at one bus time they are queued with every other frame
//! queued then, by (port name, order sent) (`bus/ahead.rs`). The heap keeps
//! its capacity: holding and taking allocate nothing once it has grown.

use std::cmp::{Ordering, Reverse};

use fieldhub_proto::Frame;

use super::{Staged, VirtualTime};
use crate::inbox::ClientId;
use crate::port_id::PortId;

/// A frame stamped for bus time `at_ns`, later than its sender's grant.
#[derive(Clone, Debug)]
pub struct Held {
    pub at_ns: u64,
    pub staged: Staged,
}

impl PartialEq for Held {
    fn eq(&self, other: &Self) -> bool {
        self.cmp(other) == Ordering::Equal
    }
}
impl Eq for Held {}
impl PartialOrd for Held {
    fn partial_cmp(&self, other: &Self) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}
impl Ord for Held {
    fn cmp(&self, other: &Self) -> Ordering {
        (self.at_ns, self.staged.order).cmp(&(other.at_ns, other.staged.order))
    }
}

/// A participant's step announced with `STEP_AHEAD`: its boundaries are
/// `granted + k·period_ns` before its `until_ns`, and `until_ns`.
#[derive(Clone, Copy, Debug)]
pub struct Ahead {
    pub period_ns: u64,
}

/// Why a `STEP_AHEAD` is not accepted (besides a `STEP`'s reasons).
#[derive(Debug, thiserror::Error)]
pub enum AheadError {
    #[error(
        "STEP_AHEAD from a session without the AHEAD option; connect with it (Rust ClientOptions {{ ahead: true, .. }}) \
         or end the step with STEP"
    )]
    NotAhead,
    #[error("STEP_AHEAD with period 0: give the length of one step in ns")]
    ZeroPeriod,
    #[error(transparent)]
    Step(#[from] super::StepError),
}

impl VirtualTime {
    /// Whether `client` is a participant that may step ahead.
    pub fn is_ahead(&self, client: ClientId) -> bool {
        self.participants.get(&client).is_some_and(|p| p.ahead)
    }

    /// The bus time a stamped frame of `client` joins its queue at: `Some`
    /// when it is later than the client's grant (then it is held), `None`
    /// when it goes with the current step's frames.
    pub fn later_than_grant(&self, client: ClientId, at_ns: u64) -> Option<u64> {
        let participant = self.participants.get(&client).filter(|p| p.ahead)?;
        (at_ns > participant.granted_ns).then_some(at_ns)
    }

    /// Hold a frame of `client` until bus time `at_ns`.
    pub fn hold(&mut self, client: ClientId, port: u16, port_id: Option<PortId>, frame: Frame, at_ns: u64) {
        let staged = Staged { client, port, port_id, order: self.next_order, frame };
        self.next_order += 1;
        self.held.push(Reverse(Held { at_ns, staged }));
        if let Some(participant) = self.participants.get_mut(&client) {
            participant.held += 1;
            participant.latest_stamp = participant.latest_stamp.max(at_ns);
        }
    }

    /// Frames `client` has held (staged in the current step, and stamped for later).
    pub fn holds(&self, client: ClientId) -> usize {
        self.participants.get(&client).map_or(0, |p| p.staged as usize + p.held as usize)
    }

    /// The bus time of the earliest held frame.
    pub fn next_held(&self) -> Option<u64> {
        self.held.peek().map(|Reverse(h)| h.at_ns)
    }

    /// Move the frames held for bus time `at_ns` or earlier to `into`.
    pub fn take_due(&mut self, at_ns: u64, into: &mut Vec<Staged>) {
        while let Some(Reverse(held)) = self.held.peek() {
            if held.at_ns > at_ns {
                break;
            }
            let Some(Reverse(held)) = self.held.pop() else { break };
            if let Some(participant) = self.participants.get_mut(&held.staged.client) {
                participant.held = participant.held.saturating_sub(1);
            }
            into.push(held.staged);
        }
    }

    /// Take out the frames `client` sent since its last announced step
    /// that are stamped later than `until_ns`: refused, as the step they
    /// were sent in ends before them. Nothing to do (and no walk of the
    /// heap) unless one was.
    pub fn past_step(&mut self, client: ClientId, until_ns: u64, into: &mut Vec<Held>) {
        let Some(participant) = self.participants.get_mut(&client) else { return };
        let latest = std::mem::take(&mut participant.latest_stamp);
        let since = std::mem::replace(&mut participant.step_order, self.next_order);
        if latest <= until_ns {
            return;
        }
        self.held.retain(|Reverse(h)| {
            let past = h.staged.client == client && h.staged.order >= since && h.at_ns > until_ns;
            if past {
                into.push(h.clone());
            }
            !past
        });
        if let Some(participant) = self.participants.get_mut(&client) {
            participant.held = participant.held.saturating_sub(into.len() as u32);
        }
        into.sort_unstable();
    }

    /// Forget the held frames of `client` on `port` (all its ports:
    /// `None`); returns how many.
    pub fn discard_held(&mut self, client: ClientId, port: Option<u16>) -> usize {
        let before = self.held.len();
        self.held.retain(|Reverse(h)| h.staged.client != client || port.is_some_and(|p| p != h.staged.port));
        let discarded = before - self.held.len();
        if let Some(participant) = self.participants.get_mut(&client) {
            participant.held = participant.held.saturating_sub(discarded as u32);
        }
        discarded
    }

    /// `STEP_AHEAD`: done up to `until_ns` in steps of `period_ns`.
    pub fn announce_ahead(&mut self, client: ClientId, until_ns: u64, period_ns: u64) -> Result<(), AheadError> {
        match self.participants.get(&client) {
            Some(participant) if !participant.ahead => return Err(AheadError::NotAhead),
            Some(_) if period_ns == 0 => return Err(AheadError::ZeroPeriod),
            _ => {}
        }
        self.announce(client, until_ns)?;
        if let Some(participant) = self.participants.get_mut(&client) {
            participant.stepping_ahead = Some(Ahead { period_ns });
            self.watchers.push(client);
        }
        Ok(())
    }

    /// Participants standing ahead whose ports watch for wake frames, in
    /// the order they announced (the bus looks at each after every serve).
    pub fn watchers(&self) -> &[ClientId] {
        &self.watchers
    }

    /// A frame its filters match was delivered to `client` at bus time
    /// `at_ns` (`queued_then`: it was queued at `at_ns` itself, so a
    /// participant stepping every period would see it only at its next
    /// step). Its boundary becomes the first of its step boundaries at or
    /// after it, if that is before its announced end; it stops watching.
    /// Returns its boundary.
    pub fn wake(&mut self, client: ClientId, at_ns: u64, queued_then: bool) -> Option<u64> {
        self.watchers.retain(|&c| c != client);
        let participant = self.participants.get_mut(&client)?;
        let ahead = participant.stepping_ahead.take()?;
        let until = participant.done_until?;
        let granted = participant.granted_ns;
        let from = if queued_then { at_ns.saturating_add(1) } else { at_ns };
        let steps = from.saturating_sub(granted).div_ceil(ahead.period_ns).max(1);
        let boundary = granted.saturating_add(steps.saturating_mul(ahead.period_ns)).min(until);
        participant.done_until = Some(boundary);
        Some(boundary)
    }
}
