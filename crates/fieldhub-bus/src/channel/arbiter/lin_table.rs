//! The LIN master's tables as the bus runs them, made once from
//! `[channel.lin]` (checked by `lin_check`): the slots, the event-triggered
//! and sporadic frames, each frame's rule (`frames`, from an LDF), and per
//! identifier what a published response may be — which slots carry it and
//! the shortest of them, and the event-triggered frame that carries it. A
//! response is judged against these as it comes ([`LinTable::refuses`]), so
//! every response the channel accepts has a slot it fits.

use fieldhub_proto::{lin, Frame, FrameFlags};

use super::roles::Roles;
use crate::config::{LinChecksum, LinConfig, LinSlotConfig};
use crate::port_id::PortId;

/// What the master sends at the start of a slot.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SlotKind {
    /// The header of this identifier; its publisher answers.
    Unconditional(u8),
    /// The header of event-triggered frame `ets[n]`.
    EventTriggered(usize),
    /// The header of the first frame of `sporadic[n]` with a response
    /// pending, or nothing.
    Sporadic(usize),
}

/// One slot: what it sends and how long it lasts (ns).
#[derive(Clone, Copy, Debug)]
pub struct Slot {
    pub kind: SlotKind,
    pub ns: u64,
}

/// An event-triggered frame as the master runs it.
pub struct EventTriggered {
    pub name: String,
    pub id: u8,
    /// The unconditional frames it carries.
    pub frames: Vec<u8>,
    /// Its collision-resolving schedule; empty: `frames` in turn.
    pub resolve: Vec<Slot>,
}

impl EventTriggered {
    /// Slots of its collision-resolving schedule.
    pub fn resolving_len(&self) -> usize {
        match self.resolve.len() {
            0 => self.frames.len(),
            n => n,
        }
    }
}

/// What a frame of `[channel.lin] frames` may be.
struct FrameRule {
    name: String,
    length: u8,
    checksum: LinChecksum,
    /// Its publishers: indices into the table's `roles`.
    publishers: Vec<usize>,
}

/// What the bus knows of one identifier.
#[derive(Default)]
struct Carried {
    /// The shortest slot (ns) that can carry a response for it; `None`:
    /// no slot does.
    shortest: Option<u64>,
    /// The event-triggered frame that carries it (index into `ets`).
    event_triggered: Option<usize>,
    /// Whether it is an event-triggered frame's own identifier.
    is_event_triggered: bool,
    /// Whether an unconditional header of it goes out — the schedule's or a
    /// collision-resolving schedule's —, which a standing response answers.
    unconditional: bool,
    rule: Option<FrameRule>,
}

pub struct LinTable {
    /// The schedule, repeated without end.
    pub slots: Vec<Slot>,
    pub ets: Vec<EventTriggered>,
    /// Each sporadic frame's frames, highest priority first.
    pub sporadic: Vec<Vec<u8>>,
    /// Per identifier 0..=0x3F.
    ids: Vec<Carried>,
    /// Which open port has which publisher's name.
    pub roles: Roles,
}

fn slot_of(config: &LinSlotConfig, ets: &[(u8, usize)], sporadic: &[&str]) -> Slot {
    // lin_check made sure each slot names an identifier or a sporadic frame.
    let kind = match (&config.sporadic, config.id) {
        (Some(name), _) => SlotKind::Sporadic(sporadic.iter().position(|s| s == name).unwrap_or(0)),
        (None, id) => {
            let id = id.unwrap_or(0);
            match ets.iter().find(|(et, _)| *et == id) {
                Some(&(_, n)) => SlotKind::EventTriggered(n),
                None => SlotKind::Unconditional(id),
            }
        }
    };
    Slot { kind, ns: config.delay_ms * 1_000_000 }
}

impl LinTable {
    pub fn new(config: &LinConfig) -> Self {
        let mut names: Vec<String> = Vec::new();
        for name in config.frames.iter().flat_map(|f| &f.publishers) {
            if !names.contains(name) {
                names.push(name.clone());
            }
        }
        let et_ids: Vec<(u8, usize)> = config.event_triggered.iter().enumerate().map(|(n, e)| (e.id, n)).collect();
        let sporadic_names: Vec<&str> = config.sporadic.iter().map(|s| s.name.as_str()).collect();
        let slot = |c: &LinSlotConfig| slot_of(c, &et_ids, &sporadic_names);
        let mut table = Self {
            slots: config.schedule.iter().map(slot).collect(),
            ets: config
                .event_triggered
                .iter()
                .map(|e| EventTriggered {
                    name: e.name.clone(),
                    id: e.id,
                    frames: e.frames.clone(),
                    resolve: e.collision_schedule.iter().map(slot).collect(),
                })
                .collect(),
            sporadic: config.sporadic.iter().map(|s| s.frames.clone()).collect(),
            ids: Vec::new(),
            roles: Roles::new(Vec::new()),
        };
        table.ids.resize_with(usize::from(lin::MAX_ID) + 1, Carried::default);
        for frame in &config.frames {
            let publishers = frame.publishers.iter().filter_map(|p| names.iter().position(|n| n == p)).collect();
            let rule =
                FrameRule { name: frame.name.clone(), length: frame.length, checksum: frame.checksum, publishers };
            table.ids[usize::from(frame.id)].rule = Some(rule);
        }
        for (n, et) in table.ets.iter().enumerate() {
            table.ids[usize::from(et.id)].is_event_triggered = true;
            for &id in &et.frames {
                table.ids[usize::from(id)].event_triggered = Some(n);
            }
        }
        table.roles = Roles::new(names);
        // Which slots carry which identifiers: the schedule's and, for the
        // event-triggered frames it sends, their collision schedules'.
        let mut carriers: Vec<(u8, u64)> = Vec::new();
        for slot in &table.slots {
            table.carriers_of(slot, &mut carriers);
            if let SlotKind::EventTriggered(n) = slot.kind {
                for resolving in &table.ets[n].resolve {
                    table.carriers_of(resolving, &mut carriers);
                }
                // Without a collision schedule its frames are polled in
                // slots as long as this one.
                if table.ets[n].resolve.is_empty() {
                    carriers.extend(table.ets[n].frames.iter().map(|&id| (id, slot.ns)));
                }
            }
        }
        let mut unconditional: Vec<u8> = Vec::new();
        for slot in &table.slots {
            match slot.kind {
                SlotKind::Unconditional(id) => unconditional.push(id),
                SlotKind::EventTriggered(n) if table.ets[n].resolve.is_empty() => {
                    unconditional.extend(&table.ets[n].frames);
                }
                SlotKind::EventTriggered(n) => {
                    unconditional.extend(table.ets[n].resolve.iter().filter_map(|r| match r.kind {
                        SlotKind::Unconditional(id) => Some(id),
                        _ => None,
                    }));
                }
                SlotKind::Sporadic(_) => {}
            }
        }
        for id in unconditional {
            table.ids[usize::from(id)].unconditional = true;
        }
        for (id, ns) in carriers {
            let shortest = &mut table.ids[usize::from(id)].shortest;
            *shortest = Some(shortest.map_or(ns, |s| s.min(ns)));
        }
        table
    }

