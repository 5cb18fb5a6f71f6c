//! Waiting for something to happen: poll a condition until it holds or a
//! deadline passes, then fail naming what never happened. The deadline only
//! guards against hangs ([`PATIENCE`]); how long a wait takes is never a
//! test's assumption.

use std::fmt::Display;
use std::time::{Duration, Instant};

/// Long enough for any step on a loaded CI machine; only guards against hangs.
pub const PATIENCE: Duration = Duration::from_secs(60);

/// [`PATIENCE`] from now: the deadline of a wait for something that should
/// happen at once.
pub fn deadline() -> Instant {
    Instant::now() + PATIENCE
}

/// Poll `probe` (first at once, then every millisecond or so, backing off to
/// 20 ms) until it returns a value, and return that; panic once `deadline`
/// has passed, saying that `what` never happened.
pub fn wait_for<T>(deadline: Instant, what: impl Display, probe: impl FnMut() -> Option<T>) -> T {
    poll(deadline, probe).unwrap_or_else(|| panic!("waited in vain: {what}"))
}

/// [`wait_for`] that returns `None` once `deadline` has passed, for a
/// caller whose failure message needs what it sees then.
pub fn poll<T>(deadline: Instant, mut probe: impl FnMut() -> Option<T>) -> Option<T> {
    let mut pause = Duration::from_millis(1);
    loop {
        if let Some(value) = probe() {
            return Some(value);
        }
        if Instant::now() >= deadline {
            return None;
        }
        std::thread::sleep(pause);
        pause = (pause * 2).min(Duration::from_millis(20));
    }
}

/// Poll `condition` until it holds; panic once `deadline` has passed,
/// saying that `what` never happened.
pub fn wait_until(deadline: Instant, what: impl Display, mut condition: impl FnMut() -> bool) {
    wait_for(deadline, what, || condition().then_some(()))
}

/// The calling thread's kernel thread id, for [`wait_until_asleep`].
pub fn thread_id() -> i32 {
    // SAFETY: gettid(2) has no preconditions and cannot fail.
    unsafe { libc::gettid() }
}

/// Wait until thread `tid` of this process sleeps in the kernel (state `S`
/// in `/proc/self/task/TID/stat`): a thread that was started to make a
/// blocking call is then blocked in it, so what a test does next meets a
/// blocked call, not one about to start.
pub fn wait_until_asleep(tid: i32) {
    let state = || {
        let stat = std::fs::read_to_string(format!("/proc/self/task/{tid}/stat")).ok()?;
        // The state follows the command's name, which ends with the last ')'.
        stat.rsplit(')').next()?.split_whitespace().next().map(str::to_owned)
    };
    wait_until(deadline(), format_args!("thread {tid} sleeps in a blocking call"), || state().as_deref() == Some("S"));
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn wait_for_returns_what_the_probe_found_once_it_finds_it() {
        let mut tries = 0;
        let found = wait_for(deadline(), "the third try", || {
            tries += 1;
            (tries == 3).then_some(tries)
        });
        assert_eq!(found, 3);
    }

    #[test]
    fn poll_gives_up_at_the_deadline() {
        assert_eq!(poll(Instant::now() + Duration::from_millis(30), || None::<()>), None);
    }
}
