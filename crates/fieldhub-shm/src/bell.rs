//! Doorbells: how one side wakes the other without a system call while the
//! other side is awake (`spec/shm.md` section 4).
//!
//! A doorbell is two `u32` words: `word`, the futex waiters sleep on (a
//! counter bumped by every wake-up), and `armed`, the number of waiters
//! about to sleep — the same idea as virtio's event suppression.
//!
//! - Waiter: `seen = word`; `armed += 1`; full fence; re-check its
//!   condition; sleep on `word` while it still equals `seen`; `armed -= 1`.
//! - Ringer: publish; full fence; if `armed` is not zero, bump `word` and
//!   wake every sleeper.
//!
//! The two fences order "publish, then look at `armed`" against "arm, then
//! look for work", so either the ringer sees a waiter armed or the waiter
//! sees the work: no lost wake-up. The bump of `word` makes a sleep that
//! starts after the ring return at once (the futex compares `word` with
//! `seen`). A ringer that finds `armed` zero costs a fence and a load.
//!
//! `armed` counts rather than flags so a bell may have several waiters (a
//! client's reader thread and an application thread waiting in `recv`): one
//! waiter withdrawing must not hide another that still sleeps. Only waiters
//! write `armed`; ringers that arrive while waiters wake up may each pay for
//! a wake-up call until the waiters run and withdraw.

use std::time::{Duration, Instant};

use crate::sync::{fence, futex_wait, futex_wake, AtomicU32, Ordering};

/// A doorbell in shared memory (or private memory, for in-process waiters).
#[derive(Clone, Copy)]
pub struct Bell<'a> {
    word: &'a AtomicU32,
    armed: &'a AtomicU32,
}

/// What the waiter saw when it armed the bell.
#[derive(Clone, Copy, Debug)]
pub struct Armed {
    seen: u32,
}

impl<'a> Bell<'a> {
    pub fn new(word: &'a AtomicU32, armed: &'a AtomicU32) -> Self {
        Self { word, armed }
    }

    /// Ringer: call after publishing. Returns whether it woke the waiter
    /// (which is when a system call was made).
    pub fn ring(&self) -> bool {
        // SYNC POINT with `arm`'s fence: publish-then-check here against
        // arm-then-check there; SeqCst fences forbid both missing the other.
        fence(Ordering::SeqCst);
        if self.armed.load(Ordering::Relaxed) == 0 {
            return false;
        }
        self.wake();
        true
    }

    /// Wake the waiter whether or not it announced a sleep (shutdown, a
    /// closed connection). Costs a system call.
    pub fn wake(&self) {
        // SYNC POINT with `sleep`'s futex compare: the bump makes a sleep on
        // an older `seen` return at once.
        self.word.fetch_add(1, Ordering::Release);
        futex_wake(self.word);
    }

    /// Waiter, step 1: announce the sleep. Re-check the condition after
    /// this, then [`Bell::sleep`] or [`Bell::disarm`].
    pub fn arm(&self) -> Armed {
        // SYNC POINT with `wake`'s Release bump.
        let seen = self.word.load(Ordering::Acquire);
        // Relaxed: the fence below orders this increment before the re-check.
        self.armed.fetch_add(1, Ordering::Relaxed);
        // SYNC POINT with `ring`'s fence (see there).
        fence(Ordering::SeqCst);
        Armed { seen }
    }

    /// Waiter: sleep until rung (or `timeout` passes, or a spurious wake-up).
    pub fn sleep(&self, armed: Armed, timeout: Option<Duration>) {
        futex_wait(self.word, armed.seen, timeout);
        self.disarm();
    }

    /// Waiter: withdraw the announcement (woken, or the condition came true).
    pub fn disarm(&self) {
        // Relaxed: a ringer that still sees the old count only makes a spare
        // wake-up; nothing is published through this counter.
        self.armed.fetch_sub(1, Ordering::Relaxed);
    }
}

/// How a side waits for its condition.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct WaitPolicy {
    /// Spin this long before sleeping (ignored with `busy_poll`).
    pub spin: Duration,
    /// Never sleep: spin until the condition or the deadline.
    pub busy_poll: bool,
}

