//! Atomics and futex calls, swapped for loom's models under `cfg(loom)` so
//! the ring and doorbell code runs unchanged inside the model checker.
//!
//! Under loom the futex is modelled as the kernel implements it: one hash
//! bucket (a mutex) that the waiter holds while it compares the word and
//! queues itself, and that the waker takes before it wakes the queue. A lost
//! wake-up then shows up as a deadlock in the model.

#[cfg(loom)]
pub(crate) use loom::sync::atomic::{fence, AtomicU32, Ordering};
#[cfg(not(loom))]
pub(crate) use std::sync::atomic::{fence, AtomicU32, Ordering};

/// Sleep while `word` holds `expected`, at most `timeout` (`None`: until
/// woken). Returns early on a wake-up, a changed word or a signal; the
/// caller re-checks its condition either way.
#[cfg(all(not(loom), not(windows)))]
pub(crate) fn futex_wait(word: &AtomicU32, expected: u32, timeout: Option<std::time::Duration>) {
    use rustix::thread::futex;
    let timespec = timeout.map(|t| rustix::time::Timespec {
        tv_sec: t.as_secs().min(i64::MAX as u64) as i64,
        tv_nsec: i64::from(t.subsec_nanos()),
    });
    // Not FUTEX_PRIVATE: the word is shared with other processes. EAGAIN
    // (word changed), ETIMEDOUT and EINTR all mean "re-check".
    let _ = futex::wait(word, futex::Flags::empty(), expected, timespec.as_ref());
}

/// Wake every thread sleeping on `word`.
#[cfg(all(not(loom), not(windows)))]
pub(crate) fn futex_wake(word: &AtomicU32) {
    use rustix::thread::futex;
    let _ = futex::wake(word, futex::Flags::empty(), i32::MAX as u32);
}

// Windows: the same two calls on WaitOnAddress (the client's local
// doorbells; no segment is shared between processes there).
#[cfg(all(not(loom), windows))]
#[path = "futex_windows.rs"]
mod futex_windows;
#[cfg(all(not(loom), windows))]
pub(crate) use futex_windows::{futex_wait, futex_wake};

#[cfg(loom)]
loom::lazy_static! {
    static ref BUCKET: (loom::sync::Mutex<()>, loom::sync::Condvar) =
        (loom::sync::Mutex::new(()), loom::sync::Condvar::new());
}

#[cfg(loom)]
pub(crate) fn futex_wait(word: &AtomicU32, expected: u32, _timeout: Option<std::time::Duration>) {
    // Timeouts are left out on purpose: the model must prove that a wake-up
    // comes, not that a timer papers over a lost one.
    let guard = BUCKET.0.lock().unwrap();
    if word.load(Ordering::Relaxed) != expected {
        return;
    }
    drop(BUCKET.1.wait(guard).unwrap());
}

#[cfg(loom)]
pub(crate) fn futex_wake(_word: &AtomicU32) {
    let _guard = BUCKET.0.lock().unwrap();
    BUCKET.1.notify_all();
}
