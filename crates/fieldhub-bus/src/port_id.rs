//! Hub-wide port ids: the one number that names a sender or receiver across
//! every channel of a hub — in frames' `sender`, `STATS`, the control API,
//! fault rules, the web monitor — and what kind of port each one is.
//!
//! | kind | ids | made by |
//! |---|---|---|
//! | [`PortKind::Client`] | `1 ..= 0xFFFC_FFFF` | [`PortId::client`]: 1, 2, 3… as clients open ports |
//! | [`PortKind::Remote`] | `0xFFFD_0000 ..= 0xFFFD_FFFF` | [`PortId::REMOTE`], its first id: every port of the other hubs of a federation |
//! | [`PortKind::Send`] | `0xFFFE_0000 ..= 0xFFFE_FFFF` | [`PortId::send`]: `0xFFFE_0000 +` channel id |
//! | [`PortKind::Gateway`] | `0xFFFF_0000 ..= 0xFFFF_FFFF` | [`PortId::gateway`]: `0xFFFF_0000 +` route slot |
//!
//! 0 is no port: the sender of the bus's own error frames (`FrameMeta::sender`
//! 0 on the wire), which the bus holds as `None`.
//!
//! The ranges are disjoint, so an id alone tells its kind ([`PortId::kind`])
//! and the web monitor need not copy these numbers. Each kind of the hub's
//! own has a block of 65,536 ids indexed by a `u16` (channel ids and route
//! slots are `u16`), so a constructor cannot leave its block; client ids stop
//! below the blocks ([`PortId::client`] refuses beyond), so a hub that opens
//! ports for ever never counts into them. The remote sender has a block of
//! its own rather than sharing one: when it was `0xFFFE_0000`, channel 0's
//! send port, the monitor labelled other hubs' frames as the page's.
//!
//! Where an id leaves for a wire — `FrameMeta::sender`, `PORT_OPENED`,
//! `STATS`, the federation's events — it is its number (`u32::from`); a
//! number read back from one becomes an id again with [`PortId::from_wire`].
//! The numbers of every kind are those the hub gave out before there was a
//! `PortId`, except the remote sender's.

use std::fmt;

use serde::Serialize;

const REMOTE_FIRST: u32 = 0xFFFD_0000;
const SEND_FIRST: u32 = 0xFFFE_0000;
const GATEWAY_FIRST: u32 = 0xFFFF_0000;

/// What a port is, told by its id's range.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum PortKind {
    /// A client's port (`OPEN_PORT`).
    Client,
    /// The sending end of a gateway route (a bridge in the web monitor).
    Gateway,
    /// A channel's send port: frames sent from the control API.
    Send,
    /// The ports of the other hubs of a federation, on a relayed channel.
    Remote,
}

/// A hub-wide port id.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize)]
#[serde(transparent)]
pub struct PortId(u32);

impl PortId {
    /// The sender of frames committed by other hubs' ports on a relayed channel.
    pub const REMOTE: Self = Self(REMOTE_FIRST);

    /// The `n`th client port the hub opens, counting from 1; `None` once the
    /// client range is used up.
    pub fn client(n: u32) -> Option<Self> {
        (1..REMOTE_FIRST).contains(&n).then_some(Self(n))
    }

    /// Channel `channel`'s send port.
    pub fn send(channel: u16) -> Self {
        Self(SEND_FIRST + u32::from(channel))
    }

    /// The sending end of the gateway route in `slot`.
    pub fn gateway(slot: u16) -> Self {
        Self(GATEWAY_FIRST + u32::from(slot))
    }

    /// The id a wire's number names; `None` for 0, which names no port.
    pub fn from_wire(id: u32) -> Option<Self> {
        (id != 0).then_some(Self(id))
    }

    /// Which kind of port this is.
    pub fn kind(self) -> PortKind {
        match self.0 {
            GATEWAY_FIRST.. => PortKind::Gateway,
            SEND_FIRST.. => PortKind::Send,
            REMOTE_FIRST.. => PortKind::Remote,
            _ => PortKind::Client,
        }
    }
}

impl From<PortId> for u32 {
    fn from(id: PortId) -> u32 {
        id.0
    }
}

impl fmt::Display for PortId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        self.0.fmt(f)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_ranges_are_disjoint_and_each_end_is_its_own_kind() {
        let last_client = PortId::client(REMOTE_FIRST - 1).unwrap();
        // In ascending order: each range ends below the next one's start.
        let ranges = [
            (PortKind::Client, PortId::client(1).unwrap(), last_client),
            (PortKind::Remote, PortId::REMOTE, PortId::from_wire(SEND_FIRST - 1).unwrap()),
            (PortKind::Send, PortId::send(0), PortId::send(u16::MAX)),
            (PortKind::Gateway, PortId::gateway(0), PortId::gateway(u16::MAX)),
        ];
        for (kind, first, last) in ranges {
            assert_eq!((first.kind(), last.kind()), (kind, kind), "{kind:?}: {first}..={last}");
            assert!(first <= last);
        }
        for pair in ranges.windows(2) {
            let ((_, _, last), (_, next_first, _)) = (pair[0], pair[1]);
            assert_eq!(u32::from(last) + 1, u32::from(next_first), "no overlap and no gap");
        }
        assert_eq!(u32::from(PortId::gateway(u16::MAX)), u32::MAX, "the ranges fill every id but 0");
        assert_eq!(PortId::client(0), None, "0 is no port");
        assert_eq!(PortId::client(REMOTE_FIRST), None, "client ids never reach the remote block");
        assert_eq!(PortId::from_wire(0), None);
    }

    #[test]
    fn the_numbers_are_those_on_the_wire() {
        assert_eq!(u32::from(PortId::send(3)), 0xFFFE_0003);
        assert_eq!(u32::from(PortId::gateway(2)), 0xFFFF_0002);
        assert_ne!(PortId::REMOTE, PortId::send(0), "frames of other hubs are not the send port's");
        assert_eq!(PortId::from_wire(7), PortId::client(7));
        assert_eq!(serde_json::to_value(PortId::send(1)).unwrap(), 0xFFFE_0001u32);
        assert_eq!(serde_json::to_value(PortKind::Gateway).unwrap(), "gateway");
        assert_eq!(PortId::client(42).unwrap().to_string(), "42");
    }
}
