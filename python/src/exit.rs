//! Interpreter exit with threads inside the extension.
//!
//! A thread that takes the GIL back while the interpreter finalizes is ended
//! by CPython with `pthread_exit` (before 3.14), whose forced unwinding
//! through pyo3's panic guard aborts the process (`FATAL: exception not
//! rethrown`). That is a script ending, or taking an uncaught Ctrl-C, while
//! a `can.Notifier`'s thread waits in `recv()`. So every wait without the
//! GIL goes through [`released`], and the package's `atexit` handler (run
//! while the interpreter is still whole) calls [`begin_exit`] and waits
//! until [`calls_in_progress`] is 0.
//!
//! Invariant: after [`begin_exit`], a thread other than the exiting one
//! that comes back from a wait parks instead of taking the GIL back, so no
//! thread returns into Python during finalization; the process ends with
//! it parked, as a daemon thread's end is (and as CPython 3.14 does itself).

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::OnceLock;
use std::thread::ThreadId;

use pyo3::prelude::*;

/// The thread that runs the interpreter's exit, once it has begun.
static EXITING: OnceLock<ThreadId> = OnceLock::new();

/// Calls waiting without the GIL now, or come back from it and not yet
/// holding it again.
static IN_PROGRESS: AtomicUsize = AtomicUsize::new(0);

/// `py.allow_threads(call)`, counted, and parking the thread for good when
/// the interpreter began to exit while it waited.
pub fn released<T: Send>(py: Python<'_>, call: impl FnOnce() -> T + Send) -> T {
    IN_PROGRESS.fetch_add(1, Ordering::SeqCst);
    let value = py.allow_threads(|| {
        let value = call();
        if EXITING.get().is_some_and(|exiting| *exiting != std::thread::current().id()) {
            IN_PROGRESS.fetch_sub(1, Ordering::SeqCst);
            loop {
                std::thread::park();
            }
        }
        value
    });
    IN_PROGRESS.fetch_sub(1, Ordering::SeqCst);
    value
}

/// The interpreter is exiting (the package's `atexit` handler): threads
/// that come back from a wait from now on park.
#[pyfunction]
pub fn begin_exit() {
    let _ = EXITING.set(std::thread::current().id());
}

/// How many calls are waiting without the GIL, or coming back from it.
#[pyfunction]
pub fn calls_in_progress() -> usize {
    IN_PROGRESS.load(Ordering::SeqCst)
}
