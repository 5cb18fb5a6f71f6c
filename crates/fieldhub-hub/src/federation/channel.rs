//! A federated channel as its federation threads see it
//! ([`FederatedChannel`]), the Zenoh keys it uses ([`key`], the owner's
//! liveliness token) and how often waiting threads look up ([`LOOK`]). Every
//! federation module may use it; it imports none of them.

use std::sync::Arc;
use std::time::Duration;

use crossbeam_channel::Receiver;
use fieldhub_bus::federation::{ChannelStatus, Uplinked};

use crate::config::Role;

/// How often waiting federation threads look whether the hub is stopping.
pub const LOOK: Duration = Duration::from_millis(100);

/// The liveliness token an owner of `channel` declares: its federation
/// name and epoch in the key, so relays and other candidates know who
/// sequences the channel under which epoch.
pub fn owner_token(channel: &str, hub: &str, epoch: u64) -> String {
    format!("fieldhub/{channel}/owner/{hub}/{epoch}")
}

/// The hub and epoch of an owner's liveliness token, `None` for another key.
pub fn parse_owner_token(channel: &str, token: &str) -> Option<(String, u64)> {
    let rest = token.strip_prefix(&format!("fieldhub/{channel}/owner/"))?;
    let (hub, epoch) = rest.split_once('/')?;
    Some((hub.to_owned(), epoch.parse().ok()?))
}

/// The key of `what` for channel `channel`.
pub fn key(channel: &str, what: &str) -> String {
    format!("fieldhub/{channel}/{what}")
}

/// One federated channel of this hub.
pub struct FederatedChannel {
    pub id: u16,
    pub name: String,
    pub role: Role,
    /// The bus's relayed frames, for a relay.
    pub uplink: Option<Receiver<Uplinked>>,
    pub status: Arc<ChannelStatus>,
    /// The channel's exact bit timing, for events' end times.
    pub bitrate: u32,
    pub data_bitrate: u32,
    pub canfd: bool,
}

#[cfg(test)]
mod tests {
    use super::{owner_token, parse_owner_token};

    #[test]
    fn an_owner_token_names_its_hub_and_epoch_and_nothing_else_parses() {
        let token = owner_token("body", "rack2", 7);
        assert_eq!(token, "fieldhub/body/owner/rack2/7");
        assert_eq!(parse_owner_token("body", &token), Some(("rack2".into(), 7)));
        assert_eq!(parse_owner_token("chassis", &token), None, "another channel's token");
        assert_eq!(parse_owner_token("body", "fieldhub/body/owner"), None, "the old key without hub and epoch");
        assert_eq!(parse_owner_token("body", "fieldhub/body/owner/rack2/x"), None);
    }
}
