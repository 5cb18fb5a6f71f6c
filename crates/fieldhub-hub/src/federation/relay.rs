//! The relay side of a federated channel: another hub owns it.
//!
//! Two threads. The uplink thread takes the bus's relayed frames (each still
//! waiting in its port's FIFO, holding its client's credit) and publishes
//! them to the owner (`fieldhub/C/tx`) while the owner of the term this hub
//! follows is there. The events thread applies the owner's committed events
//! (`fieldhub/C/events`) strictly in sequence order, as
//! [`Inbound::Committed`] (a frame) or [`Inbound::CommitDropped`] (a frame
//! of this hub's the owner's bus dropped), and keeps each in the channel's
//! ledger, from which this hub answers other hubs' history queries; while
//! all is in order it lets the subscriber's callback apply the next events
//! itself (`applier.rs`), one hand-off less per event. On a gap
//! it fetches the missing events from every hub that answers
//! (`fieldhub/C/history`: the owner, the other relays, a standby); what none
//! holds any more it reports to the channel's clients as a gap
//! ([`Inbound::FederationState`], `CHANNEL_STATE` gap) and counts as a
//! desynchronisation — a reported loss, never a silent one.
//!
//! Owners come and go (their liveliness tokens). While none is there the
//! channel's clients are told it waits, and the uplink thread holds frames
//! back (a request published with no owner subscribed would vanish). An
//! owner of a newer term — the owner restarted, a standby that took over —
//! starts only once the old term is finished: this hub collects the old
//! owner's last events from every hub that applied them, waiting for those
//! still applying theirs, so every relay ends the term with the same events,
//! or reports the ones it lacks. Then its clients are told the channel is
//! live and the frames still waiting here (those the old owner never
//! committed) go to the new owner, in their order.
//!
//! Invariants:
//! - An event is applied at most once and never after a higher `seq` of its
//!   term; events of an older term than one applied are refused.
//! - A relay starts at the first event it sees: it has no clients' frames
//!   committed before, as its subscriber is declared before anything is
//!   uplinked.
//! - Nothing is sent to the owner of a newer term before the old term is
//!   finished here: a frame the old owner committed is never sent again.

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use crossbeam_channel::{Receiver, RecvTimeoutError, TrySendError};
use fieldhub_proto::fate::ChannelCondition;
use tracing::{error, info, warn};
use zenoh::qos::{CongestionControl, Priority};
use zenoh::query::ConsolidationMode;
use zenoh::sample::SampleKind;
use zenoh::Wait;

use super::applier::Applier;
use super::channel::{key, FederatedChannel, LinkTrouble, LOOK};
use super::event::{Batch, Event, HistoryQuery, HistoryReply, Term, TxRequest};
use super::ledger::Ledger;
use super::zenoh_threads::wait_off_runtime;
use crate::session::Sessions;
use fieldhub_bus::federation::{ChannelStatus, Uplinked};
use fieldhub_bus::inbox::Inbound;

/// Committed events Zenoh may queue for the events thread before it holds
/// the owner's link back.
const EVENT_QUEUE: usize = 16 * 1024;

/// How long a history query may take.
const QUERY_TIMEOUT: Duration = Duration::from_secs(5);

/// How long finishing a term waits for hubs still applying its last
/// events (one whose link to the old owner lingers) before it reports what
/// it could not collect.
const SETTLE_TIMEOUT: Duration = Duration::from_secs(10);

