//! Virtual time (`[hub] time = "virtual"`): bus time that moves only when
//! every synchronised participant has finished its step.
//!
//! # How bus time advances
//!
//! The bus reads time through a [`ManualClock`] that starts at 0 and that
//! only the bus thread moves. A participant (a session whose `HELLO` said
//! `SYNCHRONIZED`) stands at the bus time of its last `GRANT` (the first one
//! comes right after `WELCOME`), computes one step and announces the end of
//! it with `STEP until_ns`: it is done up to that time. When every
//! participant has announced (and every name in `time_participants` has
//! joined, and the control API does not hold time), the target is the
//! smallest boundary announced — or less, when the control API runs only
//! until an earlier time.
//!
//! # What the bus does on each advance
//!
//! 1. The frames sent during the step, held here ([`Staged`]) instead of in
//!    their ports' FIFOs, go to the FIFOs in a fixed order (below), all
//!    arriving at the current bus time: every sender stood at it.
//! 2. The bus serves its channels at the current time, then moves the clock
//!    from deadline to deadline up to the target, serving at each: timed
//!    frames end at their exact end of frame, retransmissions, delayed
//!    frames, bus-off recovery, fault windows — the same code as in real
//!    time, only the clock is told instead of read. Frames are delivered
//!    stamped with bus time, and recordings write bus time.
//! 3. The participants whose boundary is the target get `GRANT target`
//!    after the window's frames (one FIFO per client carries both, so a
//!    participant has every frame of its window before its grant). The
//!    others stay done up to their later boundary.
//!
//! # Why it is deterministic
//!
//! Within a step the only nondeterminism is arrival order: which client's
//! message the bus happened to read first. It decides nothing here. Staged
//! frames are sorted by (port name, order sent) before they are queued, so
//! the arrival numbers arbitration uses to break ties between identical
//! fields, the order fault rules draw their seeded dice in, and the
//! sequence numbers every receiver sees depend only on bus time and names
//! — port ids would not do, as they follow the order in which ports were
//! opened. Participants are kept in a `BTreeMap`, so grants go out in one
//! order too. What remains is the wall clock, which decides nothing but
//! when a stalled participant is reported.
//!
//! # Limits
//!
//! A participant's staged frames still hold its transmit credit (256 frames
//! in the bus): a step that sends more waits for the step's end, which
//! never comes — the participant is reported as stalled. A `PING` is
//! answered once the participant's frames are staged, so a flush never
//! waits for the participant's own `STEP`. Observers (sessions without the
//! option) are never waited for; their frames join the next advance. A
//! `block_on_overflow` port without room holds its channel until the bus-time
//! deadline of its next look, as in real time, but bus time does not wait
//! for its reader: a lossless reader that falls behind within a window
//! changes when frames go, so keep such readers reading.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::{Duration, Instant};

use fieldhub_proto::Frame;
use serde::Serialize;

use crate::clock::{Clock, ManualClock, WallClock};
use crate::config::{StallPolicy, TimeConfig};
use crate::inbox::ClientId;
use crate::port_id::PortId;

/// A frame sent during the current step, waiting for the step's end.
#[derive(Clone, Copy, Debug)]
pub struct Staged {
    pub client: ClientId,
    pub port: u16,
    /// Hub-wide id of the sending port (`None` if the port is not open: the
    /// frame is refused when it is queued, in its place in the order).
    pub port_id: Option<PortId>,
    /// Order among all staged frames: keeps a port's frames in FIFO order.
    pub order: u64,
    pub frame: Frame,
}

/// How far the control API lets bus time run.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case", tag = "state", content = "until_ns")]
pub enum RunLimit {
    /// As far as the participants go.
    Running,
    /// Not at all until resumed.
    Paused,
    /// Up to the given bus time, then paused.
    Until(u64),
    /// One advance, then paused.
    SingleStep,
}

