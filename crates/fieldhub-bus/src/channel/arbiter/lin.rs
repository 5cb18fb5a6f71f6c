//! `lin`: the LIN master's schedule table (LIN 2.x, ISO 17987), run by the
//! hub on bus time. A `protocol = "lin"` channel has no master port: the
//! hub is the master. Its slots follow each other without end, each
//! `delay_ms` long; at the start of a slot the master sends the header of
//! the slot's identifier, and the slave that published a response for it
//! answers in the same frame.
//!
//! - A slave **publishes** a response by sending a LIN frame on its port;
//!   it waits in the port's FIFO like any frame. At a slot for identifier
//!   `id`, the port whose oldest frame is a response for `id` answers (of
//!   several, the response published first); the frame starts at the slot's
//!   start and lasts its exact nominal time (header and response,
//!   `fieldhub_proto::lin`), so its timestamp is the slot's start plus that.
//! - A slave may instead keep a **standing response** for an identifier
//!   (`lin_standing`): it answers every unconditional header of it — the
//!   schedule's and a collision-resolving schedule's — until replaced or
//!   withdrawn, when no port has a one-shot response for it at the head of
//!   its FIFO. It takes no transmit credit and never waits in a FIFO: its
//!   answer is a [`Pending::standing`] the channel puts on the bus like any
//!   winner ([`LinScheduleArbiter::take_answer`]).
//! - An unconditional slot nobody answers puts the header alone on the bus:
//!   a hub-made `NO_RESPONSE` frame, timestamped at the header's end,
//!   counted in [`LinScheduleArbiter::no_responses`].
//! - A response no slot carries, or longer on the wire than the shortest
//!   slot that carries it, is refused as it comes (`lin_table`): every
//!   response the channel accepts goes out. With `frames` (an LDF's,
//!   `[channel.lin] ldf`), a response is also refused unless its length
//!   and checksum model are its frame's and its port is named as one of
//!   the frame's publishers (the LDF's node names).
//! - An **event-triggered** slot (LIN 2.2A 2.3.3.3) is answered by every
//!   port whose oldest frame is a response for one of the frames the
//!   event-triggered frame carries (its first byte that frame's protected
//!   identifier, `lin_table` checks). One answers: its response goes out
//!   under the event-triggered identifier ([`super::Rule::carried`] re-makes the
//!   frame). None: a `NO_RESPONSE` header, not counted as missing — no
//!   signal changed. Two or more collide: the bus's `COLLISION` frame, what
//!   the bus read ([`Frame::lin_collision`]), lasts the header and the
//!   longest response and is counted in [`LinScheduleArbiter::collisions`];
//!   the responses stay in their FIFOs, and after the slot the master runs
//!   the frame's collision-resolving schedule once (each of its frames in
//!   turn, without one), then the slot after the event-triggered one.
//! - A **sporadic** slot (2.3.3.4) carries the first of its frames, in the
//!   sporadic frame's order, that a port has a response pending for (of
//!   several ports, the response published first); with none the slot is
//!   silent: no header, nothing on the bus.
//! - The schedule starts when the channel is first served with a port on it
//!   (a port's opening serves it) and stops when the last port leaves; slot
//!   `k` of a run that started at `t0` starts at `t0 + Σ delays before k`,
//!   whenever the bus thread wakes.
//! - Sleep and wake-up (`sleep`): the go-to-sleep command stops the
//!   schedule, so does a bus idle for its timeout; a wake-up pulse starts it
//!   over from its first slot after the master's wake-up delay.

mod sleep;

use fieldhub_proto::{lin, Frame, FrameFlags};

pub use self::sleep::{LinPower, PowerNews};
use self::sleep::{Power, Sleep};
use super::lin_standing::StandingResponses;
use super::lin_table::{LinTable, Slot, SlotKind};
use super::roles::Roles;
use super::{Arbiter, Candidate, Rates};
use crate::config::LinConfig;
use crate::port_id::PortId;
#[cfg(doc)]
use crate::tx_queue::Pending;

/// A collision-resolving schedule the master is running.
#[derive(Clone, Copy, Debug)]
struct Resolving {
    /// The event-triggered frame whose responses collided.
    et: usize,
    /// Its next slot.
    at: usize,
    /// The length of the slot that collided, for a frame without a
    /// collision schedule.
    slot_ns: u64,
}

