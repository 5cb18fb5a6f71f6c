//! The owner side of a federated channel: this hub sequences it.
//!
//! The bridge is one client of the bus. Its main port on the channel,
//! opened lossless and with `RECEIVE_OWN`, carries every frame the channel
//! transmits, in the channel's order. Relays' transmit requests
//! (`fieldhub/C/tx`) enter with transmit credit, like any sender's, each
//! relay port's through a `TRANSMIT_ONLY` port of its own
//! (`origin_ports`), so they arbitrate by identifier with each other and
//! with the owner's local ports as on one hub. The writer thread turns each
//! frame into a committed event (`fieldhub/C/events`), keeps the newest
//! `history` events for the queryable (`fieldhub/C/history`), and names
//! the relay port of each frame a bridge port sent: a port's FIFO keeps its
//! frames in order, so they reach the bus in the order forwarded — less
//! those the bus refused or a fault rule dropped, which is why each is
//! matched to the oldest forwarded request with the same frame.
//!
//! Invariants:
//! - `seq` is +1 per published event, from 1, under one epoch.
//! - Nothing is dropped: the port is lossless (a slow publisher holds the
//!   channel), publications block under congestion, requests wait for
//!   credit and the request subscriber's queue holds Zenoh back when full.

use std::collections::VecDeque;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};

use fieldhub_proto::bits::FrameBits;
use fieldhub_proto::wire::{ChannelFlags, PortOptions};
use tracing::{error, info, warn};
use zenoh::handlers::FifoChannel;
use zenoh::qos::{CongestionControl, Priority};
use zenoh::sample::SampleKind;
use zenoh::Wait;

use super::channel::{key, FederatedChannel, LOOK};
use super::event::{Event, TxRequest};
use super::origin_ports::{opening, origin_of, Forwarded, Opening, OriginPorts};
use crate::config::FederationConfig;
use crate::session::bridge_port::OpenedPort;
use crate::session::peer_user::PeerOrigin;
use crate::session::{ClientSlot, Sessions};
use fieldhub_bus::credit::TxCredit;
use fieldhub_bus::inbox::Inbound;
use fieldhub_bus::outbox::{Outbound, Outbox, QueueOutbox};

/// Transmit requests Zenoh may queue for the forwarder before it holds
/// the link back.
const REQUEST_QUEUE: usize = 4096;

/// Most events one history reply carries; a relay asks again for the rest.
pub const MAX_REPLY_EVENTS: u64 = 4096;

/// The newest committed events, by sequence number.
#[derive(Default)]
pub struct History {
    events: VecDeque<(u64, Vec<u8>)>,
}

impl History {
    fn push(&mut self, seq: u64, bytes: Vec<u8>, keep: usize) {
        if self.events.len() == keep {
            self.events.pop_front();
        }
        self.events.push_back((seq, bytes));
    }

    /// Events `from..=to` (at most [`MAX_REPLY_EVENTS`]), each length-
    /// prefixed (`u32` little-endian); empty when `from` is no longer kept.
    pub fn range(&self, from: u64, to: u64) -> Vec<u8> {
        let mut out = Vec::new();
        let Some(&(first, _)) = self.events.front() else { return out };
        if from < first || to < from {
            return out;
        }
        let start = (from - first) as usize;
        let last = to.min(from + MAX_REPLY_EVENTS - 1);
        for (seq, bytes) in self.events.iter().skip(start).take_while(|(seq, _)| *seq <= last) {
            debug_assert!(*seq >= from);
            out.extend_from_slice(&(bytes.len() as u32).to_le_bytes());
            out.extend_from_slice(bytes);
        }
        out
    }
}

pub struct OwnerBridge {
    session: zenoh::Session,
    /// This hub's federation name, in its liveliness token.
    me: String,
    epoch: u64,
    history: usize,
    channel: FederatedChannel,
    /// Relay ports' frames the previous owner committed (on a takeover):
    /// a relay sends them again when it did not see the commit, and they
    /// are not committed twice.
    committed: super::relay::Committed,
}

/// Another owner of the channel whose claim beats this hub's: a higher
/// epoch, or the same epoch and a lower name (two standbys that took over
/// at once).
pub(super) struct Outranked {
    pub channel: FederatedChannel,
    pub by: String,
    pub epoch: u64,
}

