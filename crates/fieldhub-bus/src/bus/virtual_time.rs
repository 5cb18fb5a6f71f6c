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
//! # Observers
//!
//! Observers (sessions without the option) are never waited for, and
//! nothing of theirs holds bus time back:
//!
//! - Their frames are staged like a participant's, at the current bus time,
//!   and join the next advance (sorted by port name with the others). A
//!   `PING` never waits for a staged frame, so a flush confirms that the
//!   frame has its place in bus time. If the observer closes the port or
//!   leaves before time moves, its frames are not lost: the port lingers on
//!   its channel, sending only ([`Lingering`]), until they are on the bus.
//! - A lossless (`block_on_overflow`) port of an observer is lossy here: it
//!   would hold its channel while its reader does not read (a `fieldhub dump
//!   --lossless` stopped with Ctrl-Z), so the participants' frames would wait
//!   behind it, their transmit credit would run out and they would be
//!   reported as stalled — for what an observer did. What it has no room for
//!   is dropped, counted and reported to it with `RX_OVERFLOW`, as on any
//!   lossy port; the hub logs once that it happens. A participant dropped
//!   for stalling is an observer from then on, and its ports become lossy too.
//!
//! # Stalls
//!
//! A participant that does not end its step within the step timeout is
//! reported by name; only a participant that has not announced its step is
//! (one that is done and waits is not). When its step cannot end because its
//! frames wait on a channel that a lossless port holds, the report names that
//! port and its client too: that is who actually holds. After `on_stall =
//! "drop"` a `STEP` of the dropped participant is refused with the reason.
//!
//! # Overload: bus time never waits on what only bus time releases
//!
//! A participant's sends are part of its step, so none may wait for the
//! bus: a send that waited for transmit credit would wait for bus time to
//! move, and bus time for that step to end. Its credit limit is raised to
//! [`PARTICIPANT_CREDITS`] while it takes part: its frames queue per port
//! as on an overloaded real bus — arbitration decides, lower priorities
//! wait or starve, `tx_pending` grows — and go out over the following
//! windows. A participant granted with more than [`TX_CREDITS`] frames
//! waiting (a real-time queue) is told first (`ERROR tx_queue_full`,
//! counted from its ports' FIFOs, so it depends on bus time only); its
//! client library then reports a full queue to a send that must not wait.
//! Only past [`PARTICIPANT_CREDITS`] does a send wait, and the step timeout
//! reports the participant as blocked on credit. Every stall report names
//! what the participant waits for: step not ended, send blocked on credit,
//! lossless receiver full.
//!
//! [`PARTICIPANT_CREDITS`]: crate::credit::PARTICIPANT_CREDITS
//! [`TX_CREDITS`]: crate::credit::TX_CREDITS
//!
//! # Limits
//!
//! An observer's frames wait for credit (256 frames in the bus) as in real
//! time, so it places at most that many while bus time stands still. A `PING` is
//! answered once the sender's frames are staged, so a flush never waits for
//! a participant's own `STEP`. A participant's `block_on_overflow` port
//! without room holds its channel until the bus-time deadline of its next
//! look, as in real time, but bus time does not wait for its reader: a
//! lossless reader that falls behind within a window changes when frames
//! go, so keep such readers reading.
//!
//! # The real-time factor
//!
//! Bus time advanced per wall-clock time in which it was free to move: from
//! the moment the hub could advance as soon as the participants were done
//! (every `time_participants` name joined, the control API not holding time,
//! someone to move it: a participant or a `run_until`) to each advance.
//! Waits in which bus time was held (paused, or nobody there to step it,
//! before the first participant or after the last) do not count, so a run
//! that went at 8× shows 8× however long the hub idles afterwards. A
//! participant's compute time and a stalled participant's wait do count:
//! they are the run's own pace.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::{Duration, Instant};

use fieldhub_proto::Frame;
use serde::Serialize;

use crate::clock::{Clock, ManualClock, WallClock};
use crate::config::{StallPolicy, TimeConfig};
use crate::inbox::ClientId;
use crate::member::Member;
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

/// An observer's port that closed, or whose client left, while frames it
/// had sent still waited for bus time: it stays on its channel, receiving
/// nothing and sending only, until they are on the bus — a frame an
/// observer sent is never lost to its leaving.
pub struct Lingering {
    pub channel: u16,
    pub port_id: PortId,
    /// The port while it is off its channel: from its departure (when the
    /// bus releases it) to the next advance, at which its frames compete
    /// at the current bus time. `None` once it is back on the channel.
    pub member: Option<Member>,
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
    /// What it waits for, as its stall report named it.
    waits_for: Option<String>,
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
    /// The participant stalled and `on_stall = "drop"` took it out of
    /// synchronisation: it is an observer now, and must hear that, not
    /// that it never was a participant.
    #[error(
        "STEP from a participant that was dropped for stalling: it sent no STEP within {timeout:?} of GRANT \
         {granted_ns} ns (on_stall = \"drop\"), so bus time went on without it and it is an observer now; \
         reconnect with the synchronized option to take part in bus time again"
    )]
    Dropped { granted_ns: u64, timeout: Duration },
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
    /// What a stalled participant waits for: step not ended, send blocked
    /// on credit, lossless receiver full (with who holds it).
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
struct Pace {
    /// Since when (wall clock, and the bus time then) bus time has been
    /// free to move; `None` while it is held.
    free_since: Option<(Instant, u64)>,
    /// Wall-clock time free to move that ended in an advance.
    spent: Duration,
    /// Bus time advanced in it.
    advanced_ns: u64,
}

