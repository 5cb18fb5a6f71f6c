//! CAN↔LIN gateways (`[[gateway]]`, `docs/buses.md`): what a body
//! controller between a CAN and a LIN bus does with one frame each way.
//!
//! - **CAN → LIN**: a CAN frame with `can_id` becomes the gateway's
//!   published response for LIN identifier `lin_id`: its data bytes as the
//!   response's, the checksum model of the LIN channel's frame (`frames`,
//!   an LDF's; else LIN 2.x's for the identifier). It waits in the gateway's
//!   own port on the LIN channel and goes out at the identifier's next slot.
//! - **LIN → CAN**: a response for `lin_id` read on the LIN bus becomes a
//!   CAN frame with `can_id` and the response's data, which arbitrates on
//!   the CAN channel from the response's end.
//!
//! The direction follows from the channels: `from` is the one the frames
//! are read on. A mapping is checked once against both channels' settings
//! ([`Mapping::new`]): a LIN identifier the schedule never sends, one whose
//! frame another node publishes, a gateway between two channels of one kind
//! or into a CAN channel whose access rule gives turns to named ports only
//! (its port has no name) are configuration errors naming the key. What only a frame can show —
//! a length that is not the LIN frame's, a response too long for its slot,
//! a response read with a wrong checksum, a full gateway queue — refuses
//! that frame ([`Refusal`]), counted per reason on its gateway; nothing is
//! dropped silently.

use fieldhub_proto::frame::{MAX_EXTENDED_ID, MAX_STANDARD_ID};
use fieldhub_proto::lin::{self, Checksum};
use fieldhub_proto::{Frame, FrameFlags, FrameKind};
use serde::{Deserialize, Serialize};

use crate::channel::Channel;
use crate::config::{Arbitration, ChannelConfig, LinChecksum, Protocol};
use crate::port_id::PortId;

/// Most `[[gateway]]` tables one hub carries: each holds a gateway port id
/// after the routes' ([`crate::config::MAX_ROUTES`]).
pub const MAX_GATEWAYS: usize = 1024;

/// `[[gateway]]`: one frame mapped between a CAN and a LIN channel.
#[derive(Clone, Debug, Deserialize, Serialize, PartialEq, Eq)]
#[serde(deny_unknown_fields)]
pub struct GatewayConfig {
    /// The channel the frames are read on.
    pub from: String,
    /// The channel the mapped frames are sent on.
    pub to: String,
    /// The CAN frame's identifier.
    pub can_id: u32,
    /// Whether `can_id` is a 29-bit identifier.
    #[serde(default)]
    pub extended: bool,
    /// The LIN frame identifier (0..=0x3F).
    pub lin_id: u8,
    /// CAN → LIN: the LIN node the gateway publishes as, one of the frame's
    /// publishers when the LIN channel names them (an LDF's node names).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub node: Option<String>,
}

/// Which way a gateway carries frames.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Direction {
    CanToLin,
    LinToCan,
}

/// Why a frame a gateway read was not sent on: one counter each.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Refusal {
    /// Its data is not as long as the LIN frame (or no data: a remote frame).
    Length,
    /// The LIN channel refuses the response (`lin_table`'s reason: a slot too
    /// short for it, an event-triggered frame's first byte).
    Schedule,
    /// The LIN response was read with a wrong checksum: a receiving node
    /// discards it.
    ChecksumError,
    /// The gateway's queue on the destination channel is full.
    QueueFull,
}

impl Refusal {
    /// Every reason, in the order of a gateway's counters.
    pub const ALL: [Self; 4] = [Self::Length, Self::Schedule, Self::ChecksumError, Self::QueueFull];

    /// The name in `ctl gateways` and the log.
    pub fn name(self) -> &'static str {
        match self {
            Self::Length => "length",
            Self::Schedule => "schedule",
            Self::ChecksumError => "checksum_error",
            Self::QueueFull => "queue_full",
        }
    }

    /// Its counter's index.
    pub fn index(self) -> usize {
        self as usize
    }
}

/// A gateway's mapping as the bus runs it, made once from its table and its
/// channels' settings.
#[derive(Clone, Copy, Debug)]
pub struct Mapping {
    pub direction: Direction,
    pub can_id: u32,
    pub extended: bool,
    pub lin_id: u8,
    /// The LIN frame's data length, when the LIN channel gives it.
    pub length: Option<u8>,
    /// CAN → LIN: the response's checksum model.
    pub model: Checksum,
}