/// This decision's answers for the current slot.
#[derive(Clone, Debug, Default)]
struct Answers {
    /// The winner: member slot, arrival, and its rank (sporadic: the
    /// frame's place in the list; else 0).
    first: Option<(usize, u64, usize)>,
    /// Event-triggered: how many ports answer, and what the bus reads when
    /// two or more do.
    count: u32,
    read: Option<Frame>,
    /// The port whose standing response may answer the current slot, and
    /// its member slot once that port is found eligible.
    standing_port: Option<PortId>,
    standing: Option<usize>,
    /// The oldest go-to-sleep command among the ports' oldest frames: its
    /// member slot.
    sleep: Option<usize>,
    sleep_arrival: u64,
    /// The port whose wake-up pulse is due (asked for, or a waker's
    /// repeat), and its member slot once that port is found eligible.
    pulse_port: Option<PortId>,
    pulse: Option<usize>,
}

/// What the last decision granted, which [`Arbiter::started`] acts on.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Grant {
    /// An answer to the current slot.
    Slot,
    /// A wake-up pulse of this port.
    Pulse(PortId),
    /// A port's go-to-sleep command.
    Sleep,
}

pub struct LinScheduleArbiter {
    table: LinTable,
    /// The next slot of the schedule.
    next: usize,
    /// A collision-resolving schedule running before `next`.
    resolving: Option<Resolving>,
    /// When the current slot starts; `None` while the schedule is stopped.
    slot_at: Option<u64>,
    answers: Answers,
    granted: Option<Grant>,
    /// Whether a port is on the channel (the schedule runs only then).
    running: bool,
    /// An answer to an event-triggered header: the identifier it goes out
    /// under.
    carry_as: Option<u8>,
    /// Each identifier's standing response.
    standing: StandingResponses,
    /// The frame the rule answers the last decision with for its winner
    /// instead of the winner's oldest frame (a standing response, a
    /// repeated wake-up pulse), for the channel to take.
    answer_won: Option<Frame>,
    /// A frame the bus makes itself (a header nobody answered, a collision)
    /// and the bus time it ends.
    own_frame: Option<(Frame, u64)>,
    rates: Rates,
    /// Sleep and wake-up.
    sleep: Sleep,
    /// Headers of unconditional frames nobody answered since the channel
    /// was made.
    pub no_responses: u64,
    /// Event-triggered headers whose answers collided.
    pub collisions: u64,
}

impl LinScheduleArbiter {
    pub fn new(config: &LinConfig) -> Self {
        Self {
            table: LinTable::new(config),
            next: 0,
            resolving: None,
            slot_at: None,
            answers: Answers::default(),
            granted: None,
            running: false,
            carry_as: None,
            standing: StandingResponses::new(),
            answer_won: None,
            own_frame: None,
            rates: Rates::default(),
            sleep: Sleep::new(config),
            no_responses: 0,
            collisions: 0,
        }
    }

    /// The publishers' names: which open port is which node.
    pub fn roles(&mut self) -> &mut Roles {
        &mut self.table.roles
    }

    /// Apply a standing response or its withdrawal (a `LIN_STANDING` frame)
    /// from `port`; the error says why it may not.
    pub fn stand(&mut self, port: PortId, request: &Frame) -> Result<(), String> {
        self.standing.apply(port, request)
    }

    /// `port` left the channel: its standing responses go with it.
    pub fn forget_standing(&mut self, port: PortId) {
        self.standing.forget(port);
    }

    /// Member slot `index`, port `port`, may send now (plugged, not waiting
    /// out a failed attempt): its standing response may answer this slot.
    #[inline]
    pub fn eligible(&mut self, index: usize, port: PortId) {
        if self.answers.standing_port == Some(port) {
            self.answers.standing = Some(index);
        }
        if self.answers.pulse_port == Some(port) {
            self.answers.pulse = Some(index);
        }
    }

    /// The frame the rule answered the last decision with (a standing
    /// response, a repeated wake-up pulse): the channel puts it on the bus
    /// instead of the member's oldest frame.
    pub fn take_answer(&mut self) -> Option<Frame> {
        self.answer_won.take()
    }

    /// Start the schedule at `now` if it is stopped, the channel awake and
    /// a port on it (`running`); stop it when the channel has none.
    pub fn run(&mut self, now: u64, running: bool) {
        if !self.may_run(now, running) {
            return;
        }
        match (running, self.slot_at) {
            (true, None) => {
                self.slot_at = Some(now);
                self.next = 0;
            }
            (false, Some(_)) => {
                self.slot_at = None;
                self.resolving = None;
                self.own_frame = None;
            }
            _ => {}
        }
    }

