//! What virtual time shows: the real-time factor (the parent's "The
//! real-time factor": wall-clock time counts only while bus time is free to
//! move) and the status the control API and `STATS` report.

use std::time::{Duration, Instant};

use serde::Serialize;

use super::{RunLimit, VirtualTime};
use crate::inbox::ClientId;

/// A participant as the time status shows it.
#[derive(Debug, Serialize)]
pub struct ParticipantStatus {
    pub client: ClientId,
    pub name: String,
    pub now_ns: u64,
    pub done_until_ns: Option<u64>,
    pub stalled: bool,
    /// What a stalled participant waits for: step not ended, or lossless
    /// receiver full (with who holds it).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub waits_for: Option<String>,
}

/// Virtual time as the control API and `STATS` show it.
#[derive(Debug, Serialize)]
pub struct TimeStatus {
    pub now_ns: u64,
    pub limit: RunLimit,
    /// Bus time advanced per wall-clock time in which it was free to move
    /// (the module doc's "The real-time factor").
    pub real_time_factor: f64,
    pub participants: Vec<ParticipantStatus>,
    /// `time_participants` that have not joined yet.
    pub awaiting: Vec<String>,
}

/// The figures of the real-time factor: the wall-clock time in which bus
/// time was free to move, and how far it moved in it.
#[derive(Debug, Default)]
pub(super) struct Pace {
    /// Since when (wall clock, and the bus time then) bus time has been
    /// free to move; `None` while it is held.
    free_since: Option<(Instant, u64)>,
    /// Wall-clock time free to move that ended in an advance.
    spent: Duration,
    /// Bus time advanced in it.
    advanced_ns: u64,
}

impl Pace {
    /// Bus time reached `target` at wall-clock time `now`; it stood where
    /// the wait began, as it moves only in advances.
    pub(super) fn advanced(&mut self, now: Instant, target: u64) {
        if let Some((since, from_ns)) = self.free_since {
            self.spent += now.saturating_duration_since(since);
            self.advanced_ns += target.saturating_sub(from_ns);
        }
        self.free_since = Some((now, target));
    }

    fn factor(&self) -> f64 {
        match self.advanced_ns {
            0 => 0.0,
            advanced => advanced as f64 / self.spent.as_nanos().max(1) as f64,
        }
    }
}

impl VirtualTime {
    /// Whether bus time is free to move: it advances as soon as the
    /// participants are done, rather than being held by the control API,
    /// by `time_participants` not joined yet, or by having nobody (no
    /// participant, no `run_until`) to move it.
    fn free_to_move(&self) -> bool {
        self.awaiting.is_empty()
            && match self.limit {
                RunLimit::Paused => false,
                RunLimit::Until(_) => true,
                RunLimit::Running | RunLimit::SingleStep => !self.participants.is_empty(),
            }
    }

    /// Start or stop counting wall-clock time for the real-time factor
    /// after a change of who or what may move bus time. A wait that ends
    /// held rather than in an advance is not counted.
    pub(super) fn reconsider_pace(&mut self) {
        match (self.free_to_move(), self.pace.free_since) {
            (true, None) => self.pace.free_since = Some((self.wall.now(), self.now())),
            (false, Some(_)) => self.pace.free_since = None,
            _ => {}
        }
    }

    pub fn status(&self) -> TimeStatus {
        let participants = self
            .participants
            .iter()
            .map(|(&client, p)| ParticipantStatus {
                client,
                name: p.name.clone(),
                now_ns: p.granted_ns,
                done_until_ns: p.done_until,
                stalled: p.stalled,
                waits_for: p.waits_for.clone(),
            })
            .collect();
        TimeStatus {
            now_ns: self.now(),
            limit: self.limit,
            real_time_factor: self.pace.factor(),
            participants,
            awaiting: self.awaiting.clone(),
        }
    }
}
