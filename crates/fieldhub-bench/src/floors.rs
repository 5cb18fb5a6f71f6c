//! Measured floors: what the primitives a path through the hub is built of
//! cost on this machine, each measured alone, so a target the hub misses can
//! be set against what no implementation on these cores could go below.
//!
//! - [`wake_fan_out`]: one process wakes `n` processes sleeping on their
//!   own `fieldhub-shm` bells (a message on each one's ring, then its bell),
//!   each answers on its ring; the time until the last answer is in. A hub
//!   that fans a frame out to `n` sleeping readers pays at least this per
//!   frame, however it rings them: every sleeper is a context switch of its
//!   own, and `n` of them share the machine's cores.
//! - [`cpu_per_wake`]: CPU time (the threads' `sum_exec_runtime`) that one
//!   futex wake-up of a sleeping process costs, waker's and sleeper's sides,
//!   from a two-process ping-pong over a ring, sleeping at once: the peer's
//!   CPU over the sleeps the kernel counted for it, both on one core, in the
//!   cheapest of ten batches (other work on the machine only adds to a batch).
//! - [`wake_time_floor_us`], [`wake_cpu_percent`]: what the wake-ups a run
//!   actually took ([`crate::sleeps`]) cost at that price — as time a round
//!   trip cannot go below on average (their CPU shares the machine's cores)
//!   and as CPU.
//! - [`thread_hand_off`]: one hand-off between two threads of a process
//!   (a message over a channel to a thread parked waiting for it), from a
//!   two-thread ping-pong: what each thread a path crosses adds.
//!
//! Invariant: a floor is always a measurement of the primitive alone in the
//! same run, never a constant; the report derives a path's floor from it by
//! counting the primitives the path needs.

use std::sync::mpsc;
use std::time::Instant;

use fieldhub_shm::{Consumer, Producer, WaitPolicy};
use rustix::process::Pid;
use rustix::thread::{sched_getaffinity, sched_setaffinity, CpuSet};

use crate::cpu::sum_exec_runtime_ms;
use crate::raw::{self, PeerMode, ShmPeer, STOP};
use crate::sleeps::process_voluntary_switches;
use crate::stats::Distribution;
use crate::{BenchError, FrameSize, Launcher, Progress, PATIENCE, WARM_UP};

/// Sleep at once, never spin: a sleeping reader is what is measured.
const SLEEP_AT_ONCE: WaitPolicy = WaitPolicy { spin: std::time::Duration::ZERO, busy_poll: false };

/// A peer process sleeping on its bell, with the rings' positions.
struct Sleeper {
    shm: ShmPeer,
    producer: Producer,
    consumer: Consumer,
}

impl Sleeper {
    fn spawn(launcher: &Launcher) -> Result<Self, BenchError> {
        Ok(Self {
            shm: raw::spawn_shm_peer(launcher, PeerMode::Futex)?,
            producer: Producer::starting_at(0),
            consumer: Consumer::starting_at(0),
        })
    }

    /// Put `message` on the sleeper's ring and ring its bell.
    fn wake(&mut self, message: &[u8]) -> Result<(), BenchError> {
        let segment = &self.shm.segment;
        raw::push(&mut self.producer, &segment.to_hub(), segment.space_bell(), message, SLEEP_AT_ONCE, PATIENCE)?;
        segment.client_bell().ring();
        Ok(())
    }

    /// Wait for the sleeper's answer.
    fn answer(&mut self, body: &mut Vec<u8>) -> Result<(), BenchError> {
        let ring = self.shm.segment.to_client();
        raw::pop(&mut self.consumer, &ring, self.shm.bell.bell(), body, SLEEP_AT_ONCE, PATIENCE)
    }

    fn stop(mut self) -> Result<(), BenchError> {
        self.wake(&STOP)?;
        self.shm.peer.finish()
    }
}