    /// The identifiers `slot` may carry a response for, with its length.
    fn carriers_of(&self, slot: &Slot, out: &mut Vec<(u8, u64)>) {
        match slot.kind {
            SlotKind::Unconditional(id) => out.push((id, slot.ns)),
            SlotKind::EventTriggered(n) => out.extend(self.ets[n].frames.iter().map(|&id| (id, slot.ns))),
            SlotKind::Sporadic(n) => out.extend(self.sporadic[n].iter().map(|&id| (id, slot.ns))),
        }
    }

    /// The event-triggered frame that carries identifier `id`, if one does.
    pub fn event_triggered_of(&self, id: u32) -> Option<usize> {
        self.ids.get(id as usize)?.event_triggered
    }

    /// Why `frame` from `port` may not be published on this channel, if it
    /// may not.
    pub fn refuses(&self, port: PortId, frame: &Frame, takes_ns: u64) -> Option<String> {
        if !frame.is_lin() {
            return Some("sends a frame that is not a LIN frame; a LIN channel carries LIN frames only".into());
        }
        if frame.flags().intersects(FrameFlags::LIN_NO_RESPONSE | FrameFlags::LIN_COLLISION) {
            return Some(
                "sends a header without a response or a collision, which only the master (the hub) sends".into(),
            );
        }
        let id = frame.id() as u8;
        let carried = &self.ids[usize::from(id)];
        if carried.is_event_triggered {
            let et = self.ets.iter().find(|e| e.id == id)?;
            return Some(format!(
                "publishes a response for 0x{id:02X}, event-triggered frame {}; publish the response of one of the frames it carries ({}) instead",
                et.name,
                listed(&et.frames)
            ));
        }
        if frame.is_lin_standing() && !carried.unconditional {
            return Some(format!(
                "publishes a standing response for 0x{id:02X}, which no unconditional slot of this channel's schedule sends; \
                 a standing response answers unconditional headers, so publish one-shot responses for event-triggered and sporadic frames"
            ));
        }
        if frame.is_lin_standing() && frame.is_empty() {
            // A withdrawal: nothing of it goes on the bus.
            return None;
        }
        let Some(shortest) = carried.shortest else {
            let ids: Vec<u8> = (0..=lin::MAX_ID).filter(|&i| self.ids[usize::from(i)].shortest.is_some()).collect();
            return Some(format!(
                "publishes a response for identifier 0x{id:02X}, which this channel's schedule table never sends ({})",
                listed(&ids)
            ));
        };
        if takes_ns > shortest {
            return Some(format!(
                "publishes a response that takes {takes_ns} ns on the wire, longer than the shortest slot of identifier 0x{id:02X} ({shortest} ns)"
            ));
        }
        if let Some(n) = carried.event_triggered {
            // LIN 2.2A 2.3.3.3: the first data byte names the frame, since
            // the event-triggered header does not.
            let pid = lin::protected_id(id).unwrap_or(0);
            let first = frame.data().first().copied().unwrap_or(0);
            if first != pid {
                return Some(format!(
                    "publishes a response for 0x{id:02X}, which event-triggered frame {} carries, with first byte 0x{first:02X}; its first byte is the frame's protected identifier 0x{pid:02X}",
                    self.ets[n].name
                ));
            }
        }
        let rule = carried.rule.as_ref()?;
        self.breaks(port, frame, rule)
    }

    /// Why `port` may not send `frame`, which no slot needs to carry (the
    /// go-to-sleep command), if it may not: with `frames` naming its
    /// identifier, it is not one of the frame's publishers or not its shape.
    pub fn refuses_publisher(&self, port: PortId, frame: &Frame) -> Option<String> {
        let rule = self.ids.get(frame.id() as usize)?.rule.as_ref()?;
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
}

/// Identifiers for a message: "0x10, 0x11".
fn listed(ids: &[u8]) -> String {
    ids.iter().map(|id| format!("0x{id:02X}")).collect::<Vec<_>>().join(", ")
}
