//! What the hub reports about frames and channels outside any request
//! (`spec/protocol.md` 6.9): frames of this client that are off the bus
//! come back from [`crate::Client::flush`] as [`crate::ClientError::Dropped`]
//! and add up in [`crate::Client::tx_dropped`]; changes of a port's channel
//! (a federation's owner gone or back, a gap in the sequence) wait in
//! [`crate::Client::channel_events`].

pub use fieldhub_proto::fate::{ChannelCondition, DropReason};

/// A change of a port's channel, as the hub reported it (`CHANNEL_STATE`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ChannelEvent {
    /// The client's port handle on the channel.
    pub port: u16,
    /// What changed; `None` for a condition this client does not know.
    pub condition: Option<ChannelCondition>,
    /// For [`ChannelCondition::Gap`]: frames this hub's sequence lacks.
    pub missed: u32,
    /// What happened and what to do, from the hub.
    pub text: String,
}

/// Frames off the bus, by reason name, as the reports of
/// [`crate::Client::flush_all`] add up (a reason this client does not know
/// is named by its code).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct DropTally(std::collections::BTreeMap<String, u64>);

impl DropTally {
    /// Count one report: `dropped` frames off the bus for wire reason `reason`.
    pub fn add(&mut self, reason: u16, dropped: u32) {
        let name = DropReason::from_wire(reason).map_or_else(|| format!("reason {reason}"), |r| r.name().to_owned());
        *self.0.entry(name).or_default() += u64::from(dropped);
    }

    /// Frames off the bus, for every reason.
    pub fn total(&self) -> u64 {
        self.0.values().sum()
    }

    /// Whether no frame is off the bus.
    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    /// The counts by reason name.
    pub fn by_reason(&self) -> &std::collections::BTreeMap<String, u64> {
        &self.0
    }
}

/// "3 bus_off, 1 fault_rule".
impl std::fmt::Display for DropTally {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        for (i, (reason, n)) in self.0.iter().enumerate() {
            write!(f, "{}{n} {reason}", if i == 0 { "" } else { ", " })?;
        }
        Ok(())
    }
}
