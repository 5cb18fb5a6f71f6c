//! Bus load like `canbusload`: the share of time a channel's wire was busy
//! over the last second and the last ten seconds. Busy time is the exact
//! on-wire duration of each frame (data phase at the data bitrate), so CAN FD
//! frames with BRS weigh what they really cost. Fixed memory: 101 buckets of
//! 100 ms, updated in O(1) per frame.

const BUCKET_NS: u64 = 100_000_000;
/// Ten seconds of complete buckets plus the one being filled.
const BUCKETS: usize = 101;

#[derive(Clone, Debug)]
pub struct BusLoad {
    /// Busy nanoseconds per 100 ms bucket, as a ring.
    busy: [u64; BUCKETS],
    /// Index (in units of buckets since the epoch) of the newest bucket.
    newest: u64,
    /// Bits put on the wire since the channel started.
    pub bits: u64,
}

impl Default for BusLoad {
    fn default() -> Self {
        Self { busy: [0; BUCKETS], newest: 0, bits: 0 }
    }
}

impl BusLoad {
    /// Account a frame of `bits` bits that occupied the wire for `busy_ns`,
    /// ending at bus time `end_ns`.
    pub fn add(&mut self, end_ns: u64, bits: u32, busy_ns: u64) {
        self.advance(end_ns);
        self.busy[(end_ns / BUCKET_NS) as usize % BUCKETS] += busy_ns;
        self.bits += u64::from(bits);
    }

    fn advance(&mut self, now_ns: u64) {
        let current = now_ns / BUCKET_NS;
        if current <= self.newest {
            return;
        }
        let stale = (current - self.newest).min(BUCKETS as u64);
        for step in 1..=stale {
            self.busy[((self.newest + step) % BUCKETS as u64) as usize] = 0;
        }
        self.newest = current;
    }

    /// Load in percent over the `window_ns` (a multiple of 100 ms, ≤ 10 s)
    /// of complete buckets before `now_ns`.
    pub fn percent(&mut self, now_ns: u64, window_ns: u64) -> f64 {
        self.advance(now_ns);
        let buckets = (window_ns / BUCKET_NS).clamp(1, BUCKETS as u64 - 1);
        let Some(newest_complete) = (now_ns / BUCKET_NS).checked_sub(1) else { return 0.0 };
        let busy: u64 = (0..buckets)
            .filter_map(|i| newest_complete.checked_sub(i))
            .map(|bucket| self.busy[(bucket % BUCKETS as u64) as usize])
            .sum();
        100.0 * busy as f64 / (buckets * BUCKET_NS) as f64
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn load_is_busy_time_over_the_window() {
        let mut load = BusLoad::default();
        let start = 50 * BUCKET_NS;
        // 250 µs busy every millisecond for one second: 25 %.
        for ms in 0..1000u64 {
            load.add(start + ms * 1_000_000, 125, 250_000);
        }
        let now = start + 1_000 * 1_000_000;
        assert!((load.percent(now, 1_000_000_000) - 25.0).abs() < 1e-9);
        assert!((load.percent(now, 10_000_000_000) - 2.5).abs() < 1e-9);
        assert_eq!(load.bits, 125_000);
        // Ten idle seconds later nothing is left in the window.
        assert_eq!(load.percent(now + 11_000_000_000, 10_000_000_000), 0.0);
    }
}
