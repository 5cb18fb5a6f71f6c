//! How a relay applies the owner's committed events, and the fast way in:
//! the events subscriber's Zenoh callback applies the next event of the
//! followed term itself, straight from the link's receive task to the bus,
//! while the relay's events thread (`relay.rs`) has nothing else to do — no
//! queue and no thread between them, a hand-off each event paid in the
//! round trip (issue 35). Everything else — a gap to fetch, a new term, an
//! owner gone, an event out of order — goes to the events thread, which
//! takes the position back first.
//!
//! Invariants:
//! - An event is applied only as the next of its term ([`Position::next`]
//!   names the term and the `seq` expected): whichever side applies it, the
//!   order is the owner's, and an event the callback passed on (with the
//!   rest of its publication) is skipped by the thread, which takes the
//!   callback's `next` back with the position.
//! - The callback applies only while the events thread offered it the
//!   position and has not taken it back; the thread takes it back before
//!   it applies, fetches or starts a term, under the same lock.
//! - The lock is the relay's alone (the control plane never takes it); the
//!   callback never waits for the thread while holding it.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use tracing::warn;

use super::event::{Batch, Body, Event, Term};
use super::ledger::Ledger;
use crate::session::Sessions;
use fieldhub_bus::federation::ChannelStatus;
use fieldhub_bus::inbox::Inbound;

/// Per relay port (Zenoh session id, port id), the arrival number of the
/// newest of its frames committed.
pub type Committed = HashMap<(String, u32), u64>;

/// Where a relay stands in its owner's events, as far as the callback may
/// move it.
#[derive(Default)]
pub struct Position {
    /// Whether the callback may apply events: the events thread offered it
    /// the position and nothing came out of order since.
    pub fast: bool,
    /// The followed term and the `seq` of the event to apply next, as the
    /// events thread offered it and the callback moved it; the thread takes
    /// it back (once) when it takes the position back.
    pub next: Option<(Term, u64)>,
    /// Per relay port, the newest of its frames applied (for a standby's
    /// takeover), whichever side applied it.
    pub committed: Committed,
}

/// What applying an event needs, owned, for both the thread and the callback.
pub struct Applier {
    pub channel: u16,
    /// The channel's name, for the log.
    pub name: String,
    /// This hub's Zenoh session id: events naming it are its own ports' frames.
    pub me: String,
    pub sessions: Arc<Sessions>,
    pub status: Arc<ChannelStatus>,
    pub ledger: Arc<Mutex<Ledger>>,
    pub position: Mutex<Position>,
}

impl Applier {
    /// The callback's part of one publication on `fieldhub/C/events`:
    /// apply its events while each is the next expected; `false` when one
    /// was not, and the whole publication goes to the events thread (which
    /// skips what was applied here).
    pub fn take_fast(&self, payload: &[u8]) -> bool {
        let Ok(mut position) = self.position.lock() else { return false };
        if !position.fast {
            return false;
        }
        let mut all = true;
        for item in Batch::items(payload) {
            match item.and_then(|bytes| Ok((Event::decode(bytes)?, bytes))) {
                Ok((event, bytes)) => {
                    let Some((term, next)) = position.next else {
                        all = false;
                        break;
                    };
                    if event.term != term || event.seq != next {
                        all = false;
                        break;
                    }
                    position.next = Some((term, next + 1));
                    if !self.apply(&mut position, event, bytes) {
                        all = false;
                        break;
                    }
                }
                Err(e) => warn!(channel = %self.name, "refusing an event: {e}"),
            }
        }
        if !all {
            // The events thread takes over from here (and `next` with it).
            position.fast = false;
        }
        drop(position);
        self.sessions.inbox.wake_bus();
        all
    }

    /// Hand one event to the bus and keep it in the ledger; false when the
    /// bus is gone. Queued quietly: the caller wakes the bus once after its
    /// events.
    pub fn apply(&self, position: &mut Position, event: Event, bytes: &[u8]) -> bool {
        self.status.last_seq.store(event.seq, std::sync::atomic::Ordering::Relaxed);
        if let Ok(mut ledger) = self.ledger.lock() {
            ledger.push(event.term, event.seq, bytes);
        }
        let mine = event.origin.as_ref().filter(|o| o.relay == self.me).map(|o| (o.port_id, o.arrival));
        if let Some(o) = event.origin {
            // The decoded origin's name becomes the key: no copy of it.
            let newest = position.committed.entry((o.relay, o.port_id)).or_insert(o.arrival);
            *newest = o.arrival.max(*newest);
        }
        let channel = self.channel;
        let inbound = match (event.body, mine) {
            (Body::Frame(frame), origin) => Inbound::Committed { channel, origin, frame },
            (Body::Dropped(reason), Some(origin)) => Inbound::CommitDropped { channel, origin, reason },
            // Another hub's frame off the bus: its own relay tells its sender.
            (Body::Dropped(_), None) => return true,
        };
        self.sessions.inbox.send_quietly(inbound).is_ok()
    }
}
