//! CONTROL mode's `< statistics MS >`: a `< stat rbytes rpackets tbytes
//! tpackets >` line every MS milliseconds, written by a ticker thread of the
//! session's own that the first `statistics` command starts.
//!
//! Invariants:
//! - The ticker runs only while statistics are on and the session is in
//!   CONTROL mode; otherwise it sleeps without a timeout until the reader
//!   changes either ([`Statistics::set`], [`Statistics::mode_changed`]), so
//!   a session that asked for no statistics costs no wake-ups.
//! - The first line comes MS after the command, as in socketcand; a new
//!   command restarts the period; `0` stops the lines.
//! - The counters are what this session received from and sent to the
//!   channel; the writer and the reader count, the ticker only reads.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Condvar, Mutex, MutexGuard};
use std::time::{Duration, Instant};

use super::protocol;

/// The session's traffic, as `< stat >` reports it.
#[derive(Default)]
pub struct Counters {
    pub rx_bytes: AtomicU64,
    pub rx_packets: AtomicU64,
    pub tx_bytes: AtomicU64,
    pub tx_packets: AtomicU64,
}

impl Counters {
    fn line(&self) -> String {
        protocol::stat_line(
            self.rx_bytes.load(Ordering::Relaxed),
            self.rx_packets.load(Ordering::Relaxed),
            self.tx_bytes.load(Ordering::Relaxed),
            self.tx_packets.load(Ordering::Relaxed),
        )
    }
}

#[derive(Default)]
struct State {
    /// The period; 0 is off.
    ms: u64,
    /// The session is in CONTROL mode.
    control: bool,
    /// Bumped by every change, so the ticker restarts its period.
    generation: u64,
    ended: bool,
}

/// The ticker's settings and the condition variable that wakes it.
#[derive(Default)]
pub struct Statistics {
    state: Mutex<State>,
    changed: Condvar,
}

impl Statistics {
    fn state(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    fn update(&self, change: impl FnOnce(&mut State)) {
        let mut state = self.state();
        change(&mut state);
        state.generation += 1;
        drop(state);
        self.changed.notify_all();
    }

    /// `< statistics MS >` (the reader): restart the period, 0 stops it.
    pub fn set(&self, ms: u32) {
        self.update(|s| s.ms = u64::from(ms));
    }

    /// The session switched modes: lines come in CONTROL mode only.
    pub fn mode_changed(&self, control: bool) {
        self.update(|s| s.control = control);
    }

    /// The session is over: the ticker ends.
    pub fn end(&self) {
        self.update(|s| s.ended = true);
    }

    /// The ticker thread: write a line with `write` every period until the
    /// session ends or `write` fails (the client does not read).
    pub fn run(&self, counters: &Counters, write: impl Fn(&str) -> bool) {
        let mut state = self.state();
        loop {
            if state.ended {
                return;
            }
            if state.ms == 0 || !state.control {
                state = self.changed.wait(state).unwrap_or_else(|e| e.into_inner());
                continue;
            }
            let (generation, period) = (state.generation, Duration::from_millis(state.ms));
            let due = Instant::now() + period;
            // Sleep out the period unless a change comes first.
            while state.generation == generation && !state.ended {
                let left = due.saturating_duration_since(Instant::now());
                if left.is_zero() {
                    break;
                }
                state = self.changed.wait_timeout(state, left).unwrap_or_else(|e| e.into_inner()).0;
            }
            if state.generation != generation || state.ended {
                continue;
            }
            drop(state);
            if !write(&counters.line()) {
                return;
            }
            state = self.state();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Arc;

    #[test]
    fn lines_come_only_in_control_mode_with_a_period_and_stop_at_the_end() {
        let statistics = Arc::new(Statistics::default());
        let counters = Arc::new(Counters::default());
        counters.tx_packets.store(3, Ordering::Relaxed);
        let (lines_tx, lines) = std::sync::mpsc::channel();
        let ticker = {
            let (statistics, counters) = (Arc::clone(&statistics), Arc::clone(&counters));
            std::thread::spawn(move || statistics.run(&counters, |line| lines_tx.send(line.to_owned()).is_ok()))
        };
        statistics.set(1);
        assert!(lines.recv_timeout(Duration::from_millis(50)).is_err(), "not in CONTROL mode: no line");
        statistics.mode_changed(true);
        assert_eq!(lines.recv().unwrap(), "< stat 0 0 0 3 >");
        assert_eq!(lines.recv().unwrap(), "< stat 0 0 0 3 >", "every period");
        statistics.end();
        ticker.join().unwrap();
    }
}
