//! What waking `n` sleepers costs the thread that wakes them, rung two
//! ways: a doorbell each (`n` futex words, `n` `FUTEX_WAKE` calls — how the
//! hub rings its shared-memory clients after a bus round, `spec/shm.md`
//! section 4) against one word all of them sleep on (one
//! `FUTEX_WAKE(INT_MAX)`), the wake word issue 35 proposes for a channel's
//! readers.
//!
//! Each round puts every sleeper to sleep on its word (`fieldhub-shm`'s
//! [`Bell`](fieldhub_shm::Bell), as a client's reader sleeps), then the waker bumps the round
//! and rings. Measured per round:
//!
//! - the waker's wall time in its ring calls, and its own CPU time there
//!   (`CLOCK_THREAD_CPUTIME_ID`, less the cost of reading that clock): what
//!   a bus thread spends before it can serve the next frame;
//! - the time until the last sleeper has run (it counts itself awake; the
//!   last one rings the waker): what a fan-out costs until every reader has
//!   its frame.
//!
//! The sleepers are threads of this process, as the bench's extra clients
//! are ([`crate::bystanders`]); the kernel wakes a thread of another
//! process the same way (the waker's side does not depend on whose thread
//! it wakes).
//!
//! Invariant: both ways run in the same call, alternating round by round,
//! so the machine's load is the same for both.

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::{Duration, Instant};

use fieldhub_shm::bell::LocalBell;
use serde::Serialize;

use crate::cpu::thread_cpu_ns;
use crate::stats::Distribution;
use crate::{BenchError, PATIENCE, WARM_UP};

/// How long the waker lets the sleepers fall asleep before it rings: a
/// woken thread arms its bell again within microseconds.
const SETTLE: Duration = Duration::from_micros(300);

/// One way of ringing, measured over the rounds.
#[derive(Clone, Debug, Serialize)]
pub struct WakerCost {
    /// The waker's wall time in its ring calls.
    pub ring: Distribution,
    /// The waker's own CPU time in its ring calls, µs per round (mean).
    pub ring_cpu_us: f64,
    /// From the first ring until the last sleeper has run.
    pub last_awake: Distribution,
}

/// Both ways of waking `sleepers` sleepers, same run.
#[derive(Clone, Debug, Serialize)]
pub struct WakeWordCost {
    pub sleepers: usize,
    /// `n` words, `n` wake calls.
    pub word_each: WakerCost,
    /// One word, one wake call for all.
    pub one_word: WakerCost,
}

/// The sleepers and what they share with the waker.
struct Sleepers {
    /// Their words when each has its own.
    own: Vec<LocalBell>,
    /// The word all sleep on when they share one.
    shared: LocalBell,
    /// Bumped by the waker to wake the sleepers for a new round.
    round: AtomicU64,
    /// Sleepers that have run, over all rounds.
    awake: AtomicU64,
    /// The last sleeper of a round rings this one for the waker.
    done: LocalBell,
    stop: AtomicBool,
}

impl Sleepers {
    fn sleep(&self, index: usize) {
        let mut seen = 0;
        loop {
            let woken = || self.round.load(Ordering::Acquire) != seen || self.stop.load(Ordering::Acquire);
            // Round `seen + 1` is rung the way [`way_of`] says.
            let bell = if way_of(seen + 1) == 1 { self.shared.bell() } else { self.own[index].bell() };
            bell.sleep_until(None, woken);
            if self.stop.load(Ordering::Acquire) {
                return;
            }
            seen = self.round.load(Ordering::Acquire);
            let total = self.awake.fetch_add(1, Ordering::AcqRel) + 1;
            if total == seen * self.own.len() as u64 {
                self.done.bell().ring();
            }
        }
    }
}

/// How round `round` (from 1) rings: 0 a word each, 1 the one word — the
/// ways alternate, and each sleeper knows the next round's word before it
/// sleeps.
fn way_of(round: u64) -> usize {
    ((round - 1) % 2) as usize
}