    /// The frame the bus made itself (a header nobody answered, a
    /// collision), once bus time `at` has reached its end: the frame and
    /// its end.
    pub fn take_own_frame(&mut self, at: u64) -> Option<(Frame, u64)> {
        match self.own_frame {
            Some((_, end)) if at >= end => self.own_frame.take(),
            _ => None,
        }
    }

    /// Why `frame` may not be published on this channel, if it may not.
    pub fn refuses(&self, port: PortId, frame: &Frame, rates: Rates) -> Option<String> {
        if !frame.is_lin() {
            return self.table.refuses(port, frame, 0);
        }
        if frame.is_lin_go_to_sleep() {
            // No slot carries it; with `frames`, only 0x3C's publisher (the
            // LDF's master) sends it.
            return self.table.refuses_publisher(port, frame).or_else(|| self.power_refuses(frame));
        }
        if let Some(why) = self.power_refuses(frame) {
            return Some(why);
        }
        if frame.is_lin_wake_up() {
            return None;
        }
        self.table.refuses(port, frame, rates.duration_ns(frame))
    }

    /// Make `frame` what goes on the bus: an answer to an event-triggered header
    /// under that header's identifier, its checksum made with it (a wrong
    /// one sent on purpose stays as sent); any other frame as it is.
    pub fn carry(&mut self, frame: &mut Frame) {
        if let Some(id) = self.carry_as.take() {
            *frame = answer_under(id, frame);
        }
    }

    /// The slot the master is at.
    fn current(&self) -> Slot {
        match self.resolving {
            Some(r) => {
                let et = &self.table.ets[r.et];
                match et.resolve.get(r.at) {
                    Some(&slot) => slot,
                    None => Slot { kind: SlotKind::Unconditional(et.frames[r.at]), ns: r.slot_ns },
                }
            }
            None => self.table.slots[self.next],
        }
    }

    /// Move to the slot after the current one, which started at `slot_at`.
    fn advance(&mut self, slot_at: u64) {
        self.slot_at = Some(slot_at + self.current().ns);
        match &mut self.resolving {
            Some(r) => {
                r.at += 1;
                if r.at == self.table.ets[r.et].resolving_len() {
                    // Resolved: back to the schedule, at the slot after the
                    // event-triggered one.
                    self.resolving = None;
                }
            }
            None => self.next = (self.next + 1) % self.table.slots.len(),
        }
    }

    /// The bus's own frame `frame` starts at `at`: the bus is busy with it
    /// until its end.
    fn own(&mut self, frame: Frame, at: u64) {
        let end = at + self.rates.duration_ns(&frame);
        self.sleep.active(end);
        self.own_frame = Some((frame, end));
    }

    /// Two or more answered event-triggered frame `et` in the slot that
    /// started at `slot_at`: the bus read `read` from `at` on; the
    /// collision-resolving schedule follows the slot.
    fn collided(&mut self, et: usize, read: Frame, slot_at: u64, at: u64) {
        self.own(read, at);
        self.collisions += 1;
        let slot_ns = self.current().ns;
        self.advance(slot_at);
        self.resolving = Some(Resolving { et, at: 0, slot_ns });
    }
}

impl Arbiter for LinScheduleArbiter {
    fn open(&mut self, at: u64, rates: Rates) {
        self.rates = rates;
        self.granted = None;
        self.carry_as = None;
        self.answer_won = None;
        let standing_port = match self.slot_at.map(|_| self.current().kind) {
            Some(SlotKind::Unconditional(id)) => self.standing.of(id).map(|(port, _)| port),
            _ => None,
        };
        let pulse_port = self.sleep.port_pulse_due(at);
        self.answers = Answers { standing_port, pulse_port, ..Answers::default() };
    }