impl OwnerBridge {
    pub(super) fn new(
        session: zenoh::Session,
        config: &FederationConfig,
        me: String,
        channel: FederatedChannel,
        epoch: u64,
    ) -> Self {
        Self { session, me, epoch, history: config.history as usize, channel, committed: Default::default() }
    }

    /// Skip relays' frames already committed under an older epoch.
    pub(super) fn after(mut self, committed: super::relay::Committed) -> Self {
        self.committed = committed;
        self
    }

    /// Sequence the channel until the hub stops (`None`) or another owner
    /// outranks this one.
    pub fn run(self, sessions: &Arc<Sessions>) -> Option<Outranked> {
        let name = self.channel.name.clone();
        let mut slot = match sessions.admit("federation", format!("federation:{name}"), PeerOrigin::Operator) {
            Ok(slot) => slot,
            Err(violation) => {
                error!(channel = %name, "cannot attach the federation: {}", violation.text);
                return None;
            }
        };
        slot.name_as(format!("federation-{name}"));
        let closed = Arc::new(AtomicBool::new(false));
        let outbox = QueueOutbox::new(None, Arc::clone(sessions.inbox.bus_wake()));
        let hang_up = {
            let closed = Arc::clone(&closed);
            Box::new(move || closed.store(true, Ordering::Release))
        };
        // This thread forwards relays' frames, so it waits for credit.
        let credit = Arc::new(TxCredit::for_current_thread());
        if slot.attach(Outbox::new(outbox.clone()), hang_up, Arc::clone(&credit), None).is_err() {
            return None;
        }
        let mut options = PortOptions::RECEIVE_OWN | PortOptions::BLOCK_ON_OVERFLOW;
        if self.channel.canfd {
            options |= PortOptions::FD;
        }
        let open = Inbound::OpenPort {
            client: slot.id(),
            request: 1,
            options,
            channel: name.clone(),
            port_name: format!("federation-{name}"),
        };
        if sessions.inbox.send(open).is_err() {
            return None;
        }
        let main = wait_until_opened(&outbox, sessions, &name)?;
        let mut routes = OriginPorts::new(main, name.clone(), self.channel.canfd);
        let opening: Arc<Opening> = Arc::new(opening());
        let forwarded: Arc<Mutex<Forwarded>> = Arc::default();
        let history: Arc<Mutex<History>> = Arc::default();
        let queryable = {
            let history = Arc::clone(&history);
            let reply_key = key(&name, "history");
            self.session
                .declare_queryable(key(&name, "history"))
                .callback(move |query| {
                    let parameters = query.parameters();
                    let bound = |k: &str| parameters.get(k).and_then(|v| v.parse::<u64>().ok());
                    let (Some(from), Some(to)) = (bound("from"), bound("to")) else { return };
                    let events = history.lock().map(|h| h.range(from, to)).unwrap_or_default();
                    if let Err(e) = query.reply(&reply_key, events).wait() {
                        warn!(key = %reply_key, "cannot answer a history query: {e}");
                    }
                })
                .wait()
        };
        let requests = self.session.declare_subscriber(key(&name, "tx")).with(FifoChannel::new(REQUEST_QUEUE)).wait();
        let (queryable, requests) = match (queryable, requests) {
            (Ok(q), Ok(r)) => (q, r),
            (Err(e), _) | (_, Err(e)) => {
                error!(channel = %name, "cannot declare the owner's Zenoh entities: {e}");
                return None;
            }
        };
        let outranked: Arc<Mutex<Option<(String, u64)>>> = Arc::default();
        let rivals = {
            let (outranked, me, epoch, channel) = (Arc::clone(&outranked), self.me.clone(), self.epoch, name.clone());
            self.session
                .liveliness()
                .declare_subscriber(format!("fieldhub/{name}/owner/**"))
                .history(true)
                .callback(move |sample| {
                    let Some((hub, theirs)) = super::channel::parse_owner_token(&channel, sample.key_expr().as_str())
                    else {
                        return;
                    };
                    if sample.kind() == SampleKind::Put && (theirs > epoch || (theirs == epoch && hub < me)) {
                        if let Ok(mut outranked) = outranked.lock() {
                            outranked.get_or_insert((hub, theirs));
                        }
                    }
                })
                .wait()
        };
        if let Err(e) = &rivals {
            error!(channel = %name, "cannot watch for other owners of the channel: {e}");
        }
        let writer = {
            let (outbox, closed, forwarded, history, opening) = (
                Arc::clone(&outbox),
                Arc::clone(&closed),
                Arc::clone(&forwarded),
                Arc::clone(&history),
                Arc::clone(&opening),
            );
            let writer = Writer {
                session: self.session.clone(),
                status: Arc::clone(&self.channel.status),
                channel: name.clone(),
                epoch: self.epoch,
                keep: self.history,
                bitrate: self.channel.bitrate,
                data_bitrate: self.channel.data_bitrate,
            };
            std::thread::Builder::new()
                .name(format!("fh-fed-pub-{name}"))
                .spawn(move || writer.run(&outbox, &closed, &forwarded, &history, &opening))
        };
        // Declared last: a relay that sees the owner finds its subscriber and queryable.
        let token =
            self.session.liveliness().declare_token(super::channel::owner_token(&name, &self.me, self.epoch)).wait();
        if let Err(e) = &token {
            error!(channel = %name, "cannot declare the owner's liveliness token: {e}");
        }
        info!(channel = %name, epoch = self.epoch, "federation: this hub owns the channel");
        let beaten = || outranked.lock().map(|o| o.is_some()).unwrap_or(false);
        let stop = || sessions.stopping() || closed.load(Ordering::Acquire) || beaten();
        while !stop() {
            let sample = match requests.recv_timeout(LOOK) {
                Ok(Some(sample)) => sample,
                Ok(None) => continue,
                Err(_) => break,
            };
            let request = match TxRequest::decode(&sample.payload().to_bytes()) {
                Ok(request) => request,
                Err(e) => {
                    warn!(channel = %name, "refusing a transmit request: {e}");
                    continue;
                }
            };
            let origin = &request.origin;
            let seen = self.committed.get(&(origin.relay.clone(), origin.port_id));
            if seen.is_some_and(|&newest| origin.arrival <= newest) {
                continue;
            }
            let Some(route) = routes.route(&request.origin, &slot, &opening, &forwarded, &stop) else { break };
            if !forward(&slot, route, &credit, &forwarded, request, &stop) {
                break;
            }
        }
        drop(token);
        drop(queryable);
        slot.detach("the federation is closing");
        outbox.close();
        closed.store(true, Ordering::Release);
        if let Ok(handle) = writer {
            let _ = handle.join();
        }
        drop(rivals);
        let (by, epoch) = outranked.lock().ok()?.take()?;
        if sessions.stopping() {
            return None;
        }
        Some(Outranked { channel: self.channel, by, epoch })
    }
}