/// The owners there, as their liveliness tokens say.
#[derive(Default)]
struct Presence {
    /// The owners' tokens there now (hub, term): one, but for a moment two
    /// when a standby took over while the old owner's link lingers.
    owners: Mutex<Vec<(String, Term)>>,
    /// Bumped by the liveliness callback on every token that comes or goes.
    changes: AtomicU64,
    /// The uplink may publish: the owner of the term the events thread
    /// follows is there. Set by the events thread, cleared by the liveliness
    /// callback when that owner leaves, both under `owners`' lock.
    live: AtomicBool,
    /// Bumped by the events thread each time it goes live: the frames
    /// waiting in the bus then go to the owner (again), in order.
    round: AtomicU64,
    /// Set when the last owner left on a standby: it takes over.
    takeover: AtomicBool,
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

pub(super) use super::applier::Committed;

/// A running relay: its uplink thread, and its events thread, which ends
/// with the channel when this hub takes it over.
pub(super) type RelayThreads = (JoinHandle<()>, JoinHandle<Option<TakeOver>>);

pub struct RelayBridge {
    session: zenoh::Session,
    channel: FederatedChannel,
    owner: String,
    standby: bool,
    ledger: Arc<Mutex<Ledger>>,
    trouble: Arc<LinkTrouble>,
}

impl RelayBridge {
    pub(super) fn new(
        session: zenoh::Session,
        channel: FederatedChannel,
        (owner, standby): (String, bool),
        ledger: Arc<Mutex<Ledger>>,
        trouble: Arc<LinkTrouble>,
    ) -> Self {
        Self { session, channel, owner, standby, ledger, trouble }
    }

