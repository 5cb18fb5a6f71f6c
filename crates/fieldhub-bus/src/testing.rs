//! Driving the bus in-process: the [`Harness`] on a
//! manual clock, outboxes read by the test, a wall clock the test moves and
//! an in-memory recorder. Logic tests of this crate and of its users run the
//! bus here deterministically; integration tests start real hub processes.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use fieldhub_proto::Frame;

pub use crate::bus::harness::{Harness, TestClient, START_NS};
use crate::clock::WallClock;
use crate::inbox::Wake;
pub use crate::outbox::test_outbox;
use crate::recording::{Recorder, RecordingStart, RecordingTap};

/// The [`Wake`] of a bus the test steps itself: nobody sleeps, so nobody
/// needs waking.
pub struct SteppedByHand;

impl Wake for SteppedByHand {
    fn ring(&self) {}
    fn poke(&self) {}
}

/// A wall clock that moves only when the test says so.
pub struct ManualWall {
    start: Instant,
    elapsed_ns: AtomicU64,
}

impl Default for ManualWall {
    fn default() -> Self {
        Self { start: Instant::now(), elapsed_ns: AtomicU64::new(0) }
    }
}

impl ManualWall {
    /// Move the wall clock forward by `by`.
    pub fn advance(&self, by: Duration) {
        self.elapsed_ns.fetch_add(by.as_nanos() as u64, Ordering::Relaxed);
    }
}

impl WallClock for ManualWall {
    fn now(&self) -> Instant {
        self.start + Duration::from_nanos(self.elapsed_ns.load(Ordering::Relaxed))
    }
}

/// What an in-memory recording holds: `(timestamp, channel, frame)` in order.
pub type Recorded = Arc<Mutex<Vec<(u64, u16, Frame)>>>;

/// A recorder that keeps every recording's frames in memory, by id.
#[derive(Clone, Default)]
pub struct MemoryRecorder {
    pub recordings: Arc<Mutex<Vec<(u32, Recorded)>>>,
}

/// Memory is never slow: a finished tap has its outcome at once.
struct MemoryTap {
    frames: Recorded,
    finished: bool,
}

impl RecordingTap for MemoryTap {
    fn offer(&mut self, timestamp_ns: u64, channel: u16, frame: &Frame) {
        self.frames.lock().unwrap().push((timestamp_ns, channel, frame.clone()));
    }

    fn dropped(&self) -> u64 {
        0
    }

    fn failure(&self) -> Option<String> {
        None
    }

    fn finish(&mut self) {
        self.finished = true;
    }

    fn outcome(&self) -> Option<Result<u64, String>> {
        self.finished.then(|| Ok(self.frames.lock().unwrap().len() as u64))
    }

    fn wait(&self, _patience: std::time::Duration) -> Option<Result<u64, String>> {
        self.outcome()
    }
}

impl Recorder for MemoryRecorder {
    fn start(&self, recording: RecordingStart<'_>) -> std::io::Result<Box<dyn RecordingTap>> {
        let frames = Recorded::default();
        self.recordings.lock().unwrap().push((recording.id, frames.clone()));
        Ok(Box::new(MemoryTap { frames, finished: false }))
    }
}
