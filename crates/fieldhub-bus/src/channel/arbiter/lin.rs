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
//! - A slot nobody answers puts the header alone on the bus: a hub-made
//!   `NO_RESPONSE` frame, timestamped at the header's end, counted in
//!   [`LinScheduleArbiter::no_responses`].
//! - A response for an identifier the table never schedules, or longer on
//!   the wire than the shortest slot of its identifier, is refused as it
//!   comes: every response the channel accepts goes out.
//! - With `frames` (an LDF's, `[channel.lin] ldf`), a response is also
//!   refused unless its length and checksum model are its frame's and its
//!   port is named as one of the frame's publishers (the LDF's node names,
//!   kept in [`Roles`]).
//! - The schedule starts when the channel is first served with a port on it
//!   (a port's opening serves it) and stops when the last port leaves; slot
//!   `k` of a run that started at `t0` starts at `t0 + Σ delays before k`,
//!   whenever the bus thread wakes.

use fieldhub_proto::{Frame, FrameFlags};

use super::roles::Roles;
use super::{Arbiter, Candidate, Rates};
use crate::config::{LinChecksum, LinConfig};
use crate::port_id::PortId;

/// Longest slot accepted: 1,000 s, as for the other rules' turns.
const MAX_DELAY_MS: u64 = 1_000_000;

/// What a frame of `[channel.lin] frames` may be.
struct FrameRule {
    name: String,
    length: u8,
    checksum: LinChecksum,
    /// Its publishers: indices into the rule's `roles`.
    publishers: Vec<usize>,
}

pub struct LinScheduleArbiter {
    /// Each slot's identifier and length in ns.
    slots: Vec<(u8, u64)>,
    /// The next slot.
    next: usize,
    /// When the next slot starts; `None` while the schedule is stopped.
    slot_at: Option<u64>,
    /// This decision's answer for the next slot: member slot and arrival.
    answer: Option<(usize, u64)>,
    granted: bool,
    /// A header nobody answered and the bus time its header ends.
    unanswered: Option<(Frame, u64)>,
    rates: Rates,
    /// Each identifier's frame, when the channel has `frames` (64 entries),
    /// else empty.
    frames: Vec<Option<FrameRule>>,
    /// Which open port has which publisher's name.
    roles: Roles,
    /// Headers nobody answered since the channel was made.
    pub no_responses: u64,
}

impl LinScheduleArbiter {
    pub fn new(config: &LinConfig) -> Self {
        let mut names: Vec<String> = Vec::new();
        for name in config.frames.iter().flat_map(|f| &f.publishers) {
            if !names.contains(name) {
                names.push(name.clone());
            }
        }
        let mut frames: Vec<Option<FrameRule>> = Vec::new();
        if !config.frames.is_empty() {
            frames.resize_with(usize::from(fieldhub_proto::lin::MAX_ID) + 1, || None);
        }
        for frame in &config.frames {
            let publishers = frame.publishers.iter().filter_map(|p| names.iter().position(|n| n == p)).collect();
            let rule =
                FrameRule { name: frame.name.clone(), length: frame.length, checksum: frame.checksum, publishers };
            frames[usize::from(frame.id)] = Some(rule);
        }
        Self {
            slots: config.schedule.iter().map(|slot| (slot.id, slot.delay_ms * 1_000_000)).collect(),
            next: 0,
            slot_at: None,
            answer: None,
            granted: false,
            unanswered: None,
            rates: Rates::default(),
            frames,
            roles: Roles::new(names),
            no_responses: 0,
        }
    }

    /// The publishers' names: which open port is which node.
    pub fn roles(&mut self) -> &mut Roles {
        &mut self.roles
    }

    /// Start the schedule at `now` if it is stopped and the channel has a
    /// port (`running`); stop it when the channel has none.
    pub fn run(&mut self, now: u64, running: bool) {
        match (running, self.slot_at) {
            (true, None) => {
                self.slot_at = Some(now);
                self.next = 0;
            }
            (false, Some(_)) => {
                self.slot_at = None;
                self.unanswered = None;
            }
            _ => {}
        }
    }

    /// The header nobody answered, once bus time `at` has reached its end:
    /// the frame and its end.
    pub fn take_unanswered(&mut self, at: u64) -> Option<(Frame, u64)> {
        match self.unanswered {
            Some((_, end)) if at >= end => self.unanswered.take(),
            _ => None,
        }
    }

    /// Why `frame` may not be published on this channel, if it may not.
    pub fn refuses(&self, port: PortId, frame: &Frame, rates: Rates) -> Option<String> {
        if !frame.is_lin() {
            return Some("sends a frame that is not a LIN frame; a LIN channel carries LIN frames only".into());
        }
        if frame.flags().contains(FrameFlags::LIN_NO_RESPONSE) {
            return Some("sends a header without a response, which only the master (the hub) sends".into());
        }
        let id = frame.id() as u8;
        let Some(shortest) = self.slots.iter().filter(|&&(slot, _)| slot == id).map(|&(_, ns)| ns).min() else {
            let ids: Vec<String> = self.slots.iter().map(|(slot, _)| format!("0x{slot:02X}")).collect();
            return Some(format!(
                "publishes a response for identifier 0x{id:02X}, which this channel's schedule table never sends ({})",
                ids.join(", ")
            ));
        };
        let takes = rates.duration_ns(frame);
        if takes > shortest {
            return Some(format!(
                "publishes a response that takes {takes} ns on the wire, longer than the shortest slot of identifier 0x{id:02X} ({shortest} ns)"
            ));
        }
        let rule = self.frames.get(usize::from(id))?.as_ref()?;
        self.breaks(port, frame, rule)
    }