/// The state of virtual time, owned by the bus thread.
pub struct VirtualTime {
    clock: Arc<ManualClock>,
    /// Step timeouts and the real-time factor are wall-clock figures.
    wall: Arc<dyn WallClock>,
    participants: BTreeMap<ClientId, Participant>,
    /// `time_participants` that have not joined yet.
    awaiting: Vec<String>,
    /// The participants were told that bus time waits for `awaiting`.
    told_awaiting: bool,
    /// Participants `on_stall = "drop"` took out, with the grant they
    /// stalled at: their `STEP` is refused with that reason.
    dropped: BTreeMap<ClientId, u64>,
    pub(super) staged: Vec<Staged>,
    next_order: u64,
    step_timeout: Duration,
    on_stall: StallPolicy,
    limit: RunLimit,
    pace: Pace,
    /// The bus's next port id when observers' ports were last made lossy:
    /// only a port opened since needs a look.
    pub(super) ports_seen: u32,
    /// Whether the hub has logged that a lossless observer cannot hold
    /// virtual time (once per hub: every `dump --lossless` would repeat it).
    pub(super) told_lossless: bool,
    /// Observers' ports that stay until their frames are on the bus.
    pub(super) lingering: Vec<Lingering>,
}

impl VirtualTime {
    pub fn new(config: &TimeConfig, clock: Arc<ManualClock>, wall: Arc<dyn WallClock>) -> Self {
        Self {
            clock,
            wall,
            participants: BTreeMap::new(),
            awaiting: config.participants.clone(),
            told_awaiting: false,
            dropped: BTreeMap::new(),
            staged: Vec::new(),
            next_order: 0,
            step_timeout: Duration::from_millis(config.step_timeout_ms),
            on_stall: config.on_stall,
            limit: RunLimit::Running,
            pace: Pace::default(),
            ports_seen: 0,
            told_lossless: false,
            lingering: Vec::new(),
        }
    }

    /// Whether `client` is a synchronised participant (not an observer).
    pub fn is_participant(&self, client: ClientId) -> bool {
        self.participants.contains_key(&client)
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
            waits_for: None,
        };
        self.participants.insert(client, participant);
        self.awaiting.retain(|awaited| awaited != name);
        self.reconsider_pace();
        now_ns
    }

    /// A participant left (or its session ended): it holds nothing back.
    pub fn leave(&mut self, client: ClientId) {
        self.participants.remove(&client);
        self.dropped.remove(&client);
        self.reconsider_pace();
    }

    /// `STEP`: the participant is done up to `until_ns`.
    pub fn announce(&mut self, client: ClientId, until_ns: u64) -> Result<(), StepError> {
        let Some(participant) = self.participants.get_mut(&client) else {
            return Err(match self.dropped.get(&client) {
                Some(&granted_ns) => StepError::Dropped { granted_ns, timeout: self.step_timeout },
                None => StepError::NotParticipant,
            });
        };
        if let Some(done_ns) = participant.done_until {
            return Err(StepError::AlreadyDone { until_ns, done_ns });
        }
        if until_ns <= participant.granted_ns {
            return Err(StepError::NotForward { until_ns, granted_ns: participant.granted_ns });
        }
        participant.done_until = Some(until_ns);
        participant.stalled = false;
        participant.waits_for = None;
        Ok(())
    }

    /// Hold a frame until the step ends.
    pub fn stage(&mut self, client: ClientId, port: u16, port_id: Option<PortId>, frame: Frame) {
        self.staged.push(Staged { client, port, port_id, order: self.next_order, frame });
        self.next_order += 1;
    }

    /// Take the staged frames of `client`'s `port` out, in the order sent.
    pub fn take_staged(&mut self, client: ClientId, port: u16) -> Vec<Staged> {
        let mut taken = Vec::new();
        self.staged.retain(|s| match s.client == client && s.port == port {
            true => {
                taken.push(*s);
                false
            }
            false => true,
        });
        taken
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
        self.clock.set(at);
    }

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
    fn reconsider_pace(&mut self) {
        match (self.free_to_move(), self.pace.free_since) {
            (true, None) => self.pace.free_since = Some((self.wall.now(), self.now())),
            (false, Some(_)) => self.pace.free_since = None,
            _ => {}
        }
    }

    /// The window ended at `target`: the participants whose boundary it
    /// is stand there now and compute their next step. Returns them.
    pub fn grant(&mut self, target: u64) -> Vec<ClientId> {
        let now = self.wall.now();
        // Bus time moves only in advances, so it stood where the wait began.
        if let Some((since, from_ns)) = self.pace.free_since {
            self.pace.spent += now.saturating_duration_since(since);
            self.pace.advanced_ns += target.saturating_sub(from_ns);
        }
        self.pace.free_since = Some((now, target));
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
        self.reconsider_pace();
        granted
    }

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
        self.reconsider_pace();
    }

    pub fn status(&self) -> TimeStatus {
        let now_ns = self.now();
        let real_time_factor = match self.pace.advanced_ns {
            0 => 0.0,
            advanced => advanced as f64 / self.pace.spent.as_nanos().max(1) as f64,
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
                waits_for: p.waits_for.clone(),
            })
            .collect();
        TimeStatus { now_ns, limit: self.limit, real_time_factor, participants, awaiting: self.awaiting.clone() }
    }
}