/// Put one relay's frame into bridge port `route` (handle, hub-wide id),
/// with transmit credit.
fn forward(
    slot: &ClientSlot,
    (port, port_id): (u16, u32),
    credit: &TxCredit,
    forwarded: &Mutex<Forwarded>,
    request: TxRequest,
    stop: &dyn Fn() -> bool,
) -> bool {
    if !credit.acquire(stop) {
        return false;
    }
    // Queued before the frame: the bus cannot carry it first.
    if let Ok(mut forwarded) = forwarded.lock() {
        forwarded.entry(port_id).or_default().push_back((request.origin, request.frame));
    }
    slot.sessions().inbox.send(Inbound::Frame { client: slot.id(), port, frame: request.frame }).is_ok()
}

/// The bus's answer to `OPEN_PORT`: the port handle and hub-wide id, or
/// `None` (logged).
fn wait_until_opened(outbox: &QueueOutbox, sessions: &Sessions, channel: &str) -> Option<(u16, u32)> {
    while !sessions.stopping() {
        match outbox.take_timeout(LOOK) {
            Some(Outbound::PortOpened { port, port_id, channel_flags, .. }) => {
                if channel_flags.contains(ChannelFlags::CANFD) {
                    info!(channel, "federated channel carries CAN FD");
                }
                return Some((port, port_id));
            }
            Some(Outbound::Error { text, .. }) => {
                error!(channel, "the bus refused the federation's port: {text}");
                return None;
            }
            Some(Outbound::Goodbye { .. }) => return None,
            Some(_) | None => continue,
        }
    }
    None
}

