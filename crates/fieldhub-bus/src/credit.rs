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
//! sender costs two atomic operations per frame and no system call (none
//! when the bus is the waiter: [`Waiter::Bus`]).
//!
//! In virtual time a synchronised participant's sends are part of its step,
//! and a send that waited for credit would wait for bus time to move, which
//! waits for that very step to end. Its frames queue per port instead, as
//! on an overloaded real bus, and the hub tells it when more than
//! [`TX_CREDITS`] wait (`docs/virtual-time.md`). The bus holds at most
//! [`PARTICIPANT_CREDITS`] of them and refuses the rest as they come
//! (`TX_DROPPED queue_full`); its transports' limit is raised to
//! [`PARTICIPANT_TRANSIT`] (`Bus` does it as the participant joins), so they
//! wait at most for the bus thread to read, never for bus time.

use std::sync::atomic::{AtomicBool, AtomicU32, Ordering};
use std::thread::Thread;
use std::time::Duration;

/// Frames one client may have queued in the bus at once.
pub const TX_CREDITS: u32 = 256;

/// Frames of a synchronised participant of virtual time the bus holds at
/// once, queued and staged: 64 real-time queues, about 1.5 MiB of frames.
/// The bus refuses a frame past it as it comes (`TX_DROPPED queue_full`),
/// so the participant's send never waits and its step always ends.
pub const PARTICIPANT_CREDITS: u32 = 64 * TX_CREDITS;

/// A participant's credit limit in its transport: [`PARTICIPANT_CREDITS`]
/// and a real-time queue more for frames on their way to the bus thread.
/// The bus returns a refused frame's credit at once, so a transport at this
/// limit waits only for the bus thread to read what it forwarded.
pub const PARTICIPANT_TRANSIT: u32 = PARTICIPANT_CREDITS + TX_CREDITS;

/// How long an acquiring thread sleeps before it re-checks on its own; a
/// safety net only, wake-ups come from [`TxCredit::release`].
const PARK_SLICE: Duration = Duration::from_millis(50);

/// Who waits for credit, and how it is woken.
pub enum Waiter {
    /// A transport thread, parked.
    Thread(Thread),
    /// An event loop, told through this call.
    Notify(Box<dyn Fn() + Send + Sync>),
    /// The bus thread itself: it looks again on its own. It is then the
    /// only thread that takes and returns this credit (it reads the
    /// client's ring and transmits its frames), so both are a load and a
    /// store, without the atomic read-modify-write other waiters need: those
    /// two were a sixteenth of the bus thread's time a frame.
    Bus,
}

pub struct TxCredit {
    in_flight: AtomicU32,
    /// [`TX_CREDITS`], or [`PARTICIPANT_TRANSIT`] for a participant.
    limit: AtomicU32,
    waiting: AtomicBool,
    /// Set by the bus when it drops the client: no credit will come back.
    closed: AtomicBool,
    waiter: Waiter,
}

impl TxCredit {
    pub fn new(waiter: Waiter) -> Self {
        Self {
            in_flight: AtomicU32::new(0),
            limit: AtomicU32::new(TX_CREDITS),
            waiting: AtomicBool::new(false),
            closed: AtomicBool::new(false),
            waiter,
        }
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
        // Relaxed: the limit changes when a participant joins or leaves
        // virtual time; a send that sees the old one waits or not once more.
        let limit = self.limit.load(Ordering::Relaxed);
        if let Waiter::Bus = self.waiter {
            // Relaxed: only the bus thread writes a bus credit (`Waiter::Bus`).
            let taken = current < limit;
            if taken {
                self.in_flight.store(current + 1, Ordering::Relaxed);
            }
            return taken;
        }
        while current < limit {
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
        if self.in_flight.load(Ordering::SeqCst) < self.limit.load(Ordering::Relaxed) && self.try_acquire() {
            self.waiting.store(false, Ordering::Relaxed);
            return true;
        }
        false
    }

    /// Return one credit (bus thread).
    pub fn release(&self) {
        if let Waiter::Bus = self.waiter {
            // Relaxed: only the bus thread writes a bus credit, and nobody
            // waits to be told (`Waiter::Bus`). Wrapping, as `fetch_sub`:
            // the bus harness's plain `send` forwards frames without one.
            let in_flight = self.in_flight.load(Ordering::Relaxed);
            self.in_flight.store(in_flight.wrapping_sub(1), Ordering::Relaxed);
            return;
        }
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

    /// Set how many frames may be queued at once (bus thread): raised for
    /// a synchronised participant, lowered again when it stops being one.
    /// A raised limit wakes a waiting acquirer: it may have room now.
    pub fn set_limit(&self, limit: u32) {
        self.limit.store(limit, Ordering::SeqCst);
        if self.waiting.load(Ordering::SeqCst) {
            self.wake();
        }
    }

    /// How many frames may be queued at once.
    pub fn limit(&self) -> u32 {
        self.limit.load(Ordering::Relaxed)
    }

    /// Whether every credit is out: the client's next frame waits (for
    /// stall reports; a transport's acquirer may not have asked yet).
    pub fn exhausted(&self) -> bool {
        self.in_flight() >= self.limit()
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
    fn a_participant_s_limit_lets_more_frames_in_and_lowering_it_lets_them_drain() {
        let credit = TxCredit::new(Waiter::Bus);
        for _ in 0..TX_CREDITS {
            assert!(credit.try_acquire());
        }
        assert!(!credit.acquire_or_wait() && credit.exhausted(), "a real-time client waits at its limit");
        credit.set_limit(PARTICIPANT_TRANSIT);
        assert!(!credit.exhausted());
        while credit.try_acquire() {}
        assert_eq!(credit.in_flight(), PARTICIPANT_TRANSIT);
        credit.set_limit(TX_CREDITS);
        (0..PARTICIPANT_TRANSIT - TX_CREDITS).for_each(|_| credit.release());
        assert!(!credit.try_acquire(), "back at the real-time limit: nothing until one more returns");
        credit.release();
        assert!(credit.try_acquire());
    }

    #[test]
    fn a_bus_credit_taken_and_returned_on_one_thread_counts_as_a_shared_one() {
        // The bus's load-and-store against the read-modify-write of every
        // other waiter, over the same takes, returns and limit changes.
        let (bus, shared) = (TxCredit::new(Waiter::Bus), TxCredit::for_current_thread());
        let mut state = 0x2545_f491_4f6c_dd1du64;
        for step in 0..200_000 {
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            match state % 100 {
                0 => [&bus, &shared].iter().for_each(|c| c.set_limit([TX_CREDITS, PARTICIPANT_TRANSIT][step % 2])),
                1..=54 => assert_eq!(bus.try_acquire(), shared.try_acquire(), "take at step {step}"),
                _ if shared.in_flight() > 0 => [&bus, &shared].iter().for_each(|c| c.release()),
                _ => {}
            }
            assert_eq!((bus.in_flight(), bus.exhausted()), (shared.in_flight(), shared.exhausted()), "step {step}");
        }
        bus.close();
        assert!(!bus.try_acquire(), "a closed bus credit refuses");
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
