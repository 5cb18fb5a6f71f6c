//! The connections in their handshake (accepted, no `HELLO` accepted yet),
//! per peer: which one to close to make room for a new one.
//!
//! Strangers that connect and say nothing must not lock everyone else out.
//! One peer (`session/peer_key.rs`: a local user, a remote address) holds
//! at most [`MAX_HANDSHAKES_PER_PEER`]; when it opens one more, its own
//! oldest is closed. When all [`MAX_HANDSHAKES`] are taken, the oldest of
//! all is closed. So a new connection always gets its slot, and a client
//! that sends its `HELLO` at once (every fieldhub client does) is past its
//! handshake before anyone else's connections could push it out.
//!
//! Invariants: a connection is held here from its admission until it
//! leaves its handshake or ends (the reactor releases it); each peer's
//! queue is in accept order (serials grow), at most
//! [`MAX_HANDSHAKES_PER_PEER`] long, and the total at most
//! [`MAX_HANDSHAKES`]; nothing here touches a socket.

use std::collections::{HashMap, VecDeque};

use crate::session::peer_key::PeerKey;
use crate::session::{MAX_HANDSHAKES, MAX_HANDSHAKES_PER_PEER};

/// The connections in their handshake, by peer: (serial, connection index).
#[derive(Default)]
pub(super) struct Pending {
    peers: HashMap<PeerKey, VecDeque<(u64, usize)>>,
    total: usize,
}

/// A connection to close to make room: its peer, index and serial.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) struct Victim {
    pub(super) peer: PeerKey,
    pub(super) index: usize,
    pub(super) serial: u64,
    pub(super) why: Room,
}

/// Why a connection is closed to make room.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Room {
    /// Its peer opened one more than [`MAX_HANDSHAKES_PER_PEER`].
    PeerFull,
    /// Every one of the [`MAX_HANDSHAKES`] slots was taken.
    HubFull,
}

impl Room {
    /// What the closed connection is told.
    pub(super) fn text(self) -> String {
        match self {
            Room::PeerFull => format!(
                "closed to make room: this peer opened more than {MAX_HANDSHAKES_PER_PEER} connections that have \
                 not sent their HELLO; its oldest goes first"
            ),
            Room::HubFull => format!(
                "closed to make room: {MAX_HANDSHAKES} connections were waiting for their HELLO; the oldest goes \
                 first"
            ),
        }
    }
}

impl Pending {
    /// The connection to close before one more of `peer` is admitted, and
    /// why; `None` when there is room.
    pub(super) fn room_for(&self, peer: PeerKey) -> Option<Victim> {
        if let Some(queue) = self.peers.get(&peer).filter(|q| q.len() >= MAX_HANDSHAKES_PER_PEER) {
            let &(serial, index) = queue.front()?;
            return Some(Victim { peer, index, serial, why: Room::PeerFull });
        }
        if self.total < MAX_HANDSHAKES {
            return None;
        }
        let (peer, &(serial, index)) =
            self.peers.iter().filter_map(|(peer, q)| Some((*peer, q.front()?))).min_by_key(|(_, front)| **front)?;
        Some(Victim { peer, index, serial, why: Room::HubFull })
    }

    /// Hold connection `index` (`serial`) of `peer`, just admitted; its
    /// serial is the newest yet.
    pub(super) fn hold(&mut self, peer: PeerKey, index: usize, serial: u64) {
        self.peers.entry(peer).or_default().push_back((serial, index));
        self.total += 1;
    }

    /// Let go of connection `serial` of `peer`: its handshake is over.
    pub(super) fn release(&mut self, peer: PeerKey, serial: u64) {
        let Some(queue) = self.peers.get_mut(&peer) else { return };
        let Some(at) = queue.iter().position(|&(s, _)| s == serial) else { return };
        queue.remove(at);
        self.total -= 1;
        if queue.is_empty() {
            self.peers.remove(&peer);
        }
    }

    /// Connections held.
    #[cfg(test)]
    pub(super) fn total(&self) -> usize {
        self.total
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const NOBODY: PeerKey = PeerKey::User(65534);
    const ROOT: PeerKey = PeerKey::User(0);

    #[test]
    fn a_peer_over_its_quota_makes_room_with_its_own_oldest_and_others_are_untouched() {
        let mut pending = Pending::default();
        pending.hold(ROOT, 900, 1);
        for serial in 2..2 + MAX_HANDSHAKES_PER_PEER as u64 {
            assert_eq!(pending.room_for(NOBODY), None);
            pending.hold(NOBODY, serial as usize, serial);
        }
        let victim = Victim { peer: NOBODY, index: 2, serial: 2, why: Room::PeerFull };
        assert_eq!(pending.room_for(NOBODY), Some(victim), "nobody's oldest, not root's");
        assert_eq!(pending.room_for(ROOT), None, "root still has room");
        pending.release(NOBODY, 2);
        assert_eq!(pending.room_for(NOBODY), None);
        assert_eq!(pending.total(), MAX_HANDSHAKES_PER_PEER);
    }

    #[test]
    fn a_full_hub_makes_room_with_the_oldest_connection_of_all() {
        let mut pending = Pending::default();
        let mut serial = 0;
        for peer in 0..(MAX_HANDSHAKES / MAX_HANDSHAKES_PER_PEER) as u8 {
            for _ in 0..MAX_HANDSHAKES_PER_PEER {
                serial += 1;
                pending.hold(PeerKey::Address([10, 0, 0, peer].into()), serial as usize + 100, serial);
            }
        }
        assert_eq!(pending.total(), MAX_HANDSHAKES);
        let first = PeerKey::Address([10, 0, 0, 0].into());
        assert_eq!(pending.room_for(ROOT), Some(Victim { peer: first, index: 101, serial: 1, why: Room::HubFull }));
        pending.release(first, 1);
        assert_eq!(pending.room_for(ROOT), None);
        pending.hold(ROOT, 7, serial + 1);
        let next = Victim { peer: first, index: 102, serial: 2, why: Room::HubFull };
        assert_eq!(pending.room_for(ROOT), Some(next), "then the next oldest");
    }

    #[test]
    fn releasing_a_connection_not_held_changes_nothing() {
        let mut pending = Pending::default();
        pending.hold(ROOT, 1, 1);
        pending.release(ROOT, 2);
        pending.release(NOBODY, 1);
        assert_eq!(pending.total(), 1);
        pending.release(ROOT, 1);
        assert_eq!(pending.total(), 0);
        assert!(pending.peers.is_empty());
    }
}
