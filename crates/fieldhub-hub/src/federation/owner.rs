//! The owner side of a federated channel: this hub sequences it.
//!
//! The bridge is one client of the bus. Its main port on the channel,
//! opened lossless and with `RECEIVE_OWN`, carries every frame the channel
//! transmits, in the channel's order. Relays' transmit requests
//! (`fieldhub/C/tx`) enter from Zenoh's subscriber callback
//! (`forwarder.rs`) with transmit credit, like any sender's, each relay
//! port's through a `TRANSMIT_ONLY` port of its own
//! (`origin_ports`), so they arbitrate by identifier with each other and
//! with the owner's local ports as on one hub. The writer thread turns each
//! frame into a committed event (`fieldhub/C/events`), keeps it in the
//! channel's ledger (which answers `fieldhub/C/history`, `ledger.rs`), and
//! names the relay port of each frame a bridge port sent: a port's FIFO
//! keeps its frames in order, so they reach the bus in the order forwarded
//! — less those the bus dropped (a fault rule, a bus-off controller), which
//! the port's `TX_DROPPED` report names and the writer publishes as events
//! of their own, so the relay tells their senders why.
//!
//! Each run of the bridge sequences one term: the configured (or a
//! standby's) epoch and an incarnation of its own, the time it started, so
//! an owner restarted with its configured epoch starts a term every relay
//! ranks above the one it had before.
//!
//! Invariants:
//! - `seq` is +1 per published event, from 1, under one term.
//! - Nothing is dropped: the port is lossless (a slow publisher holds the
//!   channel), publications block under congestion, and requests wait for
//!   credit in the subscriber's callback, holding Zenoh's link back.
//! - A relay port's frame is forwarded once: a relay sends its waiting
//!   frames again to an owner that comes back, and one already forwarded
//!   (or committed under an older term) is skipped.

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};

use fieldhub_proto::wire::{ChannelFlags, PortOptions};
use tracing::{error, info, warn};
use zenoh::qos::{CongestionControl, Priority};
use zenoh::sample::SampleKind;
use zenoh::Wait;

use super::channel::{key, FederatedChannel, LOOK};
use super::event::{Batch, Body, Event, Origin, Term};
use super::forwarder::{CreditWaiter, Forwarder, Stopping};
use super::ledger::Ledger;
use super::origin_ports::{dropped, opening, origin_of, Forwarded, Opening, OriginPorts, SeenRequests};
use super::zenoh_threads::lock_off_runtime;
use crate::session::bridge_port::OpenedPort;
use crate::session::peer_user::PeerOrigin;
use crate::session::Sessions;
use fieldhub_bus::inbox::Inbound;
use fieldhub_bus::outbox::{Outbound, Outbox, QueueOutbox};

pub struct OwnerBridge {
    session: zenoh::Session,
    /// This hub's federation name, in its liveliness token.
    me: String,
    term: Term,
    channel: FederatedChannel,
    ledger: Arc<Mutex<Ledger>>,
    /// The relay ports' requests already forwarded here or committed under
    /// an older term (a standby's takeover), so a frame a relay sends again
    /// is not sequenced twice.
    seen: SeenRequests,
}

/// Another owner of the channel whose claim beats this hub's: a higher
/// term (a higher epoch, or the same epoch started later).
pub(super) struct Outranked {
    pub channel: FederatedChannel,
    pub by: String,
    pub term: Term,
}

impl OwnerBridge {
    /// The bridge that sequences `channel` under `epoch`, from now (its
    /// incarnation), keeping its events in `ledger`.
    pub(super) fn new(
        session: zenoh::Session,
        me: String,
        channel: FederatedChannel,
        epoch: u64,
        ledger: Arc<Mutex<Ledger>>,
    ) -> Self {
        // The wall clock: a restarted hub's owner bridge starts after the one before.
        let now = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap_or_default();
        let term = Term { epoch, incarnation: u64::try_from(now.as_nanos()).unwrap_or(u64::MAX) };
        Self { session, me, term, channel, ledger, seen: SeenRequests::default() }
    }

    /// Skip relays' frames already committed under an older term.
    pub(super) fn after(mut self, committed: super::relay::Committed) -> Self {
        self.seen = SeenRequests::from(committed);
        self
    }

