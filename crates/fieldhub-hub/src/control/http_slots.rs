//! The control API's connection slots, per peer: no party can hold the API
//! at `503` for everyone else by keeping connections open.
//!
//! - Once half the [`MAX_CONNECTIONS`] are open, one peer
//!   (`session/peer_key.rs`: a local user, a remote address) holds at most
//!   [`MAX_PER_PEER`] (until then a burst of one user's requests is not
//!   held back).
//! - A new connection gets a slot by closing another when needed: its
//!   peer's own oldest when that peer is over its share, else (all slots
//!   taken) the oldest of all. Connections that never presented valid
//!   credentials go first, then idle ones that did; a connection in the
//!   middle of an authorised request is never closed. Only when no
//!   connection may be closed is the new one refused.
//!
//! Invariants: a connection holds its slot from its admission until its
//! [`Slot`] drops or it is closed to make room (then its task is told at
//! once and the slot is someone else's); the table is behind one lock,
//! taken per connection and per authorised request, never across an
//! await.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex, MutexGuard};

use tokio::sync::Notify;

use crate::session::peer_key::PeerKey;

/// HTTP connections served at once.
pub const MAX_CONNECTIONS: usize = 64;
/// HTTP connections one peer may hold at once.
pub const MAX_PER_PEER: usize = 16;

/// The connections served, by admission order.
#[derive(Default)]
pub struct HttpSlots {
    table: Mutex<Table>,
}

#[derive(Default)]
struct Table {
    /// By id, which grows with admission: the first entries are the oldest.
    conns: BTreeMap<u64, Entry>,
    next: u64,
}

struct Entry {
    peer: PeerKey,
    /// It presented valid credentials (or is the hub's own user's).
    trusted: bool,
    /// Authorised requests under way.
    busy: u32,
    /// Told when it is closed to make room.
    closed: Arc<Notify>,
}

/// Why a connection got no slot.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Refused {
    /// Its peer holds [`MAX_PER_PEER`] or more, each in an authorised
    /// request, and half the slots are taken.
    PeerFull,
    /// All [`MAX_CONNECTIONS`] are in authorised requests.
    Full,
}

impl Refused {
    /// What the refused client is told.
    pub fn text(self) -> String {
        match self {
            Refused::PeerFull => format!(
                "this client already has {MAX_PER_PEER} or more HTTP connections to the hub, each in a request; \
                 close one or try again later"
            ),
            Refused::Full => format!(
                "the hub serves {MAX_CONNECTIONS} HTTP connections at once, each in a request; close one or try \
                 again later"
            ),
        }
    }
}

/// A connection's slot: freed when dropped.
pub struct Slot {
    handle: SlotHandle,
    /// Notified when the connection is closed to make room.
    pub closed: Arc<Notify>,
}

/// A connection's slot as its requests see it (cloned into each).
#[derive(Clone)]
pub struct SlotHandle {
    slots: Arc<HttpSlots>,
    id: u64,
}

/// An authorised request under way on a connection: it is not closed to
/// make room until this drops.
pub struct Busy(SlotHandle);

impl HttpSlots {
    fn lock(&self) -> MutexGuard<'_, Table> {
        self.table.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    /// A slot for a new connection of `peer`, closing another connection
    /// first when needed (see the module doc).
    pub fn admit(self: &Arc<Self>, peer: PeerKey) -> Result<Slot, Refused> {
        let mut table = self.lock();
        let mine = table.conns.values().filter(|e| e.peer == peer).count();
        let victim = if mine >= MAX_PER_PEER && table.conns.len() >= MAX_CONNECTIONS / 2 {
            Some(table.closable(|e| e.peer == peer).ok_or(Refused::PeerFull)?)
        } else if table.conns.len() >= MAX_CONNECTIONS {
            Some(table.closable(|_| true).ok_or(Refused::Full)?)
        } else {
            None
        };
        if let Some(entry) = victim.and_then(|id| table.conns.remove(&id)) {
            entry.closed.notify_one();
        }
        let id = table.next;
        table.next += 1;
        let closed = Arc::new(Notify::new());
        table.conns.insert(id, Entry { peer, trusted: false, busy: 0, closed: Arc::clone(&closed) });
        Ok(Slot { handle: SlotHandle { slots: Arc::clone(self), id }, closed })
    }

    /// Connections holding a slot.
    #[cfg(test)]
    fn len(&self) -> usize {
        self.lock().conns.len()
    }
}

impl Table {
    /// The connection among `which` to close first: the oldest that never
    /// presented credentials, else the oldest idle one; never one in an
    /// authorised request.
    fn closable(&self, which: impl Fn(&Entry) -> bool) -> Option<u64> {
        let idle = || self.conns.iter().filter(|(_, e)| which(e) && e.busy == 0);
        idle().find(|(_, e)| !e.trusted).or_else(|| idle().next()).map(|(id, _)| *id)
    }
}

impl Slot {
    /// The handle its requests carry.
    pub fn handle(&self) -> SlotHandle {
        self.handle.clone()
    }
}

