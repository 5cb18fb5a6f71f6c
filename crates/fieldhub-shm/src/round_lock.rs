//! A lock its one writer keeps for a round: the hub's side of a to-client
//! ring.
//!
//! The hub's bus thread is the only writer of each client's to-client ring
//! (the producer's index, the open batch), yet that state sits behind a lock
//! so a link can be shared (`Sync`). Taking and leaving a lock are two atomic
//! read-modify-writes, once per frame and receiver: three quarters of the
//! bus's cost of queueing a frame. A [`RoundLock`] lets its writer keep the
//! lock from the first write of its round ([`RoundLock::write_for_round`]) to
//! the round's end ([`RoundLock::end_round`]); the writes in between re-enter
//! it (parking_lot's reentrant lock: a load and a compare). Another thread
//! that writes meanwhile waits for the round's end.
//!
//! Invariants:
//! - A round's hold exists only while the thread that made it owns the lock,
//!   and its flag is read and written only under the lock: a thread that
//!   finds the flag set is the one that made the hold, as no other thread
//!   can own the lock while the hold lasts.
//! - A thread that writes for a round ends it: until then no other thread
//!   gets the lock. (The hub's bus ends every client's round at the end of
//!   every round of its own, `OutboxSink::flush`.)
//! - The value is never reached while it is being changed: a change that
//!   wrote to the same lock again would panic (`RefCell`), not alias.

use std::cell::RefCell;

use parking_lot::ReentrantMutex;

/// A value behind a lock its writer may keep for a round (module docs).
pub struct RoundLock<T> {
    lock: ReentrantMutex<RefCell<Held<T>>>,
}

struct Held<T> {
    value: T,
    /// The thread that set this owns the lock once more than its writes
    /// do (a guard it forgot), until it leaves it in `end_round`.
    round_hold: bool,
}

impl<T> RoundLock<T> {
    pub fn new(value: T) -> Self {
        Self { lock: ReentrantMutex::new(RefCell::new(Held { value, round_hold: false })) }
    }

    /// Change the value under the lock, and keep the lock for this thread
    /// until its [`RoundLock::end_round`].
    pub fn write_for_round<R>(&self, change: impl FnOnce(&mut T) -> R) -> R {
        let locked = self.lock.lock();
        let mut held = locked.borrow_mut();
        if !held.round_hold {
            held.round_hold = true;
            // Re-entered and forgotten: `end_round` leaves it.
            std::mem::forget(self.lock.lock());
        }
        change(&mut held.value)
    }

    /// Change the value under the lock (re-entered if this thread holds it
    /// for a round), without keeping it.
    pub fn write<R>(&self, change: impl FnOnce(&mut T) -> R) -> R {
        let locked = self.lock.lock();
        let mut held = locked.borrow_mut();
        change(&mut held.value)
    }

    /// Change the value under the lock, then leave the round's hold if this
    /// thread has one: the lock is free for other threads again.
    pub fn end_round<R>(&self, change: impl FnOnce(&mut T) -> R) -> R {
        let (result, held_for_round) = {
            let locked = self.lock.lock();
            let mut held = locked.borrow_mut();
            let result = change(&mut held.value);
            (result, std::mem::take(&mut held.round_hold))
        };
        if held_for_round {
            // SAFETY: the flag was seen set under the lock, so this thread
            // set it and owns the lock once more than the guards it still
            // has, which are none (the one above is dropped): that is the
            // guard `write_for_round` forgot, and this leaves it.
            unsafe { self.lock.force_unlock() };
        }
        result
    }
}

impl<T> std::fmt::Debug for RoundLock<T> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RoundLock").finish_non_exhaustive()
    }
}

#[cfg(test)]
mod tests {
    use std::sync::atomic::{AtomicBool, Ordering};
    use std::sync::{mpsc, Arc};
    use std::time::Duration;

    use super::*;

    /// Long enough for a thread that is not blocked to finish many times
    /// over; not a measured figure: a thread kept out for good is the
    /// failure it catches (and that thread is left behind, not joined).
    const HANG: Duration = Duration::from_secs(20);

    /// What another thread reads with a plain write, or `None` if it could
    /// not get the lock.
    fn read_from_another_thread<T: Clone + Send + 'static>(lock: &Arc<RoundLock<T>>) -> Option<T> {
        let (done, wait_done) = mpsc::channel();
        let lock = Arc::clone(lock);
        std::thread::spawn(move || done.send(lock.write(|v| v.clone())));
        wait_done.recv_timeout(HANG).ok()
    }

    #[test]
    fn another_threads_write_waits_for_the_end_of_the_writers_round() {
        let lock = Arc::new(RoundLock::new(Vec::new()));
        let round_ended = Arc::new(AtomicBool::new(false));
        lock.write_for_round(|v| v.push("round"));
        let (started, wait_started) = mpsc::channel();
        let other = {
            let (lock, round_ended) = (Arc::clone(&lock), Arc::clone(&round_ended));
            std::thread::spawn(move || {
                started.send(()).unwrap();
                lock.write(|v| v.push("other"));
                round_ended.load(Ordering::SeqCst)
            })
        };
        wait_started.recv_timeout(HANG).expect("the other thread starts");
        // Time for the other thread to reach the lock: it must still be
        // waiting after it.
        std::thread::sleep(Duration::from_millis(50));
        lock.write_for_round(|v| v.push("round again"));
        round_ended.store(true, Ordering::SeqCst);
        lock.end_round(|_| ());
        assert!(other.join().unwrap(), "the other thread wrote before the round ended");
        assert_eq!(lock.write(|v| v.clone()), ["round", "round again", "other"]);
    }

    #[test]
    fn many_rounds_of_many_writes_leave_the_lock_free_each_time() {
        let lock = Arc::new(RoundLock::new(0u64));
        for round in 1..=100 {
            for _ in 0..1_000 {
                lock.write_for_round(|n| *n += 1);
            }
            lock.write(|n| *n += 1);
            lock.end_round(|_| ());
            // Were a hold left behind, the other thread would never get in.
            assert_eq!(read_from_another_thread(&lock), Some(round * 1_001), "round {round}");
        }
    }

    #[test]
    fn ending_a_round_without_a_hold_is_a_plain_write() {
        let lock = Arc::new(RoundLock::new(1));
        assert_eq!(lock.end_round(|n| std::mem::replace(n, 2)), 1);
        assert_eq!(read_from_another_thread(&lock), Some(2));
    }

    #[test]
    fn a_round_lock_can_be_shared_between_threads() {
        fn shared<T: Send + Sync>() {}
        shared::<RoundLock<Vec<u8>>>();
    }
}
