//! The relay side of a federated channel: another hub owns it.
//!
//! Two threads. The uplink thread takes the bus's relayed frames (each still
//! waiting in its port's FIFO, holding its client's credit) and publishes
//! them to the owner (`fieldhub/C/tx`) once the owner's liveliness token is
//! there. The events thread applies the owner's committed events
//! (`fieldhub/C/events`) strictly in sequence order, as
//! [`Inbound::Committed`]; on a gap it fetches the missing events from the
//! owner's history (`fieldhub/C/history`), and when that fails it reports
//! the channel desynchronised ([`Inbound::FederationAlert`]) before going on
//! from the event it has — a reported loss, never a silent one.
//!
//! The owner's liveliness token is watched: while it is away the uplink
//! thread holds frames back (a request published with no owner subscribed
//! would vanish), and when it goes the channel's clients are told the
//! channel is down ([`Inbound::FederationAlert`]); the owner that comes
//! back numbers its events afresh.
//!
//! Invariants:
//! - An event is applied at most once and never after a higher `seq` of
//!   its epoch; events of an older epoch than one applied are refused.
//! - A relay starts at the first event it sees: it has no clients' frames
//!   committed before, as its subscriber is declared before anything is
//!   uplinked.

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::Duration;

use crossbeam_channel::{Receiver, RecvTimeoutError};
use tracing::{error, info, warn};
use zenoh::handlers::{FifoChannel, FifoChannelHandler};
use zenoh::pubsub::Subscriber;
use zenoh::qos::{CongestionControl, Priority};
use zenoh::query::ConsolidationMode;
use zenoh::sample::{Sample, SampleKind};
use zenoh::Wait;

use super::channel::{key, FederatedChannel, LOOK};
use super::event::{Event, Origin, TxRequest};
use crate::session::Sessions;
use fieldhub_bus::federation::{ChannelStatus, Uplinked};
use fieldhub_bus::inbox::Inbound;

/// Committed events Zenoh may queue for the events thread before it holds
/// the owner's link back.
const EVENT_QUEUE: usize = 16 * 1024;

/// How long a history query or a look for the owner's token may take.
const QUERY_TIMEOUT: Duration = Duration::from_secs(5);

/// Whether an owner's liveliness token is there, as its subscriber saw it.
#[derive(Default)]
struct Presence {
    present: AtomicBool,
    /// The owners' tokens there now (hub, epoch): one, but for a moment
    /// two when a standby took over while the old owner's link lingers.
    owners: Mutex<Vec<(String, u64)>>,
    /// Set when the owner left: the next owner's events start a new
    /// sequence (of the same epoch or a higher one).
    left: AtomicBool,
    /// Set when the last owner left on a standby: it takes over.
    takeover: AtomicBool,
    /// How often the last owner left: frames handed to one that left are
    /// sent again to the next.
    departures: AtomicU64,
    /// Set, under the lock, once the channel is taken over: the uplink
    /// thread, which publishes under the lock, sends nothing more, so no
    /// frame reaches this hub's own owner bridge as a relay's.
    handed_over: Mutex<bool>,
}

/// A standby's relay ends: it sequences the channel from now on.
pub(super) struct TakeOver {
    pub channel: FederatedChannel,
    /// The highest owner epoch it applied events of.
    pub seen_epoch: u64,
    /// Per relay port, the newest frame an old owner committed that this
    /// hub applied: one sent again to the new owner is not committed twice.
    pub committed: Committed,
}

/// Per relay port (Zenoh session id, port id), the arrival number of the
/// newest of its frames committed.
pub(super) type Committed = HashMap<(String, u32), u64>;

/// A running relay: its uplink thread, and its events thread, which ends
/// with the channel when this hub takes it over.
pub(super) type RelayThreads = (JoinHandle<()>, JoinHandle<Option<TakeOver>>);

pub struct RelayBridge {
    session: zenoh::Session,
    channel: FederatedChannel,
    owner: String,
    standby: bool,
}

impl RelayBridge {
    pub(super) fn new(session: zenoh::Session, channel: FederatedChannel, owner: String, standby: bool) -> Self {
        Self { session, channel, owner, standby }
    }

