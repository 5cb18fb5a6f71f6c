//! One cannelloni peer as a client of the hub with one port: admitted and
//! counted like any client ([`Sessions::admit`]), attached with its own
//! outbox and transmit credit, its port opened on the endpoint's channel.
//! [`PeerCounters`] are what the endpoint counts for it that the bus cannot
//! see: packets, sequence gaps, malformed input, and the frames the bus
//! dropped for it, which cannelloni has no way to tell its sender.
//!
//! Invariants:
//! - A frame the peer sent is forwarded only with a transmit credit, like a
//!   native stream client's: the reader waits for credit, so a busy channel
//!   slows the peer's reader instead of growing a queue.
//! - The bus's reports for the peer (`TX_DROPPED`, `RX_OVERFLOW`, errors)
//!   are counted here and logged at most once a second per peer.
//! - Nothing here wakes by itself: the peer's writer sleeps on its outbox
//!   until an item comes or the outbox closes, and the bus's hang-up closes
//!   the outbox (and runs the endpoint's own wake, e.g. shutting a TCP
//!   connection down), so an idle peer costs no CPU.

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, OnceLock};
use std::time::{Duration, Instant};

use fieldhub_bus::credit::TxCredit;
use fieldhub_bus::inbox::Inbound;
use fieldhub_bus::outbox::{Outbound, QueueOutbox};
use fieldhub_proto::wire::PortOptions;
use fieldhub_proto::Frame;
use tracing::warn;

use crate::session::peer_user::PeerOrigin;
use crate::session::{ClientSlot, Sessions};
use crate::transport::internal_port::{self, InternalPort, PortRequest};

/// What the endpoint does besides closing the outbox when the bus hangs
/// up on a peer: wake its reader (a TCP connection is shut down).
pub type OnHangUp = Box<dyn Fn() + Send>;

/// What the endpoint counts for one peer.
#[derive(Debug, Default)]
pub struct PeerCounters {
    /// UDP packets (or TCP reads) taken from the peer.
    pub packets_in: AtomicU64,
    /// Frames the peer sent that went to the bus.
    pub frames_in: AtomicU64,
    /// UDP packets missing by the peer's sequence numbers.
    pub seq_gaps: AtomicU64,
    /// UDP packets that came with an older sequence number than the last
    /// (reordered or duplicated on the way); their frames still go on.
    pub seq_late: AtomicU64,
    /// Packets (or a TCP stream) refused as not cannelloni.
    pub malformed: AtomicU64,
    /// Frames sent to the peer.
    pub frames_out: AtomicU64,
    /// Frames the bus dropped for the peer's full queue (`RX_OVERFLOW`).
    pub rx_dropped: AtomicU64,
    /// Frames of the peer's that the bus took off (`TX_DROPPED`): counted
    /// here as cannelloni cannot tell its sender.
    pub tx_dropped: AtomicU64,
    /// Sends the socket refused.
    pub send_errors: AtomicU64,
}

impl PeerCounters {
    pub fn add(counter: &AtomicU64, n: u64) {
        counter.fetch_add(n, Ordering::Relaxed);
    }
}

/// At most one log line a second; what it held back is counted into the next.
#[derive(Default)]
pub struct LogLimit {
    last: Option<Instant>,
    held: u64,
}

impl LogLimit {
    /// Whether to log now, and how many earlier lines were held back.
    pub fn allow(&mut self) -> Option<u64> {
        let now = Instant::now();
        if self.last.is_some_and(|last| now.duration_since(last) < Duration::from_secs(1)) {
            self.held += 1;
            return None;
        }
        self.last = Some(now);
        Some(std::mem::take(&mut self.held))
    }
}

/// A peer attached to the bus with its port open.
pub struct Peer {
    pub slot: ClientSlot,
    pub port: u16,
    pub outbox: Arc<QueueOutbox>,
    /// Set when the bus drops the client (its hang-up) or the endpoint ends it.
    pub closed: Arc<AtomicBool>,
    pub credit: Arc<TxCredit>,
    pub counters: Arc<PeerCounters>,
    pub label: String,
}

impl Peer {
    /// Admit `peer` (`udp/ADDR`, `tcp/ADDR`), attach it and open its port on
    /// `channel` as `cannelloni-…`. The calling thread is the one that
    /// forwards its frames (it waits for credit). Why not, when the hub is
    /// full, stopping or the bus refused the port: the caller logs it, as
    /// often as its log limit lets it (a sender may try with every packet).
    /// When the bus hangs up on the peer, its outbox closes (which wakes
    /// the writer) and `on_hang_up` runs.
    pub fn attach(
        sessions: &Arc<Sessions>,
        channel: &str,
        label: String,
        origin: PeerOrigin,
        on_hang_up: Option<OnHangUp>,
    ) -> Result<Self, String> {
        let mut slot = sessions.admit("cannelloni", label.clone(), origin).map_err(|violation| violation.text)?;
        let port_name = port_name(&label);
        slot.name_as(port_name.clone());
        let closed = Arc::new(AtomicBool::new(false));
        // The outbox exists only once the port is open; a hang-up before
        // that is caught below by the flag.
        let opened: Arc<OnceLock<Arc<QueueOutbox>>> = Arc::default();
        let hang_up = {
            let (closed, opened) = (Arc::clone(&closed), Arc::clone(&opened));
            Box::new(move || {
                // SYNC POINT with the readers' Acquire loads.
                closed.store(true, Ordering::Release);
                if let Some(outbox) = opened.get() {
                    outbox.close();
                }
                if let Some(wake) = &on_hang_up {
                    wake();
                }
            })
        };
        let request = PortRequest {
            channel,
            port_name,
            // What the peer sends decides; a classic channel refuses FD frames itself.
            options: PortOptions::FD,
            deadline: None,
        };
        let InternalPort { port, outbox, credit } =
            internal_port::open(&mut slot, hang_up, request).map_err(|not_opened| not_opened.to_string())?;
        let _ = opened.set(Arc::clone(&outbox));
        // SYNC POINT with the hang-up's Release store.
        if closed.load(Ordering::Acquire) {
            outbox.close();
        }
        let counters = Arc::new(PeerCounters::default());
        Ok(Self { slot, port, outbox, closed, credit, counters, label })
    }

