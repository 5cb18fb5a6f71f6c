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
//! Every hub keeps the newest events it sequenced or applied in the
//! channel's ledger (`ledger.rs`) and answers history queries from it
//! (`handover.rs`), so events outlive the owner that published them.
//!
//! Keys, per channel `C`: `fieldhub/C/events` (the owner's events),
//! `fieldhub/C/tx` (relays' transmit requests), `fieldhub/C/history` (every
//! hub's queryable over the events it keeps),
//! `fieldhub/C/owner/HUB/EPOCH/INCARNATION` (the owner's liveliness token).
//!
//! Invariants:
//! - One total order: only the owner sequences; an event's `seq` is +1 per
//!   event within a term (an owner's epoch and incarnation) and relays
//!   apply events strictly in `seq` order, and terms in rising order.
//! - Nothing is lost silently: every Zenoh publication here is Reliable (the
//!   default, over the TCP links the hub is built with) with
//!   `CongestionControl::Block`; a relay that sees a gap fetches it from
//!   every hub's ledger and, if it cannot, reports it to its clients as a
//!   gap (`CHANNEL_STATE`) and counts it. A term ends on every relay with
//!   the events any of them applied, or with the gap reported.
//! - A relay's sender gets its transmit confirmation (credit back, echo)
//!   only when the owner's event for its frame is applied; a frame the
//!   owner's bus dropped comes back as an event too, and its sender is told
//!   why (`TX_DROPPED`).
//! - Ownership is configured (`[[channel]] owner`, with `[federation]
//!   epoch`), not elected; the owner's liveliness token tells relays that it
//!   is there, and its loss and return are reported to their clients; a
//!   `standby` takes over with a higher epoch (`handover.rs`).
//! - Every link is authenticated, loopback included: a hub with no
//!   `token_file` uses its user's own token, made owner-only at its first
//!   start (`token.rs`), so another local user's hub cannot link.
//! - A link another hub refuses (a different federation token) is named in
//!   the log with the fix, and the relays' waiting clients are told
//!   (`link.rs`); a hub that only listens names the refusal too
//!   (`refusal.rs`, through the binary's log setup).

#[cfg(feature = "federation")]
mod applier;
#[cfg(feature = "federation")]
mod channel;
mod error;
pub mod event;
#[cfg(test)]
mod event_vectors;
#[cfg(feature = "federation")]
mod forwarder;
#[cfg(feature = "federation")]
mod handover;
#[cfg(feature = "federation")]
mod ledger;
#[cfg(feature = "federation")]
mod link;
#[cfg(feature = "federation")]
mod origin_ports;
#[cfg(feature = "federation")]
mod owner;
mod refusal;
#[cfg(feature = "federation")]
mod relay;
#[cfg(feature = "federation")]
mod token;
#[cfg(not(feature = "federation"))]
mod unbuilt;
#[cfg(feature = "federation")]
mod zenoh_threads;

pub use error::FederationError;
pub use refusal::{RefusalLog, ACCEPT_LOG_TARGET};

#[cfg(feature = "federation")]
pub use link::Federation;
#[cfg(not(feature = "federation"))]
pub use unbuilt::Federation;