    /// Declare the events subscriber, then start the uplink thread and the
    /// events thread; the latter ends with the channel when this hub takes
    /// it over.
    pub fn start(mut self, sessions: &Arc<Sessions>) -> std::io::Result<Option<RelayThreads>> {
        let name = self.channel.name.clone();
        let Some(uplink) = self.channel.uplink.take() else { return Ok(None) };
        let events =
            match self.session.declare_subscriber(key(&name, "events")).with(FifoChannel::new(EVENT_QUEUE)).wait() {
                Ok(events) => events,
                Err(e) => {
                    error!(channel = %name, "cannot subscribe to the owner's events: {e}");
                    return Ok(None);
                }
            };
        info!(channel = %name, owner = %self.owner, "federation: this hub relays the channel");
        let presence: Arc<Presence> = Arc::default();
        let watch = {
            let (presence, sessions, name) = (Arc::clone(&presence), Arc::clone(sessions), name.clone());
            let (channel, status, standby) = (self.channel.id, Arc::clone(&self.channel.status), self.standby);
            self.session
                .liveliness()
                .declare_subscriber(format!("fieldhub/{name}/owner/**"))
                .history(true)
                .callback(move |sample| {
                    let Some((owner, epoch)) = super::channel::parse_owner_token(&name, sample.key_expr().as_str())
                    else {
                        return;
                    };
                    let Ok(mut owners) = presence.owners.lock() else { return };
                    match sample.kind() {
                        SampleKind::Put => {
                            owners.push((owner.clone(), epoch));
                            // An old owner back with an older epoch is not the owner.
                            if let Some((newest, _)) = owners.iter().max_by_key(|(_, e)| *e) {
                                status.set_owner(newest, true);
                            }
                            presence.present.store(true, Ordering::Release);
                            info!(channel = %name, owner = %owner, epoch, "federation: the owner is there");
                        }
                        SampleKind::Delete => {
                            owners.retain(|o| *o != (owner.clone(), epoch));
                            warn!(channel = %name, owner = %owner, epoch, "federation: the owner hub left");
                            if let Some((newest, _)) = owners.iter().max_by_key(|(_, e)| *e) {
                                return status.set_owner(newest, true);
                            }
                            presence.left.store(true, Ordering::Release);
                            presence.departures.fetch_add(1, Ordering::AcqRel);
                            presence.present.store(false, Ordering::Release);
                            let next = if standby {
                                presence.takeover.store(true, Ordering::Release);
                                "this hub, its standby, takes it over"
                            } else {
                                "frames sent now wait for an owner"
                            };
                            let text = format!(
                                "is down: its owner hub '{owner}' (epoch {epoch}) left; {next}; frames in \
                                 flight to it may be lost (counted as dropped)"
                            );
                            let _ = sessions.inbox.send(Inbound::FederationAlert { channel, text });
                        }
                    }
                })
                .wait()
        };
        let watch = match watch {
            Ok(watch) => watch,
            Err(e) => {
                error!(channel = %name, "cannot watch the owner's liveliness token: {e}");
                return Ok(None);
            }
        };
        let id = self.channel.id;
        let uplinker = {
            let (session, sessions, name, presence) =
                (self.session.clone(), Arc::clone(sessions), name.clone(), Arc::clone(&presence));
            std::thread::Builder::new()
                .name(format!("fh-fed-up-{name}"))
                .spawn(move || uplink_loop(&session, (id, &name), &uplink, &sessions, &presence))?
        };
        let applier = {
            let sessions = Arc::clone(sessions);
            std::thread::Builder::new().name(format!("fh-fed-rx-{name}")).spawn(move || {
                let standby = self.standby;
                let mut sequencer = Sequencer {
                    session: &self.session,
                    channel: &self.channel,
                    sessions: &sessions,
                    me: self.session.zid().to_string(),
                    status: &self.channel.status,
                    presence: &presence,
                    epoch: 0,
                    last: None,
                    committed: Committed::new(),
                };
                let take_over = sequencer.run(&events, standby);
                let seen_epoch = sequencer.epoch;
                if take_over {
                    if let Ok(mut handed_over) = presence.handed_over.lock() {
                        *handed_over = true;
                    }
                }
                // Dropped before this hub publishes: it must not apply its own events.
                drop(events);
                drop(watch);
                let s = self.channel.status.snapshot();
                info!(channel = %self.channel.name, epoch = s.epoch, last_seq = s.last_seq,
                    gaps_recovered = s.gaps_recovered, desyncs = s.desyncs, stale = s.stale,
                    "federation relay stopped");
                let committed = std::mem::take(&mut sequencer.committed);
                take_over.then_some(TakeOver { channel: self.channel, seen_epoch, committed })
            })?
        };
        Ok(Some((uplinker, applier)))
    }
}

