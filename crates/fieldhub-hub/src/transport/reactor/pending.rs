//! The connections in their handshake (accepted, not yet admitted: no
//! `HELLO` accepted, or on a hub with a token no `AUTH`),
//! per peer: which one to close to make room for a new one.
//!
//! Strangers that connect and say nothing must not lock everyone else out.
//! Once half the [`MAX_HANDSHAKES`] slots are taken ([`SCARCE`]), one peer
//! (`session/peer_key.rs`: a local user, a remote address) holding
//! [`MAX_HANDSHAKES_PER_PEER`] or more gets a new slot only by closing its
//! own oldest; until then a burst of one user's clients connecting at once
//! is not held back. When all slots are taken, the oldest of all is closed.
//! So a new connection always gets its slot, no peer can take more than
//! half of them from the others, and a client that sends its `HELLO` at
//! once (every fieldhub client does) is past its handshake before anyone
//! else's connections could push it out.
//!
//! Invariants: a connection is held here from its admission until it
//! leaves its handshake or ends (the reactor releases it); each peer's
//! queue is in accept order (serials grow); the total is at most
//! [`MAX_HANDSHAKES`]; nothing here touches a socket.

use std::collections::{HashMap, VecDeque};

use crate::session::peer_key::PeerKey;
use crate::session::{MAX_HANDSHAKES, MAX_HANDSHAKES_PER_PEER};

/// Slots taken from which each peer is held to its share.
pub(super) const SCARCE: usize = MAX_HANDSHAKES / 2;

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
                "closed to make room: this peer has {MAX_HANDSHAKES_PER_PEER} or more connections that have not \
                 sent their HELLO while the hub's handshake slots are scarce; its oldest goes first"
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
        let over_share = |q: &&VecDeque<(u64, usize)>| q.len() >= MAX_HANDSHAKES_PER_PEER && self.total >= SCARCE;
        if let Some(queue) = self.peers.get(&peer).filter(over_share) {
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
    fn while_slots_are_scarce_a_peer_over_its_share_makes_room_with_its_own_oldest_and_others_are_untouched() {
        let mut pending = Pending::default();
        let mut serial = 0;
        // Others hold a share each, and root one.
        while pending.total() < SCARCE - MAX_HANDSHAKES_PER_PEER {
            serial += 1;
            let peer = PeerKey::Address([10, 0, 0, (serial / MAX_HANDSHAKES_PER_PEER as u64) as u8].into());
            pending.hold(peer, serial as usize + 1000, serial);
        }
        pending.hold(ROOT, 900, 900);
        let first = serial + 1;
        for serial in first..first + MAX_HANDSHAKES_PER_PEER as u64 {
            assert_eq!(pending.room_for(NOBODY), None);
            pending.hold(NOBODY, serial as usize, serial);
        }
        let victim = Victim { peer: NOBODY, index: first as usize, serial: first, why: Room::PeerFull };
        assert_eq!(pending.room_for(NOBODY), Some(victim), "nobody's oldest, not root's");
        assert_eq!(pending.room_for(ROOT), None, "root still has room");
        pending.release(NOBODY, first);
        assert_eq!(pending.room_for(NOBODY), None, "not scarce any more");
    }

    #[test]
    fn while_slots_are_plentiful_a_burst_of_one_peer_is_not_held_to_its_share() {
        let mut pending = Pending::default();
        for serial in 1..SCARCE as u64 {
            pending.hold(ROOT, serial as usize, serial);
            assert_eq!(pending.room_for(ROOT), None, "{serial} of root's at once");
        }
        pending.hold(ROOT, SCARCE, SCARCE as u64);
        assert_eq!(pending.room_for(ROOT).map(|v| (v.serial, v.why)), Some((1, Room::PeerFull)));
        assert_eq!(pending.room_for(NOBODY), None, "another peer still gets a slot without closing any");
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
