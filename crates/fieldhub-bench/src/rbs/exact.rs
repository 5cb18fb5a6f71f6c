//! The rest-bus benchmark's measure against the exact outcome. The same
//! database run in virtual time, where the hub's bus is deterministic on bus
//! time (docs/virtual-time.md), puts every message's every cycle where exact
//! arbitration puts it: the frames due together on one millisecond wait for
//! each other there too. Each frame of the real-time run is matched with its
//! virtual-time counterpart — same message, same cycle index — and the
//! difference between the two is how far real time strayed from the exact
//! outcome: the scheduler's share, with arbitration taken out.
//!
//! Invariants:
//! - Both runs count time from their simulation's origin (`origin_ns` of
//!   the control API: the bus time every start delay counts from), and a
//!   frame's cycle index is its time since the origin less its message's
//!   start delay, to the nearest period — the same rule in both runs.
//! - Only cycles due after the warm-up and a whole period before the end of
//!   the shorter run are compared; a cycle there that one run has and the
//!   other has not (or has twice) is counted as unmatched, never compared.

use std::collections::BTreeMap;

use serde::Serialize;

use crate::stats::Distribution;

/// A message's schedule, relative to its simulation's origin.
#[derive(Clone, Copy, Debug)]
pub struct Schedule {
    pub id: u32,
    pub period_ns: u64,
    pub delay_ns: u64,
}

/// The frames one run received: per identifier, their bus times.
pub type Received = BTreeMap<u32, Vec<u64>>;

/// One run as the comparison reads it: its frames and its origin.
#[derive(Clone, Copy, Debug)]
pub struct Run<'a> {
    pub frames: &'a Received,
    pub origin_ns: u64,
}

impl Run<'_> {
    /// The latest frame, from the origin.
    fn span_ns(&self) -> u64 {
        let last = self.frames.values().filter_map(|t| t.last()).max().copied().unwrap_or(0);
        last.saturating_sub(self.origin_ns)
    }

    /// Message `s`'s frames by cycle index, in time from the origin (the
    /// first of a cycle), and the cycles a second frame came in.
    fn cycles(&self, s: &Schedule) -> (BTreeMap<u64, u64>, Vec<u64>) {
        let (mut by_cycle, mut doubled) = (BTreeMap::new(), Vec::new());
        for &t in self.frames.get(&s.id).map_or(&[][..], Vec::as_slice) {
            let since_due = t.saturating_sub(self.origin_ns).saturating_sub(s.delay_ns);
            let k = (since_due + s.period_ns / 2) / s.period_ns;
            match by_cycle.entry(k) {
                std::collections::btree_map::Entry::Vacant(v) => {
                    v.insert(t.saturating_sub(self.origin_ns));
                }
                std::collections::btree_map::Entry::Occupied(_) => doubled.push(k),
            }
        }
        (by_cycle, doubled)
    }
}

/// How one cycle class's real-time frames deviate from the exact outcome.
#[derive(Clone, Debug, Serialize)]
pub struct Deviation {
    pub cycle_ms: u64,
    /// Cycles both runs had, once each.
    pub matched: usize,
    /// Cycles in the compared span that one run had and the other had not,
    /// or had twice.
    pub unmatched: usize,
    /// |real − exact| of every matched cycle.
    pub deviation: Distribution,
    /// The same in frame times.
    pub p50_frames: f64,
    pub p99_frames: f64,
    pub max_frames: f64,
    /// Matched cycles within one frame time of the exact outcome, of all.
    pub within_one_frame: f64,
    /// The matched cycles more than one frame time off, for the report to
    /// set beside the hub's late deadlines (not in the JSON: its figures
    /// are the distribution above).
    #[serde(skip)]
    pub off: Vec<OffCycle>,
}

/// A real-time frame more than one frame time from its exact counterpart.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct OffCycle {
    pub id: u32,
    /// The real-time frame's bus time.
    pub at_ns: u64,
    /// Its exact counterpart's time, on the real-time run's clock (the same
    /// time from the origin).
    pub exact_ns: u64,
    /// |real − exact|.
    pub deviation_ns: u64,
}

