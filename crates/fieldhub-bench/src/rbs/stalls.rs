//! Why real-time cycles strayed from the exact outcome: each cycle more
//! than one frame time off ([`super::exact::OffCycle`]) set beside the
//! deadlines the hub's bus thread served late in the same run (`STATS`
//! `timer`, spec/protocol.md 3.10). A late deadline the thread slept past
//! is the machine's scheduling (the OS ran the thread late); one it served
//! late while awake is the hub's own work; a late cycle with no late
//! deadline near it is neither — the frame waited on the bus.
//!
//! Invariants: a deadline served `late` after its time explains a cycle
//! whose exact time falls from that time to three times `late` after it —
//! the stall itself, then the queue of frames it held back draining (a
//! backlog of `late` on a bus loaded ρ drains in `late·ρ/(1−ρ)`, about
//! `late` at this database's half load; twice that for margin) — if it was
//! served at least half the cycle's deviation late (a stall delays a frame
//! by at most about its own length); of several, the latest explains it. The hub names only
//! the 32 deadlines it served furthest past their time, so a run with more
//! stalls than that leaves the shorter ones unmatched: the report says how
//! many cycles were matched.

use fieldhub_client::{LateDeadline, TimerStats};
use serde::Serialize;

use super::exact::OffCycle;

/// How many of the worst cycles the report names.
const NAMED: usize = 8;

/// The late cycles of a run and what explains the worst of them.
#[derive(Clone, Debug, Serialize)]
pub struct Stalls {
    /// Cycles more than one frame time off the exact outcome, every class.
    pub off: usize,
    /// The hub's bus thread over the run (`STATS` `timer`).
    pub deadlines: u64,
    pub deadlines_late_over_100us: u64,
    pub deadlines_late_over_1ms: u64,
    /// Deadlines served more than 100 µs late for work the bus thread was
    /// doing: the hub's own share, over the whole run.
    pub deadlines_busy_over_100us: u64,
    pub latest_deadline_us: f64,
    /// How many late deadlines the hub named (at most 32).
    pub deadlines_named: usize,
    /// Of the `off` cycles, those a late deadline of the bus thread
    /// explains, by whose it was: slept past (the machine's) or served late
    /// while busy (the hub's).
    pub explained_by_the_machine: usize,
    pub explained_by_the_hub: usize,
    /// The largest deviation of a cycle no named deadline explains, and the
    /// least late of the named deadlines: a cycle less far off than that can
    /// have had its cause left out of the hub's list.
    pub unexplained_max_us: f64,
    pub least_named_late_us: f64,
    /// The worst cycles, worst first.
    pub worst: Vec<WorstCycle>,
}

/// One of the worst cycles.
#[derive(Clone, Debug, Serialize)]
pub struct WorstCycle {
    pub id: u32,
    /// Its real-time frame, seconds after the simulation's origin.
    pub at_s: f64,
    pub deviation_us: f64,
    /// The bus thread's late deadline that explains it, if one does.
    pub deadline: Option<LateService>,
}

/// A deadline the bus thread served late.
#[derive(Clone, Copy, Debug, Serialize)]
pub struct LateService {
    pub late_us: f64,
    /// The part it slept past its time.
    pub woke_late_us: f64,
    /// The thread slept past most of it ([`LateDeadline::mostly_asleep`]):
    /// the machine's, not the hub's.
    pub the_machines: bool,
}

impl From<&LateDeadline> for LateService {
    fn from(d: &LateDeadline) -> Self {
        Self {
            late_us: d.late_ns as f64 / 1e3,
            woke_late_us: d.woke_late_ns as f64 / 1e3,
            the_machines: d.mostly_asleep(),
        }
    }
}

/// Set the cycles `off` (every class's) beside the hub's `timer`; times
/// from `origin_ns`, the simulation's origin.
pub fn explain(off: &[OffCycle], timer: &TimerStats, origin_ns: u64) -> Stalls {
    let explained = |c: &OffCycle| {
        timer
            .worst
            .iter()
            .filter(|d| (d.due_ns..=d.due_ns + 3 * d.late_ns).contains(&c.exact_ns) && d.late_ns * 2 >= c.deviation_ns)
            .max_by_key(|d| d.late_ns)
            .map(LateService::from)
    };
    let causes: Vec<Option<LateService>> = off.iter().map(explained).collect();
    let by_machine = causes.iter().flatten().filter(|d| d.the_machines).count();
    let unexplained_max_ns =
        off.iter().zip(&causes).filter(|(_, cause)| cause.is_none()).map(|(c, _)| c.deviation_ns).max().unwrap_or(0);
    let mut worst: Vec<(&OffCycle, Option<LateService>)> = off.iter().zip(causes.iter().copied()).collect();
    worst.sort_by_key(|(c, _)| std::cmp::Reverse(c.deviation_ns));
    worst.truncate(NAMED);
    let worst = worst
        .into_iter()
        .map(|(c, deadline)| WorstCycle {
            id: c.id,
            at_s: c.at_ns.saturating_sub(origin_ns) as f64 / 1e9,
            deviation_us: c.deviation_ns as f64 / 1e3,
            deadline,
        })
        .collect();
    Stalls {
        explained_by_the_machine: by_machine,
        explained_by_the_hub: causes.iter().flatten().count() - by_machine,
        unexplained_max_us: unexplained_max_ns as f64 / 1e3,
        least_named_late_us: timer.worst.last().map_or(0.0, |d| d.late_ns as f64 / 1e3),
        off: off.len(),
        deadlines: timer.deadlines,
        deadlines_late_over_100us: timer.late_over_100us,
        deadlines_late_over_1ms: timer.late_over_1ms,
        deadlines_busy_over_100us: timer.busy_over_100us,
        latest_deadline_us: timer.max_late_ns as f64 / 1e3,
        deadlines_named: timer.worst.len(),
        worst,
    }
}