impl Drop for Slot {
    fn drop(&mut self) {
        self.handle.slots.lock().conns.remove(&self.handle.id);
    }
}

impl SlotHandle {
    /// The connection presented valid credentials and starts an authorised
    /// request: it is kept until the request is answered.
    pub fn authorised(&self) -> Busy {
        if let Some(entry) = self.slots.lock().conns.get_mut(&self.id) {
            entry.trusted = true;
            entry.busy += 1;
        }
        Busy(self.clone())
    }
}

impl Drop for Busy {
    fn drop(&mut self) {
        if let Some(entry) = self.0.slots.lock().conns.get_mut(&self.0.id) {
            entry.busy = entry.busy.saturating_sub(1);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const NOBODY: PeerKey = PeerKey::User(65534);
    const ROOT: PeerKey = PeerKey::User(0);

    #[test]
    fn once_half_are_open_a_peer_at_its_share_makes_room_with_its_own_oldest_connection() {
        let slots = Arc::new(HttpSlots::default());
        let root = slots.admit(ROOT).unwrap();
        let _others: Vec<Slot> = (0..MAX_CONNECTIONS / 2 - MAX_PER_PEER - 1)
            .map(|i| slots.admit(PeerKey::Address([10, 0, 0, (i / MAX_PER_PEER) as u8].into())).unwrap())
            .collect();
        let nobody: Vec<Slot> = (0..MAX_PER_PEER).map(|_| slots.admit(NOBODY).unwrap()).collect();
        let one_more = slots.admit(NOBODY).unwrap();
        assert_eq!(slots.len(), MAX_CONNECTIONS / 2, "nobody's oldest made room");
        assert!(slots.lock().conns.contains_key(&root.handle.id), "root's connection is untouched");
        assert!(!slots.lock().conns.contains_key(&nobody[0].handle.id));
        drop(nobody);
        drop(one_more);
        assert_eq!(slots.len(), MAX_CONNECTIONS / 2 - MAX_PER_PEER);
    }

    #[test]
    fn while_few_are_open_a_burst_of_one_peer_is_not_held_to_its_share() {
        let slots = Arc::new(HttpSlots::default());
        let burst: Vec<Slot> = (0..MAX_CONNECTIONS / 2).map(|_| slots.admit(ROOT).unwrap()).collect();
        assert_eq!(slots.len(), burst.len(), "none closed");
        let _one_more = slots.admit(ROOT).unwrap();
        assert!(!slots.lock().conns.contains_key(&burst[0].handle.id), "then its oldest makes room");
    }

    #[test]
    fn a_full_api_closes_connections_without_credentials_first_and_never_one_in_an_authorised_request() {
        let slots = Arc::new(HttpSlots::default());
        let trusted: Vec<Slot> = (0..MAX_PER_PEER).map(|_| slots.admit(ROOT).unwrap()).collect();
        let busy: Vec<Busy> = trusted[1..].iter().map(|s| s.handle().authorised()).collect();
        drop(trusted[0].handle().authorised());
        let strangers: Vec<Slot> = (1..=3u8)
            .flat_map(|peer| (0..MAX_PER_PEER).map(move |_| PeerKey::Address([10, 0, 0, peer].into())))
            .map(|peer| slots.admit(peer).unwrap())
            .collect();
        assert_eq!(slots.len(), MAX_CONNECTIONS);

        let newcomer = slots.admit(PeerKey::Address([10, 0, 0, 9].into())).unwrap();
        assert!(!slots.lock().conns.contains_key(&strangers[0].handle.id), "the oldest stranger made room");
        assert!(slots.lock().conns.contains_key(&trusted[0].handle.id), "an idle trusted one is kept meanwhile");
        drop((strangers, newcomer));

        // Now only root's: the idle one goes, the busy ones never.
        let others: Vec<Slot> = (0..MAX_CONNECTIONS - MAX_PER_PEER)
            .map(|i| slots.admit(PeerKey::Address([10, 1, (i / MAX_PER_PEER) as u8, 0].into())).unwrap())
            .collect();
        let _all_busy: Vec<Busy> = others.iter().map(|s| s.handle().authorised()).collect();
        let admitted = slots.admit(NOBODY).unwrap();
        assert!(!slots.lock().conns.contains_key(&trusted[0].handle.id), "the idle trusted connection made room");
        assert_eq!(slots.len(), MAX_CONNECTIONS);
        drop((admitted, busy));
    }

    #[test]
    fn a_peer_whose_connections_are_all_in_authorised_requests_is_refused_and_another_still_gets_in() {
        let slots = Arc::new(HttpSlots::default());
        let held: Vec<Slot> = (0..MAX_CONNECTIONS / 2).map(|_| slots.admit(ROOT).unwrap()).collect();
        let _busy: Vec<Busy> = held.iter().map(|s| s.handle().authorised()).collect();
        assert_eq!(slots.admit(ROOT).err(), Some(Refused::PeerFull));
        assert!(slots.admit(NOBODY).is_ok(), "another peer still gets in");
    }
}