    /// Sequence the channel until the hub stops (`None`) or another owner
    /// outranks this one.
    pub fn run(mut self, sessions: &Arc<Sessions>) -> Option<Outranked> {
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
        // The subscriber's callback forwards relays' frames: it waits for credit.
        let waiter: Arc<CreditWaiter> = Arc::default();
        let credit = Arc::new(CreditWaiter::credit(&waiter));
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
        let routes = OriginPorts::new(main, name.clone(), self.channel.canfd);
        let opening: Arc<Opening> = Arc::new(opening());
        let forwarded: Arc<Mutex<Forwarded>> = Arc::default();
        let outranked: Arc<Mutex<Option<(String, Term)>>> = Arc::default();
        let rivals = {
            let (outranked, term, channel) = (Arc::clone(&outranked), self.term, name.clone());
            self.session
                .liveliness()
                .declare_subscriber(format!("fieldhub/{name}/owner/**"))
                .history(true)
                .callback(move |sample| {
                    let Some((hub, theirs)) = super::channel::parse_owner_token(&channel, sample.key_expr().as_str())
                    else {
                        return;
                    };
                    if sample.kind() == SampleKind::Put && theirs > term {
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
        if let Ok(mut ledger) = self.ledger.lock() {
            ledger.follow(self.term);
        }
        let writer = {
            let (outbox, closed, forwarded, opening) =
                (Arc::clone(&outbox), Arc::clone(&closed), Arc::clone(&forwarded), Arc::clone(&opening));
            let writer = Writer {
                session: self.session.clone(),
                status: Arc::clone(&self.channel.status),
                channel: name.clone(),
                term: self.term,
                ledger: Arc::clone(&self.ledger),
                rates: self.channel.rates,
                ports: HashMap::from([(main.0, main.1)]),
            };
            std::thread::Builder::new()
                .name(format!("fh-fed-pub-{name}"))
                .spawn(move || writer.run(&outbox, &closed, &forwarded, &opening))
        };
        // Requests go to the bus from Zenoh's callback (`forwarder.rs`),
        // declared once the writer reads the bridge's outbox.
        let stopping = Stopping {
            sessions: Arc::clone(sessions),
            closed: Arc::clone(&closed),
            outranked: Arc::clone(&outranked),
            ended: Arc::default(),
        };
        let ended = Arc::clone(&stopping.ended);
        let forwarder = Mutex::new(Forwarder {
            client: slot.id(),
            channel: name.clone(),
            credit,
            waiter,
            seen: std::mem::take(&mut self.seen),
            routes,
            opening,
            forwarded,
            stopping,
        });
        let requests = self
            .session
            .declare_subscriber(key(&name, "tx"))
            .callback(move |sample| {
                // Another relay's publication may hold it, waiting for credit.
                if let Some(mut forwarder) = lock_off_runtime(&forwarder) {
                    forwarder.take(&sample.payload().to_bytes());
                }
            })
            .wait();
        let requests = match requests {
            Ok(requests) => Some(requests),
            Err(e) => {
                error!(channel = %name, "cannot subscribe to the relays' transmit requests: {e}");
                ended.store(true, Ordering::Release);
                None
            }
        };
        // Declared last: a relay that sees the owner finds its subscriber.
        let token = requests.as_ref().map(|_| {
            let token =
                self.session.liveliness().declare_token(super::channel::owner_token(&name, &self.me, self.term));
            let token = token.wait();
            match &token {
                Ok(_) => info!(channel = %name, epoch = self.term.epoch, incarnation = self.term.incarnation,
                    "federation: this hub owns the channel"),
                Err(e) => error!(channel = %name, "cannot declare the owner's liveliness token: {e}"),
            }
            token
        });
        let beaten = || outranked.lock().map(|o| o.is_some()).unwrap_or(false);
        // SYNC POINT with the forwarder's Release store of `ended`.
        let stop =
            || sessions.stopping() || closed.load(Ordering::Acquire) || beaten() || ended.load(Ordering::Acquire);
        while !stop() {
            std::thread::sleep(LOOK);
        }
        // Nothing is forwarded from here on, by a callback still running either.
        ended.store(true, Ordering::Release);
        if let Some(Err(e)) = requests.map(|r| r.undeclare().wait()) {
            warn!(channel = %name, "cannot unsubscribe from the relays' transmit requests: {e}");
        }
        drop(token);
        slot.detach("the federation is closing");
        outbox.close();
        closed.store(true, Ordering::Release);
        if let Ok(handle) = writer {
            let _ = handle.join();
        }
        drop(rivals);
        if let Ok(mut ledger) = self.ledger.lock() {
            ledger.settle(self.term);
        }
        let (by, term) = outranked.lock().ok()?.take()?;
        if sessions.stopping() {
            return None;
        }
        Some(Outranked { channel: self.channel, by, term })
    }
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

/// Publishes the channel's frames, and relay ports' frames its bus
/// dropped, as committed events.
struct Writer {
    session: zenoh::Session,
    status: Arc<fieldhub_bus::federation::ChannelStatus>,
    channel: String,
    term: Term,
    ledger: Arc<Mutex<Ledger>>,
    rates: fieldhub_bus::channel::Rates,
    /// The bridge's ports: handle → hub-wide id (`TX_DROPPED` names a handle).
    ports: HashMap<u16, u32>,
}

/// The events publication the writer fills, and how it goes out.
struct Outgoing<'a> {
    publisher: &'a zenoh::pubsub::Publisher<'a>,
    batch: Batch,
    /// The `seq` of the newest event numbered.
    seq: u64,
    /// A publication failed (logged): the bridge ends.
    failed: bool,
}

impl Outgoing<'_> {
    /// Publish the events the batch holds, if any, and note them published.
    fn publish(&mut self, channel: &str, status: &fieldhub_bus::federation::ChannelStatus) {
        if self.batch.is_empty() || self.failed {
            return;
        }
        if let Err(e) = self.publisher.put(self.batch.bytes()).wait() {
            self.failed = true;
            return error!(channel, seq = self.seq, "cannot publish committed events: {e}");
        }
        self.batch.clear();
        status.last_seq.store(self.seq, Ordering::Relaxed);
    }
}

impl Writer {
    /// Add the events of one item of the bridge's outbox to the outgoing
    /// batch (publishing a full one first), each kept in the ledger as it
    /// is numbered; false when the bridge ends.
    fn add(&mut self, item: Outbound, out: &mut Outgoing<'_>, forwarded: &Mutex<Forwarded>, opening: &Opening) -> bool {
        let mut event = |origin: Option<Origin>, body: Body, start_ns: u64, end_ns: u64| {
            // A drop report can name more frames than one batch holds.
            if !out.batch.has_room() {
                out.publish(&self.channel, &self.status);
            }
            out.seq += 1;
            let event = Event { term: self.term, seq: out.seq, start_ns, end_ns, origin, body };
            let bytes = out.batch.push(|o| event.encode(o));
            if let Ok(mut ledger) = self.ledger.lock() {
                ledger.push(self.term, out.seq, bytes);
            }
        };
        match item {
            Outbound::Frame { frame, meta, .. } => {
                let frame = frame.with_echo(false);
                let origin = forwarded.lock().ok().and_then(|mut f| origin_of(&mut f, meta.sender, &frame));
                let busy_ns = self.rates.duration_ns(&frame);
                event(origin, Body::Frame(frame), meta.timestamp_ns, meta.timestamp_ns + busy_ns);
            }
            Outbound::TxDropped { port, reason, dropped: count } => {
                let port_id = self.ports.get(&port).copied();
                let origins = port_id
                    .and_then(|id| forwarded.lock().ok().map(|mut f| dropped(&mut f, id, count)))
                    .unwrap_or_default();
                if origins.len() < count as usize {
                    warn!(channel = %self.channel, port, count, named = origins.len(),
                        "relayed frames {}, not all of them forwarded here", reason.describe());
                }
                for origin in origins {
                    event(Some(origin), Body::Dropped(reason), 0, 0);
                }
            }
            Outbound::PortOpened { request, port, port_id, .. } => {
                self.ports.insert(port, port_id);
                opening.answer(request, Ok(OpenedPort { port, port_id }));
            }
            Outbound::Error { request, text, fatal, .. } => {
                if !opening.answer(request, Err(text.clone())) {
                    warn!(channel = %self.channel, "the bus reports: {text}");
                }
                return !fatal;
            }
            Outbound::Goodbye { .. } => return false,
            // A lossless port is never overrun; the rest answer
            // requests the bridge does not make.
            Outbound::RxOverflow { .. }
            | Outbound::ChannelState { .. }
            | Outbound::PortClosed { .. }
            | Outbound::Pong { .. }
            | Outbound::Stats { .. }
            | Outbound::Grant { .. } => {}
        }
        true
    }

    fn run(mut self, outbox: &QueueOutbox, closed: &AtomicBool, forwarded: &Mutex<Forwarded>, opening: &Opening) {
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
        self.status.epoch.store(self.term.epoch, Ordering::Relaxed);
        self.status.last_seq.store(0, Ordering::Relaxed);
        let mut items = Vec::with_capacity(Batch::MAX_ITEMS);
        let batch = Batch::with_capacity(Batch::MAX_ITEMS);
        let mut out = Outgoing { publisher: &publisher, batch, seq: 0, failed: false };
        // SYNC POINT with the hang-up's and the bridge's Release stores.
        while !closed.load(Ordering::Acquire) {
            let Some(item) = outbox.take_timeout(LOOK) else { continue };
            // What else the bus queued goes in the same publication, in order.
            items.push(item);
            outbox.take_into(&mut items, Batch::MAX_ITEMS - 1);
            outbox.took();
            let mut going = true;
            for item in items.drain(..) {
                going = going && self.add(item, &mut out, forwarded, opening);
            }
            out.publish(&self.channel, &self.status);
            if !going || out.failed {
                break;
            }
        }
        closed.store(true, Ordering::Release);
    }
}
