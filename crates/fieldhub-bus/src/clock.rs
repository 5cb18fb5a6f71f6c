//! Bus time: nanoseconds since the Unix epoch, read only through a [`Clock`].
//!
//! The bus never calls `Instant::now` or `SystemTime::now` itself; it asks the
//! clocks it was given: a [`Clock`] for bus time and, in virtual time, a
//! [`WallClock`] for step timeouts. The runtime supplies real time (the hub's
//! `MonotonicClock`); [`ManualClock`] moves only when told to: in-process
//! tests drive arbitration, timing and faults with it deterministically, and
//! virtual time moves it as its participants step.

use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Instant;

/// A source of bus time.
pub trait Clock: Send + Sync {
    /// Bus time now, in nanoseconds since the Unix epoch.
    fn now(&self) -> u64;
}

/// Wall-clock instants, for the little the bus measures in real time even
/// when bus time is virtual: how long a participant has taken for its step,
/// and how fast virtual time runs against real time.
pub trait WallClock: Send + Sync {
    fn now(&self) -> Instant;
}

/// Time that moves only when the owner says so.
#[derive(Debug, Default)]
pub struct ManualClock {
    now_ns: AtomicU64,
}

impl ManualClock {
    /// A clock standing at `now_ns`.
    pub fn at(now_ns: u64) -> Self {
        Self { now_ns: AtomicU64::new(now_ns) }
    }

    /// Move time forward by `ns`.
    pub fn advance(&self, ns: u64) {
        // Relaxed: the clock is read and moved by the thread driving the bus.
        self.now_ns.fetch_add(ns, Ordering::Relaxed);
    }

    /// Move time to `ns` (never backwards).
    pub fn set(&self, ns: u64) {
        self.now_ns.fetch_max(ns, Ordering::Relaxed);
    }
}

impl Clock for ManualClock {
    fn now(&self) -> u64 {
        self.now_ns.load(Ordering::Relaxed)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn manual_clock_moves_only_forward_and_only_when_told() {
        let clock = ManualClock::at(1_000);
        assert_eq!(clock.now(), 1_000);
        clock.advance(500);
        clock.set(1_200);
        assert_eq!(clock.now(), 1_500);
    }
}
