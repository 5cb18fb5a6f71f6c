//! The bus clock: monotonic time expressed as nanoseconds since the Unix
//! epoch. Frame timestamps and timed-mode schedules use it, so a schedule is
//! exact (end of one frame = start of the next, to the nanosecond) and never
//! goes backwards when the wall clock is adjusted.

use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

#[derive(Clone, Copy, Debug)]
pub struct BusClock {
    start: Instant,
    start_epoch_ns: u64,
}

impl BusClock {
    /// A clock anchored to the wall clock now.
    pub fn start() -> Self {
        let start_epoch_ns = SystemTime::now().duration_since(UNIX_EPOCH).map_or(0, |d| d.as_nanos() as u64);
        Self { start: Instant::now(), start_epoch_ns }
    }

    /// Bus time of `instant`.
    pub fn at(&self, instant: Instant) -> u64 {
        self.start_epoch_ns + instant.saturating_duration_since(self.start).as_nanos() as u64
    }

    /// Bus time now.
    pub fn now(&self) -> u64 {
        self.at(Instant::now())
    }

    /// The instant at which bus time reaches `ns`.
    pub fn instant_of(&self, ns: u64) -> Instant {
        self.start + Duration::from_nanos(ns.saturating_sub(self.start_epoch_ns))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn instants_and_bus_time_convert_both_ways() {
        let clock = BusClock::start();
        let later = clock.start + Duration::from_micros(1500);
        assert_eq!(clock.at(later) - clock.at(clock.start), 1_500_000);
        assert_eq!(clock.instant_of(clock.at(later)), later);
    }
}