/// Rounds of waking `sleepers` sleeping processes at once, each answering:
/// the time from the first wake to the last answer.
pub fn wake_fan_out(
    launcher: &Launcher,
    sleepers: usize,
    rounds: usize,
    progress: Progress<'_>,
) -> Result<Distribution, BenchError> {
    if sleepers == 0 || rounds == 0 {
        return Err(BenchError::Invalid("a fan-out needs at least one sleeper and one round".into()));
    }
    progress(&format!("floor: starting {sleepers} sleeping processes"));
    let mut peers = (0..sleepers).map(|_| Sleeper::spawn(launcher)).collect::<Result<Vec<_>, _>>()?;
    let message = FrameSize::Can8.wire_message();
    let mut body = Vec::new();
    let mut times = Vec::with_capacity(rounds);
    for i in 0..WARM_UP.min(rounds) + rounds {
        let started = Instant::now();
        for peer in &mut peers {
            peer.wake(&message)?;
        }
        for peer in &mut peers {
            peer.answer(&mut body)?;
        }
        if i >= WARM_UP.min(rounds) {
            times.push(started.elapsed().as_nanos() as u64);
        }
        // Let every sleeper fall asleep again, as readers between frames do.
        std::thread::sleep(std::time::Duration::from_micros(200));
    }
    progress(&format!("floor: waking {sleepers} sleepers, {rounds} rounds done"));
    for peer in peers {
        peer.stop()?;
    }
    Ok(Distribution::of(&mut times))
}

/// Batches the rounds of [`cpu_per_wake`] are read in: the cheapest is the
/// price, as the machine's other work (compilers, the hypervisor) only ever
/// adds to a batch's CPU.
const WAKE_BATCHES: usize = 10;

/// What one futex wake-up of a sleeping process costs.
#[derive(Clone, Copy, Debug, serde::Serialize)]
pub struct WakeCost {
    /// CPU of the sleeper and its waker for one wake-up, µs: the cheapest
    /// batch's — the price a floor uses.
    pub cpu_us: f64,
    /// The median batch's, for how much the price moved within the run.
    pub cpu_us_median: f64,
    /// The sleeps the kernel counted for the peer per ping-pong (1 when it
    /// slept every round, as it should).
    pub sleeps_per_round: f64,
}

impl WakeCost {
    /// The cheapest and the median of batches' (CPU ms, sleeps).
    fn of(batches: &[(f64, u64)], rounds: usize) -> Self {
        let mut prices: Vec<f64> = batches.iter().map(|&(ms, slept)| ms * 1e3 / slept.max(1) as f64).collect();
        prices.sort_by(f64::total_cmp);
        let slept: u64 = batches.iter().map(|&(_, s)| s).sum();
        Self {
            cpu_us: prices.first().copied().unwrap_or(0.0),
            cpu_us_median: prices.get(prices.len() / 2).copied().unwrap_or(0.0),
            sleeps_per_round: slept as f64 / rounds.max(1) as f64,
        }
    }
}

/// This thread and a peer process held on one core while the value lives,
/// their affinities given back when it is dropped: a wake-up between two
/// processes on one core is a plain switch, where across two cores it also
/// costs the other core's interrupt and its way out of idle (on a VM, an
/// exit to the hypervisor) — so where the scheduler happened to put the
/// two no longer decides the price.
struct OneCore {
    peer: Pid,
    ours: CpuSet,
    theirs: CpuSet,
}

/// The cores process `pid` (`None`: this thread) may run on.
fn affinity(pid: Option<Pid>) -> Result<CpuSet, BenchError> {
    sched_getaffinity(pid)
        .map_err(|e| BenchError::Proc { path: format!("sched_getaffinity({})", Pid::as_raw(pid)), source: e.into() })
}

fn set_affinity(pid: Option<Pid>, set: &CpuSet) -> Result<(), BenchError> {
    sched_setaffinity(pid, set)
        .map_err(|e| BenchError::Proc { path: format!("sched_setaffinity({})", Pid::as_raw(pid)), source: e.into() })
}

