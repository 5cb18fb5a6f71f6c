//! What the hub tells a client about frames that did not take the usual
//! way (`spec/protocol.md` 3.8a, 3.8b and 6.9): [`TxDropped`], frames a port
//! sent that will never be on the bus, with the [`DropReason`]; and
//! [`ChannelState`], a change of its channel that a receiver must know to
//! trust what it holds (the federation's owner gone and back, a gap).
//!
//! Both are reports, never answers to a request: like `RX_OVERFLOW` they
//! come before the `PONG` of a later `PING`, so a client that flushed has
//! been told of everything that happened to its frames before it.

/// Why frames a port sent are off the bus. Receivers MUST accept values
/// not listed here ([`DropReason::from_wire`] gives `None`) and report them
/// as unknown.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[repr(u16)]
pub enum DropReason {
    /// The port's controller went bus-off (its transmit queue is flushed,
    /// as a CAN controller's is) or was bus-off when the frame came.
    BusOff = 1,
    /// A fault rule dropped the frame before it reached the bus.
    FaultRule = 2,
    /// A relay's frame that the federation's owner never committed: the
    /// owner died or a newer owner took the channel over first.
    OwnerLost = 3,
    /// The port's cable is pulled (`ctl unplug`) or the port was moved to
    /// another channel (`ctl plug`) while the frame waited.
    Unplugged = 4,
    /// Virtual time: the participant already had the most frames a
    /// participant may have waiting in the hub (`PARTICIPANT_CREDITS`), so
    /// the hub refused the frame as it came instead of letting the send
    /// wait for bus time, which waits for the participant's step.
    QueueFull = 5,
}

impl DropReason {
    /// The reason for a wire value; unknown values map to `None`.
    pub fn from_wire(value: u16) -> Option<Self> {
        Some(match value {
            1 => Self::BusOff,
            2 => Self::FaultRule,
            3 => Self::OwnerLost,
            4 => Self::Unplugged,
            5 => Self::QueueFull,
            _ => return None,
        })
    }

    /// Stable snake-case name, as in the spec, the vectors and `STATS`.
    pub fn name(self) -> &'static str {
        match self {
            Self::BusOff => "bus_off",
            Self::FaultRule => "fault_rule",
            Self::OwnerLost => "owner_lost",
            Self::Unplugged => "unplugged",
            Self::QueueFull => "queue_full",
        }
    }

    /// What happened, in words for a person: the end of "N frame(s) …".
    pub fn describe(self) -> &'static str {
        match self {
            Self::BusOff => "dropped: the port's controller is bus-off (fieldhub stats shows its TEC; it recovers after 128 x 11 recessive bits when the channel auto-recovers)",
            Self::FaultRule => "dropped by a fault rule of the channel (fieldhub ctl faults lists them)",
            Self::OwnerLost => "lost: the federation's owner hub went away before it committed them; they are not on the bus",
            Self::Unplugged => "dropped: the port is unplugged or was moved to another channel (fieldhub ctl plug connects it)",
            Self::QueueFull => "refused: 16384 frames of this participant already waited in the hub, the most it may queue in virtual time; its channel carries less than it sends (send less per step, or check tx_queue_full before sending)",
        }
    }

    /// Every reason, in wire order.
    pub const ALL: [Self; 5] = [Self::BusOff, Self::FaultRule, Self::OwnerLost, Self::Unplugged, Self::QueueFull];

    /// Drop counts in the order of [`DropReason::ALL`] as `STATS` and the
    /// control API show them: by reason name, only reasons that dropped any.
    pub fn counts_by_name(counts: [u64; Self::ALL.len()]) -> std::collections::BTreeMap<String, u64> {
        Self::ALL.iter().zip(counts).filter(|&(_, n)| n > 0).map(|(reason, n)| (reason.name().to_owned(), n)).collect()
    }
}

/// `TX_DROPPED`: `dropped` frames `port` sent are off the bus for `reason`,
/// counted since the previous report of that reason for that port.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct TxDropped {
    pub port: u16,
    /// A [`DropReason`] value; others are possible from newer hubs.
    pub reason: u16,
    pub dropped: u32,
}

/// What changed about a receiving port's channel. Unknown values are
/// possible from newer hubs ([`ChannelCondition::from_wire`] gives `None`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[repr(u8)]
pub enum ChannelCondition {
    /// The channel's sequencer (a federation's owner hub) is unreachable:
    /// frames sent now wait; nothing is lost yet.
    Waiting = 1,
    /// The channel is sequenced again (the owner is back, or a new one).
    Live = 2,
    /// This hub's sequence of the channel lacks `missed` frames that the
    /// other hubs of the federation carried: what the port holds differs
    /// from theirs from here on.
    Gap = 3,
    /// A LIN channel went to sleep (spec 4.1.1): after the go-to-sleep
    /// command or its bus-idle timeout; the master sends no headers until a
    /// wake-up.
    Asleep = 4,
    /// A sleeping LIN channel was woken by a wake-up pulse; the master's
    /// schedule resumes after its wake-up delay.
    Awake = 5,
}

impl ChannelCondition {
    /// The condition for a wire value; unknown values map to `None`.
    pub fn from_wire(value: u8) -> Option<Self> {
        Some(match value {
            1 => Self::Waiting,
            2 => Self::Live,
            3 => Self::Gap,
            4 => Self::Asleep,
            5 => Self::Awake,
            _ => return None,
        })
    }

    /// Stable snake-case name, as in the spec and the vectors.
    pub fn name(self) -> &'static str {
        match self {
            Self::Waiting => "waiting",
            Self::Live => "live",
            Self::Gap => "gap",
            Self::Asleep => "asleep",
            Self::Awake => "awake",
        }
    }
}

/// `CHANNEL_STATE`: the channel of receiving port `port` changed
/// `condition`; `missed` counts the frames of a [`ChannelCondition::Gap`]
/// (0 otherwise); `text` says what happened and what to do.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ChannelState<'a> {
    pub port: u16,
    /// A [`ChannelCondition`] value.
    pub condition: u8,
    pub missed: u32,
    pub text: &'a str,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_reason_and_condition_survives_its_wire_value() {
        for reason in DropReason::ALL {
            assert_eq!(DropReason::from_wire(reason as u16), Some(reason));
        }
        assert_eq!(DropReason::from_wire(0), None);
        assert_eq!(DropReason::from_wire(6), None, "the first value no reason has");
        for condition in [
            ChannelCondition::Waiting,
            ChannelCondition::Live,
            ChannelCondition::Gap,
            ChannelCondition::Asleep,
            ChannelCondition::Awake,
        ] {
            assert_eq!(ChannelCondition::from_wire(condition as u8), Some(condition));
        }
        assert_eq!(ChannelCondition::from_wire(0), None);
    }
}