/// Compare the messages `class` of one cycle class: `real` against `exact`,
/// cycles due from `warm_up_ns` after the origin on.
pub fn compare(
    cycle_ms: u64,
    class: &[Schedule],
    real: Run<'_>,
    exact: Run<'_>,
    warm_up_ns: u64,
    frame_ns: f64,
) -> Deviation {
    let end_ns = real.span_ns().min(exact.span_ns());
    let (mut deviations, mut unmatched, mut off) = (Vec::new(), 0, Vec::new());
    for s in class {
        let compared = |k: &u64| {
            let due = s.delay_ns + k * s.period_ns;
            due >= warm_up_ns && due + s.period_ns <= end_ns
        };
        let ((mut real_cycles, real_doubled), (exact_cycles, exact_doubled)) = (real.cycles(s), exact.cycles(s));
        unmatched += real_doubled.iter().chain(&exact_doubled).filter(|k| compared(k)).count();
        for (k, exact_at) in exact_cycles.iter().filter(|(k, _)| compared(k)) {
            match real_cycles.remove(k) {
                Some(real_at) => {
                    let deviation_ns = real_at.abs_diff(*exact_at);
                    if deviation_ns as f64 > frame_ns {
                        off.push(OffCycle {
                            id: s.id,
                            at_ns: real.origin_ns + real_at,
                            exact_ns: real.origin_ns + exact_at,
                            deviation_ns,
                        });
                    }
                    deviations.push(deviation_ns);
                }
                None => unmatched += 1,
            }
        }
        unmatched += real_cycles.keys().filter(|k| compared(k)).count();
    }
    let within = deviations.iter().filter(|&&d| d as f64 <= frame_ns).count();
    let matched = deviations.len();
    let deviation = Distribution::of(&mut deviations);
    let in_frames = |us: f64| us * 1e3 / frame_ns;
    Deviation {
        cycle_ms,
        matched,
        unmatched,
        p50_frames: in_frames(deviation.p50_us),
        p99_frames: in_frames(deviation.p99_us),
        max_frames: in_frames(deviation.max_us),
        deviation,
        within_one_frame: if matched == 0 { 0.0 } else { within as f64 / matched as f64 },
        off,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const MS: u64 = 1_000_000;

    #[test]
    fn each_real_frame_is_compared_with_its_exact_counterpart_of_the_same_cycle() {
        // Two 10 ms messages, the second 3 ms into the cycle; 100 ms of each
        // run, the first 20 ms warm-up. The exact run has 0x101 one frame
        // time (130 µs) behind its due time in every cycle (arbitration).
        let frame_ns = 130_000.0;
        let s = [
            Schedule { id: 0x100, period_ns: 10 * MS, delay_ns: 0 },
            Schedule { id: 0x101, period_ns: 10 * MS, delay_ns: 3 * MS },
        ];
        let exact_origin = 0;
        let exact = Received::from([
            (0x100, (0..10).map(|k| k * 10 * MS).collect()),
            (0x101, (0..10).map(|k| 3 * MS + 130_000 + k * 10 * MS).collect()),
        ]);
        // Real time: origin elsewhere; 0x100 50 µs late in cycle 3 and 5 ms
        // late in cycle 6; 0x101 on its exact time but for cycle 4, which is
        // missing, and cycle 7 200 µs early (the bus was free before).
        let o = 7_000_000_000;
        let mut r100: Vec<u64> = (0..10).map(|k| o + k * 10 * MS).collect();
        r100[3] += 50_000;
        r100[6] += 4_900_000;
        let mut r101: Vec<u64> = (0..10).map(|k| o + 3 * MS + 130_000 + k * 10 * MS).collect();
        r101[7] -= 200_000;
        r101.remove(4);
        let real = Received::from([(0x100, r100), (0x101, r101)]);
        let d = compare(
            10,
            &s,
            Run { frames: &real, origin_ns: o },
            Run { frames: &exact, origin_ns: exact_origin },
            20 * MS,
            frame_ns,
        );
        // Compared: cycles due from 20 ms to 10 ms before the shorter run's
        // last frame (93.13 ms): 0x100's 2..=8 (due 20..80 ms), 0x101's
        // 2..=8 (due 23..83 ms) less the missing 4.
        assert_eq!((d.matched, d.unmatched), (13, 1));
        assert_eq!(d.deviation.max_us, 4_900.0);
        assert_eq!(d.deviation.p50_us, 0.0);
        assert!((d.max_frames - 4_900.0 / 130.0).abs() < 1e-9);
        // 11 exact, 50 µs within one frame time; 200 µs and 4.9 ms not.
        assert!((d.within_one_frame - 11.0 / 13.0).abs() < 1e-9, "{}", d.within_one_frame);
        let off = [
            OffCycle { id: 0x100, at_ns: o + 60 * MS + 4_900_000, exact_ns: o + 60 * MS, deviation_ns: 4_900_000 },
            OffCycle {
                id: 0x101,
                at_ns: o + 73 * MS + 130_000 - 200_000,
                exact_ns: o + 73 * MS + 130_000,
                deviation_ns: 200_000,
            },
        ];
        assert_eq!(d.off, off, "the two cycles more than a frame time off, at their real bus times");
    }

    #[test]
    fn a_cycle_that_one_run_has_twice_is_unmatched_and_never_compared() {
        let s = [Schedule { id: 0x200, period_ns: 10 * MS, delay_ns: 0 }];
        let exact = Received::from([(0x200, (0..6).map(|k| k * 10 * MS).collect())]);
        // Cycle 2 twice (one 4 ms late, after the other).
        let real = Received::from([(0x200, vec![0, 10 * MS, 20 * MS, 24 * MS, 30 * MS, 40 * MS, 50 * MS])]);
        let d = compare(10, &s, Run { frames: &real, origin_ns: 0 }, Run { frames: &exact, origin_ns: 0 }, 0, 1e5);
        assert_eq!((d.matched, d.unmatched), (5, 1), "cycles 0..=4 compared; the second of cycle 2 unmatched");
        assert_eq!(d.deviation.max_us, 0.0, "the first frame of cycle 2 is the one compared");
    }
}
