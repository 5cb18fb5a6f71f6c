//! Per-identifier traffic counts of one channel, with the rate over the
//! last completed second. Bounded: at most [`MAX_TRACKED_IDS`] identifiers
//! are tracked; a map entry is allocated only the first time an id is seen.

use std::collections::HashMap;

use fieldhub_proto::stats::IdStats;

/// Distinct identifiers one channel tracks.
pub const MAX_TRACKED_IDS: usize = 4096;

const SECOND_NS: u64 = 1_000_000_000;

#[derive(Clone, Copy, Default)]
struct Count {
    frames: u64,
    this_second: u64,
    last_second: u64,
}

#[derive(Default)]
pub struct IdCounter {
    counts: HashMap<u32, Count>,
    /// Bus time at which the current one-second window began.
    second_start_ns: u64,
}

impl IdCounter {
    /// Count one frame of `id` (SocketCAN form) at bus time `now_ns`.
    pub fn count(&mut self, id: u32, now_ns: u64) {
        self.roll(now_ns);
        if let Some(count) = self.counts.get_mut(&id) {
            count.frames += 1;
            count.this_second += 1;
        } else if self.counts.len() < MAX_TRACKED_IDS {
            self.counts.insert(id, Count { frames: 1, this_second: 1, last_second: 0 });
        }
    }

    fn roll(&mut self, now_ns: u64) {
        if now_ns < self.second_start_ns + SECOND_NS {
            return;
        }
        // More than one whole second without traffic: the last second was empty.
        let skipped = now_ns - self.second_start_ns >= 2 * SECOND_NS;
        for count in self.counts.values_mut() {
            count.last_second = if skipped { 0 } else { count.this_second };
            count.this_second = 0;
        }
        self.second_start_ns = now_ns - (now_ns - self.second_start_ns) % SECOND_NS;
    }

    /// Snapshot, most frequent first.
    pub fn snapshot(&mut self, now_ns: u64) -> Vec<IdStats> {
        self.roll(now_ns);
        let mut ids: Vec<IdStats> = self
            .counts
            .iter()
            .map(|(&id, c)| IdStats { id, frames: c.frames, rate_hz: c.last_second as f64 })
            .collect();
        ids.sort_by(|a, b| b.frames.cmp(&a.frames).then(a.id.cmp(&b.id)));
        ids
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rate_is_the_count_of_the_last_completed_second() {
        let mut ids = IdCounter::default();
        for i in 0..100 {
            ids.count(0x123, i * 10_000_000); // 100 frames within second 0
        }
        ids.count(0x456, 1_500_000_000);
        let snap = ids.snapshot(1_600_000_000);
        assert_eq!((snap[0].id, snap[0].frames, snap[0].rate_hz), (0x123, 100, 100.0));
        assert_eq!((snap[1].id, snap[1].rate_hz), (0x456, 0.0));
        let later = ids.snapshot(5 * SECOND_NS);
        assert_eq!(later[0].rate_hz, 0.0, "idle seconds bring the rate to zero");
    }

    #[test]
    fn tracking_is_bounded() {
        let mut ids = IdCounter::default();
        for id in 0..(MAX_TRACKED_IDS as u32 + 10) {
            ids.count(id, 0);
        }
        assert_eq!(ids.snapshot(0).len(), MAX_TRACKED_IDS);
    }
}
