//! The scheduler's floor, measured beside the hub in the same run: a
//! thread of the benchmark that sleeps to absolute deadlines one millisecond
//! apart, as `cyclictest` does, and records how late each wake-up came. It
//! is scheduled as the hub's bus thread is — 1 ns of timer slack, and
//! `SCHED_FIFO` at the bus thread's priority when the hub runs `realtime` —
//! and the bus thread wakes the same way for its cyclic jobs, so lateness
//! the floor shows too is the machine's (other processes, the hypervisor,
//! the timer tick), not the hub's.
//!
//! Invariant: the thread sleeps between deadlines (no spinning: it must not
//! take the core the hub needs), and a deadline that passed while it was
//! late is skipped, not caught up, as the hub's jobs skip theirs.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use fieldhub_shm::waker_sched;

use crate::stats::Distribution;

/// The sleeping thread's period.
const PERIOD: Duration = Duration::from_millis(1);

/// A running floor measurement.
pub struct Floor {
    stop: Arc<AtomicBool>,
    thread: JoinHandle<Vec<u64>>,
}

impl Floor {
    /// Start the sleeping thread, under `SCHED_FIFO` when `realtime` (as
    /// the bus thread of a `realtime` hub; refused without the right to).
    pub fn start(realtime: bool) -> std::io::Result<Self> {
        let stop = Arc::new(AtomicBool::new(false));
        let stopped = Arc::clone(&stop);
        let thread = std::thread::Builder::new().name("bench-floor".into()).spawn(move || {
            // The bus thread's slack (`bus_thread::realtime`): the default
            // 50 µs would make the floor later than the hub by design.
            let _ = waker_sched::set_timer_slack_ns(fieldhub_shm::BUS_THREAD_SLACK_NS);
            let mut late = Vec::with_capacity(1 << 16);
            let mut deadline = Instant::now() + PERIOD;
            while !stopped.load(Ordering::Relaxed) {
                std::thread::sleep(deadline.saturating_duration_since(Instant::now()));
                let woke = Instant::now();
                late.push(woke.saturating_duration_since(deadline).as_nanos() as u64);
                while deadline <= woke {
                    deadline += PERIOD;
                }
            }
            late
        })?;
        if realtime {
            if let Err(e) = waker_sched::run_fifo(&thread, fieldhub_shm::BUS_THREAD_PRIORITY) {
                stop.store(true, Ordering::Relaxed);
                let _ = thread.join();
                return Err(std::io::Error::new(e.kind(), format!("the floor thread under SCHED_FIFO: {e}")));
            }
        }
        Ok(Self { stop, thread })
    }

    /// Stop it: how late its wake-ups came, after the first `skip` of them.
    pub fn stop(self, skip: Duration) -> Distribution {
        self.stop.store(true, Ordering::Relaxed);
        let mut late = self.thread.join().unwrap_or_default();
        let skip = (skip.as_nanos() / PERIOD.as_nanos()) as usize;
        Distribution::of(late.get_mut(skip..).unwrap_or_default())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_floor_records_one_wake_up_per_millisecond_and_skips_what_it_is_told() {
        let floor = Floor::start(false).unwrap();
        std::thread::sleep(Duration::from_millis(200));
        // About one a millisecond, fewer if the machine made it late; the
        // first 50 ms left out.
        let d = floor.stop(Duration::from_millis(50));
        assert!((50..=151).contains(&d.samples), "{} wake-ups in the last 150 ms", d.samples);
    }
}
