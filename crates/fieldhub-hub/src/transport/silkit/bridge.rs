//! What both modes of a SIL Kit bridge share: the configured network
//! ([`SilKitBridge`]: its `[[silkit]]` section, SIL Kit's library, the
//! channel's bit rate), joining it while its registry is away
//! ([`join_retrying`](SilKitBridge::join_retrying)), the bridge's client on
//! the bus ([`attach`](SilKitBridge::attach), [`Attached`]) and the bus's
//! answer to its port ([`wait_until_opened`](SilKitBridge::wait_until_opened)).
//!
//! A leaf of `silkit/`: `participant.rs` and `simulator.rs` import it, it
//! imports neither.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use fieldhub_proto::wire::ChannelFlags;
use fieldhub_silkit::SilKitLibrary;
use tracing::{error, warn};

use crate::config::SilKitConfig;
use crate::session::peer_user::PeerOrigin;
use crate::session::{ClientSlot, Sessions};
use fieldhub_bus::credit::TxCredit;
use fieldhub_bus::outbox::{Notify, Outbound, Outbox, QueueOutbox};

/// How long to wait before joining again when the registry was not there.
pub const JOIN_RETRY: Duration = Duration::from_secs(2);

/// How often waiting threads look whether the bridge is stopping.
const LOOK: Duration = Duration::from_millis(100);

/// One configured SIL Kit network, not joined yet.
pub struct SilKitBridge {
    pub(super) config: SilKitConfig,
    pub(super) library: Arc<SilKitLibrary>,
    /// The channel's nominal bit rate, which SIL Kit controllers' baud rate
    /// requests are held against.
    pub(super) bitrate: u32,
    /// Whether the channel is `timing = "timed"`: a frame is on the bus
    /// only after its bit time, so its answer is not there at once.
    pub(super) timed: bool,
}

/// The bridge's client on the bus.
pub(super) struct Attached {
    pub slot: ClientSlot,
    pub outbox: Arc<QueueOutbox>,
    pub credit: Arc<TxCredit>,
}

impl SilKitBridge {
    /// Admit the bridge to the bus as a client (named `silkit-PARTICIPANT`)
    /// whose hang-up sets `closed`; the thread calling this is the one that
    /// waits for the client's transmit credit. `notify` is how the bus
    /// tells the outbox's consumer that items wait (`None`: a consumer
    /// thread waiting on the outbox itself).
    pub(super) fn attach(
        &self,
        sessions: &Arc<Sessions>,
        kind: &'static str,
        closed: &Arc<AtomicBool>,
        notify: Notify,
    ) -> Option<Attached> {
        let name = self.config.participant_name();
        let peer = format!("silkit:{}/{}", self.config.registry, self.config.network);
        let mut slot = match sessions.admit(kind, peer, PeerOrigin::Operator) {
            Ok(slot) => slot,
            Err(violation) => {
                error!(participant = %name, "the hub cannot attach the SIL Kit bridge: {}", violation.text);
                return None;
            }
        };
        slot.name_as(format!("silkit-{name}"));
        if self.config.synchronized {
            slot.synchronize();
        }
        let outbox = QueueOutbox::new(notify, Arc::clone(sessions.inbox.bus_wake()));
        let hang_up = {
            let closed = Arc::clone(closed);
            Box::new(move || closed.store(true, Ordering::Release))
        };
        let credit = Arc::new(TxCredit::for_current_thread());
        slot.attach(Outbox::new(outbox.clone()), hang_up, Arc::clone(&credit), None).ok()?;
        Some(Attached { slot, outbox, credit })
    }

    /// Run `attempt` until it joins, retrying every [`JOIN_RETRY`] while the
    /// registry is not there; `None` when the hub stops first.
    pub(super) fn join_retrying<T>(
        &self,
        sessions: &Sessions,
        mut attempt: impl FnMut() -> Result<T, fieldhub_silkit::SilKitError>,
    ) -> Option<T> {
        let participant = self.config.participant_name();
        let registry = &self.config.registry;
        let mut failures = 0u64;
        while !sessions.stopping() {
            match attempt() {
                Ok(joined) => return Some(joined),
                Err(e) => {
                    failures += 1;
                    // The first failure says why; a registry that stays
                    // away is reported once a minute, not every retry.
                    if failures == 1 || failures % 30 == 0 {
                        warn!(participant = %participant, registry = %registry, failures,
                            "cannot join SIL Kit; retrying every {} s: {e}", JOIN_RETRY.as_secs());
                    }
                    // In slices, so a hub that stops does not wait out the retry.
                    let retry_at = Instant::now() + JOIN_RETRY;
                    while !sessions.stopping() && Instant::now() < retry_at {
                        std::thread::sleep(LOOK);
                    }
                }
            }
        }
        None
    }

    /// The bus's answer to `OPEN_PORT`: the port handle and whether its
    /// channel carries CAN FD, or `None` (logged) when it refused.
    pub(super) fn wait_until_opened(&self, outbox: &QueueOutbox, sessions: &Sessions) -> Option<(u16, bool)> {
        while !sessions.stopping() {
            match outbox.take_timeout(LOOK) {
                Some(Outbound::PortOpened { port, channel_flags, .. }) => {
                    return Some((port, channel_flags.contains(ChannelFlags::CANFD)))
                }
                Some(Outbound::Error { text, .. }) => {
                    error!(channel = %self.config.channel, "the bus refused the SIL Kit bridge's port: {text}");
                    return None;
                }
                Some(Outbound::Goodbye { .. }) => return None,
                Some(_) | None => continue,
            }
        }
        None
    }
}