    fn consider(&mut self, candidate: Candidate<'_>) {
        let frame = &candidate.pending.frame;
        let arrival = candidate.pending.arrival;
        if self.sleep.power != Power::Awake {
            // No slot until the master's first header after the wake-up.
            return;
        }
        if frame.is_lin_go_to_sleep() {
            if self.answers.sleep.is_none() || arrival < self.answers.sleep_arrival {
                self.answers.sleep = Some(candidate.index);
                self.answers.sleep_arrival = arrival;
            }
            return;
        }
        let id = frame.id();
        let rank = match self.current().kind {
            SlotKind::Unconditional(slot) if id == u32::from(slot) => 0,
            SlotKind::Sporadic(n) => match self.table.sporadic[n].iter().position(|&f| u32::from(f) == id) {
                Some(rank) => rank,
                None => return,
            },
            // A response carried before (its attempt failed) has the
            // event-triggered identifier already.
            SlotKind::EventTriggered(n)
                if self.table.event_triggered_of(id) == Some(n) || id == u32::from(self.table.ets[n].id) =>
            {
                let et = self.table.ets[n].id;
                let sent = answer_under(et, frame);
                self.answers.count += 1;
                self.answers.read = match (self.answers.count, self.answers.read.take()) {
                    (1, _) => Some(sent),
                    (_, Some(read)) => Frame::lin_collision(et, &[read, sent]).ok(),
                    (_, None) => None,
                };
                0
            }
            _ => return,
        };
        let better = match self.answers.first {
            None => true,
            Some((_, first, best)) => (rank, arrival) < (best, first),
        };
        if better {
            self.answers.first = Some((candidate.index, arrival, rank));
        }
    }

    fn decide(&mut self, at: u64) -> (Option<usize>, Option<u64>) {
        if let Some((_, end)) = self.own_frame {
            // The bus's own frame is on the wire until its end.
            return (None, Some(end));
        }
        if let Some(decision) = self.decide_power(at) {
            return decision;
        }
        let Some(slot_at) = self.slot_at else { return (None, None) };
        if at < slot_at {
            return (None, Some(slot_at.min(self.sleep.idle_at())));
        }
        if let Some(decision) = self.sleep_at_boundary(at) {
            return decision;
        }
        let kind = self.current().kind;
        if let (SlotKind::EventTriggered(n), Some(read)) = (kind, &self.answers.read) {
            if self.answers.count >= 2 {
                self.collided(n, read.clone(), slot_at, at);
                return (None, self.own_frame.as_ref().map(|(_, end)| *end));
            }
        }
        if let Some((index, _, _)) = self.answers.first {
            if let SlotKind::EventTriggered(n) = kind {
                self.carry_as = Some(self.table.ets[n].id);
            }
            self.granted = Some(Grant::Slot);
            return (Some(index), None);
        }
        if let (SlotKind::Unconditional(id), Some(index)) = (kind, self.answers.standing) {
            // No one-shot response: the slave's buffer answers.
            self.answer_won = self.standing.of(id).map(|(_, frame)| frame);
            self.granted = Some(Grant::Slot);
            return (Some(index), None);
        }
        let header = match kind {
            SlotKind::Unconditional(id) => {
                self.no_responses += 1;
                Frame::lin_no_response(id).ok()
            }
            // No slave had a change to report: the header alone, as planned.
            SlotKind::EventTriggered(n) => Frame::lin_no_response(self.table.ets[n].id).ok(),
            // Nothing to send: the slot stays silent.
            SlotKind::Sporadic(_) => None,
        };
        if let Some(header) = header {
            self.own(header, at);
        }
        self.advance(slot_at);
        let idle_at = self.sleep.idle_at();
        (None, self.own_frame.as_ref().map(|(_, end)| *end).or(self.slot_at.map(|slot| slot.min(idle_at))))
    }

    fn started(&mut self, at: u64, frame: &Frame) {
        let ns = self.rates.duration_ns(frame);
        self.sleep.active(at + ns);
        match self.granted.take() {
            Some(Grant::Slot) => {
                if let Some(slot_at) = self.slot_at {
                    self.advance(slot_at);
                }
            }
            Some(Grant::Pulse(port)) => self.pulse_started(at, Some(port)),
            Some(Grant::Sleep) => self.sleep_started(at, ns),
            None => {}
        }
    }
}

/// `frame` as it goes out answering the header of event-triggered
/// identifier `id`: its checksum made with `id`'s protected identifier, or
/// a wrong one sent on purpose kept as sent.
fn answer_under(id: u8, frame: &Frame) -> Frame {
    let model = lin::model_of(frame.flags());
    let made = match frame.flags().contains(FrameFlags::LIN_CHECKSUM_ERROR) {
        true => Frame::lin_with_checksum(id, model, frame.data(), frame.len8_dlc()),
        false => Frame::lin(id, model, frame.data()),
    };
    made.unwrap_or_else(|_| frame.clone())
}
