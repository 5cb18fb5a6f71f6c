//! What the hub takes from an LDF: the cluster's speed and protocol
//! versions, its nodes, its frames (identifier, publisher, length), its
//! event-triggered and sporadic frames and its schedule tables. Signals, encodings and node configuration are read
//! over (their sections are checked for balance only).

use crate::error::Pos;

/// One LIN description file, as far as the hub uses it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Ldf {
    /// `LIN_protocol_version`, as written ("2.1").
    pub protocol_version: String,
    /// `LIN_language_version`, if written.
    pub language_version: Option<String>,
    /// `LIN_speed` in bit/s (19.2 kbps: 19,200).
    pub speed_bps: u32,
    /// `Channel_name`, if written.
    pub channel_name: Option<String>,
    /// The master node's name (`Nodes { Master: … }`).
    pub master: String,
    /// The slave nodes' names, in order.
    pub slaves: Vec<String>,
    /// Unconditional and diagnostic frames, in the order written.
    pub frames: Vec<Frame>,
    /// `Node_attributes`: each node's `LIN_protocol`, where written.
    pub node_protocols: Vec<(String, String)>,
    /// Event-triggered frames (`Event_triggered_frames`), in the order written.
    pub event_triggered_frames: Vec<EventTriggeredFrame>,
    /// Sporadic frames (`Sporadic_frames`), in the order written.
    pub sporadic_frames: Vec<SporadicFrame>,
    /// The schedule tables, in the order written.
    pub schedule_tables: Vec<ScheduleTable>,
}

/// Who sends a frame's response.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Publisher {
    /// One node, by name.
    Node(String),
    /// Whichever slave is addressed: the diagnostic `SlaveResp` (0x3D).
    AnySlave,
}

/// One frame: `Frames` (unconditional) or `Diagnostic_frames`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Frame {
    pub name: String,
    /// The frame identifier, 0..=0x3F.
    pub id: u8,
    pub publisher: Publisher,
    /// Data bytes, 1..=8.
    pub length: u8,
    /// Where the frame is defined.
    pub pos: Pos,
}

/// An event-triggered frame: its own identifier, the unconditional frames
/// it carries and the table that resolves their collisions.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct EventTriggeredFrame {
    pub name: String,
    /// The identifier of its header, 0..=0x3F.
    pub id: u8,
    /// The collision-resolving schedule table (LIN 2.1 on; a LIN 2.0 file
    /// has none).
    pub collision_table: Option<String>,
    /// The unconditional frames it carries, by name (checked).
    pub frames: Vec<String>,
    pub pos: Pos,
}

/// A sporadic frame: the unconditional frames its slot may carry, highest
/// priority first.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SporadicFrame {
    pub name: String,
    /// By name (checked).
    pub frames: Vec<String>,
    pub pos: Pos,
}

/// One schedule table: its frames in order, each with its slot's length.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ScheduleTable {
    pub name: String,
    pub entries: Vec<Entry>,
    pub pos: Pos,
}

/// One entry of a schedule table: a frame and the slot's length.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Entry {
    /// The frame's name: an unconditional, diagnostic, event-triggered or
    /// sporadic frame's (checked).
    pub frame: String,
    /// The slot's length in µs (`delay 10 ms`: 10,000).
    pub delay_us: u64,
    pub pos: Pos,
}

impl Ldf {
    /// The frame named `name`.
    pub fn frame(&self, name: &str) -> Option<&Frame> {
        self.frames.iter().find(|f| f.name == name)
    }

    /// The event-triggered frame named `name`.
    pub fn event_triggered(&self, name: &str) -> Option<&EventTriggeredFrame> {
        self.event_triggered_frames.iter().find(|f| f.name == name)
    }

    /// The schedule table named `name`.
    pub fn schedule_table(&self, name: &str) -> Option<&ScheduleTable> {
        self.schedule_tables.iter().find(|t| t.name == name)
    }

    /// The LIN protocol version node `node` speaks: its `Node_attributes`
    /// `LIN_protocol`, else the file's `LIN_protocol_version`.
    pub fn protocol_of(&self, node: &str) -> &str {
        self.node_protocols.iter().find(|(n, _)| n == node).map_or(&self.protocol_version, |(_, v)| v)
    }

    /// Whether `frame` carries the classic checksum (data bytes only): the
    /// diagnostic frames 0x3C and 0x3D, and frames a LIN 1.x node
    /// publishes. Every other frame carries the enhanced checksum (LIN 2.x:
    /// the protected identifier too).
    pub fn classic_checksum(&self, frame: &Frame) -> bool {
        if frame.id >= 0x3C {
            return true;
        }
        let version = match &frame.publisher {
            Publisher::Node(node) => self.protocol_of(node),
            Publisher::AnySlave => &self.protocol_version,
        };
        version.starts_with("1.")
    }
}
