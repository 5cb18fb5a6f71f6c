//! The Zenoh threads a hub asks for, and how a Zenoh callback of the hub's
//! waits.
//!
//! Zenoh 1.10 runs its tasks on five tokio runtimes, each with threads of
//! its own (`ZENOH_RUNTIME`: app, acc, tx, rx, net). By default a link's
//! socket belongs to the runtime that made it — acc for an accepted link,
//! net for a connected one — while the link's receive task runs on rx, with
//! two workers: every message received woke acc's or net's thread, which
//! woke an rx thread, which often woke the other (issue 35 counted 3.7
//! sleeps of Zenoh's threads on a relay per relayed round trip, 3.1 on the
//! owner). [`ask_for_threads`] hands rx and acc over to net, with two
//! workers: the thread that sees the socket readable runs the receive task
//! and the hub's subscriber callbacks itself — one sleep per message. The
//! transmit side needs no thread of Zenoh's at all: `link.rs` asks for the
//! low-latency transport, whose publications are written by the publishing
//! thread.
//!
//! Invariants:
//! - A value the user set (`ZENOH_RUNTIME` in the hub's environment) is
//!   kept: the hub only fills it in when it is unset, once per process,
//!   before its Zenoh session opens (Zenoh reads it when it starts its
//!   first runtime).
//! - A callback that may wait for long — for transmit credit, for the
//!   forwarder another callback holds, for room in a relay's event queue,
//!   for a port the bus opens — waits through [`wait_off_runtime`]: tokio
//!   hands the worker's other tasks, the link sockets' readiness among
//!   them, to another thread meanwhile. Without it two waiting callbacks
//!   would hold both of net's workers, and a wait that needs this hub's own
//!   publication to go out (the owner's writer waits for its socket to
//!   drain before the bus returns credit) would never end.

use std::sync::{Mutex, MutexGuard, Once, TryLockError};

use super::error::FederationError;

/// The environment variable Zenoh reads its runtimes' threads from.
pub const ZENOH_RUNTIME: &str = "ZENOH_RUNTIME";

/// What the hub sets it to when the user did not: the receive and accept
/// runtimes handed over to net, which gets two workers (RON, as Zenoh
/// parses it).
pub const HUB_ZENOH_RUNTIME: &str = "(rx: (handover: net), acc: (handover: net), net: (worker_threads: 2))";

static ASKED: Once = Once::new();

/// Set `ZENOH_RUNTIME` to [`HUB_ZENOH_RUNTIME`] unless the user set it;
/// the value in force, and whether it is the user's. Call before the
/// first Zenoh session opens (later, Zenoh has read it). An empty value
/// is refused: Zenoh would stop the process on it.
pub fn ask_for_threads() -> Result<(String, bool), FederationError> {
    ASKED.call_once(|| {
        if std::env::var_os(ZENOH_RUNTIME).is_none() {
            // Set before Zenoh starts a thread; the hub's own threads read
            // no environment while it starts its federation.
            std::env::set_var(ZENOH_RUNTIME, HUB_ZENOH_RUNTIME);
        }
    });
    let value = std::env::var(ZENOH_RUNTIME).unwrap_or_default();
    if value.trim().is_empty() {
        return Err(FederationError::EmptyZenohRuntime);
    }
    let users = value != HUB_ZENOH_RUNTIME;
    Ok((value, users))
}

/// Run `wait` — a wait that may last — off the Zenoh runtime whose worker
/// calls it (the worker's other tasks go on on another thread); outside a
/// runtime (a test calling a callback's code), simply run it.
pub fn wait_off_runtime<T>(wait: impl FnOnce() -> T) -> T {
    // Zenoh's runtimes are multi-threaded (it refuses any other), where
    // `block_in_place` is allowed; on no runtime it just calls `wait`.
    tokio::task::block_in_place(wait)
}

/// Lock `mutex`, waiting off the runtime when another callback holds it;
/// `None` when it is poisoned.
pub fn lock_off_runtime<T>(mutex: &Mutex<T>) -> Option<MutexGuard<'_, T>> {
    match mutex.try_lock() {
        Ok(guard) => Some(guard),
        Err(TryLockError::WouldBlock) => wait_off_runtime(|| mutex.lock().ok()),
        Err(TryLockError::Poisoned(_)) => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Arc;
    use std::time::Duration;

    #[test]
    fn a_callback_waiting_off_the_runtime_leaves_its_worker_to_the_other_tasks() {
        assert_eq!(wait_off_runtime(|| 7), 7, "outside a runtime the wait just runs");
        // Zenoh's runtimes are multi-threaded; one worker, as a runtime may have.
        let runtime = tokio::runtime::Builder::new_multi_thread().worker_threads(1).build().unwrap();
        let mutex = Arc::new(Mutex::new(0));
        let held = mutex.lock().unwrap();
        let (started, waiting) = std::sync::mpsc::channel();
        let waiter = {
            let mutex = Arc::clone(&mutex);
            runtime.spawn(async move {
                started.send(()).unwrap();
                *lock_off_runtime(&mutex).unwrap() += 1;
            })
        };
        waiting.recv_timeout(Duration::from_secs(5)).unwrap();
        // The only worker waits for the lock; a task spawned now must still run.
        let (ran, other) = std::sync::mpsc::channel();
        runtime.spawn(async move { ran.send(5).unwrap() });
        assert_eq!(other.recv_timeout(Duration::from_secs(5)), Ok(5), "the worker's other task did not run");
        drop(held);
        runtime.block_on(waiter).unwrap();
        assert_eq!(*mutex.lock().unwrap(), 1, "the waiting callback took the lock once it was free");
    }
}