    /// Declare the events subscriber, then start the uplink thread and the
    /// events thread; the latter ends with the channel when this hub takes
    /// it over.
    pub fn start(mut self, sessions: &Arc<Sessions>) -> std::io::Result<Option<RelayThreads>> {
        let name = self.channel.name.clone();
        let Some(uplink) = self.channel.uplink.take() else { return Ok(None) };
        let applier = Arc::new(Applier {
            channel: self.channel.id,
            name: name.clone(),
            me: self.session.zid().to_string(),
            sessions: Arc::clone(sessions),
            status: Arc::clone(&self.channel.status),
            ledger: Arc::clone(&self.ledger),
            position: Mutex::default(),
        });
        // The callback applies the next event itself while the events
        // thread offers it the position (`applier.rs`); the rest waits here.
        let (to_thread, events) = crossbeam_channel::bounded::<Vec<u8>>(EVENT_QUEUE);
        let subscriber = {
            let applier = Arc::clone(&applier);
            self.session.declare_subscriber(key(&name, "events")).callback(move |sample| {
                let payload = sample.payload().to_bytes();
                if !applier.take_fast(&payload) {
                    // Waits while the queue is full, holding the owner's link
                    // back: off Zenoh's runtime (`zenoh_threads.rs`).
                    if let Err(TrySendError::Full(payload)) = to_thread.try_send(payload.into_owned()) {
                        let _ = wait_off_runtime(|| to_thread.send(payload));
                    }
                }
            })
        };
        let subscriber = match subscriber.wait() {
            Ok(subscriber) => subscriber,
            Err(e) => {
                error!(channel = %name, "cannot subscribe to the owner's events: {e}");
                return Ok(None);
            }
        };
        info!(channel = %name, owner = %self.owner, "federation: this hub relays the channel");
        let presence: Arc<Presence> = Arc::default();
        let watch = {
            let (presence, name) = (Arc::clone(&presence), name.clone());
            let (status, standby) = (Arc::clone(&self.channel.status), self.standby);
            self.session
                .liveliness()
                .declare_subscriber(format!("fieldhub/{name}/owner/**"))
                .history(true)
                .callback(move |sample| {
                    let Some((owner, term)) = super::channel::parse_owner_token(&name, sample.key_expr().as_str())
                    else {
                        return;
                    };
                    let Ok(mut owners) = presence.owners.lock() else { return };
                    match sample.kind() {
                        SampleKind::Put => owners.push((owner.clone(), term)),
                        SampleKind::Delete => {
                            let newest = owners.iter().map(|(_, t)| *t).max();
                            owners.retain(|o| *o != (owner.clone(), term));
                            warn!(channel = %name, owner = %owner, epoch = term.epoch,
                                incarnation = term.incarnation, "federation: the owner hub left");
                            if newest == Some(term) && owners.iter().all(|(_, t)| *t < term) {
                                // Nothing more may be sent: no owner of the term is subscribed.
                                presence.live.store(false, Ordering::Release);
                                if standby {
                                    presence.takeover.store(true, Ordering::Release);
                                }
                            }
                        }
                    }
                    // An old owner back with an older term is not the owner.
                    if let Some((newest, _)) = owners.iter().max_by_key(|(_, t)| *t) {
                        status.set_owner(newest, true);
                    }
                    presence.changes.fetch_add(1, Ordering::Release);
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
        let events_thread = {
            let sessions = Arc::clone(sessions);
            std::thread::Builder::new().name(format!("fh-fed-rx-{name}")).spawn(move || {
                let standby = self.standby;
                let mut sequencer = Sequencer {
                    session: &self.session,
                    channel: &self.channel,
                    sessions: &sessions,
                    applier: &applier,
                    owner: self.owner.clone(),
                    status: &self.channel.status,
                    presence: &presence,
                    ledger: &self.ledger,
                    trouble: (&self.trouble, u64::MAX),
                    seen_changes: u64::MAX,
                    term: None,
                    last: None,
                    live_term: None,
                    told_waiting: false,
                };
                let take_over = sequencer.run(&events, standby);
                let seen_epoch = sequencer.term.map_or(0, |t| t.epoch);
                if take_over {
                    if let Ok(mut handed_over) = presence.handed_over.lock() {
                        *handed_over = true;
                    }
                }
                // Dropped before this hub publishes: it must not apply its own
                // events. The queue first: a callback waiting for room returns.
                drop(events);
                drop(subscriber);
                drop(watch);
                let s = self.channel.status.snapshot();
                info!(channel = %self.channel.name, epoch = s.epoch, last_seq = s.last_seq,
                    gaps_recovered = s.gaps_recovered, desyncs = s.desyncs, stale = s.stale,
                    "federation relay stopped");
                let committed =
                    applier.position.lock().map(|mut p| std::mem::take(&mut p.committed)).unwrap_or_default();
                take_over.then_some(TakeOver { channel: self.channel, seen_epoch, committed })
            })?
        };
        Ok(Some((uplinker, events_thread)))
    }
}

/// Publish the bus's relayed frames to the owner while it is live.
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
    let mut batch = Batch::with_capacity(Batch::MAX_ITEMS);
    let mut ups: Vec<Uplinked> = Vec::with_capacity(Batch::MAX_ITEMS);
    // The resend round this thread asked the bus for.
    let mut synced = 0;
    while !sessions.stopping() {
        // SYNC POINT with the events thread's Release increment. Each time
        // it goes live, every frame still waiting (whatever an owner that
        // left had of them, uncommitted) goes to the owner, in order, before
        // any later; the owner skips those it already has.
        let round = presence.round.load(Ordering::Acquire);
        if round != synced {
            synced = round;
            if sessions.inbox.send(Inbound::FederationResend { channel: id, round }).is_err() {
                return;
            }
        }
        let up = match uplink.recv_timeout(LOOK) {
            Ok(up) => up,
            Err(RecvTimeoutError::Timeout) => continue,
            Err(RecvTimeoutError::Disconnected) => return,
        };
        // What else waits goes in the same publication, in order: one
        // Zenoh message per batch, never a wait for more to come.
        ups.clear();
        ups.push(up);
        ups.extend(uplink.try_iter().take(Batch::MAX_ITEMS - 1));
        ups.retain(|up| up.round == synced);
        if ups.is_empty() {
            continue;
        }
        // A request published while no owner subscribes would be lost.
        if !wait_until_live(channel, sessions, presence) {
            return;
        }
        if presence.round.load(Ordering::Acquire) != synced {
            // Still in their FIFOs: the next round sends them.
            continue;
        }
        let Ok(handed_over) = presence.handed_over.lock() else { return };
        if *handed_over {
            return;
        }
        let publish = |batch: &Batch| {
            let sent = publisher.put(batch.bytes()).wait();
            sent.map_err(|e| error!(channel, "cannot send frames to the owner: {e}")).is_ok()
        };
        batch.clear();
        for up in &ups {
            // Large frames fill a batch's bytes before its count.
            if !batch.has_room() {
                if !publish(&batch) {
                    return;
                }
                batch.clear();
            }
            batch.push(|out| TxRequest::encode_parts(out, &me, (up.port_id, up.arrival), &up.frame));
        }
        if !publish(&batch) {
            return;
        }
    }
}

/// Wait until the owner of the followed term is there; false when the hub
/// stops first. Frames wait meanwhile, holding their senders' credit.
fn wait_until_live(channel: &str, sessions: &Sessions, presence: &Presence) -> bool {
    let mut looks = 0u64;
    // SYNC POINT with the events thread's and the callback's Release stores.
    while !presence.live.load(Ordering::Acquire) {
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

/// Applies committed events in sequence order, term after term.
struct Sequencer<'a> {
    session: &'a zenoh::Session,
    channel: &'a FederatedChannel,
    sessions: &'a Sessions,
    /// How events are applied, shared with the subscriber's callback.
    applier: &'a Applier,
    /// The configured owner, named while none is there yet.
    owner: String,
    status: &'a ChannelStatus,
    presence: &'a Presence,
    ledger: &'a Mutex<Ledger>,
    /// What the link watch knows is wrong, and the change of it last told.
    trouble: (&'a LinkTrouble, u64),
    /// The owners' changes (`Presence::changes`) last looked at.
    seen_changes: u64,
    /// The term whose events are applied now.
    term: Option<Term>,
    /// The last `seq` applied in `term`; `None`: none yet, and the first
    /// event seen starts it (this hub's first term only).
    last: Option<u64>,
    /// The term whose owner this hub saw there (it went live under it).
    live_term: Option<Term>,
    /// Whether the clients were told the channel waits (and not live since).
    told_waiting: bool,
}

impl Sequencer<'_> {
    /// Apply events until the hub stops (false) or, on a standby, the
    /// owner is gone and this hub takes over (true).
    fn run(&mut self, events: &Receiver<Vec<u8>>, standby: bool) -> bool {
        while !self.sessions.stopping() {
            self.reclaim();
            if !self.watch_owners(!events.is_empty()) {
                return false;
            }
            // SYNC POINT with the liveliness callback's Release store. Events
            // still queued are the old owner's last: applied first, below,
            // as long as they come before the takeover is seen.
            if standby && self.presence.takeover.load(Ordering::Acquire) && events.is_empty() {
                // The new term starts from what the other hubs applied too.
                return self.term.is_none_or(|term| self.finish(term));
            }
            self.offer(events, standby);
            let payload = match events.recv_timeout(LOOK) {
                Ok(payload) => payload,
                Err(RecvTimeoutError::Timeout) => continue,
                Err(RecvTimeoutError::Disconnected) => return false,
            };
            self.reclaim();
            for item in Batch::items(&payload) {
                match item.and_then(|bytes| Ok((Event::decode(bytes)?, bytes))) {
                    Ok((event, bytes)) => {
                        if !self.receive(event, bytes.to_vec()) {
                            return false;
                        }
                    }
                    Err(e) => warn!(channel = %self.channel.name, "refusing an event: {e}"),
                }
            }
            // One wake of the bus for the publication's events.
            self.sessions.inbox.wake_bus();
        }
        false
    }

    /// Take the position back from the subscriber's callback: the events it
    /// applied are this thread's too.
    fn reclaim(&mut self) {
        let Ok(mut position) = self.applier.position.lock() else { return };
        position.fast = false;
        if let Some((term, next)) = position.next.take() {
            if self.term == Some(term) {
                self.last = self.last.max(Some(next - 1));
            }
        }
    }

    /// Offer the position to the subscriber's callback while nothing needs
    /// this thread: live under the followed term's owner, past this hub's
    /// first event, nothing queued here and no takeover due.
    fn offer(&self, events: &Receiver<Vec<u8>>, standby: bool) {
        let (Some(term), Some(last)) = (self.term, self.last) else { return };
        // SYNC POINT with the liveliness callback's Release stores.
        let live = self.presence.live.load(Ordering::Acquire);
        let takeover = standby && self.presence.takeover.load(Ordering::Acquire);
        if !live || takeover || self.told_waiting || self.live_term != Some(term) || !events.is_empty() {
            return;
        }
        if let Ok(mut position) = self.applier.position.lock() {
            position.fast = true;
            position.next = Some((term, last + 1));
        }
    }

    /// Follow the owners' comings and goings: tell the clients the channel
    /// waits when no owner of the followed term (or a newer one) is there,
    /// start a newer owner's term once the events queued here are applied,
    /// and go live under an owner of the followed term. False when the bus
    /// is gone.
    fn watch_owners(&mut self, events_queued: bool) -> bool {
        // SYNC POINT with the callback's Release increment and store: while
        // live and nothing changed there is nothing to do (once per event).
        let changes = self.presence.changes.load(Ordering::Acquire);
        if changes == self.seen_changes && !self.told_waiting && self.presence.live.load(Ordering::Acquire) {
            return true;
        }
        self.seen_changes = changes;
        let newest = self.presence.owners.lock().ok().and_then(|o| o.iter().max_by_key(|(_, t)| *t).cloned());
        match newest {
            Some((hub, term)) if self.term.is_none_or(|followed| term > followed) => {
                // The old owner's last events, queued before its departure,
                // come first; then look again.
                if events_queued {
                    self.seen_changes = u64::MAX;
                    return true;
                }
                if let Some(old) = self.term {
                    if !self.finish(old) {
                        return false;
                    }
                }
                self.start(term);
                self.go_live(&hub, term)
            }
            Some((hub, term)) if Some(term) == self.term => {
                // SYNC POINT with the callback's Release store of `live`.
                if self.presence.live.load(Ordering::Acquire) {
                    return true;
                }
                self.go_live(&hub, term)
            }
            Some((hub, term)) => self.tell_waiting(|this| {
                format!(
                    "waits for an owner: hub '{hub}' is there with {term}, older than the {} this hub follows, \
                     and its events are refused; frames sent now wait (none is lost)",
                    this.term.map(|t| t.to_string()).unwrap_or_default()
                )
            }),
            None => {
                // Its owner gone and every event it sent applied: this hub's
                // part of the term is final.
                if !events_queued && self.live_term.is_some() && self.live_term == self.term {
                    if let Some(term) = self.term {
                        self.ledger.lock().map(|mut l| l.settle(term)).unwrap_or_default();
                    }
                }
                self.tell_waiting(|this| match this.live_term {
                    None => format!(
                        "waits for its owner hub '{}', which this hub has not linked to yet; frames sent now \
                         wait for it (none is lost)",
                        this.owner
                    ),
                    Some(term) => {
                        let standby = this.presence.takeover.load(Ordering::Acquire);
                        format!(
                            "waits for an owner: its owner hub '{}' ({term}) left; frames sent now wait for it to \
                             come back{} (none is lost)",
                            this.status.snapshot().owner,
                            if standby { " or for this hub, its standby, to take over" } else { "" }
                        )
                    }
                })
            }
        }
    }

    /// Tell the clients the channel waits (once, or again when the link
    /// watch found out why); false when the bus is gone.
    fn tell_waiting(&mut self, text: impl FnOnce(&Self) -> String) -> bool {
        let (trouble, told) = self.trouble;
        let changes = trouble.changes();
        if self.told_waiting && changes == told {
            return true;
        }
        self.trouble.1 = changes;
        self.told_waiting = true;
        let text = text(self);
        let text = match trouble.text() {
            Some(why) => format!("{text}: {why}"),
            None => text,
        };
        self.tell(ChannelCondition::Waiting, 0, text)
    }

    /// Go live under `hub`'s `term`, the followed one, if its owner is still
    /// there: frames waiting here go to it. False when the bus is gone.
    fn go_live(&mut self, hub: &str, term: Term) -> bool {
        {
            let Ok(owners) = self.presence.owners.lock() else { return false };
            if !owners.iter().any(|(h, t)| h == hub && *t == term) {
                return true;
            }
            self.presence.live.store(true, Ordering::Release);
            self.presence.round.fetch_add(1, Ordering::AcqRel);
        }
        self.live_term = Some(term);
        self.ledger.lock().map(|mut l| l.follow(term)).unwrap_or_default();
        info!(channel = %self.channel.name, owner = %hub, epoch = term.epoch, incarnation = term.incarnation,
            "federation: the owner is there");
        if !self.told_waiting {
            return true;
        }
        self.told_waiting = false;
        self.tell(ChannelCondition::Live, 0, format!("is live: its owner hub '{hub}' sequences it ({term})"))
    }

    /// Follow `term` from now on: its events are applied from its first
    /// (fetched when missed), but on this hub's first term, which starts
    /// with the first event seen.
    fn start(&mut self, term: Term) {
        if let Some(old) = self.term {
            info!(channel = %self.channel.name, epoch = term.epoch, incarnation = term.incarnation,
                previous = %old, "federation: a new owner term");
            self.last = Some(0);
        }
        self.term = Some(term);
        self.status.epoch.store(term.epoch, Ordering::Relaxed);
        self.status.last_seq.store(0, Ordering::Relaxed);
        self.ledger.lock().map(|mut l| l.follow(term)).unwrap_or_default();
    }

    /// Take one event from the subscription; false when the bus is gone.
    fn receive(&mut self, event: Event, bytes: Vec<u8>) -> bool {
        match self.term {
            None => self.start(event.term),
            Some(term) if event.term < term => {
                if self.status.stale.fetch_add(1, Ordering::Relaxed) == 0 {
                    warn!(channel = %self.channel.name, refused = %event.term, current = %term,
                        "refusing events of an older owner term");
                }
                return true;
            }
            Some(term) if event.term > term => {
                // A new owner's events came before its token: the old term ends here.
                if !self.finish(term) {
                    return false;
                }
                self.start(event.term);
            }
            Some(_) => {}
        }
        match self.last {
            Some(last) if event.seq <= last => true,
            Some(last) if event.seq > last + 1 => self.recover(event.seq - 1) && self.apply(event, bytes),
            _ => self.apply(event, bytes),
        }
    }

    /// Fetch and apply the events after the last applied up to `to` of the
    /// followed term from every hub that still holds them; report what none
    /// holds. False when the bus is gone.
    ///
    /// Until a hub that got as far as `to` answers, the query is asked again
    /// for a while: on a link just made, the owner's events can come before
    /// its history's queryable is known here.
    fn recover(&mut self, to: u64) -> bool {
        let Some(term) = self.term else { return true };
        let settle_by = Instant::now() + SETTLE_TIMEOUT;
        while self.last.unwrap_or(0) < to {
            let before = self.last;
            let Some((replies, _)) = self.fetch(HistoryQuery { term, from: before.unwrap_or(0) + 1, to }) else {
                break;
            };
            let reached = replies.iter().any(|r| r.last >= to);
            if !self.apply_fetched(term, replies) {
                return false;
            }
            if self.last != before {
                continue;
            }
            // Nobody holds them: gone, unless the hub that has them is not heard yet.
            if reached || Instant::now() >= settle_by || self.sessions.stopping() {
                break;
            }
            std::thread::sleep(LOOK);
        }
        let next = self.last.unwrap_or(0) + 1;
        if next > to {
            self.status.gaps_recovered.fetch_add(1, Ordering::Relaxed);
            return true;
        }
        self.last = Some(to);
        let text = format!(
            "lacks events {next}..={to} of its owner's {term}: no hub that answered holds them any more; \
             from here on this hub's frames differ from the other hubs' (raise [federation] history if this recurs)"
        );
        self.report_gap(to - next + 1, text)
    }

    /// End `term` here: collect its events this hub lacks from every hub
    /// that applied more of it, waiting for those still taking its last
    /// events, and report what none holds. False when the bus is gone.
    fn finish(&mut self, term: Term) -> bool {
        self.ledger.lock().map(|mut l| l.settle(term)).unwrap_or_default();
        // A first term this hub applied nothing of: no client saw any of it.
        let Some(mut last) = self.last.filter(|_| self.term == Some(term)) else { return true };
        let settle_by = Instant::now() + SETTLE_TIMEOUT;
        let had = last;
        let mut known = last;
        while let Some((replies, pending)) = self.fetch(HistoryQuery { term, from: last + 1, to: u64::MAX }) {
            known = known.max(replies.iter().map(|r| r.last).max().unwrap_or(0));
            if !self.apply_fetched(term, replies) {
                return false;
            }
            let now = self.last.unwrap_or(0);
            if now > last {
                last = now;
                continue;
            }
            // Nobody has more for now: done, unless a hub still takes them.
            if !pending || Instant::now() >= settle_by || self.sessions.stopping() {
                break;
            }
            std::thread::sleep(LOOK);
        }
        info!(channel = %self.channel.name, term = %term, last, fetched = last - had,
            lacking = known.saturating_sub(last), "federation: the old owner's term ends here");
        if known <= last {
            return true;
        }
        let text = format!(
            "lacks {} events its owner published under {term} before it left: this hub applied {last}, \
             another hub {known}, and no hub that answered holds the rest; from here on this hub's frames differ \
             from the other hubs'",
            known - last
        );
        self.report_gap(known - last, text)
    }

    /// The replies to `query` from every hub that answers (this one too),
    /// and whether one of them may still apply more of the term; `None`
    /// when the query could not be made.
    fn fetch(&self, query: HistoryQuery) -> Option<(Vec<HistoryReply>, bool)> {
        let selector = format!("{}?{}", key(&self.channel.name, "history"), query.parameters());
        let replies = self
            .session
            .get(selector)
            .consolidation(ConsolidationMode::None)
            .timeout(QUERY_TIMEOUT)
            .wait()
            .map_err(|e| warn!(channel = %self.channel.name, "cannot query the other hubs' history: {e}"))
            .ok()?;
        let mut got = Vec::new();
        let mut pending = false;
        while let Ok(reply) = replies.recv() {
            let Ok(sample) = reply.result() else { continue };
            match HistoryReply::decode(&sample.payload().to_bytes()) {
                Ok(reply) => {
                    pending |= !reply.done;
                    got.push(reply);
                }
                Err(e) => warn!(channel = %self.channel.name, "refusing a history reply: {e}"),
            }
        }
        Some((got, pending))
    }

    /// Apply the events of `term` after the last applied that `replies`
    /// hold, consecutively; false when the bus is gone.
    fn apply_fetched(&mut self, term: Term, replies: Vec<HistoryReply>) -> bool {
        let after = self.last.unwrap_or(0);
        let mut found: BTreeMap<u64, (Event, Vec<u8>)> = BTreeMap::new();
        for bytes in replies.into_iter().flat_map(|r| r.events) {
            match Event::decode(&bytes) {
                Ok(event) if event.term == term && event.seq > after => {
                    found.entry(event.seq).or_insert((event, bytes));
                }
                Ok(_) => {}
                Err(e) => warn!(channel = %self.channel.name, "refusing a fetched event: {e}"),
            }
        }
        for (seq, (event, bytes)) in found {
            if seq != self.last.unwrap_or(0) + 1 {
                break;
            }
            if !self.apply(event, bytes) {
                return false;
            }
        }
        self.sessions.inbox.wake_bus();
        true
    }

    /// Count a desynchronisation and tell the clients what they lack.
    fn report_gap(&mut self, missed: u64, text: String) -> bool {
        self.status.desyncs.fetch_add(1, Ordering::Relaxed);
        self.tell(ChannelCondition::Gap, u32::try_from(missed).unwrap_or(u32::MAX), text)
    }

    fn tell(&self, condition: ChannelCondition, missed: u32, text: String) -> bool {
        let state = Inbound::FederationState { channel: self.channel.id, condition, missed, text };
        self.sessions.inbox.send(state).is_ok()
    }

    /// Hand one event to the bus and keep it; false when the bus is gone.
    /// Queued quietly: the caller wakes the bus once after its events.
    fn apply(&mut self, event: Event, bytes: Vec<u8>) -> bool {
        self.last = Some(event.seq);
        let Ok(mut position) = self.applier.position.lock() else { return false };
        self.applier.apply(&mut position, event, &bytes)
    }
}
