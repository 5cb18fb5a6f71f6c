//! Recordings the control API starts: the bus offers every frame put on the
//! recorded channels to a [`RecordingTap`], which the runtime supplies (the
//! hub's writes candump or ASC files from a thread of its own). The bus only
//! decides what is recorded and keeps the books; formatting and file I/O
//! never happen on the bus thread.
//!
//! Invariant: [`RecordingTap::offer`] never waits. A tap that cannot keep up
//! drops and counts, and the count is shown on the recording.

use std::path::{Path, PathBuf};

use fieldhub_proto::Frame;

/// Recordings at once: each holds a writer, a file and its queue.
pub const MAX_RECORDINGS: usize = 64;

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
    /// Finish the file; returns the number of frames written. The bus calls
    /// it on its own thread, so it must not wait on the disk either: the
    /// runtime finishes the file where waiting is harmless.
    fn stop(self: Box<Self>) -> Result<u64, String>;
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
        Self { id, path, name, format, channels, tap }
    }

    /// Hand over a frame put on `channel`, if this recording covers it.
    pub fn offer(&mut self, timestamp_ns: u64, channel: u16, frame: &Frame) {
        if self.channels.iter().any(|(id, _)| *id == channel) {
            self.tap.offer(timestamp_ns, channel, frame);
        }
    }

    pub fn dropped(&self) -> u64 {
        self.tap.dropped()
    }

    pub fn failure(&self) -> Option<String> {
        self.tap.failure()
    }

    /// Finish the file; returns the number of frames written.
    pub fn stop(self) -> Result<u64, String> {
        self.tap.stop()
    }
}