impl WaitPolicy {
    /// A short spin catches the answer of a peer that is awake without the
    /// ~25 µs of a wake-up; beyond it, sleeping is cheaper.
    pub const ADAPTIVE: WaitPolicy = WaitPolicy { spin: Duration::from_micros(20), busy_poll: false };
    pub const BUSY_POLL: WaitPolicy = WaitPolicy { spin: Duration::ZERO, busy_poll: true };
}

/// A spin budget that follows the peers' pace, for a waiter whose peers
/// answer in bursts (the hub's bus thread). A wait whose input came soon —
/// twice its wait fits the budget's maximum ([`AdaptiveSpin::MAX`] by
/// default) — right after another that did, makes the budget twice that
/// wait (never less than it was); a lone soon wait leaves it as it is; a
/// wait whose input came later takes the budget down to its minimum at once
/// — by default none at all ([`AdaptiveSpin::MIN`]). A request/answer
/// exchange then pays no wake-up for the answer, and a periodic stream
/// slower than the spin limit (a 500 kbit/s bus sends a frame every
/// ~250 µs) sleeps at once, even when a late sender's frames now and then
/// come close together: a spin it could not win would cost a core's time
/// for nothing (docs/profile-2026-11-28-500kbit.md).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct AdaptiveSpin {
    budget: Duration,
    min: Duration,
    max: Duration,
    /// The last wait's input came soon.
    soon: bool,
}

impl AdaptiveSpin {
    pub const MIN: Duration = Duration::ZERO;
    pub const MAX: Duration = Duration::from_micros(200);

    /// A budget between `min` and `max` (`min` ≤ `max`), starting at the
    /// reference spin ([`WaitPolicy::ADAPTIVE`]) if that lies between them.
    pub fn bounded(min: Duration, max: Duration) -> Self {
        Self { budget: WaitPolicy::ADAPTIVE.spin.clamp(min, max), min, max, soon: false }
    }

    /// The spin the next wait may use.
    pub fn budget(&self) -> Duration {
        self.budget
    }

    /// Input came `after` the wait began (for waiters that spin and sleep
    /// by other means than [`Bell::wait_adaptive`]).
    pub fn observe(&mut self, after: Duration) {
        let soon = after * 2 <= self.max;
        if !soon {
            self.budget = self.min;
        } else if self.soon {
            self.budget = self.budget.max(after * 2);
        }
        self.soon = soon;
    }
}

impl Default for AdaptiveSpin {
    fn default() -> Self {
        Self::bounded(Self::MIN, Self::MAX)
    }
}

/// How a spin ended.
enum Spun {
    /// `ready()` held.
    Ready,
    /// The deadline passed.
    Deadline,
    /// The budget ran out: time to sleep.
    Out,
}

impl<'a> Bell<'a> {
    /// Wait until `ready()` is true (returns true) or `deadline` passes
    /// (returns false): spin per `policy`, then sleep on the bell.
    pub fn wait(&self, policy: WaitPolicy, deadline: Option<Instant>, mut ready: impl FnMut() -> bool) -> bool {
        let limit = (!policy.busy_poll).then_some(policy.spin);
        match spin(limit, deadline, &mut ready) {
            Spun::Ready => true,
            Spun::Deadline => false,
            Spun::Out => self.sleep_until(deadline, ready),
        }
    }

    /// [`Bell::wait`] with a spin budget that adapts to how soon the
    /// condition tends to come true ([`AdaptiveSpin`]).
    pub fn wait_adaptive(
        &self,
        spin_budget: &mut AdaptiveSpin,
        deadline: Option<Instant>,
        mut ready: impl FnMut() -> bool,
    ) -> bool {
        let started = Instant::now();
        let ready = match spin(Some(spin_budget.budget), deadline, &mut ready) {
            Spun::Ready => true,
            Spun::Deadline => false,
            Spun::Out => self.sleep_until(deadline, ready),
        };
        if ready {
            spin_budget.observe(started.elapsed());
        }
        ready
    }