impl OneCore {
    /// This thread and `peer` on the first core this thread may use.
    fn pin(peer: u32) -> Result<Self, BenchError> {
        let peer = i32::try_from(peer)
            .ok()
            .and_then(Pid::from_raw)
            .ok_or_else(|| BenchError::Invalid(format!("no such process {peer}")))?;
        let (ours, theirs) = (affinity(None)?, affinity(Some(peer))?);
        let cpu = (0..CpuSet::MAX_CPU)
            .find(|&cpu| ours.is_set(cpu))
            .ok_or_else(|| BenchError::Invalid("this thread may run on no core".into()))?;
        let mut one = CpuSet::new();
        one.set(cpu);
        set_affinity(Some(peer), &one)?;
        set_affinity(None, &one)?;
        Ok(Self { peer, ours, theirs })
    }
}

impl Drop for OneCore {
    fn drop(&mut self) {
        // The peer may have ended already; this thread's own mask is what matters.
        let _ = set_affinity(Some(self.peer), &self.theirs);
        let _ = set_affinity(None, &self.ours);
    }
}

/// CPU time of one futex wake-up of a sleeping process: the peer's CPU over
/// its sleeps. Each round the peer is woken (and switched in), wakes this
/// process and goes back to sleep: the sleeper's side and the waker's side
/// of one wake-up. The peer alone is read because it is one thread doing
/// only that, where this process has other threads of its own; dividing by
/// the sleeps the kernel counted, not the rounds, prices a sleep even when
/// a round found its message without sleeping. Both processes share one
/// core (`OneCore`): the cheapest a wake-up can be. The rounds are read in
/// `WAKE_BATCHES` batches and the cheapest batch is the price.
pub fn cpu_per_wake(launcher: &Launcher, rounds: usize) -> Result<WakeCost, BenchError> {
    if rounds < WAKE_BATCHES {
        return Err(BenchError::Invalid(format!("at least {WAKE_BATCHES} rounds are needed (one a batch)")));
    }
    let mut peer = Sleeper::spawn(launcher)?;
    let message = FrameSize::Can8.wire_message();
    let mut body = Vec::new();
    let mut round = |peer: &mut Sleeper| -> Result<(), BenchError> {
        peer.wake(&message)?;
        peer.answer(&mut body)
    };
    let pid = peer.shm.peer.pid();
    let one_core = OneCore::pin(pid)?;
    for _ in 0..WARM_UP {
        round(&mut peer)?;
    }
    let reading = || {
        let cpu_ms = sum_exec_runtime_ms(pid).ok_or_else(|| BenchError::Proc {
            path: format!("/proc/{pid}/task/*/sched"),
            source: std::io::Error::other("no se.sum_exec_runtime: the kernel lacks CONFIG_SCHED_DEBUG"),
        })?;
        Ok::<_, BenchError>((cpu_ms, process_voluntary_switches(pid)?))
    };
    let mut batches = Vec::with_capacity(WAKE_BATCHES);
    for _ in 0..WAKE_BATCHES {
        let before = reading()?;
        for _ in 0..rounds / WAKE_BATCHES {
            round(&mut peer)?;
        }
        let after = reading()?;
        batches.push((after.0 - before.0, after.1.saturating_sub(before.1)));
    }
    drop(one_core);
    peer.stop()?;
    Ok(WakeCost::of(&batches, rounds / WAKE_BATCHES * WAKE_BATCHES))
}

/// The mean time an event (a round trip) takes at least when each took
/// `sleeps_per_event` sleeps, each woken at `cpu_per_wake_us` of CPU: that
/// CPU is spent on the machine's `cores` whatever the order of the
/// wake-ups, so the events cannot follow each other faster on average.
pub fn wake_time_floor_us(sleeps_per_event: f64, cpu_per_wake_us: f64, cores: usize) -> f64 {
    sleeps_per_event * cpu_per_wake_us / cores.max(1) as f64
}

/// Percent of one core that `sleeps_per_event` wake-ups an event cost at
/// `cpu_per_wake_us` each, `events_per_s` events a second.
pub fn wake_cpu_percent(sleeps_per_event: f64, cpu_per_wake_us: f64, events_per_s: f64) -> f64 {
    events_per_s * sleeps_per_event * cpu_per_wake_us / 1e6 * 100.0
}

