//! The futex calls of `sync` on Windows: `WaitOnAddress` and
//! `WakeByAddressAll`. They wake threads of one process only, which is all
//! Windows uses a doorbell for (the client's local bells; shared segments
//! are Linux-only), so the semantics match `futex_wait`/`futex_wake` there:
//! sleep while the word holds the expected value, return early on a wake-up
//! or a changed word, the caller re-checks either way.

use std::time::Duration;

use windows_sys::Win32::System::Threading::{WaitOnAddress, WakeByAddressAll, INFINITE};

use super::AtomicU32;

/// Sleep while `word` holds `expected`, at most `timeout` (`None`: until woken).
pub(crate) fn futex_wait(word: &AtomicU32, expected: u32, timeout: Option<Duration>) {
    // Whole milliseconds, rounded up so a short timeout still sleeps; INFINITE
    // is u32::MAX, so a finite wait stays below it.
    let millis = match timeout {
        None => INFINITE,
        Some(t) => u32::try_from(t.as_nanos().div_ceil(1_000_000)).unwrap_or(INFINITE - 1).min(INFINITE - 1),
    };
    // SAFETY: `word` is a live AtomicU32 for the whole call and `expected` a
    // local u32; both are 4 bytes, the size given. WaitOnAddress only reads
    // them. A timeout or a spurious return is fine: the caller re-checks.
    unsafe {
        WaitOnAddress(word.as_ptr().cast(), (&raw const expected).cast(), 4, millis);
    }
}

/// Wake every thread sleeping on `word`.
pub(crate) fn futex_wake(word: &AtomicU32) {
    // SAFETY: `word` is a live AtomicU32; WakeByAddressAll only uses its
    // address as a key.
    unsafe { WakeByAddressAll(word.as_ptr().cast()) }
}
