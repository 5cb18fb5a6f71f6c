//! Federation: hubs on several machines serving the same channels over
//! Eclipse Zenoh (`[federation]`, `docs/federation.md`, issue 20). The
//! Zenoh session runs inside the hub (peer mode, no router daemon,
//! multicast scouting off: peers are the configured endpoints).
//!
//! Each federated channel has one **owner** hub, which sequences it like
//! any local channel (`owner.rs`: a lossless port on it sees every frame in
//! the channel's order and publishes each as a committed event; each relay
//! port's frames enter through a transmit-only port of their own,
//! `origin_ports.rs`, so they arbitrate as a local port's), and
//! **relays** (`relay.rs`), whose clients' frames go to the owner and whose
//! channel transmits only the owner's committed events (`bus/federated.rs`).
//!
//! Keys, per channel `C`: `fieldhub/C/events` (the owner's events),
//! `fieldhub/C/tx` (relays' transmit requests), `fieldhub/C/history` (the
//! owner's queryable over its recent events), `fieldhub/C/owner/HUB/EPOCH`
//! (the owner's liveliness token).
//!
//! Invariants:
//! - One total order: only the owner sequences; an event's `seq` is +1 per
//!   event within an epoch and relays apply events strictly in `seq` order.
//! - Nothing is lost silently: every Zenoh publication here is Reliable (the
//!   default, over the TCP links the hub is built with) with
//!   `CongestionControl::Block`; a relay that sees a gap fetches it from the
//!   owner's history and, if it cannot, reports the channel desynchronised
//!   to its clients and counts it.
//! - A relay's sender gets its transmit confirmation (credit back, echo)
//!   only when the owner's event for its frame is applied.
//! - Ownership is configured (`[[channel]] owner`, with `[federation]
//!   epoch`), not elected; the owner's liveliness token tells relays that it
//!   is there, and its loss is reported to their clients; a `standby` takes
//!   over with a higher epoch (`handover.rs`).

pub mod event;
#[cfg(feature = "federation")]
mod handover;
#[cfg(feature = "federation")]
mod link;
#[cfg(feature = "federation")]
mod origin_ports;
#[cfg(feature = "federation")]
mod owner;
#[cfg(feature = "federation")]
mod relay;
#[cfg(not(feature = "federation"))]
mod unbuilt;

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use crossbeam_channel::Sender;
use fieldhub_proto::stats::FederationStats;
use fieldhub_proto::Frame;

#[cfg(feature = "federation")]
pub use link::Federation;
#[cfg(feature = "federation")]
use link::{key, owner_token, parse_owner_token, FederatedChannel, LOOK};
#[cfg(not(feature = "federation"))]
pub use unbuilt::Federation;

/// A relayed channel's frame on its way from the bus to the owner hub.
#[derive(Debug)]
pub struct Uplinked {
    pub channel: u16,
    /// The sending port (hub-wide id) and the bus's arrival number of the
    /// frame: what the committed event names to find it again.
    pub port_id: u32,
    pub arrival: u64,
    pub frame: Frame,
    /// The relay's resend round it was handed over in
    /// ([`ChannelStatus::round`]): frames of an older round are sent again
    /// in the newer one, so the uplink skips them.
    pub round: u64,
}

/// What the bus holds of one federated channel ([`crate::bus::Bus::federate`]).
pub struct BusLink {
    pub channel: u16,
    /// Where a relayed channel's frames go; `None` on the owner.
    pub uplink: Option<Sender<Uplinked>>,
    pub status: Arc<ChannelStatus>,
}

/// A federated channel's figures, written by its federation threads and
/// read by the bus for `STATS`.
pub struct ChannelStatus {
    /// The hub sequencing the channel now, and whether it is another one:
    /// both change when a standby takes over or an owner steps down.
    owner: std::sync::Mutex<String>,
    relay: std::sync::atomic::AtomicBool,
    pub epoch: AtomicU64,
    pub last_seq: AtomicU64,
    pub gaps_recovered: AtomicU64,
    pub desyncs: AtomicU64,
    pub stale: AtomicU64,
    /// Written by the bus alone: the resend round its relayed frames are
    /// handed over in (`Inbound::FederationResend`).
    pub round: AtomicU64,
}

impl ChannelStatus {
    /// The figures now, each read on its own (they need not agree exactly).
    pub fn snapshot(&self) -> FederationStats {
        let read = |value: &AtomicU64| value.load(Ordering::Relaxed);
        FederationStats {
            role: if self.relay.load(Ordering::Relaxed) { "relay" } else { "owner" }.into(),
            owner: self.owner.lock().map(|o| o.clone()).unwrap_or_default(),
            epoch: read(&self.epoch),
            last_seq: read(&self.last_seq),
            gaps_recovered: read(&self.gaps_recovered),
            desyncs: read(&self.desyncs),
            stale: read(&self.stale),
        }
    }
}

/// Why the federation could not start.
#[derive(Debug, thiserror::Error)]
pub enum FederationError {
    #[error("federation: cannot configure Zenoh ({key}): {error}")]
    Config { key: &'static str, error: String },
    #[error("federation: cannot open the Zenoh session (listen {listen:?}, connect {connect:?}): {error}")]
    Open { listen: Vec<String>, connect: Vec<String>, error: String },
    #[error(
        "federation: the token file {} was not read; a hub reads it when it starts (`fieldhub hub` does)",
        path.display()
    )]
    TokenNotRead { path: std::path::PathBuf },
    #[error("federation: the token may not contain line breaks or start or end with spaces")]
    BadToken,
    #[error("federation: cannot write the token's dictionary for Zenoh: {error}")]
    Dictionary { error: std::io::Error },
    #[error("federation: cannot start a thread for channel '{channel}': {error}")]
    Thread { channel: String, error: std::io::Error },
    #[error(
        "federation: this fieldhub was built without federation (cargo feature `federation` of fieldhub-hub); \
         remove [federation] from the configuration or use a build with it, such as `make install`"
    )]
    NotBuilt,
}
