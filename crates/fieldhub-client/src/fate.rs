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
