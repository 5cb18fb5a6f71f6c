//! Recordings the control API starts: the bus offers every frame put on the
//! recorded channels to a [`RecordingTap`], which the runtime supplies (the
//! hub's writes candump or ASC files from a thread of its own). The bus only
//! decides what is recorded and keeps the books; formatting and file I/O
//! never happen on the bus thread.
//!
//! Invariants: nothing here waits on a file. [`RecordingTap::offer`] never
//! waits: a tap that cannot keep up drops and counts, and the count is shown
//! on the recording. Stopping only tells the writer ([`RecordingTap::finish`]);
//! the recording stays listed as `stopping` until its writer reports how it
//! ended ([`RecordingTap::outcome`]), so a slow or stuck disk costs only that
//! recording, never the bus.

use std::path::{Path, PathBuf};
use std::time::Duration;

use fieldhub_proto::Frame;

/// Recordings at once, those still finishing their file included: each
/// holds a writer, a file and its queue.
pub const MAX_RECORDINGS: usize = 64;
/// Finished recordings kept listed (oldest forgotten first), so their
/// outcome can be read after `record stop` answered.
pub const FINISHED_KEPT: usize = 16;

/// The file format of a recording.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum RecordingFormat {
    /// can-utils `candump -l` log lines.
    Candump,
    /// Vector ASC.
    Asc,
}

impl RecordingFormat {
    /// The format a file name's extension names: `.log` or `.asc`.
    pub fn from_path(path: &Path) -> Option<Self> {
        match path.extension()?.to_str()? {
            "log" => Some(Self::Candump),
            "asc" => Some(Self::Asc),
            _ => None,
        }
    }

    /// Its name in the control API.
    pub fn name(self) -> &'static str {
        match self {
            Self::Candump => "candump",
            Self::Asc => "asc",
        }
    }
}

/// One recording's writer, as the bus sees it.
pub trait RecordingTap: Send {
    /// Take a frame put on `channel` (one the recording covers); never waits.
    fn offer(&mut self, timestamp_ns: u64, channel: u16, frame: &Frame);
    /// Frames lost because the writer fell behind or failed.
    fn dropped(&self) -> u64;
    /// Why the writer stopped early, once it did.
    fn failure(&self) -> Option<String>;
    /// Tell the writer that no frame follows: it finishes the file on its
    /// own. Never waits.
    fn finish(&mut self);
    /// How the writer ended, once it has: the frames written, or why the
    /// file is incomplete. `None` while it still writes. Never waits.
    fn outcome(&self) -> Option<Result<u64, String>>;
    /// Wait at most `patience` for the outcome: only for a hub shutting
    /// down, which has no traffic left to hold.
    fn wait(&self, patience: Duration) -> Option<Result<u64, String>>;
}

/// Where a recording is: still taking frames, told to stop and finishing
/// its file, or done (the frames written, or why it failed).
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum RecordingState {
    Recording,
    Stopping,
    Stopped { frames: u64 },
    Failed { error: String },
}

impl RecordingState {
    /// Its name in the control API (`state`).
    pub fn name(&self) -> &'static str {
        match self {
            Self::Recording => "recording",
            Self::Stopping => "stopping",
            Self::Stopped { .. } => "stopped",
            Self::Failed { .. } => "failed",
        }
    }

    /// Whether the writer still holds its file (recording or stopping).
    pub fn is_writing(&self) -> bool {
        matches!(self, Self::Recording | Self::Stopping)
    }
}

/// What a recording is asked to write.
pub struct RecordingStart<'a> {
    pub id: u32,
    pub path: &'a Path,
    pub format: RecordingFormat,
    /// Channel ids and names recorded.
    pub channels: &'a [(u16, String)],
    /// Bus time of the start, for the file's header.
    pub start_ns: u64,
}

/// Starts recordings' writers; the runtime supplies it ([`crate::Bus::with_recorder`]).
pub trait Recorder: Send {
    /// Create the file and start its writer.
    fn start(&self, recording: RecordingStart<'_>) -> std::io::Result<Box<dyn RecordingTap>>;
}

/// One recording in progress.
pub struct Recording {
    pub id: u32,
    pub path: PathBuf,
    /// The path as the API was given it, relative to the recordings
    /// directory: how the file is downloaded again.
    pub name: String,
    pub format: RecordingFormat,
    /// Channel ids and names recorded.
    pub channels: Vec<(u16, String)>,
    tap: Box<dyn RecordingTap>,
    /// Told to stop: frames are no longer offered.
    stopped: bool,
}

impl Recording {
    pub fn new(
        id: u32,
        path: PathBuf,
        name: String,
        format: RecordingFormat,
        channels: Vec<(u16, String)>,
        tap: Box<dyn RecordingTap>,
    ) -> Self {
        Self { id, path, name, format, channels, tap, stopped: false }
    }

    /// Hand over a frame put on `channel`, if this recording covers it and
    /// has not been stopped.
    pub fn offer(&mut self, timestamp_ns: u64, channel: u16, frame: &Frame) {
        if !self.stopped && self.channels.iter().any(|(id, _)| *id == channel) {
            self.tap.offer(timestamp_ns, channel, frame);
        }
    }

    pub fn dropped(&self) -> u64 {
        self.tap.dropped()
    }

    pub fn failure(&self) -> Option<String> {
        self.tap.failure()
    }

    pub fn state(&self) -> RecordingState {
        match (self.stopped, self.tap.outcome()) {
            (false, _) => RecordingState::Recording,
            (true, None) => RecordingState::Stopping,
            (true, Some(Ok(frames))) => RecordingState::Stopped { frames },
            (true, Some(Err(error))) => RecordingState::Failed { error },
        }
    }

    /// Stop taking frames and tell the writer to finish the file; returns
    /// at once (see [`Recording::state`] for how it ends).
    pub fn stop(&mut self) {
        if !self.stopped {
            self.stopped = true;
            self.tap.finish();
        }
    }

    /// Stop, then wait at most `patience` for the file to be finished (a
    /// hub shutting down): how it ended, or `None` if it has not yet.
    pub fn stop_and_wait(&mut self, patience: Duration) -> Option<Result<u64, String>> {
        self.stop();
        self.tap.wait(patience)
    }
}
