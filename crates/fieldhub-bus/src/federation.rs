//! What the bus holds of a federated channel (the hub's `federation/` layer
//! runs the links; this is the bus side's vocabulary): the frames a relayed
//! channel hands to its uplink ([`Uplinked`]), the link the bus is given for
//! a channel ([`BusLink`]) and the channel's figures ([`ChannelStatus`]),
//! written by the federation threads and read by the bus for `STATS`, with
//! what a port opened on the channel is told first (it waits for its owner),
//! which `STATS` reports too (the web monitor shows the owner unreachable).

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use crossbeam_channel::Sender;
use fieldhub_proto::stats::FederationStats;
use fieldhub_proto::Frame;

/// Frames a client with a port on a relayed channel may have waiting in the
/// bus ([`TX_CREDITS`] elsewhere). A relayed frame holds its credit until
/// the owner's committed event for it comes back, a round trip through both
/// hubs' threads and the link, so the window must cover what a flood has in
/// flight over that round trip, or the sender waits with the cores idle:
/// a flood from a relay to its owner on the 2-core machine carried
/// 355–418 k frames/s with 256, 539–585 k with 1,024 and 689–795 k with
/// 4,096, no more with 16,384 (docs/performance.md, "The federation
/// flood's window"). A sender on a slow channel then waits longer for
/// credit than on a local one: 4,096 frames at 500 kbit/s are about a
/// second of the bus.
///
/// [`TX_CREDITS`]: crate::credit::TX_CREDITS
pub const RELAY_CREDITS: u32 = 16 * crate::credit::TX_CREDITS;

/// A relayed channel's frame on its way from the bus to the owner hub.
#[derive(Debug)]
pub struct Uplinked {
    pub channel: u16,
    /// The sending port's hub-wide id, as the number the federation's events
    /// carry, and the bus's arrival number of the frame: what the committed
    /// event names to find it again.
    pub port_id: u32,
    pub arrival: u64,
    pub frame: Frame,
    /// The relay's resend round it was handed over in
    /// ([`ChannelStatus::round`]): frames of an older round are sent again
    /// in the newer one, so the uplink skips them.
    pub round: u64,
}

/// What the bus holds of one federated channel ([`crate::Bus::federate`]).
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
    owner: Mutex<String>,
    relay: AtomicBool,
    pub epoch: AtomicU64,
    pub last_seq: AtomicU64,
    pub gaps_recovered: AtomicU64,
    pub desyncs: AtomicU64,
    pub stale: AtomicU64,
    /// Written by the bus alone: the resend round its relayed frames are
    /// handed over in (`Inbound::FederationResend`).
    pub round: AtomicU64,
    /// Written by the bus alone: while the channel waits for its owner, what
    /// its clients were told (`CHANNEL_STATE` waiting), for a port opened
    /// meanwhile; `None` while it is live.
    pub waiting: Mutex<Option<String>>,
}

impl ChannelStatus {
    /// A channel sequenced by `owner`, relayed here when `relay`.
    pub fn new(owner: String, relay: bool) -> Self {
        let zero = || AtomicU64::new(0);
        Self {
            owner: Mutex::new(owner),
            relay: relay.into(),
            epoch: zero(),
            last_seq: zero(),
            gaps_recovered: zero(),
            desyncs: zero(),
            stale: zero(),
            round: zero(),
            waiting: Mutex::new(None),
        }
    }

    /// Who sequences the channel from now on.
    pub fn set_owner(&self, owner: &str, relay: bool) {
        if let Ok(mut current) = self.owner.lock() {
            owner.clone_into(&mut current);
        }
        self.relay.store(relay, Ordering::Relaxed);
    }

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
            waiting: self.waiting.lock().ok().and_then(|w| w.clone()),
        }
    }
}
