//! Bus time: nanoseconds since the Unix epoch, read only through a [`Clock`].
//!
//! The bus never calls `Instant::now` or `SystemTime::now` itself; it asks the
//! clock it was given. [`MonotonicClock`] is real time: anchored to the wall
//! clock once, then advanced by the monotonic clock, so a schedule is exact
//! (end of one frame = start of the next, to the nanosecond) and never goes
//! backwards when the wall clock is adjusted. [`ManualClock`] moves only when
//! told to: in-process tests drive arbitration, timing and faults with it
//! deterministically, and a virtual-time mode can build on it.

use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

/// A source of bus time.
pub trait Clock: Send + Sync {
    /// Bus time now, in nanoseconds since the Unix epoch.
    fn now(&self) -> u64;
}

/// Real time: monotonic, anchored to the wall clock at creation.
#[derive(Clone, Copy, Debug)]
pub struct MonotonicClock {
    start: Instant,
    start_epoch_ns: u64,
}

impl MonotonicClock {
    /// A clock anchored to the wall clock now.
    pub fn start() -> Self {
        let start_epoch_ns = SystemTime::now().duration_since(UNIX_EPOCH).map_or(0, |d| d.as_nanos() as u64);
        Self { start: Instant::now(), start_epoch_ns }
    }

    /// Bus time of `instant`.
    pub fn at(&self, instant: Instant) -> u64 {
        self.start_epoch_ns + instant.saturating_duration_since(self.start).as_nanos() as u64
    }

    /// The instant at which bus time reaches `ns`.
    pub fn instant_of(&self, ns: u64) -> Instant {
        self.start + Duration::from_nanos(ns.saturating_sub(self.start_epoch_ns))
    }
}

impl Clock for MonotonicClock {
    fn now(&self) -> u64 {
        self.at(Instant::now())
    }
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
    fn instants_and_bus_time_convert_both_ways() {
        let clock = MonotonicClock::start();
        let later = clock.start + Duration::from_micros(1500);
        assert_eq!(clock.at(later) - clock.at(clock.start), 1_500_000);
        assert_eq!(clock.instant_of(clock.at(later)), later);
    }

    #[test]
    fn manual_clock_moves_only_forward_and_only_when_told() {
        let clock = ManualClock::at(1_000);
        assert_eq!(clock.now(), 1_000);
        clock.advance(500);
        clock.set(1_200);
        assert_eq!(clock.now(), 1_500);
    }
}
