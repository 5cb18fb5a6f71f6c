//! Per-identifier traffic counts of one channel, with the rate over the
//! last completed second. Bounded: at most [`MAX_TRACKED_IDS`] identifiers
//! are tracked.
//!
//! Counting is on the path of every frame, so it hashes nothing: a base-format
//! data frame's identifier indexes an array of the 2,048 there are, every
//! other form (extended, remote, error) goes to an ordered map — logarithmic
//! whatever identifiers a client sends, so none can make it slow.

use std::collections::BTreeMap;

use fieldhub_proto::stats::IdStats;

/// Distinct identifiers one channel tracks.
pub const MAX_TRACKED_IDS: usize = 4096;

const SECOND_NS: u64 = 1_000_000_000;
/// Base-format identifiers: SocketCAN ids below this carry no flag.
const BASE_IDS: usize = 0x800;

#[derive(Clone, Copy, Default)]
struct Count {
    frames: u64,
    this_second: u64,
    last_second: u64,
}

#[derive(Default)]
pub struct IdCounter {
    /// Base-format data frames by identifier; allocated at the first one.
    base: Option<Box<[Count; BASE_IDS]>>,
    /// Every other form, by SocketCAN id.
    other: BTreeMap<u32, Count>,
    /// Identifiers tracked so far, in both.
    tracked: usize,
    /// Bus time at which the current one-second window began.
    second_start_ns: u64,
}

impl IdCounter {
    /// Count one frame of `id` (SocketCAN form) at bus time `now_ns`.
    pub fn count(&mut self, id: u32, now_ns: u64) {
        self.roll(now_ns);
        let full = self.tracked >= MAX_TRACKED_IDS;
        let count = match usize::try_from(id).ok().filter(|&i| i < BASE_IDS) {
            Some(index) => {
                let count = &mut self.base.get_or_insert_with(|| Box::new([Count::default(); BASE_IDS]))[index];
                if count.frames == 0 && full {
                    return;
                }
                count
            }
            None if full && !self.other.contains_key(&id) => return,
            None => self.other.entry(id).or_default(),
        };
        if count.frames == 0 {
            self.tracked += 1;
        }
        count.frames += 1;
        count.this_second += 1;
    }

    fn counts_mut(&mut self) -> impl Iterator<Item = &mut Count> {
        self.base.iter_mut().flat_map(|base| base.iter_mut()).chain(self.other.values_mut())
    }

    fn roll(&mut self, now_ns: u64) {
        if now_ns < self.second_start_ns + SECOND_NS {
            return;
        }
        // More than one whole second without traffic: the last second was empty.
        let skipped = now_ns - self.second_start_ns >= 2 * SECOND_NS;
        for count in self.counts_mut().filter(|c| c.frames > 0) {
            count.last_second = if skipped { 0 } else { count.this_second };
            count.this_second = 0;
        }
        self.second_start_ns = now_ns - (now_ns - self.second_start_ns) % SECOND_NS;
    }

    /// Snapshot, most frequent first.
    pub fn snapshot(&mut self, now_ns: u64) -> Vec<IdStats> {
        self.roll(now_ns);
        let base = self.base.iter().flat_map(|base| base.iter().enumerate().map(|(id, c)| (id as u32, c)));
        let mut ids: Vec<IdStats> = base
            .chain(self.other.iter().map(|(&id, c)| (id, c)))
            .filter(|(_, c)| c.frames > 0)
            .map(|(id, c)| IdStats { id, frames: c.frames, rate_hz: c.last_second as f64 })
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

    #[test]
    fn base_extended_and_remote_forms_of_one_number_count_apart() {
        let mut ids = IdCounter::default();
        for (id, n) in [(0x123, 3), (0x8000_0123, 2), (0x4000_0123, 1)] {
            (0..n).for_each(|_| ids.count(id, 0));
        }
        let snap: Vec<(u32, u64)> = ids.snapshot(0).iter().map(|s| (s.id, s.frames)).collect();
        assert_eq!(snap, [(0x123, 3), (0x8000_0123, 2), (0x4000_0123, 1)]);
    }
}
