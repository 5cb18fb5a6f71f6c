//! One federated channel's life on this hub, through its changes of hands:
//! an owner runs [`OwnerBridge`] until the hub stops or another owner
//! outranks it (a newer term), then relays the channel from that owner;
//! a standby relays until its owner's liveliness token goes, then takes the
//! channel over with an epoch above every one it applied. Both switches
//! tell the bus first ([`Inbound::FederationRole`]), so the bus never
//! arbitrates a channel it relays nor relays one it sequences, then the
//! channel's clients (`CHANNEL_STATE`).
//!
//! The channel's [`Ledger`] outlives the roles, and so does the queryable
//! that answers other hubs' history queries from it (`fieldhub/C/history`):
//! what this hub applied as a relay is still there to fetch after it took
//! the channel over, and what it sequenced after it stepped down.
//!
//! Invariants:
//! - No split brain on the relays: they refuse events of an older term
//!   than one they applied, and an outranked owner stops publishing as
//!   soon as it sees the newer owner's token.
//! - A plain relay never takes over; owners and standbys may, again and
//!   again, each time with a higher epoch than any they saw.

use std::sync::{Arc, Mutex};

use fieldhub_proto::fate::ChannelCondition;
use tracing::{error, info, warn};
use zenoh::Wait;

use super::channel::{key, FederatedChannel, LinkTrouble};
use super::event::HistoryQuery;
use super::ledger::Ledger;
use super::owner::{Outranked, OwnerBridge};
use super::relay::{RelayBridge, TakeOver};
use crate::config::FederationConfig;
use crate::session::Sessions;
use fieldhub_bus::inbox::Inbound;

/// What a channel does next on this hub.
pub(super) enum Next {
    Own { epoch: u64, committed: super::relay::Committed },
    Relay { owner: String, standby: bool },
}

/// Serve `channel` from `next` on, switching roles as told, until the hub stops.
pub(super) fn serve(
    session: &zenoh::Session,
    (config, me): (&FederationConfig, &str),
    mut channel: FederatedChannel,
    mut next: Next,
    sessions: &Arc<Sessions>,
    trouble: &Arc<LinkTrouble>,
) {
    let ledger = Arc::new(Mutex::new(Ledger::new(config.history as usize)));
    let answering = {
        let (ledger, reply_key, name) = (Arc::clone(&ledger), key(&channel.name, "history"), channel.name.clone());
        session
            .declare_queryable(key(&channel.name, "history"))
            .callback(move |query| {
                let parameters = query.parameters();
                let Some(asked) = HistoryQuery::parse(|k| parameters.get(k)) else {
                    return warn!(channel = %name, "ignoring a history query without a term and range: {parameters}");
                };
                let mut bytes = Vec::new();
                if let Ok(ledger) = ledger.lock() {
                    ledger.reply(&asked).encode(&mut bytes);
                }
                if let Err(e) = query.reply(&reply_key, bytes).wait() {
                    warn!(key = %reply_key, "cannot answer a history query: {e}");
                }
            })
            .wait()
    };
    let _answering = match answering {
        Ok(queryable) => queryable,
        Err(e) => return error!(channel = %channel.name, "cannot answer the other hubs' history queries: {e}"),
    };
    loop {
        next = match next {
            Next::Own { epoch, committed } => {
                let owner = OwnerBridge::new(session.clone(), me.to_owned(), channel, epoch, Arc::clone(&ledger))
                    .after(committed);
                let Some(Outranked { channel: outranked, by, term }) = owner.run(sessions) else { return };
                channel = outranked;
                let (to_owner, from_bus) = crossbeam_channel::unbounded();
                channel.uplink = Some(from_bus);
                channel.status.set_owner(&by, true);
                let text = format!(
                    "changed hands: hub '{by}' sequences it with {term}, newer than this hub's; this hub relays \
                     it from now on (frames it sequenced meanwhile reached no other hub)"
                );
                error!(channel = %channel.name, "federation: the channel {text}");
                let id = channel.id;
                let state =
                    Inbound::FederationState { channel: id, condition: ChannelCondition::Live, missed: 0, text };
                if sessions.inbox.send(Inbound::FederationRole { channel: id, uplink: Some(to_owner) }).is_err()
                    || sessions.inbox.send(state).is_err()
                {
                    return;
                }
                Next::Relay { owner: by, standby: true }
            }
            Next::Relay { owner, standby } => {
                let name = channel.name.clone();
                let relay = RelayBridge::new(
                    session.clone(),
                    channel,
                    (owner, standby),
                    Arc::clone(&ledger),
                    Arc::clone(trouble),
                );
                let (uplinker, applier) = match relay.start(sessions) {
                    Ok(Some(threads)) => threads,
                    Ok(None) => return,
                    Err(e) => return error!(channel = %name, "cannot start the relay's threads: {e}"),
                };
                let take_over = applier.join().ok().flatten();
                let Some(TakeOver { channel: taken, seen_epoch, committed }) = take_over else {
                    let _ = uplinker.join();
                    return;
                };
                channel = taken;
                let epoch = seen_epoch.max(config.epoch) + 1;
                channel.status.set_owner(me, false);
                info!(channel = %name, epoch, "federation: this hub takes the channel over");
                // The bus drops the uplink, which ends the uplink thread.
                let id = channel.id;
                if sessions.inbox.send(Inbound::FederationRole { channel: id, uplink: None }).is_err() {
                    return;
                }
                let text = format!("is live: this hub, its standby, took it over with epoch {epoch}");
                let state =
                    Inbound::FederationState { channel: id, condition: ChannelCondition::Live, missed: 0, text };
                if sessions.inbox.send(state).is_err() {
                    return;
                }
                let _ = uplinker.join();
                Next::Own { epoch, committed }
            }
        };
    }
}