    /// Whether the peer's session is over (the bus dropped it, or the
    /// endpoint closed it).
    pub fn is_closed(&self) -> bool {
        // SYNC POINT with the hang-up's and `close`'s Release stores.
        self.closed.load(Ordering::Acquire)
    }

    /// Forward one frame of the peer's, waiting for credit; `false` when
    /// the peer's session or the hub ended first.
    pub fn forward(&self, frame: Frame) -> bool {
        let sessions = self.slot.sessions();
        let stop = || sessions.stopping() || self.is_closed();
        if !self.credit.acquire(stop) {
            return false;
        }
        let frame = Inbound::Frame { client: self.slot.id(), port: self.port, frame };
        if sessions.inbox.send(frame).is_err() {
            return false;
        }
        PeerCounters::add(&self.counters.frames_in, 1);
        true
    }

    /// End the peer's session: its port closes after what it sent.
    pub fn close(&mut self, reason: &str) {
        self.closed.store(true, Ordering::Release);
        self.slot.detach(reason);
        self.outbox.close();
    }
}

/// The port name of a peer: `cannelloni-` and its address, in the names'
/// alphabet (`udp/127.0.0.1:5` → `cannelloni-udp-127.0.0.1-5`).
fn port_name(label: &str) -> String {
    let safe: String =
        label.chars().map(|c| if c.is_ascii_alphanumeric() || c == '.' || c == '_' { c } else { '-' }).collect();
    let mut name = format!("cannelloni-{safe}");
    name.truncate(fieldhub_proto::limits::MAX_NAME_LEN);
    name
}

/// What the writer does with one item of the peer's outbox.
pub enum Item {
    /// A frame to send to the peer.
    Frame(Frame),
    /// Nothing to send (a report, counted).
    Nothing,
    /// The session is over.
    End,
}

/// Count and log a report of the bus's for the peer; frames come back as
/// [`Item::Frame`].
pub fn item_of(outbound: Outbound, counters: &PeerCounters, label: &str, limit: &mut LogLimit) -> Item {
    match outbound {
        Outbound::Frame { frame, .. } => return Item::Frame(frame),
        Outbound::RxOverflow { dropped, .. } => {
            PeerCounters::add(&counters.rx_dropped, u64::from(dropped));
            if let Some(held) = limit.allow() {
                warn!(peer = label, dropped, held, "the cannelloni peer fell behind the bus; frames dropped for it");
            }
        }
        Outbound::TxDropped { reason, dropped, .. } => {
            PeerCounters::add(&counters.tx_dropped, u64::from(dropped));
            if let Some(held) = limit.allow() {
                warn!(
                    peer = label,
                    dropped,
                    held,
                    "frames of the cannelloni peer {} (cannelloni cannot tell it)",
                    reason.describe()
                );
            }
        }
        Outbound::Error { text, fatal, .. } => {
            if let Some(held) = limit.allow() {
                warn!(peer = label, held, "the bus reports for the cannelloni peer: {text}");
            }
            if fatal {
                return Item::End;
            }
        }
        // Its one port closed (its channel removed): the session ends, so
        // a UDP peer starts over with its next packet, a TCP peer reconnects.
        Outbound::Goodbye { .. } | Outbound::PortClosed { .. } => return Item::End,
        Outbound::ChannelState { text, .. } => {
            if let Some(held) = limit.allow() {
                warn!(peer = label, held, "{text}");
            }
        }
        Outbound::PortOpened { .. } | Outbound::Pong { .. } | Outbound::Grant { .. } | Outbound::Stats { .. } => {}
    }
    Item::Nothing
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn port_names_are_the_peer_address_in_the_names_alphabet() {
        assert_eq!(port_name("udp/127.0.0.1:20000"), "cannelloni-udp-127.0.0.1-20000");
        assert_eq!(port_name("tcp/[::1]:5"), "cannelloni-tcp----1--5");
        assert!(
            fieldhub_bus::names::check_name(&port_name("udp/[ffff:ffff:ffff:ffff:ffff:ffff:ffff:ffff]:65535")).is_ok()
        );
    }

    #[test]
    fn the_log_limit_lets_one_line_a_second_through_and_counts_the_rest() {
        let mut limit = LogLimit::default();
        assert_eq!(limit.allow(), Some(0));
        assert_eq!(limit.allow(), None);
        assert_eq!(limit.allow(), None);
        limit.last = Some(Instant::now() - Duration::from_secs(2));
        assert_eq!(limit.allow(), Some(2));
    }
}
