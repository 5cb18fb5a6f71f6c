//! Refused authentications per transport, since the hub started: the hub's
//! session layer and control API count each client they refuse for its
//! credentials (a wrong token, none where one is needed, another local user
//! without one), and `STATS` reports them as `auth_refused`
//! (`spec/protocol.md` 3.10).
//!
//! One relaxed atomic add per refusal: nothing here is on a frame's path,
//! and no lock is shared between the transports and the bus thread.

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicU64, Ordering};

/// Where a refused client presented its credentials.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum AuthTransport {
    Tcp,
    Tls,
    Unix,
    Shm,
    Ivshmem,
    /// The control API (`401`).
    Http,
}

impl AuthTransport {
    const ALL: [Self; 6] = [Self::Tcp, Self::Tls, Self::Unix, Self::Shm, Self::Ivshmem, Self::Http];

    /// Its key in `auth_refused`.
    pub fn name(self) -> &'static str {
        match self {
            Self::Tcp => "tcp",
            Self::Tls => "tls",
            Self::Unix => "unix",
            Self::Shm => "shm",
            Self::Ivshmem => "ivshmem",
            Self::Http => "http",
        }
    }
}

/// The counters, shared by whoever refuses and the bus that reports them.
#[derive(Debug, Default)]
pub struct AuthRefusals {
    counts: [AtomicU64; AuthTransport::ALL.len()],
}

impl AuthRefusals {
    /// One more client refused on `transport`.
    pub fn count(&self, transport: AuthTransport) {
        // Relaxed: a statistic, read by no decision.
        self.counts[transport as usize].fetch_add(1, Ordering::Relaxed);
    }

    /// The transports that refused any, by name.
    pub fn snapshot(&self) -> BTreeMap<String, u64> {
        AuthTransport::ALL
            .iter()
            .map(|&t| (t, self.counts[t as usize].load(Ordering::Relaxed)))
            .filter(|&(_, n)| n > 0)
            .map(|(t, n)| (t.name().to_owned(), n))
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_transport_counts_apart_and_only_those_that_refused_are_listed() {
        let refusals = AuthRefusals::default();
        assert!(refusals.snapshot().is_empty());
        refusals.count(AuthTransport::Tcp);
        refusals.count(AuthTransport::Shm);
        refusals.count(AuthTransport::Shm);
        refusals.count(AuthTransport::Http);
        let counted: Vec<(String, u64)> = refusals.snapshot().into_iter().collect();
        assert_eq!(counted, [("http".into(), 1), ("shm".into(), 2), ("tcp".into(), 1)]);
    }
}
