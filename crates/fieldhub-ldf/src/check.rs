//! The cross-checks of a parsed LDF: every name a frame or schedule refers
//! to is defined, names and identifiers are unique, the header is
//! complete. What passes here is an [`Ldf`] the hub can run any table of.

use crate::error::{LdfError, Pos};
use crate::model::{Ldf, Publisher};
use crate::parser::Parts;

pub fn check(parts: Parts, end: Pos) -> Result<Ldf, LdfError> {
    check_events(&parts)?;
    let missing = |what: &str| LdfError::at(end, format!("the file has no {what}; every LDF needs one"));
    let (protocol_version, _) = parts.protocol_version.ok_or_else(|| missing("LIN_protocol_version = \"2.1\";"))?;
    let speed_bps = parts.speed_bps.ok_or_else(|| missing("LIN_speed = 19.2 kbps;"))?;
    if speed_bps == 0 {
        return Err(LdfError::at(end, "LIN_speed is 0 kbps; LIN buses run at 19.2, 10.4 or 9.6 kbps"));
    }
    let (master, _) = parts.master.ok_or_else(|| missing("Nodes { Master: … ; } section"))?;
    let mut nodes = vec![master.as_str()];
    for (slave, pos) in &parts.slaves {
        if nodes.contains(&slave.as_str()) {
            return Err(LdfError::at(*pos, format!("node '{slave}' is named twice in Nodes; node names are unique")));
        }
        nodes.push(slave);
    }
    for (i, frame) in parts.frames.iter().enumerate() {
        if let Some(other) = parts.frames[..i].iter().find(|f| f.name == frame.name || f.id == frame.id) {
            let what = if other.name == frame.name {
                format!("name '{}'", frame.name)
            } else {
                format!("identifier 0x{:02X}", frame.id)
            };
            return Err(LdfError::at(
                frame.pos,
                format!(
                    "frame '{}' has the {what} of frame '{}' (line {}); each frame has its own",
                    frame.name, other.name, other.pos.line
                ),
            ));
        }
        if frame.length == 0 {
            return Err(LdfError::at(
                frame.pos,
                format!("frame '{}' has length 0; a LIN frame carries 1 to 8 bytes", frame.name),
            ));
        }
        if let Publisher::Node(node) = &frame.publisher {
            if !nodes.contains(&node.as_str()) {
                return Err(LdfError::at(
                    frame.pos,
                    format!(
                        "frame '{}' is published by '{node}', which is not a node of Nodes ({})",
                        frame.name,
                        nodes.join(", ")
                    ),
                ));
            }
        }
    }
    for (node, _) in &parts.node_protocols {
        if !nodes.contains(&node.as_str()) {
            return Err(LdfError::at(
                end,
                format!("Node_attributes of '{node}', which is not a node of Nodes ({})", nodes.join(", ")),
            ));
        }
    }
    for (i, table) in parts.schedule_tables.iter().enumerate() {
        if parts.schedule_tables[..i].iter().any(|t| t.name == table.name) {
            return Err(LdfError::at(table.pos, format!("schedule table '{}' is defined twice", table.name)));
        }
        for entry in &table.entries {
            let name = &entry.frame;
            let place = format!("schedule table '{}'", table.name);
            if let Some((command, pos)) = parts.commands.iter().find(|(_, pos)| *pos == entry.pos) {
                return Err(LdfError::at(
                    *pos,
                    format!("'{command}' in {place} is a node configuration command, which the hub's master does not send; leave it out or schedule MasterReq"),
                ));
            }
            let event = parts.event_triggered_frames.iter().any(|f| &f.name == name);
            if !event
                && !parts.sporadic_frames.iter().any(|f| &f.name == name)
                && !parts.frames.iter().any(|f| &f.name == name)
            {
                let known: Vec<&str> = parts.frames.iter().map(|f| f.name.as_str()).collect();
                return Err(LdfError::at(
                    entry.pos,
                    format!(
                        "{place} schedules '{name}', which no Frames, Diagnostic_frames, Event_triggered_frames or Sporadic_frames entry defines ({})",
                        known.join(", ")
                    ),
                ));
            }
            if entry.delay_us == 0 {
                return Err(LdfError::at(
                    entry.pos,
                    format!("'{name}' in {place} has delay 0 ms; a slot lasts at least its frame"),
                ));
            }
        }
    }
    Ok(Ldf {
        protocol_version,
        language_version: parts.language_version,
        speed_bps,
        channel_name: parts.channel_name,
        master,
        slaves: parts.slaves.into_iter().map(|(name, _)| name).collect(),
        frames: parts.frames,
        node_protocols: parts.node_protocols,
        event_triggered_frames: parts.event_triggered_frames,
        sporadic_frames: parts.sporadic_frames,
        schedule_tables: parts.schedule_tables,
    })
}

/// Event-triggered and sporadic frames: their own names and identifiers,
/// unconditional frames they carry, and an existing collision table.
fn check_events(parts: &Parts) -> Result<(), LdfError> {
    let unconditional = |name: &str| {
        parts.frames.iter().any(|f| f.name == name && f.id < 0x3C && matches!(f.publisher, Publisher::Node(_)))
    };
    let carried = |frames: &[String], what: &str, pos: Pos| match frames.iter().find(|f| !unconditional(f)) {
        Some(f) => Err(LdfError::at(
            pos,
            format!("{what} carries '{f}', which is not a frame of Frames; it carries unconditional frames"),
        )),
        None => Ok(()),
    };
    let mut names: Vec<&str> = parts.frames.iter().map(|f| f.name.as_str()).collect();
    let events = parts.event_triggered_frames.iter().map(|e| (e.name.as_str(), e.pos));
    for (name, pos) in events.chain(parts.sporadic_frames.iter().map(|s| (s.name.as_str(), s.pos))) {
        if names.contains(&name) {
            return Err(LdfError::at(pos, format!("'{name}' names two frames; each frame has its own name")));
        }
        names.push(name);
    }
    for (i, event) in parts.event_triggered_frames.iter().enumerate() {
        let what = format!("event-triggered frame '{}'", event.name);
        let mut other_ids =
            parts.frames.iter().map(|f| f.id).chain(parts.event_triggered_frames[..i].iter().map(|e| e.id));
        if other_ids.any(|id| id == event.id) {
            return Err(LdfError::at(
                event.pos,
                format!("{what} has identifier 0x{:02X}, which another frame has", event.id),
            ));
        }
        carried(&event.frames, &what, event.pos)?;
        if let Some(table) = &event.collision_table {
            if !parts.schedule_tables.iter().any(|t| &t.name == table) {
                return Err(LdfError::at(event.pos, format!("{what} resolves collisions with schedule table '{table}', which Schedule_tables does not define")));
            }
        }
    }
    for sporadic in &parts.sporadic_frames {
        carried(&sporadic.frames, &format!("sporadic frame '{}'", sporadic.name), sporadic.pos)?;
    }
    Ok(())
}
