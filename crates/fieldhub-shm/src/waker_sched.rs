//! The scheduling of a thread that sleeps on a doorbell and must wake on
//! time (the hub's bus thread): its timer slack, and the real-time policy.
//! The system calls live here, where `unsafe` is allowed; the values the
//! bus thread asks for are the crate's [`crate::BUS_THREAD_PRIORITY`] and
//! [`crate::BUS_THREAD_SLACK_NS`], so that a thread measuring the machine
//! beside it (`fieldhub bench rbs`' floor) asks for the same; when to ask is
//! the caller's (`fieldhub-hub`'s `bus_thread::realtime`).
//!
//! Invariant: neither call makes a thread spin or changes any thread but
//! the one named.

use std::thread::JoinHandle;

/// Set the calling thread's timer slack: how much later than asked Linux
/// may fire its timers, to merge wake-ups (50 µs unless changed).
pub fn set_timer_slack_ns(ns: u64) -> std::io::Result<()> {
    rustix::thread::set_current_timer_slack(std::num::NonZeroU64::new(ns)).map_err(std::io::Error::from)
}

/// The calling thread's timer slack in ns.
pub fn timer_slack_ns() -> std::io::Result<u64> {
    rustix::thread::current_timer_slack().map_err(std::io::Error::from)
}

/// Run `thread` under `SCHED_FIFO` at `priority` (1–99). Refused (EPERM)
/// without CAP_SYS_NICE or an `RLIMIT_RTPRIO` of at least `priority`; the
/// thread keeps its policy then.
pub fn run_fifo<T>(thread: &JoinHandle<T>, priority: i32) -> std::io::Result<()> {
    use std::os::unix::thread::JoinHandleExt;
    let param = libc::sched_param { sched_priority: priority };
    // SAFETY: the pthread_t comes from a JoinHandle we borrow, so the
    // thread has not been joined or detached and the id is live; `param`
    // outlives the call, which only reads it.
    match unsafe { libc::pthread_setschedparam(thread.as_pthread_t(), libc::SCHED_FIFO, &param) } {
        0 => Ok(()),
        code => Err(std::io::Error::from_raw_os_error(code)),
    }
}

/// Whether `thread` runs under `SCHED_FIFO`.
pub fn runs_fifo<T>(thread: &JoinHandle<T>) -> std::io::Result<bool> {
    use std::os::unix::thread::JoinHandleExt;
    let (mut policy, mut param) = (0, libc::sched_param { sched_priority: 0 });
    // SAFETY: a live thread's id (as in `run_fifo`); both out-pointers are
    // valid for writes for the call.
    match unsafe { libc::pthread_getschedparam(thread.as_pthread_t(), &mut policy, &mut param) } {
        0 => Ok(policy == libc::SCHED_FIFO),
        code => Err(std::io::Error::from_raw_os_error(code)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_thread_sets_its_own_timer_slack_and_no_other() {
        let before = timer_slack_ns().unwrap();
        let set = std::thread::spawn(|| {
            set_timer_slack_ns(1).unwrap();
            timer_slack_ns().unwrap()
        });
        assert_eq!(set.join().unwrap(), 1);
        assert_eq!(timer_slack_ns().unwrap(), before, "the calling thread only");
    }

    #[test]
    fn a_thread_runs_under_sched_fifo_or_keeps_its_policy_when_refused() {
        let (stop, stopped) = std::sync::mpsc::channel::<()>();
        let thread = std::thread::spawn(move || stopped.recv());
        let result = run_fifo(&thread, 10);
        let fifo = runs_fifo(&thread).unwrap();
        stop.send(()).unwrap();
        let _ = thread.join();
        // Which depends on the machine's permissions; both are checked.
        match result {
            Ok(()) => assert!(fifo),
            Err(e) => {
                assert_eq!(e.kind(), std::io::ErrorKind::PermissionDenied, "{e}");
                assert!(!fifo);
            }
        }
    }
}
