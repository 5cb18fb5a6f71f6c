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
//!   from a two-process ping-pong over a ring, sleeping at once.
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

use crate::cpu::sum_exec_runtime_ms;
use crate::raw::{self, PeerMode, ShmPeer, STOP};
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

/// CPU time of one futex wake-up of a sleeping process, µs: the peer's CPU
/// per ping-pong. Each round the peer is woken (and switched in), wakes
/// this process and goes back to sleep: the sleeper's side and the waker's
/// side of one wake-up. The peer alone is read because it is one thread
/// doing only that, where this process has other threads of its own.
pub fn cpu_per_wake(launcher: &Launcher, rounds: usize) -> Result<f64, BenchError> {
    if rounds == 0 {
        return Err(BenchError::Invalid("at least one round is needed".into()));
    }
    let mut peer = Sleeper::spawn(launcher)?;
    let message = FrameSize::Can8.wire_message();
    let mut body = Vec::new();
    let mut round = |peer: &mut Sleeper| -> Result<(), BenchError> {
        peer.wake(&message)?;
        peer.answer(&mut body)
    };
    for _ in 0..WARM_UP {
        round(&mut peer)?;
    }
    let pid = peer.shm.peer.pid();
    let cpu_ms = || {
        sum_exec_runtime_ms(pid).ok_or_else(|| BenchError::Proc {
            path: format!("/proc/{pid}/task/*/sched"),
            source: std::io::Error::other("no se.sum_exec_runtime: the kernel lacks CONFIG_SCHED_DEBUG"),
        })
    };
    let before = cpu_ms()?;
    for _ in 0..rounds {
        round(&mut peer)?;
    }
    let used_ms = cpu_ms()? - before;
    peer.stop()?;
    Ok(used_ms * 1e3 / rounds as f64)
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
}