/// Publishes the channel's frames as committed events.
struct Writer {
    session: zenoh::Session,
    status: Arc<fieldhub_bus::federation::ChannelStatus>,
    channel: String,
    epoch: u64,
    keep: usize,
    bitrate: u32,
    data_bitrate: u32,
}

impl Writer {
    fn run(
        self,
        outbox: &QueueOutbox,
        closed: &AtomicBool,
        forwarded: &Mutex<Forwarded>,
        history: &Mutex<History>,
        opening: &Opening,
    ) {
        let publisher = match self
            .session
            .declare_publisher(key(&self.channel, "events"))
            .congestion_control(CongestionControl::Block)
            .priority(Priority::RealTime)
            .express(true)
            .wait()
        {
            Ok(publisher) => publisher,
            Err(e) => {
                closed.store(true, Ordering::Release);
                return error!(channel = %self.channel, "cannot declare the events publisher: {e}");
            }
        };
        let mut seq = 0u64;
        self.status.epoch.store(self.epoch, Ordering::Relaxed);
        // SYNC POINT with the hang-up's and the bridge's Release stores.
        while !closed.load(Ordering::Acquire) {
            let Some(item) = outbox.take_timeout(LOOK) else { continue };
            outbox.took();
            let (frame, meta) = match item {
                Outbound::Frame { frame, meta, .. } => (frame, meta),
                Outbound::PortOpened { request, port, port_id, .. } => {
                    opening.answer(request, Ok(OpenedPort { port, port_id }));
                    continue;
                }
                Outbound::Error { request, text, fatal, .. } => {
                    if !opening.answer(request, Err(text.clone())) {
                        warn!(channel = %self.channel, "the bus reports: {text}");
                    }
                    if fatal {
                        break;
                    }
                    continue;
                }
                Outbound::Goodbye { .. } => break,
                Outbound::TxDropped { reason, dropped, .. } => {
                    warn!(channel = %self.channel, dropped, "relayed frames {}", reason.describe());
                    continue;
                }
                // A lossless port is never overrun; the rest answer
                // requests the bridge does not make.
                Outbound::RxOverflow { .. }
                | Outbound::ChannelState { .. }
                | Outbound::PortClosed { .. }
                | Outbound::Pong { .. }
                | Outbound::Stats { .. }
                | Outbound::Grant { .. } => continue,
            };
            let frame = frame.with_echo(false);
            let origin = forwarded.lock().ok().and_then(|mut f| origin_of(&mut f, meta.sender, &frame));
            seq += 1;
            let busy_ns = FrameBits::of(&frame).duration_ns(self.bitrate, self.data_bitrate);
            let event = Event {
                epoch: self.epoch,
                seq,
                start_ns: meta.timestamp_ns,
                end_ns: meta.timestamp_ns + busy_ns,
                origin,
                frame,
            };
            let mut bytes = Vec::with_capacity(96);
            event.encode(&mut bytes);
            if let Ok(mut history) = history.lock() {
                history.push(seq, bytes.clone(), self.keep);
            }
            if let Err(e) = publisher.put(bytes).wait() {
                error!(channel = %self.channel, seq, "cannot publish a committed event: {e}");
                break;
            }
            self.status.last_seq.store(seq, Ordering::Relaxed);
        }
        closed.store(true, Ordering::Release);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn history_serves_what_it_keeps_and_nothing_older() {
        let mut history = History::default();
        for seq in 1..=10u64 {
            history.push(seq, vec![seq as u8], 4);
        }
        let read = |bytes: Vec<u8>| -> Vec<u8> { bytes.chunks(5).map(|c| c[4]).collect() };
        assert_eq!(read(history.range(7, 9)), [7, 8, 9]);
        assert_eq!(read(history.range(9, 100)), [9, 10]);
        assert!(history.range(6, 8).is_empty(), "6 is no longer kept");
        assert!(history.range(9, 8).is_empty());
    }
}