/// One synchronised participant.
#[derive(Debug)]
struct Participant {
    name: String,
    /// Bus time of its last `GRANT`: where it stands.
    granted_ns: u64,
    /// Its announced boundary; `None` while it computes its step.
    done_until: Option<u64>,
    /// Wall-clock time of its last grant: its step timeout runs from here.
    granted_at: Instant,
    /// Reported as stalled in the current step.
    stalled: bool,
}

/// A participant that did not finish its step within the timeout.
#[derive(Debug)]
pub struct Stall {
    pub client: ClientId,
    pub name: String,
    pub granted_ns: u64,
    /// It no longer holds time back (`on_stall = "drop"`).
    pub dropped: bool,
}

/// Why a `STEP` is not accepted.
#[derive(Debug, thiserror::Error)]
pub enum StepError {
    #[error("STEP from a session that is not a synchronised participant (connect with the synchronized option)")]
    NotParticipant,
    #[error("STEP to {until_ns} ns does not move forward: the participant stands at {granted_ns} ns")]
    NotForward { until_ns: u64, granted_ns: u64 },
    /// A second `STEP` before the first one's `GRANT`: the boundary it
    /// announced may already be part of the next advance.
    #[error("STEP to {until_ns} ns while the participant is already done up to {done_ns} ns; wait for its GRANT")]
    AlreadyDone { until_ns: u64, done_ns: u64 },
}

/// A participant as the time status shows it.
#[derive(Debug, Serialize)]
pub struct ParticipantStatus {
    pub client: ClientId,
    pub name: String,
    pub now_ns: u64,
    pub done_until_ns: Option<u64>,
    pub stalled: bool,
}

/// Virtual time as the control API and `STATS` show it.
#[derive(Debug, Serialize)]
pub struct TimeStatus {
    pub now_ns: u64,
    pub limit: RunLimit,
    /// Bus time advanced per wall-clock time since time first moved.
    pub real_time_factor: f64,
    pub participants: Vec<ParticipantStatus>,
    /// `time_participants` that have not joined yet.
    pub awaiting: Vec<String>,
}

/// The state of virtual time, owned by the bus thread.
pub struct VirtualTime {
    clock: Arc<ManualClock>,
    /// Step timeouts and the real-time factor are wall-clock figures.
    wall: Arc<dyn WallClock>,
    participants: BTreeMap<ClientId, Participant>,
    /// `time_participants` that have not joined yet.
    awaiting: Vec<String>,
    pub(super) staged: Vec<Staged>,
    next_order: u64,
    step_timeout: Duration,
    on_stall: StallPolicy,
    limit: RunLimit,
    /// When bus time first moved, for the real-time factor.
    first_advance: Option<(Instant, u64)>,
}

impl VirtualTime {
    pub fn new(config: &TimeConfig, clock: Arc<ManualClock>, wall: Arc<dyn WallClock>) -> Self {
        Self {
            clock,
            wall,
            participants: BTreeMap::new(),
            awaiting: config.participants.clone(),
            staged: Vec::new(),
            next_order: 0,
            step_timeout: Duration::from_millis(config.step_timeout_ms),
            on_stall: config.on_stall,
            limit: RunLimit::Running,
            first_advance: None,
        }
    }

    /// Current bus time.
    pub fn now(&self) -> u64 {
        self.clock.now()
    }

    /// A participant joins at the current bus time; returns that time (its first `GRANT`).
    pub fn join(&mut self, client: ClientId, name: &str) -> u64 {
        let now_ns = self.now();
        let participant = Participant {
            name: name.to_owned(),
            granted_ns: now_ns,
            done_until: None,
            granted_at: self.wall.now(),
            stalled: false,
        };
        self.participants.insert(client, participant);
        self.awaiting.retain(|awaited| awaited != name);
        now_ns
    }

    /// A participant left (or its session ended): it holds nothing back.
    pub fn leave(&mut self, client: ClientId) {
        self.participants.remove(&client);
    }

