//! How late the runtime served the bus's deadlines in real time — the
//! timed frames' ends and the cyclic jobs' cycles a [`crate::bus::Bus`]
//! asks to be woken for — and why: the thread slept past the deadline (the
//! operating system ran it late) or it was awake and busy when the deadline
//! came (the hub's own work). Read in `STATS` as `timer` (spec/protocol.md
//! 3.10): what tells a user whether a rest-bus simulation's late cycle was
//! the machine's or the hub's.
//!
//! Invariants: recording costs a few comparisons and never allocates (the
//! worst list is a fixed array, kept latest first); virtual time records
//! nothing (its deadlines are bus time, which moves only as participants
//! step, so no deadline is ever served late).

use fieldhub_proto::stats::{LateDeadline, TimerStats};

/// How many of the deadlines served furthest past their time `STATS` names.
pub const WORST: usize = 32;

const US_100: u64 = 100_000;
const MS_1: u64 = 1_000_000;

/// The record of every deadline served.
#[derive(Debug, Default)]
pub struct DeadlineLateness {
    deadlines: u64,
    late_over_100us: u64,
    late_over_1ms: u64,
    busy_over_100us: u64,
    /// The latest ones served, latest first; `kept` of them are filled.
    worst: [LateDeadline; WORST],
    kept: usize,
}

impl DeadlineLateness {
    /// The deadline `due_ns` was served at `served_ns`; the thread had slept
    /// toward it and woke at `woke_ns`, or was awake (`None`).
    pub fn served(&mut self, due_ns: u64, served_ns: u64, woke_ns: Option<u64>) {
        self.deadlines += 1;
        let late_ns = served_ns.saturating_sub(due_ns);
        if late_ns > US_100 {
            self.late_over_100us += 1;
        }
        if late_ns > MS_1 {
            self.late_over_1ms += 1;
        }
        let woke_late_ns = woke_ns.map_or(0, |woke| woke.saturating_sub(due_ns).min(late_ns));
        if late_ns - woke_late_ns > US_100 {
            self.busy_over_100us += 1;
        }
        let least = if self.kept < WORST { 0 } else { self.worst[WORST - 1].late_ns };
        if late_ns == 0 || late_ns <= least {
            return;
        }
        let at = self.worst[..self.kept].iter().position(|w| w.late_ns < late_ns).unwrap_or(self.kept);
        self.kept = (self.kept + 1).min(WORST);
        self.worst[at..self.kept].rotate_right(1);
        self.worst[at] = LateDeadline { due_ns, late_ns, woke_late_ns };
    }

    /// The figures for `STATS`.
    pub fn snapshot(&self) -> TimerStats {
        TimerStats {
            deadlines: self.deadlines,
            late_over_100us: self.late_over_100us,
            late_over_1ms: self.late_over_1ms,
            busy_over_100us: self.busy_over_100us,
            max_late_ns: self.worst[..self.kept].first().map_or(0, |w| w.late_ns),
            worst: self.worst[..self.kept].to_vec(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_latest_deadlines_are_kept_latest_first_with_what_the_thread_slept_past() {
        let mut record = DeadlineLateness::default();
        // Deadline k served k·50 µs late, for k = 0..40, shuffled; even ones
        // slept toward and woke 30 µs before they were served, odd ones
        // served by a busy thread.
        let mut order: Vec<u64> = (0..40).collect();
        order.sort_by_key(|k| (k * 17) % 40);
        for k in order {
            let due = 1_000_000 * k;
            let served = due + 50_000 * k;
            let woke = (k % 2 == 0).then_some(served.saturating_sub(30_000));
            record.served(due, served, woke);
        }
        let stats = record.snapshot();
        assert_eq!(stats.deadlines, 40);
        assert_eq!(stats.late_over_100us, 37, "3..=39 are 150 µs and later");
        assert_eq!(stats.late_over_1ms, 19, "21..=39 are 1.05 ms and later");
        assert_eq!(stats.busy_over_100us, 19, "the odd ones of 3..=39: the even ones slept past all but 30 µs");
        assert_eq!(stats.max_late_ns, 1_950_000);
        let late: Vec<u64> = stats.worst.iter().map(|w| w.late_ns / 50_000).collect();
        assert_eq!(late, (8..40).rev().collect::<Vec<_>>(), "the 32 latest, latest first");
        let woke: Vec<u64> = stats.worst.iter().map(|w| w.woke_late_ns).collect();
        assert!(woke.iter().zip(&late).all(|(&w, &k)| w == if k % 2 == 0 { k * 50_000 - 30_000 } else { 0 }));
        assert_eq!(stats.worst[0].due_ns, 39_000_000);
    }

    #[test]
    fn a_thread_that_woke_late_and_then_worked_counts_only_its_sleep_as_woke_late() {
        let mut record = DeadlineLateness::default();
        // Woke 200 µs past the deadline, served it 2.5 ms past.
        record.served(1_000_000, 3_500_000, Some(1_200_000));
        // Served on time: counted, not kept.
        record.served(5_000_000, 5_000_000, Some(5_000_000));
        let stats = record.snapshot();
        assert_eq!((stats.deadlines, stats.late_over_100us, stats.late_over_1ms), (2, 1, 1));
        assert_eq!(stats.busy_over_100us, 1, "busy 2.3 ms of the 2.5 ms");
        assert_eq!(stats.worst, [LateDeadline { due_ns: 1_000_000, late_ns: 2_500_000, woke_late_ns: 200_000 }]);
    }
}