/// A configuration error: the key and what is wrong with it.
pub type KeyError = (&'static str, String);

impl Mapping {
    /// The mapping of `config` between channels `from` and `to`; the error
    /// names the offending key.
    pub fn new(config: &GatewayConfig, from: &ChannelConfig, to: &ChannelConfig) -> Result<Self, KeyError> {
        let (direction, lin_channel) = match (from.protocol, to.protocol) {
            (Protocol::Can | Protocol::Canfd | Protocol::Canxl, Protocol::Lin) => (Direction::CanToLin, to),
            (Protocol::Lin, Protocol::Can | Protocol::Canfd | Protocol::Canxl) => (Direction::LinToCan, from),
            (Protocol::Raw, _) | (_, Protocol::Raw) => {
                let raw = if from.protocol == Protocol::Raw { &from.name } else { &to.name };
                return Err(("to", format!("'{raw}' is a raw channel; a gateway joins a CAN and a LIN channel")));
            }
            (Protocol::Lin, Protocol::Lin) => {
                return Err((
                    "to",
                    format!(
                        "'{}' and '{}' are both LIN channels; a gateway joins a CAN and a LIN channel",
                        from.name, to.name
                    ),
                ));
            }
            _ => {
                return Err((
                    "to",
                    format!(
                        "'{}' and '{}' are both CAN channels; a gateway joins a CAN and a LIN channel (between CAN channels use a [[route]])",
                        from.name, to.name
                    ),
                ));
            }
        };
        if direction == Direction::LinToCan && to.arbitration != Arbitration::Can {
            // Its port has no name such a rule could give a turn to: its
            // frames would wait for ever.
            let text = format!(
                "a gateway cannot send into channel '{}': arbitration = \"{}\" gives bus time to named ports only",
                to.name,
                to.arbitration.name()
            );
            return Err(("to", text));
        }
        if config.lin_id > lin::MAX_ID {
            return Err(("lin_id", format!("0x{:X} is not a LIN frame identifier (0..=0x3F)", config.lin_id)));
        }
        let limit = if config.extended { MAX_EXTENDED_ID } else { MAX_STANDARD_ID };
        if config.can_id > limit {
            let fix = if config.extended { "" } else { "; set extended = true for a 29-bit identifier" };
            return Err(("can_id", format!("0x{:X} exceeds the identifier range 0x{limit:X}{fix}", config.can_id)));
        }
        let rule = lin_channel.lin.as_ref().and_then(|l| l.frames.iter().find(|f| f.id == config.lin_id));
        let model = match rule.map(|r| r.checksum) {
            Some(LinChecksum::Classic) => Checksum::Classic,
            Some(LinChecksum::Enhanced) => Checksum::Enhanced,
            None => Checksum::lin2_for(config.lin_id),
        };
        let mapping = Self {
            direction,
            can_id: config.can_id,
            extended: config.extended,
            lin_id: config.lin_id,
            length: rule.map(|r| r.length),
            model,
        };
        let publishers = rule.map(|r| r.publishers.as_slice()).unwrap_or_default();
        let node = match (direction, &config.node) {
            (Direction::LinToCan, Some(_)) => {
                return Err(("node", "only a gateway into a LIN channel publishes as a node; leave it out".into()));
            }
            (Direction::CanToLin, Some(node)) if !publishers.is_empty() && !publishers.contains(node) => {
                let text = format!(
                    "node '{node}' does not publish LIN frame 0x{:02X} on '{}'; its publishers: {}",
                    config.lin_id,
                    lin_channel.name,
                    publishers.join(", ")
                );
                return Err(("node", text));
            }
            (Direction::CanToLin, None) if !publishers.is_empty() => {
                let text = format!(
                    "LIN frame 0x{:02X} on '{}' is published by {}: name the node the gateway publishes as (node = \"{}\")",
                    config.lin_id,
                    lin_channel.name,
                    publishers.join(" or "),
                    publishers[0]
                );
                return Err(("node", text));
            }
            // Reading: any publisher's response passes the probe below.
            (_, node) => node.clone().or_else(|| publishers.first().cloned()),
        };
        mapping.probe(lin_channel, node.as_deref())?;
        Ok(mapping)
    }

    /// Whether the LIN channel's schedule would carry a response of this
    /// mapping at all: a probe response from a port named `node`, as long
    /// as the LIN frame (1 byte where the channel does not say), judged by
    /// the channel's own rule.
    fn probe(&self, lin_channel: &ChannelConfig, node: Option<&str>) -> Result<(), KeyError> {
        let mut channel = Channel::new(0, lin_channel.clone());
        let port = PortId::gateway(0);
        if let Some(node) = node {
            channel.name_port(port, node);
        }
        let mut data = [0u8; lin::MAX_DATA];
        // A frame an event-triggered frame carries starts with its protected id.
        data[0] = lin::protected_id(self.lin_id).unwrap_or(0);
        let length = usize::from(self.length.unwrap_or(1)).clamp(1, lin::MAX_DATA);
        let Ok(frame) = Frame::lin(self.lin_id, self.model, &data[..length]) else {
            return Err(("lin_id", format!("0x{:02X} is not a LIN frame identifier", self.lin_id)));
        };
        match channel.arbitration_refuses(port, &frame) {
            Some(why) => Err(("lin_id", format!("on LIN channel '{}' the gateway {why}", lin_channel.name))),
            None => Ok(()),
        }
    }

    /// Whether `frame`, read on the gateway's `from` channel, is one it maps.
    #[inline]
    pub fn matches(&self, frame: &Frame) -> bool {
        match self.direction {
            Direction::CanToLin => {
                matches!(frame.kind(), FrameKind::Can | FrameKind::CanFd)
                    && frame.id() == self.can_id
                    && frame.is_extended() == self.extended
            }
            Direction::LinToCan => {
                frame.kind() == FrameKind::Lin
                    && frame.id() == u32::from(self.lin_id)
                    && !frame.flags().intersects(FrameFlags::LIN_NO_RESPONSE | FrameFlags::LIN_COLLISION)
            }
        }
    }

    /// The frame a matching `frame` becomes on the other channel, or why it
    /// does not cross. Allocates nothing.
    pub fn map(&self, frame: &Frame) -> Result<Frame, Refusal> {
        let data = frame.data();
        match self.direction {
            Direction::CanToLin => {
                let fits = match self.length {
                    Some(length) => data.len() == usize::from(length),
                    None => (1..=lin::MAX_DATA).contains(&data.len()),
                };
                if frame.is_remote() || !fits {
                    return Err(Refusal::Length);
                }
                Frame::lin(self.lin_id, self.model, data).map_err(|_| Refusal::Length)
            }
            Direction::LinToCan => {
                if frame.flags().contains(FrameFlags::LIN_CHECKSUM_ERROR) {
                    return Err(Refusal::ChecksumError);
                }
                Frame::can(self.can_id, self.extended, data).map_err(|_| Refusal::Length)
            }
        }
    }

    /// Why `frame` was refused for `reason`, in words; `lin_refuses` is the
    /// LIN channel's own reason for a [`Refusal::Schedule`].
    pub fn explain(&self, reason: Refusal, frame: &Frame, lin_refuses: Option<String>) -> String {
        let (can, lin) = (self.can_id, self.lin_id);
        match reason {
            Refusal::Length => match (frame.is_remote(), self.length) {
                (true, _) => format!("CAN frame 0x{can:X} is a remote frame: it has no data for LIN frame 0x{lin:02X}"),
                (false, Some(length)) => format!(
                    "CAN frame 0x{can:X} has {} data bytes; LIN frame 0x{lin:02X} has {length}",
                    frame.data().len()
                ),
                (false, None) => {
                    format!("CAN frame 0x{can:X} has {} data bytes; a LIN response has 1..=8", frame.data().len())
                }
            },
            Refusal::Schedule => format!(
                "the response for LIN frame 0x{lin:02X} from CAN frame 0x{can:X} is refused: the gateway {}",
                lin_refuses.unwrap_or_else(|| "no longer fits the channel".into())
            ),
            Refusal::ChecksumError => {
                format!("LIN frame 0x{lin:02X} was read with a wrong checksum; a receiving node discards it")
            }
            Refusal::QueueFull => {
                format!("{} frames wait in the gateway's queue already", crate::member::GATEWAY_QUEUE)
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn channels(lin: &str) -> (ChannelConfig, ChannelConfig) {
        #[derive(Deserialize)]
        struct File {
            channel: Vec<ChannelConfig>,
        }
        let text = format!(
            "[[channel]]\nname = \"can\"\n[[channel]]\nname = \"lin\"\nprotocol = \"lin\"\nbitrate = 19200\n{lin}"
        );
        let mut file: File = toml::from_str(&text).unwrap();
        let lin = file.channel.pop().unwrap();
        (file.channel.pop().unwrap(), lin)
    }

    const SCHEDULE: &str = "[channel.lin]\nschedule = [{ id = 0x10, delay_ms = 10 }, { id = 0x20, delay_ms = 10 }]\n\
        frames = [{ name = \"Lamp\", id = 0x20, length = 2, checksum = \"classic\", publishers = [\"BCM\"] }]\n";

    fn gateway(from: &str, to: &str, lin_id: u8, node: Option<&str>) -> GatewayConfig {
        let node = node.map(str::to_owned);
        GatewayConfig { from: from.into(), to: to.into(), can_id: 0x120, extended: false, lin_id, node }
    }

    #[test]
    fn a_can_frame_becomes_the_response_with_the_lin_frames_length_and_checksum_model() {
        let (can, lin) = channels(SCHEDULE);
        let mapping = Mapping::new(&gateway("can", "lin", 0x20, Some("BCM")), &can, &lin).unwrap();
        let frame = Frame::can(0x120, false, &[1, 2]).unwrap();
        assert!(mapping.matches(&frame));
        assert!(!mapping.matches(&Frame::can(0x120, true, &[1, 2]).unwrap()), "an extended 0x120 is another frame");
        let response = mapping.map(&frame).unwrap();
        assert_eq!(response, Frame::lin(0x20, Checksum::Classic, &[1, 2]).unwrap());
        let long = Frame::can(0x120, false, &[1, 2, 3]).unwrap();
        assert_eq!(mapping.map(&long), Err(Refusal::Length));
        assert_eq!(
            mapping.explain(Refusal::Length, &long, None),
            "CAN frame 0x120 has 3 data bytes; LIN frame 0x20 has 2"
        );
        let remote = Frame::remote(0x120, false, 2).unwrap();
        assert_eq!(mapping.map(&remote), Err(Refusal::Length));
    }

    #[test]
    fn a_lin_response_becomes_a_can_frame_and_one_read_with_a_wrong_checksum_is_refused() {
        let (can, lin) = channels(SCHEDULE);
        let mapping = Mapping::new(&gateway("lin", "can", 0x10, None), &lin, &can).unwrap();
        let response = Frame::lin(0x10, Checksum::Enhanced, &[7, 8, 9]).unwrap();
        assert!(mapping.matches(&response));
        assert!(!mapping.matches(&Frame::lin_no_response(0x10).unwrap()), "a header alone carries nothing");
        assert_eq!(mapping.map(&response), Ok(Frame::can(0x120, false, &[7, 8, 9]).unwrap()));
        let bad = Frame::lin_with_checksum(0x10, Checksum::Enhanced, &[7], 0).unwrap();
        assert_eq!(mapping.map(&bad), Err(Refusal::ChecksumError));
    }

    #[test]
    fn mappings_the_channels_cannot_carry_are_configuration_errors_naming_the_key() {
        let (can, lin) = channels(SCHEDULE);
        let error =
            |g: GatewayConfig, from: &ChannelConfig, to: &ChannelConfig| Mapping::new(&g, from, to).unwrap_err();
        let (key, text) = error(gateway("can", "lin", 0x15, None), &can, &lin);
        assert_eq!(key, "lin_id");
        assert!(text.contains("0x15, which this channel's schedule table never sends (0x10, 0x20)"), "{text}");
        let (key, text) = error(gateway("can", "lin", 0x20, None), &can, &lin);
        assert_eq!((key, text.contains("node = \"BCM\"")), ("node", true), "{text}");
        let (key, text) = error(gateway("can", "lin", 0x20, Some("door")), &can, &lin);
        assert_eq!((key, text.contains("its publishers: BCM")), ("node", true), "{text}");
        let (key, _) = error(gateway("lin", "can", 0x10, Some("BCM")), &lin, &can);
        assert_eq!(key, "node");
        let (key, text) = error(gateway("can", "can", 0x10, None), &can, &can);
        assert_eq!((key, text.contains("[[route]]")), ("to", true), "{text}");
        let mut wide = gateway("can", "lin", 0x10, None);
        wide.can_id = 0x800;
        let (key, text) = error(wide, &can, &lin);
        assert_eq!((key, text.contains("extended = true")), ("can_id", true), "{text}");
        let (key, _) = error(gateway("can", "lin", 0x40, None), &can, &lin);
        assert_eq!(key, "lin_id");
        let mut tdma = can.clone();
        tdma.arbitration = Arbitration::Tdma;
        let (key, text) = error(gateway("lin", "can", 0x10, None), &lin, &tdma);
        assert_eq!((key, text.contains("arbitration = \"tdma\"")), ("to", true), "{text}");
    }
}