/// Publish the bus's relayed frames to the owner, once it is there.
fn uplink_loop(
    session: &zenoh::Session,
    (id, channel): (u16, &str),
    uplink: &Receiver<Uplinked>,
    sessions: &Sessions,
    presence: &Presence,
) {
    let publisher = match session
        .declare_publisher(key(channel, "tx"))
        .congestion_control(CongestionControl::Block)
        .priority(Priority::RealTime)
        .express(true)
        .wait()
    {
        Ok(publisher) => publisher,
        Err(e) => return error!(channel, "cannot declare the transmit publisher: {e}"),
    };
    let me = session.zid().to_string();
    let mut bytes = Vec::with_capacity(96);
    // The owners' departures this thread has resent for, and the bus's
    // resend round that goes with them.
    let (mut synced, mut round) = (0, 0);
    while !sessions.stopping() {
        // SYNC POINT with the liveliness callback's Release stores. A new
        // owner after one left: frames handed to the old one (still in their
        // FIFOs, uncommitted) go to the new one, in order, before any later.
        let departures = presence.departures.load(Ordering::Acquire);
        if departures != synced && presence.present.load(Ordering::Acquire) {
            synced = departures;
            round += 1;
            if sessions.inbox.send(Inbound::FederationResend { channel: id, round }).is_err() {
                return;
            }
        }
        let up = match uplink.recv_timeout(LOOK) {
            Ok(up) => up,
            Err(RecvTimeoutError::Timeout) => continue,
            Err(RecvTimeoutError::Disconnected) => return,
        };
        if up.round != round {
            continue;
        }
        // A request published while no owner subscribes would be lost.
        if !wait_for_owner(channel, sessions, presence) {
            return;
        }
        if presence.departures.load(Ordering::Acquire) != synced {
            // Still in its FIFO: the next round sends it.
            continue;
        }
        bytes.clear();
        let origin = Origin { relay: me.clone(), port_id: up.port_id, arrival: up.arrival };
        TxRequest { origin, frame: up.frame }.encode(&mut bytes);
        let Ok(handed_over) = presence.handed_over.lock() else { return };
        if *handed_over {
            return;
        }
        if let Err(e) = publisher.put(bytes.clone()).wait() {
            return error!(channel, "cannot send a frame to the owner: {e}");
        }
    }
}

/// Wait until the owner's liveliness token is there; false when the hub
/// stops first. Frames wait meanwhile, holding their senders' credit.
fn wait_for_owner(channel: &str, sessions: &Sessions, presence: &Presence) -> bool {
    let mut looks = 0u64;
    // SYNC POINT with the liveliness callback's Release stores.
    while !presence.present.load(Ordering::Acquire) {
        if sessions.stopping() || presence.handed_over.lock().map_or(true, |h| *h) {
            return false;
        }
        looks += 1;
        if looks == 1 || looks % 600 == 0 {
            warn!(channel, "federation: waiting for the channel's owner hub");
        }
        std::thread::sleep(LOOK);
    }
    true
}

/// Applies committed events in sequence order.
struct Sequencer<'a> {
    session: &'a zenoh::Session,
    channel: &'a FederatedChannel,
    sessions: &'a Sessions,
    /// This hub's Zenoh session id: events naming it are its own ports' frames.
    me: String,
    status: &'a ChannelStatus,
    presence: &'a Presence,
    epoch: u64,
    /// The last sequence number applied in `epoch`.
    last: Option<u64>,
    /// Relay ports' newest committed frames, for a standby's takeover.
    committed: Committed,
}

