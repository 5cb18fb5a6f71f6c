//! A federated channel as its federation threads see it
//! ([`FederatedChannel`]), the Zenoh keys it uses ([`key`], the owner's
//! liveliness token) and how often waiting threads look up ([`LOOK`]). Every
//! federation module may use it; it imports only the events' vocabulary.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use crossbeam_channel::Receiver;
use fieldhub_bus::federation::{ChannelStatus, Uplinked};

use super::event::Term;
use crate::config::Role;

/// How often waiting federation threads look whether the hub is stopping.
pub const LOOK: Duration = Duration::from_millis(100);

/// The liveliness token an owner of `channel` declares: its federation
/// name and term in the key, so relays and other candidates know who
/// sequences the channel under which term.
pub fn owner_token(channel: &str, hub: &str, term: Term) -> String {
    format!("fieldhub/{channel}/owner/{hub}/{}/{}", term.epoch, term.incarnation)
}

/// The hub and term of an owner's liveliness token, `None` for another key.
pub fn parse_owner_token(channel: &str, token: &str) -> Option<(String, Term)> {
    let rest = token.strip_prefix(&format!("fieldhub/{channel}/owner/"))?;
    let mut parts = rest.split('/');
    let (hub, epoch, incarnation) = (parts.next()?, parts.next()?, parts.next()?);
    if parts.next().is_some() {
        return None;
    }
    Some((hub.to_owned(), Term { epoch: epoch.parse().ok()?, incarnation: incarnation.parse().ok()? }))
}

/// The key of `what` for channel `channel`.
pub fn key(channel: &str, what: &str) -> String {
    format!("fieldhub/{channel}/{what}")
}

/// What is wrong with this hub's federation links, as the link watch found
/// out (`link.rs`: a peer refused the federation token), for the relays to
/// tell the clients that wait for their owner; read by their threads.
#[derive(Default)]
pub struct LinkTrouble {
    text: Mutex<Option<String>>,
    /// How often `text` changed, so a reader sees a change without the lock.
    changes: AtomicU64,
}

impl LinkTrouble {
    /// What is wrong now (`None`: nothing known).
    pub fn set(&self, text: Option<String>) {
        let Ok(mut current) = self.text.lock() else { return };
        if *current != text {
            *current = text;
            self.changes.fetch_add(1, Ordering::Release);
        }
    }

    /// How often it changed.
    pub fn changes(&self) -> u64 {
        // SYNC POINT with `set`'s Release increment.
        self.changes.load(Ordering::Acquire)
    }

    /// What is wrong now.
    pub fn text(&self) -> Option<String> {
        self.text.lock().ok().and_then(|t| t.clone())
    }
}

/// One federated channel of this hub.
pub struct FederatedChannel {
    pub id: u16,
    pub name: String,
    pub role: Role,
    /// The bus's relayed frames, for a relay.
    pub uplink: Option<Receiver<Uplinked>>,
    pub status: Arc<ChannelStatus>,
    /// The channel's exact bit timing (its bitrates and raw frames' model),
    /// for events' end times.
    pub rates: fieldhub_bus::channel::Rates,
    /// The channel carries CAN FD frames (and, on `canxl`, CAN XL ones): the
    /// bridge's ports open with `FD`.
    pub canfd: bool,
}

#[cfg(test)]
mod tests {
    use super::{owner_token, parse_owner_token, Term};

    #[test]
    fn an_owner_token_names_its_hub_and_term_and_nothing_else_parses() {
        let term = Term { epoch: 7, incarnation: 1_700_000_000_123 };
        let token = owner_token("body", "rack2", term);
        assert_eq!(token, "fieldhub/body/owner/rack2/7/1700000000123");
        assert_eq!(parse_owner_token("body", &token), Some(("rack2".into(), term)));
        assert_eq!(parse_owner_token("chassis", &token), None, "another channel's token");
        assert_eq!(parse_owner_token("body", "fieldhub/body/owner"), None, "the old key without hub and epoch");
        assert_eq!(parse_owner_token("body", "fieldhub/body/owner/rack2/7"), None, "no incarnation");
        assert_eq!(parse_owner_token("body", "fieldhub/body/owner/rack2/x/1"), None);
        assert_eq!(parse_owner_token("body", &format!("{token}/9")), None);
    }
}
