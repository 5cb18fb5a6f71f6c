//! How long a waiting client thread spins before it sleeps on a doorbell.
//!
//! Spinning saves the wake-up (a futex call by the waker, a context switch
//! for the waiter: microseconds each) when what a thread waits for comes
//! while it still spins, and costs a core while it spins. So:
//!
//! - The consumer's spin follows the recent gaps between arrivals
//!   ([`consumer_spin`], an [`AdaptiveSpin`] between 0 and [`MAX_SPIN`]):
//!   twice the last wait when that fits and the wait before came as soon,
//!   none after a wait whose input came later. A request/answer exchange
//!   whose answer comes within tens of microseconds is caught spinning; a
//!   periodic stream (500 kbit/s: a frame every 250 µs) earns no spin at all
//!   and sleeps at once. A wait
//!   that ended without a message leaves the next one without a spin.
//! - A thread spins only while it holds one of a process-wide number of
//!   spin slots ([`wait`]): the machine's cores less two — one for the hub's
//!   bus thread, which spins itself between bus rounds, and one for the
//!   thread that will answer. On a two-core machine no client thread spins:
//!   measured with `fieldhub bench latency --transport shm` there, a round
//!   trip's p50 was 16 µs without a client spin, 32 µs with an adaptive one
//!   of at most 20 µs, 66 µs with a fixed 20 µs spin and 196 µs with the
//!   hub's 200 µs cap — the spinning waiter only kept the thread it waited
//!   for from running. And 64 clients in one process (the benchmark's
//!   extra clients) never spin all at once.
//!
//! Busy-poll (`shm://NAME?busy_poll=1`) is the application's explicit
//! choice and bypasses all of this.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::OnceLock;
use std::time::{Duration, Instant};

use fieldhub_shm::{AdaptiveSpin, Bell, WaitPolicy};

/// The longest spin of a client's consumer: an answer later than this is
/// cheaper to be woken for than to spin for, and a client is one of many
/// threads on a machine (the hub's bus thread spins up to 200 µs).
#[cfg_attr(not(target_os = "linux"), allow(dead_code))] // the shared-memory links only (Linux)
pub const MAX_SPIN: Duration = Duration::from_micros(50);

/// The spin of a thread waiting for something another client thread
/// hands it (a follower, `receive.rs`; a stream's reader).
pub(crate) const FOLLOWER_SPIN: Duration = WaitPolicy::ADAPTIVE.spin;

/// A new consumer's spin budget.
#[cfg_attr(not(target_os = "linux"), allow(dead_code))] // the shared-memory links only (Linux)
pub(crate) fn consumer_spin() -> AdaptiveSpin {
    AdaptiveSpin::bounded(Duration::ZERO, MAX_SPIN)
}

/// Client threads of this process spinning now.
static SPINNING: AtomicUsize = AtomicUsize::new(0);

/// How many client threads of this process may spin at once.
fn spin_slots() -> usize {
    static SLOTS: OnceLock<usize> = OnceLock::new();
    *SLOTS.get_or_init(|| std::thread::available_parallelism().map_or(0, |n| n.get().saturating_sub(2)))
}

/// The right to spin, given back on drop.
struct SpinSlot;

impl SpinSlot {
    /// One of `slots` slots, if one is free.
    fn take(slots: usize) -> Option<Self> {
        if slots == 0 {
            return None;
        }
        // Relaxed: a count that only bounds how many spin; nothing is
        // published through it.
        if SPINNING.fetch_add(1, Ordering::Relaxed) < slots {
            Some(SpinSlot)
        } else {
            SPINNING.fetch_sub(1, Ordering::Relaxed);
            None
        }
    }
}

impl Drop for SpinSlot {
    fn drop(&mut self) {
        SPINNING.fetch_sub(1, Ordering::Relaxed);
    }
}

/// Wait on `bell` until `ready()` holds (true) or `deadline` passes
/// (false): spin up to `spin` if a spin slot is free, then sleep.
pub(crate) fn wait(bell: Bell<'_>, spin: Duration, deadline: Option<Instant>, ready: impl FnMut() -> bool) -> bool {
    wait_with(spin_slots(), bell, spin, deadline, ready)
}

/// [`wait`] with `slots` spin slots in the process.
fn wait_with(
    slots: usize,
    bell: Bell<'_>,
    spin: Duration,
    deadline: Option<Instant>,
    mut ready: impl FnMut() -> bool,
) -> bool {
    if !spin.is_zero() {
        if let Some(_slot) = SpinSlot::take(slots) {
            let spin_end = Instant::now() + spin;
            let until = deadline.map_or(spin_end, |d| d.min(spin_end));
            // Busy-polls until `until`: the spin, without sleeping.
            if bell.wait(WaitPolicy::BUSY_POLL, Some(until), &mut ready) {
                return true;
            }
            if until < spin_end {
                return false;
            }
        }
    }
    bell.sleep_until(deadline, ready)
}

#[cfg(test)]
mod tests {
    use fieldhub_shm::bell::LocalBell;

    use super::*;

    /// Waits with `slots` spin slots: one woken after its spin, one whose
    /// condition comes while it spins, one that gives up at its deadline
    /// (during the spin and after it), one with nothing to wait for.
    fn waits_end_as_they_should(slots: usize) {
        let local = LocalBell::default();
        let flag = std::sync::atomic::AtomicBool::new(false);
        std::thread::scope(|s| {
            s.spawn(|| {
                std::thread::sleep(Duration::from_millis(5));
                flag.store(true, Ordering::Release);
                local.bell().ring();
            });
            assert!(wait_with(slots, local.bell(), MAX_SPIN, None, || flag.load(Ordering::Acquire)));
        });
        if slots > 0 {
            // Only a spin sees it: nothing rings for the clock.
            let soon = Instant::now() + Duration::from_micros(10);
            assert!(wait_with(slots, local.bell(), MAX_SPIN, None, || Instant::now() >= soon));
        }
        let deadline = Instant::now() + Duration::from_micros(20);
        assert!(!wait_with(slots, local.bell(), MAX_SPIN, Some(deadline), || false));
        assert!(Instant::now() >= deadline);
        let deadline = Instant::now() + Duration::from_millis(5);
        assert!(!wait_with(slots, local.bell(), MAX_SPIN, Some(deadline), || false));
        assert!(Instant::now() >= deadline);
        assert!(!wait_with(slots, local.bell(), Duration::ZERO, Some(Instant::now()), || false));
    }

    #[test]
    fn waits_with_and_without_spin_slots_end_when_they_should_and_give_every_slot_back() {
        waits_end_as_they_should(0);
        waits_end_as_they_should(1);
        assert_eq!(SPINNING.load(Ordering::Relaxed), 0, "every spin slot was given back");
        let held = SpinSlot::take(1).expect("a free slot");
        assert!(SpinSlot::take(1).is_none(), "one slot, taken");
        drop(held);
        assert!(SpinSlot::take(1).is_some());
    }
}
