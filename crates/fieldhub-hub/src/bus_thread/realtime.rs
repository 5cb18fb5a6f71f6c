//! How the bus thread asks the OS to wake it on time. Its cyclic jobs (a
//! rest-bus simulation's messages) and frame ends are deadlines in real time,
//! and the thread sleeps between them; two things decide how late it wakes:
//!
//! - **Timer slack** ([`tighten_timer_slack`], always): Linux may delay a
//!   sleeping thread's timer by its slack, 50 µs by default, to merge
//!   wake-ups. The bus thread asks for 1 ns: a frame time at 1 Mbit/s is
//!   about 130 µs, and 50 µs of it is too much to give away. It costs no
//!   CPU time while the hub is idle (nothing is armed then).
//! - **The scheduler** ([`make_realtime`], `[hub] realtime = true`): under
//!   the normal policy a thread that wakes thousands of times a second has
//!   used its share, and a woken bus thread waits behind a busy process on
//!   its core until that one's slice ends at a timer tick — 4 ms at 250 Hz,
//!   measured with `perf sched` (docs/performance.md). `SCHED_FIFO` runs it
//!   as soon as it wakes. Only when permitted (CAP_SYS_NICE or an
//!   `RLIMIT_RTPRIO` of at least [`PRIORITY`]); otherwise the hub does not
//!   start and says what to grant.
//!
//! Invariant: nothing here makes the thread spin; a real-time thread that
//! never slept would hold its core, so `realtime` and `busy_poll` together
//! are refused.

use std::thread::JoinHandle;

// The priority's one definition, shared with threads that measure the
// machine as the bus thread sees it (`fieldhub bench rbs`' floor).
use fieldhub_shm::BUS_THREAD_PRIORITY as PRIORITY;

/// Why the bus thread cannot have real-time scheduling.
#[derive(Debug, thiserror::Error)]
pub enum RealtimeError {
    #[error(
        "[hub] realtime = true: the bus thread may not use SCHED_FIFO (priority {PRIORITY}): {source}. Give the \
         hub CAP_SYS_NICE (sudo setcap cap_sys_nice+ep $(command -v fieldhub), or AmbientCapabilities=CAP_SYS_NICE \
         in its systemd unit) or a real-time priority limit of at least {PRIORITY} (ulimit -r {PRIORITY}; rtprio in \
         /etc/security/limits.conf, LimitRTPRIO= in a systemd unit), or set realtime = false"
    )]
    NotPermitted {
        #[source]
        source: std::io::Error,
    },
    #[error(
        "[hub] realtime = true with busy_poll = true would hold a core at real-time priority and starve the \
         hub's other threads: set one of them, not both"
    )]
    WithBusyPoll,
    #[error("[hub] realtime = true: real-time scheduling of the bus thread is built for Linux only")]
    Unsupported,
}

/// Ask for 1 ns of timer slack for the calling thread (the bus thread).
/// A refusal costs only precision, so it is logged, not fatal.
pub fn tighten_timer_slack() {
    #[cfg(target_os = "linux")]
    if let Err(e) = fieldhub_shm::waker_sched::set_timer_slack_ns(fieldhub_shm::BUS_THREAD_SLACK_NS) {
        tracing::warn!("the bus thread keeps the default timer slack (wake-ups up to 50 µs late): {e}");
    }
}

/// Run `thread` (the bus thread) under `SCHED_FIFO` at [`PRIORITY`].
pub fn make_realtime<T>(thread: &JoinHandle<T>, busy_poll: bool) -> Result<(), RealtimeError> {
    if busy_poll {
        return Err(RealtimeError::WithBusyPoll);
    }
    #[cfg(target_os = "linux")]
    return fieldhub_shm::waker_sched::run_fifo(thread, PRIORITY)
        .map_err(|source| RealtimeError::NotPermitted { source });
    #[cfg(not(target_os = "linux"))]
    {
        let _ = thread;
        Err(RealtimeError::Unsupported)
    }
}

// Two attributes, not cfg(all(test, …)): tests/layers.rs knows test code
// by its own #[cfg(test)] line.
#[cfg(test)]
#[cfg(target_os = "linux")]
mod tests {
    use fieldhub_shm::waker_sched::timer_slack_ns;

    use super::*;

    #[test]
    fn realtime_with_busy_poll_is_refused_naming_both_keys() {
        let thread = std::thread::spawn(|| ());
        let refused = make_realtime(&thread, true).unwrap_err().to_string();
        thread.join().unwrap();
        assert!(refused.contains("realtime = true") && refused.contains("busy_poll = true"), "{refused}");
    }

    #[test]
    fn a_refused_sched_fifo_names_what_to_grant_and_the_way_out() {
        // Whether this machine permits it is fieldhub-shm's waker_sched test;
        // here, what the hub says when it does not.
        let source = std::io::Error::from(std::io::ErrorKind::PermissionDenied);
        let text = RealtimeError::NotPermitted { source }.to_string();
        for needed in ["CAP_SYS_NICE", "setcap cap_sys_nice+ep", "ulimit -r 10", "LimitRTPRIO=", "realtime = false"] {
            assert!(text.contains(needed), "{needed} missing from: {text}");
        }
    }

    #[test]
    fn the_bus_threads_timer_slack_becomes_one_nanosecond() {
        let slack = std::thread::spawn(|| {
            tighten_timer_slack();
            timer_slack_ns().unwrap()
        });
        assert_eq!(slack.join().unwrap(), 1);
    }
}