impl std::fmt::Display for Stalls {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        writeln!(
            f,
            "cycles more than one frame time off the exact outcome: {}; the hub's bus thread served {} deadlines, \
             {} more than 100 µs late ({} of them for more than 100 µs of its own work), {} more than 1 ms, the latest \
             {:.1} µs",
            self.off,
            self.deadlines,
            self.deadlines_late_over_100us,
            self.deadlines_busy_over_100us,
            self.deadlines_late_over_1ms,
            self.latest_deadline_us
        )?;
        writeln!(
            f,
            "  of them, {} came while the bus thread slept past a deadline (the machine), {} while it was busy past one \
             (the hub); {} near none of the {} it served latest (those at most {:.1} µs off; the least late it named \
             {:.1} µs)",
            self.explained_by_the_machine,
            self.explained_by_the_hub,
            self.off - self.explained_by_the_machine - self.explained_by_the_hub,
            self.deadlines_named,
            self.unexplained_max_us,
            self.least_named_late_us
        )?;
        for c in &self.worst {
            let why = match c.deadline {
                Some(d) if d.the_machines => format!(
                    "the bus thread served its deadline {:.1} µs late, {:.1} µs of it asleep past its time \
                     (the machine)",
                    d.late_us, d.woke_late_us
                ),
                Some(d) => format!(
                    "the bus thread served its deadline {:.1} µs late, awake and busy for {:.1} µs of it (the hub)",
                    d.late_us,
                    d.late_us - d.woke_late_us
                ),
                None => "no late deadline of the bus thread near it".into(),
            };
            writeln!(f, "  0x{:X} at {:.3} s: {:.1} µs off: {why}", c.id, c.at_s, c.deviation_us)?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const MS: u64 = 1_000_000;

    /// A cycle due at `exact_ns` that came `late_ns` after it.
    fn off(id: u32, exact_ns: u64, late_ns: u64) -> OffCycle {
        OffCycle { id, at_ns: exact_ns + late_ns, exact_ns, deviation_ns: late_ns }
    }

    #[test]
    fn each_worst_cycle_is_explained_by_the_late_deadline_in_its_span_or_by_none() {
        let origin = 1_000 * MS;
        let off = [
            // 1.5 ms late at 2 s: due 3 ms into a stall of 1.45 ms — in the
            // queue it left, which drains within twice its length more.
            off(0x100, origin + 2_000 * MS, 1_500_000),
            // 600 µs late at 3 s: the thread was busy 500 of the 520 µs it was late.
            off(0x101, origin + 3_000 * MS, 600_000),
            // 300 µs late at 4 s: the only late deadline, 400 µs, 5 ms before.
            off(0x102, origin + 4_000 * MS, 300_000),
            // 200 µs late at 5 s: a deadline just before, but only 50 µs late.
            off(0x103, origin + 5_000 * MS, 200_000),
        ];
        let late = |due_ns, late_ns, woke_late_ns| LateDeadline { due_ns, late_ns, woke_late_ns };
        let timer = TimerStats {
            deadlines: 1_000,
            late_over_100us: 3,
            late_over_1ms: 1,
            busy_over_100us: 1,
            max_late_ns: 1_450_000,
            worst: vec![
                late(origin + 1_997 * MS, 1_450_000, 1_400_000),
                late(origin + 3_000 * MS - 100_000, 520_000, 20_000),
                late(origin + 3_995 * MS, 400_000, 400_000),
                late(origin + 5_000 * MS - 100_000, 50_000, 0),
            ],
        };
        let stalls = explain(&off, &timer, origin);
        assert_eq!(stalls.off, 4);
        assert_eq!((stalls.explained_by_the_machine, stalls.explained_by_the_hub), (1, 1));
        let ids: Vec<u32> = stalls.worst.iter().map(|c| c.id).collect();
        assert_eq!(ids, [0x100, 0x101, 0x102, 0x103], "worst first");
        let first = stalls.worst[0].deadline.unwrap();
        assert!(first.the_machines && first.late_us == 1_450.0 && first.woke_late_us == 1_400.0);
        assert!(!stalls.worst[1].deadline.unwrap().the_machines, "busy 500 of 520 µs");
        assert!(stalls.worst[2].deadline.is_none() && stalls.worst[3].deadline.is_none());
        assert_eq!(stalls.worst[0].at_s, 2.0015);
        let text = stalls.to_string();
        assert!(text.contains("0x100 at 2.002 s: 1500.0 µs off: the bus thread served its deadline 1450.0 µs late, 1400.0 µs of it asleep past its time (the machine)"), "{text}");
        assert!(text.contains("0x101 at 3.001 s: 600.0 µs off: the bus thread served its deadline 520.0 µs late, awake and busy for 500.0 µs of it (the hub)"), "{text}");
        assert!(text.contains("of them, 1 came while the bus thread slept past a deadline (the machine), 1 while it was busy past one (the hub); 2 near none of the 4 it served latest (those at most 300.0 µs off; the least late it named 50.0 µs)"), "{text}");
        assert!(text.contains("0x102 at 4.000 s: 300.0 µs off: no late deadline of the bus thread near it"), "{text}");
    }
}
