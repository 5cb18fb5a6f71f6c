//! Transmit credit: how many frames of one client may wait in the bus
//! thread's transmit queues. It is what makes a sender wait while its bus is
//! busy — as a SocketCAN write blocks on a full TX queue — instead of the
//! hub buffering without bound.
//!
//! The client's transport takes a credit before it forwards a frame and
//! waits when none is left; the bus thread returns the credit when the frame
//! has left its queue (transmitted, or discarded with an error). How the
//! transport waits is its own ([`Waiter`]): a thread parks, the reactor stops
//! reading that client's socket until it is told, the bus itself (reading a
//! shared-memory ring) just looks again next round. Only when the waiter has
//! announced that it waits does the bus pay for a wake-up, so a flowing
//! sender costs two atomic operations per frame and no system call.

use std::sync::atomic::{AtomicBool, AtomicU32, Ordering};
use std::thread::Thread;
use std::time::Duration;

/// Frames one client may have queued in the bus at once.
pub const TX_CREDITS: u32 = 256;

/// How long an acquiring thread sleeps before it re-checks on its own; a
/// safety net only, wake-ups come from [`TxCredit::release`].
const PARK_SLICE: Duration = Duration::from_millis(50);

/// Who waits for credit, and how it is woken.
pub enum Waiter {
    /// A transport thread, parked.
    Thread(Thread),
    /// An event loop, told through this call.
    Notify(Box<dyn Fn() + Send + Sync>),
    /// The bus thread itself: it looks again on its own.
    Bus,
}

pub struct TxCredit {
    in_flight: AtomicU32,
    waiting: AtomicBool,
    /// Set by the bus when it drops the client: no credit will come back.
    closed: AtomicBool,
    waiter: Waiter,
}

impl TxCredit {
    pub fn new(waiter: Waiter) -> Self {
        Self { in_flight: AtomicU32::new(0), waiting: AtomicBool::new(false), closed: AtomicBool::new(false), waiter }
    }

    /// Credit for frames forwarded by the calling thread.
    pub fn for_current_thread() -> Self {
        Self::new(Waiter::Thread(std::thread::current()))
    }

    /// Take one credit, waiting while none is left. Returns false, without
    /// a credit, once the bus has closed the credit or `abandon` returns true.
    pub fn acquire(&self, abandon: impl Fn() -> bool) -> bool {
        loop {
            if self.acquire_or_wait() {
                return true;
            }
            // SYNC POINT with `close`'s Release store.
            if self.closed.load(Ordering::Acquire) || abandon() {
                self.waiting.store(false, Ordering::Relaxed);
                return false;
            }
            std::thread::park_timeout(PARK_SLICE);
            self.waiting.store(false, Ordering::Relaxed);
        }
    }

    /// Take one credit if one is left, without waiting: for the bus thread,
    /// which reads a shared-memory client's frames itself and leaves them in
    /// the client's ring while none is left.
    pub fn try_acquire(&self) -> bool {
        // SYNC POINT with `close`'s Release store.
        if self.closed.load(Ordering::Acquire) {
            return false;
        }
        // SYNC POINT with `release`'s fetch_sub, as in `acquire`.
        let mut current = self.in_flight.load(Ordering::Acquire);
        while current < TX_CREDITS {
            match self.in_flight.compare_exchange_weak(current, current + 1, Ordering::AcqRel, Ordering::Acquire) {
                Ok(_) => return true,
                Err(now) => current = now,
            }
        }
        false
    }

    /// Take one credit, or announce that the caller waits for one: then
    /// `false`, and the waiter's notification comes when a credit returns.
    /// An event loop calls it as it is; [`TxCredit::acquire`] parks on it.
    pub fn acquire_or_wait(&self) -> bool {
        if self.try_acquire() {
            return true;
        }
        // Announce the wait, then re-check: a release between the look above
        // and the store below sees `waiting` false and wakes nobody, but then
        // this re-check sees its credit.
        // SYNC POINT with `release`'s load of `waiting` (SeqCst on both
        // sides: store-then-load against store-then-load).
        self.waiting.store(true, Ordering::SeqCst);
        if self.in_flight.load(Ordering::SeqCst) < TX_CREDITS && self.try_acquire() {
            self.waiting.store(false, Ordering::Relaxed);
            return true;
        }
        false
    }

    /// Return one credit (bus thread).
    pub fn release(&self) {
        // SYNC POINT with `acquire`'s SeqCst re-check after it set `waiting`.
        self.in_flight.fetch_sub(1, Ordering::SeqCst);
        if self.waiting.load(Ordering::SeqCst) {
            self.wake();
        }
    }

    /// The bus has dropped the client: wake and refuse any waiting acquirer.
    pub fn close(&self) {
        self.closed.store(true, Ordering::Release);
        self.wake();
    }

    fn wake(&self) {
        match &self.waiter {
            Waiter::Thread(thread) => thread.unpark(),
            Waiter::Notify(notify) => {
                if self.waiting.swap(false, Ordering::SeqCst) {
                    notify();
                }
            }
            Waiter::Bus => {}
        }
    }

    /// Frames currently queued in the bus.
    pub fn in_flight(&self) -> u32 {
        self.in_flight.load(Ordering::Relaxed)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Arc;

    #[test]
    fn acquire_waits_for_release_and_never_exceeds_the_limit() {
        let credit = Arc::new(TxCredit::for_current_thread());
        let (tx, rx) = std::sync::mpsc::channel::<()>();
        let bus = {
            let credit = Arc::clone(&credit);
            std::thread::spawn(move || {
                let mut released = 0u32;
                while rx.recv().is_ok() {
                    assert!(credit.in_flight() <= TX_CREDITS);
                    credit.release();
                    released += 1;
                }
                released
            })
        };
        for _ in 0..10 * TX_CREDITS {
            assert!(credit.acquire(|| false));
            tx.send(()).unwrap();
        }
        drop(tx);
        assert_eq!(bus.join().unwrap(), 10 * TX_CREDITS);
        assert_eq!(credit.in_flight(), 0);
    }

    #[test]
    fn closed_credit_refuses_at_once() {
        let credit = TxCredit::for_current_thread();
        credit.close();
        assert!(!credit.acquire(|| false));
    }

    #[test]
    fn acquire_gives_up_when_abandoned() {
        let credit = TxCredit::for_current_thread();
        for _ in 0..TX_CREDITS {
            assert!(credit.acquire(|| false));
        }
        assert!(!credit.acquire(|| true));
    }
}
