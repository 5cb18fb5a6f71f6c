//! The owner bridge's way in for relays' transmit requests: run in the
//! Zenoh subscriber's callback of `fieldhub/C/tx`, so a request goes from
//! the link's receive task straight to the bus — no queue and no thread of
//! the bridge's between them (a hand-off each request paid in the round
//! trip, issue 35).
//!
//! One publication (a batch, `spec/federation.md` 5.4) becomes one
//! [`Inbound::Frames`] run and one wake of the bus, as far as the bridge's
//! transmit credit goes; with none left, the run so far goes to the bus and
//! the callback waits for credit like any sender. Waiting there holds the
//! link's receive task, and with it the relay: the back-pressure a full
//! `FifoChannel` gave before, which Zenoh's own handlers apply alike.
//!
//! Every wait here (for credit, for the forwarder's lock, for a port the
//! bus opens) is made off Zenoh's runtime (`zenoh_threads.rs`).
//!
//! Invariants:
//! - Callbacks take the forwarder's lock, so requests reach the bus in the
//!   order Zenoh delivered them, one publication after the other; the lock
//!   is the bridge's alone (no control-plane path takes it).
//! - A request's entry in [`Forwarded`] is queued before its frame reaches
//!   the bus, so the writer always finds the origin of a frame it publishes.
//! - A relay port's request is forwarded once ([`SeenRequests`]).
//! - Once the bridge ends (or the bus is gone) nothing more is forwarded.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::thread::Thread;

use tracing::warn;

use super::event::{Batch, TxRequest};
use super::origin_ports::{Forwarded, Opening, OriginPorts, SeenRequests};
use super::zenoh_threads::wait_off_runtime;
use crate::session::Sessions;
use fieldhub_bus::credit::{TxCredit, Waiter};
use fieldhub_bus::inbox::{ClientId, FrameRun, Inbound};

/// Frames the owner bridge may have waiting in its bus, every relay's
/// together ([`TX_CREDITS`] for a client). Each wait for credit holds a
/// Zenoh receive task and leaves its runtime (a thread hand-off and, on
/// tokio, a new worker thread); a flood of a relay with its window of
/// [`RELAY_CREDITS`] waited here often with 256, and carried 6–9 % more
/// with 2,048 (docs/performance.md, "The federation flood's window").
///
/// [`TX_CREDITS`]: fieldhub_bus::credit::TX_CREDITS
/// [`RELAY_CREDITS`]: fieldhub_bus::federation::RELAY_CREDITS
pub const BRIDGE_CREDITS: u32 = 8 * fieldhub_bus::credit::TX_CREDITS;

/// Whoever waits for the bridge's transmit credit now: the Zenoh task
/// running the callback, unparked by the bus when a credit comes back.
#[derive(Default)]
pub struct CreditWaiter(Mutex<Option<Thread>>);

impl CreditWaiter {
    /// The credit of a bridge whose forwarder waits through `waiter`:
    /// [`BRIDGE_CREDITS`] frames.
    pub fn credit(waiter: &Arc<Self>) -> TxCredit {
        let waiter = Arc::clone(waiter);
        let credit = TxCredit::new(Waiter::Notify(Box::new(move || {
            if let Some(thread) = waiter.0.lock().ok().and_then(|t| t.clone()) {
                thread.unpark();
            }
        })));
        credit.set_limit(BRIDGE_CREDITS);
        credit
    }

    fn wait_here(&self) {
        if let Ok(mut thread) = self.0.lock() {
            *thread = Some(std::thread::current());
        }
    }
}

/// What decides that the bridge stops forwarding.
pub struct Stopping {
    pub sessions: Arc<Sessions>,
    /// The bus hung up on the bridge, or the bridge closed.
    pub closed: Arc<AtomicBool>,
    /// Another owner outranks this one.
    pub outranked: Arc<Mutex<Option<(String, super::event::Term)>>>,
    /// The forwarder found the bus gone or the bridge stopping.
    pub ended: Arc<AtomicBool>,
}

impl Stopping {
    pub fn now(&self) -> bool {
        // SYNC POINT with the hang-up's, the bridge's and `end`'s Release stores.
        self.sessions.stopping()
            || self.closed.load(Ordering::Acquire)
            || self.ended.load(Ordering::Acquire)
            || self.outranked.lock().map(|o| o.is_some()).unwrap_or(false)
    }

    fn end(&self) {
        self.ended.store(true, Ordering::Release);
    }
}

/// The bridge's forwarding state, behind the subscriber callback's lock.
pub struct Forwarder {
    pub client: ClientId,
    pub channel: String,
    pub credit: Arc<TxCredit>,
    pub waiter: Arc<CreditWaiter>,
    pub seen: SeenRequests,
    pub routes: OriginPorts,
    pub opening: Arc<Opening>,
    pub forwarded: Arc<Mutex<Forwarded>>,
    pub stopping: Stopping,
}

impl Forwarder {
    /// Forward the requests of one publication on `fieldhub/C/tx`.
    pub fn take(&mut self, payload: &[u8]) {
        if self.stopping.now() {
            return;
        }
        let inbox = &self.stopping.sessions.inbox;
        // Taken at the first frame: a publication of requests already
        // seen costs no buffer.
        let mut run: Option<FrameRun> = None;
        for item in Batch::items(payload) {
            let request = match item.and_then(TxRequest::decode) {
                Ok(request) => request,
                Err(e) => {
                    warn!(channel = %self.channel, "refusing a transmit request: {e}");
                    continue;
                }
            };
            if !self.seen.first_time(&request.origin) {
                continue;
            }
            let stop = || self.stopping.now();
            let Some((port, port_id)) =
                self.routes.route(&request.origin, (self.client, inbox), &self.opening, &self.forwarded, &stop)
            else {
                return self.stopping.end();
            };
            if !self.credit.try_acquire() {
                // What is ready goes first: the bus returns credit as it
                // carries those frames.
                if !self.send(run.take()) {
                    return self.stopping.end();
                }
                self.waiter.wait_here();
                // Off the runtime: the credit comes back once the writer's
                // publications drain, which that runtime's other tasks see.
                if !wait_off_runtime(|| self.credit.acquire(stop)) {
                    return self.stopping.end();
                }
            }
            // Queued before the frame: the bus cannot carry it first.
            if let Ok(mut forwarded) = self.forwarded.lock() {
                forwarded.entry(port_id).or_default().push(request.origin, request.frame.clone());
            }
            run.get_or_insert_with(|| inbox.frame_run()).push((port, request.frame, 0));
        }
        if !self.send(run) {
            self.stopping.end();
        }
    }

    /// Hand a run of frames to the bus (one queue item, one wake); false
    /// when the bus is gone.
    fn send(&self, frames: Option<FrameRun>) -> bool {
        let Some(frames) = frames else { return true };
        self.stopping.sessions.inbox.send(Inbound::Frames { client: self.client, frames }).is_ok()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_bridge_may_have_its_window_of_relayed_frames_waiting_and_waits_past_it() {
        let waiter: Arc<CreditWaiter> = Arc::default();
        let credit = CreditWaiter::credit(&waiter);
        for n in 0..BRIDGE_CREDITS {
            assert!(credit.try_acquire(), "credit {n} of the window");
        }
        assert!(!credit.try_acquire(), "past the window the forwarder waits");
        // The bus returns one as it carries a frame: there is one to take again.
        waiter.wait_here();
        assert!(!credit.acquire_or_wait());
        credit.release();
        assert!(credit.try_acquire(), "the returned credit is there to take");
    }
}
