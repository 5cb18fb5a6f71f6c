//! The scheduler's floor, measured beside the hub in the same run: a plain
//! thread of the benchmark that sleeps to absolute deadlines one millisecond
//! apart, as `cyclictest` does, and records how late each wake-up came. The
//! hub's bus thread wakes the same way for its cyclic jobs, so lateness the
//! floor shows too is the machine's (other processes, the hypervisor, the
//! timer tick), not the hub's.
//!
//! Invariant: the thread sleeps between deadlines (no spinning: it must not
//! take the core the hub needs), and a deadline that passed while it was
//! late is skipped, not caught up, as the hub's jobs skip theirs.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use crate::stats::Distribution;

/// The sleeping thread's period.
const PERIOD: Duration = Duration::from_millis(1);

/// A running floor measurement.
pub struct Floor {
    stop: Arc<AtomicBool>,
    thread: JoinHandle<Vec<u64>>,
}

impl Floor {
    /// Start the sleeping thread.
    pub fn start() -> std::io::Result<Self> {
        let stop = Arc::new(AtomicBool::new(false));
        let stopped = Arc::clone(&stop);
        let thread = std::thread::Builder::new().name("bench-floor".into()).spawn(move || {
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
        let floor = Floor::start().unwrap();
        std::thread::sleep(Duration::from_millis(200));
        // About one a millisecond, fewer if the machine made it late; the
        // first 50 ms left out.
        let d = floor.stop(Duration::from_millis(50));
        assert!((50..=151).contains(&d.samples), "{} wake-ups in the last 150 ms", d.samples);
    }
}
