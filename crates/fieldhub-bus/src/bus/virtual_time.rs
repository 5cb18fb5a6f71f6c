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
//! move, and bus time for that step to end. Its frames queue per port as
//! on an overloaded real bus — arbitration decides, lower priorities wait
//! or starve, `tx_pending` grows — and go out over the following windows.
//! A participant granted with more than [`TX_CREDITS`] frames waiting (a
//! real-time queue) is told first (`ERROR tx_queue_full`, counted from its
//! ports' FIFOs, so it depends on bus time only); its client library then
//! reports a full queue to a send that must not wait. The hub holds at most
//! [`PARTICIPANT_CREDITS`] frames of one participant (queued and staged):
//! a frame past that is refused as it comes — off the bus with
//! `TX_DROPPED queue_full`, counted — so the participant's step always
//! ends. Which frames are refused depends on bus time only: during a step
//! nothing leaves the FIFOs, so the count is the FIFOs' at the grant plus
//! the frames of the step, in the order sent. The transports' credit limit
//! for a participant is higher ([`PARTICIPANT_TRANSIT`]), so a transport
//! waits at most for the bus thread to read, never for bus time. Every
//! stall report names what the participant waits for: step not ended, or
//! lossless receiver full.
//!
//! [`PARTICIPANT_CREDITS`]: crate::credit::PARTICIPANT_CREDITS
//! [`PARTICIPANT_TRANSIT`]: crate::credit::PARTICIPANT_TRANSIT
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

mod ahead;
mod pace;
mod staging;
mod stalls;

use std::cmp::Reverse;
use std::collections::{BTreeMap, BinaryHeap};
use std::sync::Arc;
use std::time::{Duration, Instant};

use serde::Serialize;

use crate::clock::{Clock, ManualClock, WallClock};
use crate::config::{StallPolicy, TimeConfig};
use crate::inbox::ClientId;
pub use ahead::{Ahead, AheadError, Held};
use pace::Pace;
pub use pace::{ParticipantStatus, TimeStatus};
pub use staging::{Lingering, Staged};
pub use stalls::Stall;

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
    /// Its frames staged in the current step (they count towards what the
    /// hub holds of it: the module doc's "Overload").
    staged: u32,
    /// It may step ahead (`AHEAD`): its frames' stamps count.
    ahead: bool,
    /// Its frames held for a later bus time (they count as `staged` do).
    held: u32,
    /// The latest stamp of a frame held since its last announced step.
    latest_stamp: u64,
    /// The order of the first frame sent since its last announced step.
    step_order: u64,
    /// Its current step was announced with `STEP_AHEAD`, and no frame has
    /// woken it yet.
    stepping_ahead: Option<Ahead>,
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
    /// Frames stamped for a later bus time than their sender's grant
    /// (`virtual_time/ahead.rs`), earliest first.
    held: BinaryHeap<Reverse<Held>>,
    /// Participants stepping ahead whose ports watch for wake frames.
    watchers: Vec<ClientId>,
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
    /// The participants of the last grant, kept so that an advance
    /// allocates nothing ([`VirtualTime::grant`]).
    granted: Vec<ClientId>,
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
            held: BinaryHeap::new(),
            watchers: Vec::new(),
            next_order: 0,
            step_timeout: Duration::from_millis(config.step_timeout_ms),
            on_stall: config.on_stall,
            limit: RunLimit::Running,
            pace: Pace::default(),
            ports_seen: 0,
            told_lossless: false,
            lingering: Vec::new(),
            granted: Vec::new(),
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

    /// A participant joins at the current bus time (`ahead`: it may step
    /// ahead); returns that time (its first `GRANT`).
    pub fn join(&mut self, client: ClientId, name: &str, ahead: bool) -> u64 {
        let now_ns = self.now();
        let participant = Participant {
            name: name.to_owned(),
            granted_ns: now_ns,
            done_until: None,
            granted_at: self.wall.now(),
            stalled: false,
            waits_for: None,
            staged: 0,
            ahead,
            held: 0,
            latest_stamp: 0,
            step_order: self.next_order,
            stepping_ahead: None,
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
        self.watchers.retain(|&c| c != client);
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

    /// The window ended at `target`: the participants whose boundary it
    /// is stand there now and compute their next step. Returns them, in a
    /// buffer to be handed back with [`VirtualTime::granted_done`].
    pub fn grant(&mut self, target: u64) -> Vec<ClientId> {
        let now = self.wall.now();
        self.pace.advanced(now, target);
        let mut granted = std::mem::take(&mut self.granted);
        for (&client, participant) in self.participants.iter_mut() {
            if participant.done_until == Some(target) {
                participant.done_until = None;
                participant.stepping_ahead = None;
                participant.granted_ns = target;
                participant.granted_at = now;
                granted.push(client);
            }
        }
        let participants = &self.participants;
        self.watchers.retain(|c| participants.get(c).is_some_and(|p| p.stepping_ahead.is_some()));
        self.limit = match self.limit {
            RunLimit::SingleStep => RunLimit::Paused,
            RunLimit::Until(until) if until <= target => RunLimit::Paused,
            other => other,
        };
        self.reconsider_pace();
        granted
    }

    /// Hand back the buffer [`VirtualTime::grant`] returned, emptied: the
    /// next advance fills it again without allocating.
    pub fn granted_done(&mut self, mut granted: Vec<ClientId>) {
        granted.clear();
        self.granted = granted;
    }

    /// The step timeout, for reports.
    pub fn step_timeout(&self) -> Duration {
        self.step_timeout
    }

    /// The control API's hold on time.
    pub fn set_limit(&mut self, limit: RunLimit) {
        self.limit = limit;
        self.reconsider_pace();
    }
}