/// One-way hand-offs between two threads of this process, ns each: half of
/// each round trip of a message to a parked thread and back.
pub fn thread_hand_off(rounds: usize) -> Result<Distribution, BenchError> {
    if rounds == 0 {
        return Err(BenchError::Invalid("at least one round is needed".into()));
    }
    let (to_echo, from_main) = mpsc::sync_channel::<u64>(1);
    let (to_main, from_echo) = mpsc::sync_channel::<u64>(1);
    let echo = std::thread::spawn(move || {
        while let Ok(n) = from_main.recv() {
            if to_main.send(n).is_err() {
                break;
            }
        }
    });
    let mut times = Vec::with_capacity(rounds);
    let stalled = || BenchError::Stalled("the hand-off thread ended".into());
    for i in 0..(WARM_UP + rounds) as u64 {
        let started = Instant::now();
        to_echo.send(i).map_err(|_| stalled())?;
        from_echo.recv_timeout(PATIENCE).map_err(|_| stalled())?;
        if i >= WARM_UP as u64 {
            times.push(started.elapsed().as_nanos() as u64 / 2);
        }
    }
    drop(to_echo);
    echo.join().map_err(|_| stalled())?;
    Ok(Distribution::of(&mut times))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_thread_hand_off_gives_one_sample_per_round_after_the_warm_up() {
        let hand_off = thread_hand_off(50).unwrap();
        assert_eq!(hand_off.samples, 50);
        assert!(hand_off.min_us > 0.0 && hand_off.min_us <= hand_off.p50_us, "{hand_off:?}");
        assert!(thread_hand_off(0).is_err());
    }

    #[test]
    fn one_core_holds_this_thread_and_its_peer_on_one_core_and_gives_their_cores_back() {
        let cores = |pid| affinity(pid).unwrap().count();
        let mut peer = std::process::Command::new("sleep").arg("5").spawn().unwrap();
        let pid = Pid::from_raw(peer.id() as i32);
        let (ours, theirs) = (cores(None), cores(pid));
        let pinned = OneCore::pin(peer.id()).unwrap();
        assert_eq!((cores(None), cores(pid)), (1, 1));
        assert!(affinity(None).unwrap() == affinity(pid).unwrap(), "this thread and the peer on the same core");
        drop(pinned);
        assert_eq!((cores(None), cores(pid)), (ours, theirs));
        peer.kill().unwrap();
        peer.wait().unwrap();
    }

    #[test]
    fn a_wake_up_is_priced_by_the_cheapest_batch_per_sleep_the_kernel_counted() {
        // Three batches of 100 rounds: 0.5 ms over 100 sleeps is 5 µs a wake-up,
        // 0.9 ms over 90 sleeps 10 µs, 2 ms over 100 sleeps 20 µs.
        let cost = WakeCost::of(&[(0.9, 90), (2.0, 100), (0.5, 100)], 300);
        assert!((cost.cpu_us - 5.0).abs() < 1e-9, "{cost:?}");
        assert!((cost.cpu_us_median - 10.0).abs() < 1e-9, "{cost:?}");
        assert!((cost.sleeps_per_round - 290.0 / 300.0).abs() < 1e-12, "{cost:?}");
    }

    #[test]
    fn wake_ups_on_two_cores_take_half_their_cpu_as_time_and_are_priced_per_frame_as_cpu() {
        // 126 sleeps a round trip at 8 µs each, over 2 cores: 504 µs.
        assert_eq!(wake_time_floor_us(126.0, 8.0, 2), 504.0);
        assert_eq!(wake_time_floor_us(126.0, 8.0, 0), 1008.0, "no core counted is one core");
        // 2.5 sleeps a frame at 4 µs, 4,000 frames/s: 40 ms of CPU a second, 4 % of a core.
        assert!((wake_cpu_percent(2.5, 4.0, 4_000.0) - 4.0).abs() < 1e-9);
        assert_eq!(wake_cpu_percent(0.0, 4.0, 4_000.0), 0.0);
    }
}