impl Sequencer<'_> {
    /// Apply events until the hub stops (false) or, on a standby, the
    /// owner is gone and this hub takes over (true).
    fn run(&mut self, events: &Subscriber<FifoChannelHandler<Sample>>, standby: bool) -> bool {
        while !self.sessions.stopping() {
            // SYNC POINT with the liveliness callback's Release store. Events
            // still queued are the old owner's last: applied first, below,
            // as long as they come before the takeover is seen.
            if standby && self.presence.takeover.load(Ordering::Acquire) && events.is_empty() {
                return true;
            }
            let sample = match events.recv_timeout(LOOK) {
                Ok(Some(sample)) => sample,
                Ok(None) => continue,
                Err(_) => return false,
            };
            match Event::decode(&sample.payload().to_bytes()) {
                Ok(event) => {
                    if !self.receive(event) {
                        return false;
                    }
                }
                Err(e) => warn!(channel = %self.channel.name, "refusing an event: {e}"),
            }
        }
        false
    }

    /// Take one event from the subscription; false when the bus is gone.
    fn receive(&mut self, event: Event) -> bool {
        // SYNC POINT with the liveliness callback's Release store: a new
        // owner numbers its events afresh; its epoch may not be older.
        if self.presence.left.swap(false, Ordering::AcqRel) {
            self.last = None;
        }
        if event.epoch < self.epoch {
            if self.status.stale.fetch_add(1, Ordering::Relaxed) == 0 {
                warn!(channel = %self.channel.name, epoch = event.epoch, current = self.epoch,
                    "refusing events of an older owner epoch");
            }
            return true;
        }
        if event.epoch > self.epoch {
            if self.epoch != 0 {
                info!(channel = %self.channel.name, epoch = event.epoch, "federation: a new owner epoch");
            }
            self.epoch = event.epoch;
            self.status.epoch.store(event.epoch, Ordering::Relaxed);
            self.last = None;
        }
        match self.last {
            Some(last) if event.seq <= last => true,
            Some(last) if event.seq > last + 1 => {
                if !self.recover(last + 1, event.seq - 1) {
                    return false;
                }
                self.apply(event)
            }
            _ => self.apply(event),
        }
    }

    /// Fetch and apply events `from..=to` from the owner's history; when
    /// some cannot be had, report the channel desynchronised. False when
    /// the bus is gone.
    fn recover(&mut self, from: u64, to: u64) -> bool {
        let mut next = from;
        while next <= to {
            let fetched = self.fetch(next, to);
            let Some(fetched) = fetched.filter(|events| !events.is_empty()) else { break };
            for event in fetched {
                // Only the very next one: anything else is not what was asked.
                if event.epoch != self.epoch || event.seq != next {
                    continue;
                }
                if !self.apply(event) {
                    return false;
                }
                next += 1;
            }
        }
        if next > to {
            self.status.gaps_recovered.fetch_add(1, Ordering::Relaxed);
            return true;
        }
        self.status.desyncs.fetch_add(1, Ordering::Relaxed);
        let text = format!(
            "is desynchronised from its owner hub: events {next}..={to} of epoch {} are lost (no longer in the owner's history)",
            self.epoch
        );
        let channel = self.channel.id;
        self.sessions.inbox.send(Inbound::FederationAlert { channel, text }).is_ok()
    }

    /// The owner's events `from..=to` (a first part of them), or `None`.
    fn fetch(&self, from: u64, to: u64) -> Option<Vec<Event>> {
        let selector = format!("{}?from={from};to={to}", key(&self.channel.name, "history"));
        let replies = self
            .session
            .get(selector)
            .consolidation(ConsolidationMode::None)
            .timeout(QUERY_TIMEOUT)
            .wait()
            .map_err(|e| warn!(channel = %self.channel.name, "cannot query the owner's history: {e}"))
            .ok()?;
        let reply = replies.recv().ok()?;
        let sample = reply.result().ok()?;
        let bytes = sample.payload().to_bytes();
        let mut events = Vec::new();
        let mut rest: &[u8] = &bytes;
        while rest.len() >= 4 {
            let len = u32::from_le_bytes([rest[0], rest[1], rest[2], rest[3]]) as usize;
            let body = rest.get(4..4 + len)?;
            events.push(Event::decode(body).ok()?);
            rest = &rest[4 + len..];
        }
        Some(events)
    }

    /// Hand one event to the bus; false when the bus is gone.
    fn apply(&mut self, event: Event) -> bool {
        self.last = Some(event.seq);
        self.status.last_seq.store(event.seq, Ordering::Relaxed);
        if let Some(o) = &event.origin {
            let newest = self.committed.entry((o.relay.clone(), o.port_id)).or_insert(o.arrival);
            *newest = o.arrival.max(*newest);
        }
        let origin = event.origin.filter(|o| o.relay == self.me).map(|o| (o.port_id, o.arrival));
        let committed = Inbound::Committed { channel: self.channel.id, origin, frame: event.frame };
        self.sessions.inbox.send(committed).is_ok()
    }
}