/// Wake `sleepers` sleeping threads `rounds` times each way (after a
/// warm-up), alternating the ways round by round.
pub fn measure(sleepers: usize, rounds: usize) -> Result<WakeWordCost, BenchError> {
    if sleepers == 0 || rounds == 0 {
        return Err(BenchError::Invalid("waking needs at least one sleeper and one round".into()));
    }
    let shared = Sleepers {
        own: (0..sleepers).map(|_| LocalBell::default()).collect(),
        shared: LocalBell::default(),
        round: AtomicU64::new(0),
        awake: AtomicU64::new(0),
        done: LocalBell::default(),
        stop: AtomicBool::new(false),
    };
    // What reading the CPU clock twice costs, taken off every CPU figure.
    let clock_cost = {
        let mut reads: Vec<u64> = (0..1000)
            .map(|_| {
                let a = thread_cpu_ns();
                thread_cpu_ns() - a
            })
            .collect();
        reads.sort_unstable();
        reads[reads.len() / 2]
    };
    std::thread::scope(|s| {
        for index in 0..sleepers {
            let shared = &shared;
            s.spawn(move || shared.sleep(index));
        }
        let result = wake_rounds(&shared, sleepers, rounds, clock_cost);
        shared.stop.store(true, Ordering::Release);
        shared.shared.bell().wake();
        for bell in &shared.own {
            bell.bell().wake();
        }
        result
    })
}

/// The waker's side of [`measure`].
fn wake_rounds(s: &Sleepers, sleepers: usize, rounds: usize, clock_cost: u64) -> Result<WakeWordCost, BenchError> {
    let warm_up = WARM_UP.min(rounds);
    // [word each, one word]: ring wall ns, ring CPU ns, last awake ns.
    let mut ring = [Vec::with_capacity(rounds), Vec::with_capacity(rounds)];
    let mut cpu = [0u64; 2];
    let mut last = [Vec::with_capacity(rounds), Vec::with_capacity(rounds)];
    for i in 0..2 * (warm_up + rounds) {
        let round = i as u64 + 1;
        let way = way_of(round);
        std::thread::sleep(SETTLE);
        s.round.store(round, Ordering::Release);
        let cpu_before = thread_cpu_ns();
        let started = Instant::now();
        if way == 0 {
            for bell in &s.own {
                bell.bell().ring();
            }
        } else {
            s.shared.bell().ring();
        }
        let rung = started.elapsed();
        let cpu_used = thread_cpu_ns().saturating_sub(cpu_before + clock_cost);
        let want = round * sleepers as u64;
        let all_ran =
            s.done.bell().sleep_until(Some(Instant::now() + PATIENCE), || s.awake.load(Ordering::Acquire) >= want);
        if !all_ran {
            return Err(BenchError::Stalled(format!(
                "{} of {sleepers} sleepers ran in round {round}",
                s.awake.load(Ordering::Acquire) - (round - 1) * sleepers as u64
            )));
        }
        let all = started.elapsed();
        if i >= 2 * warm_up {
            ring[way].push(rung.as_nanos() as u64);
            cpu[way] += cpu_used;
            last[way].push(all.as_nanos() as u64);
        }
    }
    let cost = |way: usize, ring: &mut Vec<u64>, last: &mut Vec<u64>| WakerCost {
        ring: Distribution::of(ring),
        ring_cpu_us: cpu[way] as f64 / 1e3 / rounds as f64,
        last_awake: Distribution::of(last),
    };
    let [ring_each, ring_one] = &mut ring;
    let [last_each, last_one] = &mut last;
    Ok(WakeWordCost { sleepers, word_each: cost(0, ring_each, last_each), one_word: cost(1, ring_one, last_one) })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn both_ways_wake_every_sleeper_every_round() {
        // A round whose sleepers did not all run ends the call as stalled.
        let cost = measure(4, 30).unwrap();
        assert_eq!(cost.word_each.ring.samples, 30);
        assert_eq!(cost.one_word.last_awake.samples, 30);
        assert!(cost.one_word.ring.min_us <= cost.one_word.last_awake.min_us, "{cost:?}");
        assert!(measure(0, 1).is_err());
    }
}
