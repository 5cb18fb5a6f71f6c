//! The bus thread's one wait point, [`BusWake`]. Shared-memory clients ring
//! the hub's bell in the bell segment they map; in-process senders (the
//! reactor, the control plane, pollers) wake the bus through a flag in the
//! hub's private memory, which no client can write. While clients ring from
//! shared memory the bus never waits longer than [`MAX_BUS_WAIT`], so nothing
//! a client writes there (a cleared `armed` word) can stall it.

use std::sync::atomic::{AtomicBool, AtomicU32, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use fieldhub_bus::inbox::Wake;
#[cfg(target_os = "linux")]
pub use fieldhub_shm::BellSegment as HubBell;
use fieldhub_shm::{AdaptiveSpin, WaitPolicy};

/// The longest the bus thread sleeps without looking at its input. Wake-ups
/// normally come sooner; this bounds what a lost one (a client that cleared
/// the shared `armed` word) can cost: latency, never a stall.
pub const MAX_BUS_WAIT: Duration = Duration::from_millis(50);

/// The bus thread's wake-up: the hub's bell in shared memory, announced
/// twice — in the bell segment for shared-memory clients, and in the hub's
/// private memory for its own threads, which no client can write
/// (`BellSegment::bell_announced_in`, model-checked in `fieldhub-shm`).
pub struct BusWake {
    bell: Arc<HubBell>,
    /// The bus thread's private announcement that it is about to sleep.
    armed: AtomicU32,
    /// Work that is in no queue (a receiver freed room): the wait ends.
    poked: AtomicBool,
    /// The bus thread's last wait ended without input.
    idle: AtomicBool,
}

impl BusWake {
    pub fn new(bell: Arc<HubBell>) -> Self {
        Self { bell, armed: AtomicU32::new(0), poked: AtomicBool::new(false), idle: AtomicBool::new(false) }
    }

    /// Bus thread: wait until `input()` holds or `deadline` passes — with
    /// `shared` (clients ring the bell from shared memory, where one could
    /// clear `armed`), never longer than [`MAX_BUS_WAIT`]. Without such
    /// clients nothing can lose a wake-up, and an idle hub sleeps until woken.
    pub fn wait(
        &self,
        busy_poll: bool,
        spin: &mut AdaptiveSpin,
        deadline: Option<Instant>,
        shared: bool,
        mut input: impl FnMut() -> bool,
    ) {
        // A poke is taken by the wait it ends.
        let input = || input() || self.poked.swap(false, Ordering::Relaxed);
        let deadline = match shared {
            true => {
                let cap = Instant::now() + MAX_BUS_WAIT;
                Some(deadline.map_or(cap, |d| d.min(cap)))
            }
            false => deadline,
        };
        // Announced in private for the whole wait; the shared bell below
        // announces, re-checks and sleeps on the word both bells share.
        let bell = self.bell.bell();
        if busy_poll {
            // Never sleeps, so nobody needs to wake it.
            bell.wait(WaitPolicy::BUSY_POLL, deadline, input);
            return;
        }
        let private = self.bell.bell_announced_in(&self.armed);
        private.arm();
        let came = if self.idle.load(Ordering::Relaxed) {
            // Nothing came in the last wait: a look every MAX_BUS_WAIT costs
            // a wake-up, not a spin as well.
            bell.sleep_until(deadline, input)
        } else {
            bell.wait_adaptive(spin, deadline, input)
        };
        // Relaxed: only the bus thread reads and writes it.
        self.idle.store(!came, Ordering::Relaxed);
        private.disarm();
    }
}

impl Wake for BusWake {
    /// In-process sender: call after queueing work for the bus. Costs a
    /// system call only when the bus thread announced that it sleeps.
    fn ring(&self) {
        self.bell.bell_announced_in(&self.armed).ring();
    }

    /// Wake the bus for work it cannot see in its queue or rings (a
    /// lossless receiver it waits for took frames).
    fn poke(&self) {
        self.poked.store(true, Ordering::Relaxed);
        self.ring();
    }
}

/// The hub's bell where shared memory is Linux-only: in the hub's private
/// memory, rung by its own threads only (no client maps it).
#[cfg(not(target_os = "linux"))]
#[derive(Default)]
pub struct HubBell {
    word: AtomicU32,
    armed: AtomicU32,
}

#[cfg(not(target_os = "linux"))]
impl HubBell {
    pub fn bell(&self) -> fieldhub_shm::Bell<'_> {
        fieldhub_shm::Bell::new(&self.word, &self.armed)
    }

    /// The bell with its announcement in `armed`, as `BellSegment` has it.
    pub fn bell_announced_in<'a>(&'a self, armed: &'a AtomicU32) -> fieldhub_shm::Bell<'a> {
        fieldhub_shm::Bell::new(&self.word, armed)
    }
}
