//! Whom a connection counts against, for the limits one party must not
//! exhaust for everyone (pending handshakes, HTTP connections), and the
//! refusal log that says each refused party once per interval.
//!
//! - [`PeerKey`]: the user id when the kernel tells it (`SO_PEERCRED` on a
//!   unix or `shm://` session socket; the `sock_diag` owner of a TCP
//!   connection from this machine), else the peer's address: another local
//!   user cannot pass for the hub's own user, and one remote address is one
//!   party.
//! - [`RefusalLog`]: at most one line per peer per [`REFUSALS_EVERY`], with
//!   the count of the refusals held back since the line before, so a flood
//!   of refused connections costs a line every few seconds, not one each.
//!
//! Invariants: the log's table is bounded ([`MAX_LOGGED_PEERS`]); the
//! caller passes the time, so the behaviour is tested without a clock.

use std::collections::HashMap;
use std::net::IpAddr;
use std::time::{Duration, Instant};

use super::peer_user::{tcp_peer_uid, PeerOrigin};

/// The party a connection belongs to.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum PeerKey {
    /// A process of this machine, by its user id.
    User(u32),
    /// A peer whose user is not known here: its address.
    Address(IpAddr),
    /// A peer the kernel told nothing of (all such peers are one party).
    Unknown,
}

impl PeerKey {
    /// The party of a connection from `origin`. Asks the kernel (one
    /// `sock_diag` question) for a TCP peer on this machine.
    pub fn of(origin: &PeerOrigin) -> Self {
        match *origin {
            PeerOrigin::Unix { uid: Some(uid) } => Self::User(uid),
            PeerOrigin::Tcp { local, peer } => {
                let ip = peer.ip().to_canonical();
                let this_machine = ip.is_loopback() || ip == local.ip().to_canonical();
                match this_machine.then(|| tcp_peer_uid(local, peer)).flatten() {
                    Some(uid) => Self::User(uid),
                    None => Self::Address(ip),
                }
            }
            PeerOrigin::Unix { uid: None } | PeerOrigin::Operator | PeerOrigin::Unknown | PeerOrigin::Certified => {
                Self::Unknown
            }
        }
    }
}

impl std::fmt::Display for PeerKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Self::User(uid) => write!(f, "user id {uid}"),
            Self::Address(ip) => write!(f, "{ip}"),
            Self::Unknown => f.write_str("peers the kernel did not name"),
        }
    }
}

/// How often one peer's refusals are logged at most.
pub const REFUSALS_EVERY: Duration = Duration::from_secs(10);
/// Peers the refusal log remembers; beyond it, peers quiet for a whole
/// interval are forgotten first, and a refusal finding no room is not
/// logged (so a flood from many addresses cannot grow the table).
pub const MAX_LOGGED_PEERS: usize = 4096;

/// Which refusals to log: one line per peer per [`REFUSALS_EVERY`].
#[derive(Default)]
pub struct RefusalLog {
    peers: HashMap<PeerKey, Logged>,
}

struct Logged {
    /// When this peer's last line was logged.
    at: Instant,
    /// Refusals since then that were not logged.
    held: u64,
}

impl RefusalLog {
    /// A refusal of `peer` at `now`: `Some(held)` when it is to be logged,
    /// with the number of this peer's refusals not logged since its last
    /// line; `None` when it is only counted.
    pub fn refused(&mut self, peer: PeerKey, now: Instant) -> Option<u64> {
        if let Some(logged) = self.peers.get_mut(&peer) {
            if now.saturating_duration_since(logged.at) < REFUSALS_EVERY {
                logged.held += 1;
                return None;
            }
            return Some(std::mem::replace(logged, Logged { at: now, held: 0 }).held);
        }
        if self.peers.len() >= MAX_LOGGED_PEERS {
            self.peers.retain(|_, logged| now.saturating_duration_since(logged.at) < REFUSALS_EVERY);
            if self.peers.len() >= MAX_LOGGED_PEERS {
                return None;
            }
        }
        self.peers.insert(peer, Logged { at: now, held: 0 });
        Some(0)
    }
}

/// What a refusal line adds when refusals were held back.
pub fn held_back(held: u64) -> String {
    match held {
        0 => String::new(),
        n => format!(" ({n} more refusals of this peer since its last line, not logged)"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_flood_of_refusals_is_one_line_per_peer_per_interval_with_the_count_held_back() {
        let mut log = RefusalLog::default();
        let (nobody, root) = (PeerKey::User(65534), PeerKey::User(0));
        let start = Instant::now();
        assert_eq!(log.refused(nobody, start), Some(0), "the first refusal is logged");
        for i in 1..=1000u64 {
            assert_eq!(log.refused(nobody, start + Duration::from_millis(i)), None);
        }
        assert_eq!(log.refused(root, start + Duration::from_millis(5)), Some(0), "another peer has its own line");
        assert_eq!(log.refused(nobody, start + REFUSALS_EVERY), Some(1000), "the next line tells the count");
        assert_eq!(log.refused(nobody, start + REFUSALS_EVERY), None);
    }

    #[test]
    fn the_table_stays_bounded_and_forgets_quiet_peers_first() {
        let mut log = RefusalLog::default();
        let start = Instant::now();
        for i in 0..MAX_LOGGED_PEERS as u32 {
            assert!(log.refused(PeerKey::User(i), start).is_some());
        }
        let extra = PeerKey::Address([10, 0, 0, 1].into());
        assert_eq!(log.refused(extra, start), None, "no room while every peer is within its interval");
        assert_eq!(log.refused(extra, start + REFUSALS_EVERY), Some(0), "quiet peers were forgotten");
        assert!(log.peers.len() <= MAX_LOGGED_PEERS);
    }

    #[test]
    fn a_local_tcp_peer_is_its_user_and_a_unix_peer_its_uid() {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let _client = std::net::TcpStream::connect(listener.local_addr().unwrap()).unwrap();
        let (accepted, peer) = listener.accept().unwrap();
        let origin = PeerOrigin::Tcp { local: accepted.local_addr().unwrap(), peer };
        let me = rustix::process::geteuid().as_raw();
        assert_eq!(PeerKey::of(&origin), PeerKey::User(me));
        assert_eq!(PeerKey::of(&PeerOrigin::Unix { uid: Some(7) }), PeerKey::User(7));
        let remote =
            PeerOrigin::Tcp { local: accepted.local_addr().unwrap(), peer: "10.255.0.7:4000".parse().unwrap() };
        assert_eq!(PeerKey::of(&remote), PeerKey::Address([10, 255, 0, 7].into()));
    }
}