    /// How `frame` from `port` differs from its frame `rule`, if it does.
    fn breaks(&self, port: PortId, frame: &Frame, rule: &FrameRule) -> Option<String> {
        let (id, name) = (frame.id(), &rule.name);
        let len = frame.data().len();
        if len != usize::from(rule.length) {
            return Some(format!(
                "publishes a {len}-byte response for frame {name} (0x{id:02X}), whose length is {} bytes",
                rule.length
            ));
        }
        let classic = frame.flags().contains(FrameFlags::LIN_CLASSIC);
        let (sent, wanted) = match (classic, rule.checksum) {
            (true, LinChecksum::Enhanced) => ("classic", "enhanced (LIN 2.x)"),
            (false, LinChecksum::Classic) => {
                ("enhanced", "classic (diagnostic frames, LIN 1.x nodes; /C in the CLI's text)")
            }
            _ => ("", ""),
        };
        if !sent.is_empty() {
            return Some(format!(
                "publishes frame {name} (0x{id:02X}) with the {sent} checksum; its checksum is {wanted}"
            ));
        }
        let role = self.roles.of(port);
        if role.is_some_and(|r| rule.publishers.contains(&r)) {
            return None;
        }
        let names = self.roles.names();
        let publishers: Vec<&str> = rule.publishers.iter().map(|&r| names[r].as_str()).collect();
        Some(format!(
            "publishes frame {name} (0x{id:02X}), which node {} publishes; open the port under that name (--port {})",
            publishers.join(" or "),
            publishers[0]
        ))
    }

    /// Move to the slot after the current one.
    fn advance(&mut self, slot_at: u64) {
        self.slot_at = Some(slot_at + self.slots[self.next].1);
        self.next = (self.next + 1) % self.slots.len();
    }
}

impl Arbiter for LinScheduleArbiter {
    fn open(&mut self, _at: u64, rates: Rates) {
        self.rates = rates;
        self.answer = None;
        self.granted = false;
    }

    fn consider(&mut self, candidate: Candidate<'_>) {
        let frame = &candidate.pending.frame;
        if frame.id() != u32::from(self.slots[self.next].0) {
            return;
        }
        let arrival = candidate.pending.arrival;
        if self.answer.is_none_or(|(_, first)| arrival < first) {
            self.answer = Some((candidate.index, arrival));
        }
    }

    fn decide(&mut self, at: u64) -> (Option<usize>, Option<u64>) {
        if let Some((_, end)) = self.unanswered {
            // The header alone is on the wire until its end.
            return (None, Some(end));
        }
        let Some(slot_at) = self.slot_at else { return (None, None) };
        if at < slot_at {
            return (None, Some(slot_at));
        }
        if let Some((index, _)) = self.answer {
            self.granted = true;
            return (Some(index), None);
        }
        let id = self.slots[self.next].0;
        if let Ok(header) = Frame::lin_no_response(id) {
            let end = at + self.rates.duration_ns(&header);
            self.unanswered = Some((header, end));
            self.no_responses += 1;
        }
        self.advance(slot_at);
        (None, self.unanswered.map(|(_, end)| end))
    }

    fn started(&mut self, _at: u64, _frame: &Frame) {
        if std::mem::take(&mut self.granted) {
            if let Some(slot_at) = self.slot_at {
                self.advance(slot_at);
            }
        }
    }
}

/// Check `[channel.lin]`; the error names the key.
pub(super) fn check(config: &LinConfig) -> Result<(), (&'static str, String)> {
    if config.ldf.is_some() && config.frames.is_empty() {
        return Err((
            "lin.ldf",
            "an LDF is read only from the hub's configuration file; through the control API give schedule and frames"
                .into(),
        ));
    }
    if config.schedule.is_empty() {
        return Err((
            "lin.schedule",
            "the master needs at least one slot: schedule = [{ id = 0x10, delay_ms = 10 }, …]".into(),
        ));
    }
    for (n, slot) in config.schedule.iter().enumerate() {
        if slot.id > fieldhub_proto::lin::MAX_ID {
            return Err(("lin.schedule", format!("slot {}: id 0x{:02X} is over 0x3F (6 bits)", n + 1, slot.id)));
        }
        if slot.delay_ms == 0 || slot.delay_ms > MAX_DELAY_MS {
            return Err((
                "lin.schedule",
                format!("slot {}: delay_ms {} is not 1..={MAX_DELAY_MS}", n + 1, slot.delay_ms),
            ));
        }
    }
    check_frames(config)
}

/// Check `[channel.lin] frames`: each once, valid, and one for every
/// scheduled identifier.
fn check_frames(config: &LinConfig) -> Result<(), (&'static str, String)> {
    let key = "lin.frames";
    for (n, frame) in config.frames.iter().enumerate() {
        let at = format!("frame {} ({})", n + 1, frame.name);
        if frame.id > fieldhub_proto::lin::MAX_ID {
            return Err((key, format!("{at}: id 0x{:02X} is over 0x3F (6 bits)", frame.id)));
        }
        if !(1..=8).contains(&frame.length) {
            return Err((key, format!("{at}: length {} is not 1..=8 bytes", frame.length)));
        }
        if frame.publishers.is_empty() {
            return Err((key, format!("{at}: no publishers; name the node (port) that sends its response")));
        }
        if config.frames[..n].iter().any(|other| other.id == frame.id) {
            return Err((key, format!("{at}: id 0x{:02X} has two frames", frame.id)));
        }
    }
    if config.frames.is_empty() {
        return Ok(());
    }
    match config.schedule.iter().find(|slot| !config.frames.iter().any(|f| f.id == slot.id)) {
        Some(slot) => Err((key, format!("the schedule sends 0x{:02X}, which no frame defines", slot.id))),
        None => Ok(()),
    }
}
