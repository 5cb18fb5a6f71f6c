//! Real time for the bus: [`MonotonicClock`], anchored to the wall clock
//! once, then advanced by the monotonic clock, so a schedule is exact (end of
//! one frame = start of the next, to the nanosecond) and never goes backwards
//! when the wall clock is adjusted. It is also the bus's wall clock for
//! virtual time's step timeouts.

use std::time::{Instant, SystemTime, UNIX_EPOCH};

use fieldhub_bus::clock::{Clock, WallClock};

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
}

impl Clock for MonotonicClock {
    fn now(&self) -> u64 {
        self.at(Instant::now())
    }
}

impl WallClock for MonotonicClock {
    fn now(&self) -> Instant {
        Instant::now()
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;

    #[test]
    fn bus_time_follows_the_monotonic_clock_from_its_anchor() {
        let clock = MonotonicClock::start();
        let later = clock.start + Duration::from_micros(1500);
        assert_eq!(clock.at(later) - clock.at(clock.start), 1_500_000);
    }
}