    /// The sleeping half of [`Bell::wait`]: arm, re-check, sleep, until
    /// `ready()` (true) or `deadline` (false).
    pub fn sleep_until(&self, deadline: Option<Instant>, mut ready: impl FnMut() -> bool) -> bool {
        loop {
            let armed = self.arm();
            if ready() {
                self.disarm();
                return true;
            }
            let timeout = match deadline {
                Some(d) => match d.checked_duration_since(Instant::now()) {
                    Some(left) if !left.is_zero() => Some(left),
                    _ => {
                        self.disarm();
                        return false;
                    }
                },
                None => None,
            };
            self.sleep(armed, timeout);
            if ready() {
                return true;
            }
        }
    }
}

/// Spin until `ready()`, the deadline, or `limit` (`None`: no limit).
fn spin(limit: Option<Duration>, deadline: Option<Instant>, ready: &mut impl FnMut() -> bool) -> Spun {
    let started = Instant::now();
    if ready() {
        return Spun::Ready;
    }
    if limit.is_some_and(|l| l.is_zero()) {
        return Spun::Out;
    }
    let mut spins = 0u32;
    loop {
        std::hint::spin_loop();
        if ready() {
            return Spun::Ready;
        }
        spins = spins.wrapping_add(1);
        if spins % 64 == 0 {
            // The thread that will answer may be waiting for this very core
            // (on two cores, or pinned to this one): let it run, or the spin
            // holds back what it waits for. Returns at once when nothing
            // else is runnable here.
            std::thread::yield_now();
            let now = Instant::now();
            if deadline.is_some_and(|d| now >= d) {
                return Spun::Deadline;
            }
            if limit.is_some_and(|l| now.duration_since(started) >= l) {
                return Spun::Out;
            }
        }
    }
}

/// A doorbell in private memory, for in-process waiters and tests.
#[derive(Default)]
pub struct LocalBell {
    word: AtomicU32,
    armed: AtomicU32,
}

impl LocalBell {
    pub fn bell(&self) -> Bell<'_> {
        Bell::new(&self.word, &self.armed)
    }
}

#[cfg(all(test, not(loom)))]
mod tests {
    use super::*;
    use std::sync::atomic::AtomicBool;
    use std::sync::Arc;

    #[test]
    fn ringing_an_unarmed_bell_makes_no_wake_up() {
        let local = LocalBell::default();
        assert!(!local.bell().ring());
        let armed = local.bell().arm();
        assert!(local.bell().ring());
        // The bump lets a sleep on the old value return at once, and the
        // waiter clears the flag: ringing is free again.
        local.bell().sleep(armed, None);
        assert!(!local.bell().ring());
    }

    #[test]
    fn a_sleeping_waiter_is_woken_by_the_ring_after_a_publish() {
        let local = Arc::new(LocalBell::default());
        let flag = Arc::new(AtomicBool::new(false));
        let waiter = {
            let (local, flag) = (Arc::clone(&local), Arc::clone(&flag));
            std::thread::spawn(move || {
                local.bell().wait(WaitPolicy { spin: Duration::ZERO, busy_poll: false }, None, || {
                    flag.load(std::sync::atomic::Ordering::Acquire)
                })
            })
        };
        std::thread::sleep(Duration::from_millis(20));
        flag.store(true, std::sync::atomic::Ordering::Release);
        local.bell().ring();
        assert!(waiter.join().unwrap());
    }

    #[test]
    fn the_adaptive_spin_grows_when_input_keeps_coming_soon_and_stops_when_it_comes_late() {
        let mut budget = AdaptiveSpin::default();
        budget.observe(Duration::from_micros(40));
        assert_eq!(budget.budget(), Duration::from_micros(20), "one soon wait alone earns no longer spin");
        budget.observe(Duration::from_micros(40));
        assert_eq!(budget.budget(), Duration::from_micros(80), "input soon twice in a row: spin twice the wait");
        budget.observe(Duration::from_micros(10));
        assert_eq!(budget.budget(), Duration::from_micros(80), "a quicker answer does not shorten the spin");
        budget.observe(AdaptiveSpin::MAX);
        assert_eq!(budget.budget(), AdaptiveSpin::MIN, "input that comes late ends the spin at once");

        // A wait whose input comes after the spin, through the bell.
        let local = LocalBell::default();
        let mut budget = AdaptiveSpin::default();
        budget.observe(Duration::from_micros(40));
        budget.observe(Duration::from_micros(40));
        let late = Instant::now() + AdaptiveSpin::MAX;
        let deadline = Some(late + Duration::from_millis(1));
        assert!(local.bell().wait_adaptive(&mut budget, deadline, || Instant::now() >= late));
        assert_eq!(budget.budget(), AdaptiveSpin::MIN);
    }

