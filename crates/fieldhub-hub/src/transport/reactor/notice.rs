//! Notices: how other threads tell the reactor that a connection needs
//! service — its outbox has items, its transmit credit came back, the bus
//! hung it up — or that it is to stop.
//!
//! Invariants: a posted connection index is seen by the reactor's next
//! drain of the queue; however many notices a round brings, they cost one
//! wake-up (one `eventfd` write) between two drains. Imports nothing else
//! from the reactor.

use std::io;
use std::sync::atomic::{AtomicBool, Ordering};

use crossbeam_channel::{Receiver, Sender};
use mio::{Registry, Token, Waker};

/// Tells the reactor a connection needs service, with one wake-up per
/// reactor round.
pub(super) struct Notice {
    queue: Sender<usize>,
    waker: Waker,
    /// A wake-up is on its way: later notices of this round need none.
    pending: AtomicBool,
}

impl Notice {
    /// A notice that wakes the poll of `registry` with `token`; the
    /// receiver is the reactor's end of its queue.
    pub(super) fn new(registry: &Registry, token: Token) -> io::Result<(Self, Receiver<usize>)> {
        let waker = Waker::new(registry, token)?;
        let (queue, notices) = crossbeam_channel::unbounded();
        Ok((Self { queue, waker, pending: AtomicBool::new(false) }, notices))
    }

    /// Connection `conn` needs service.
    pub(super) fn post(&self, conn: usize) {
        let _ = self.queue.send(conn);
        // SYNC POINT with the reactor's swap to false in `rearm`.
        if !self.pending.swap(true, Ordering::AcqRel) {
            let _ = self.waker.wake();
        }
    }

    /// Wake the reactor without naming a connection (to stop it).
    pub(super) fn wake(&self) {
        self.pending.store(true, Ordering::Release);
        let _ = self.waker.wake();
    }

    /// The reactor is about to drain the queue.
    pub(super) fn rearm(&self) {
        // SYNC POINT with `post`'s swap: reading its `true` makes its queued
        // notice visible to the drain that follows; a post after this swap
        // reads `false` and wakes the next round.
        self.pending.swap(false, Ordering::AcqRel);
    }
}