    /// `STEP`: the participant is done up to `until_ns`.
    pub fn announce(&mut self, client: ClientId, until_ns: u64) -> Result<(), StepError> {
        let participant = self.participants.get_mut(&client).ok_or(StepError::NotParticipant)?;
        if let Some(done_ns) = participant.done_until {
            return Err(StepError::AlreadyDone { until_ns, done_ns });
        }
        if until_ns <= participant.granted_ns {
            return Err(StepError::NotForward { until_ns, granted_ns: participant.granted_ns });
        }
        participant.done_until = Some(until_ns);
        participant.stalled = false;
        Ok(())
    }

    /// Hold a frame until the step ends.
    pub fn stage(&mut self, client: ClientId, port: u16, port_id: Option<PortId>, frame: Frame) {
        self.staged.push(Staged { client, port, port_id, order: self.next_order, frame });
        self.next_order += 1;
    }

    /// Forget the staged frames of `client` on `port` (all its ports:
    /// `None`); returns how many.
    pub fn discard(&mut self, client: ClientId, port: Option<u16>) -> usize {
        let before = self.staged.len();
        self.staged.retain(|s| s.client != client || port.is_some_and(|p| p != s.port));
        before - self.staged.len()
    }

    /// The bus time to advance to now, if time may move.
    pub fn target(&self) -> Option<u64> {
        let now_ns = self.now();
        if !self.awaiting.is_empty() {
            return None;
        }
        let mut boundary: Option<u64> = None;
        for participant in self.participants.values() {
            let done = participant.done_until?;
            boundary = Some(boundary.map_or(done, |b| b.min(done)));
        }
        let target = match self.limit {
            RunLimit::Paused => None,
            RunLimit::Running | RunLimit::SingleStep => boundary,
            // With no participant, the control API alone moves time.
            RunLimit::Until(until) => Some(boundary.map_or(until, |b| b.min(until))),
        };
        target.filter(|&t| t > now_ns)
    }

    /// Move the clock to `at` (a deadline inside the window, or the target).
    pub fn move_clock(&mut self, at: u64) {
        if self.first_advance.is_none() {
            self.first_advance = Some((self.wall.now(), self.now()));
        }
        self.clock.set(at);
    }

    /// The window ended at `target`: the participants whose boundary it
    /// is stand there now and compute their next step. Returns them.
    pub fn grant(&mut self, target: u64) -> Vec<ClientId> {
        let now = self.wall.now();
        let mut granted = Vec::new();
        for (&client, participant) in self.participants.iter_mut() {
            if participant.done_until == Some(target) {
                participant.done_until = None;
                participant.granted_ns = target;
                participant.granted_at = now;
                granted.push(client);
            }
        }
        self.limit = match self.limit {
            RunLimit::SingleStep => RunLimit::Paused,
            RunLimit::Until(until) if until <= target => RunLimit::Paused,
            other => other,
        };
        granted
    }

    /// When the next participant runs out of time for its step.
    pub fn stall_deadline(&self) -> Option<Instant> {
        self.computing().map(|p| p.granted_at + self.step_timeout).min()
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
            }
        }
        stalls
    }

    /// The step timeout, for reports.
    pub fn step_timeout(&self) -> Duration {
        self.step_timeout
    }

    fn computing(&self) -> impl Iterator<Item = &Participant> {
        self.participants.values().filter(|p| p.done_until.is_none() && !p.stalled)
    }

    /// The control API's hold on time.
    pub fn set_limit(&mut self, limit: RunLimit) {
        self.limit = limit;
    }

    pub fn status(&self) -> TimeStatus {
        let now_ns = self.now();
        let real_time_factor = match self.first_advance {
            Some((at, from_ns)) => {
                (now_ns - from_ns) as f64 / self.wall.now().saturating_duration_since(at).as_nanos().max(1) as f64
            }
            None => 0.0,
        };
        let participants = self
            .participants
            .iter()
            .map(|(&client, p)| ParticipantStatus {
                client,
                name: p.name.clone(),
                now_ns: p.granted_ns,
                done_until_ns: p.done_until,
                stalled: p.stalled,
            })
            .collect();
        TimeStatus { now_ns, limit: self.limit, real_time_factor, participants, awaiting: self.awaiting.clone() }
    }
}