    #[test]
    fn a_periodic_stream_whose_frames_now_and_then_come_close_together_earns_no_spin() {
        // 500 kbit/s: a frame every 250 µs, and a late sender that sends the
        // frame it owes with the next one, 30 µs apart, every fourth frame.
        let mut budget = AdaptiveSpin::bounded(Duration::ZERO, Duration::from_micros(200));
        budget.observe(Duration::from_micros(250));
        for _ in 0..8 {
            for after in [250, 250, 250, 30] {
                budget.observe(Duration::from_micros(after));
                assert_eq!(budget.budget(), Duration::ZERO, "the one close frame earns no spin ({after} µs)");
            }
        }
        budget.observe(Duration::from_micros(10));
        budget.observe(Duration::from_micros(10));
        assert_eq!(budget.budget(), Duration::from_micros(20), "quick answers in a row bring the spin back");
    }

    #[test]
    fn a_bounded_spin_stays_within_its_bounds() {
        let mut budget = AdaptiveSpin::bounded(Duration::from_micros(5), Duration::from_micros(50));
        assert_eq!(budget.budget(), Duration::from_micros(20), "starts at the reference spin");
        budget.observe(Duration::from_micros(20));
        budget.observe(Duration::from_micros(20));
        assert_eq!(budget.budget(), Duration::from_micros(40));
        budget.observe(Duration::from_micros(30));
        assert_eq!(budget.budget(), Duration::from_micros(5), "twice 30 µs does not fit 50 µs: down to the minimum");
    }

    /// Two `SCHED_FIFO` threads of one priority on one core: the one that
    /// runs keeps the core until it blocks or yields, so without a yield in
    /// the spin the thread that would answer never runs before the deadline.
    #[cfg(target_os = "linux")]
    #[test]
    fn a_spinning_waiter_lets_the_thread_it_waits_for_run_on_its_core() {
        use std::sync::atomic::{AtomicBool, Ordering};
        use std::sync::{mpsc, Arc};
        fn on_cpu_0() {
            let mut cpus = rustix::thread::CpuSet::new();
            cpus.set(0);
            rustix::thread::sched_setaffinity(None, &cpus).expect("pin the thread to CPU 0");
        }
        let flag = Arc::new(AtomicBool::new(false));
        let (go_spin, spin_go) = mpsc::channel::<()>();
        let (go_set, set_go) = mpsc::channel::<()>();
        let seen = Arc::clone(&flag);
        let spinner = std::thread::spawn(move || {
            on_cpu_0();
            spin_go.recv().unwrap();
            let local = LocalBell::default();
            let deadline = Instant::now() + Duration::from_secs(5);
            local.bell().wait(WaitPolicy::BUSY_POLL, Some(deadline), || seen.load(Ordering::Acquire))
        });
        let setter = std::thread::spawn(move || {
            on_cpu_0();
            set_go.recv().unwrap();
            flag.store(true, Ordering::Release);
        });
        let needs = "this test runs two SCHED_FIFO threads on one core: it needs CAP_SYS_NICE (run it as root)";
        crate::waker_sched::run_fifo(&spinner, 10).expect(needs);
        crate::waker_sched::run_fifo(&setter, 10).expect(needs);
        go_spin.send(()).unwrap();
        std::thread::sleep(Duration::from_millis(20));
        go_set.send(()).unwrap();
        assert!(spinner.join().unwrap(), "the waiter spun to its deadline: the thread on its core never ran");
        setter.join().unwrap();
    }

    #[test]
    fn wait_gives_up_at_the_deadline() {
        let local = LocalBell::default();
        let deadline = Instant::now() + Duration::from_millis(5);
        assert!(!local.bell().wait(WaitPolicy::ADAPTIVE, Some(deadline), || false));
        assert!(Instant::now() >= deadline);
    }
}
