//! Recordings started through the control API: every frame put on the
//! recorded channels is written to a candump log or Vector ASC file.
//!
//! The bus thread only hands `(timestamp, channel, frame)` to a bounded
//! queue; a thread per recording does the formatting and the file I/O, so a
//! slow disk never holds the bus. A full queue drops and counts, and the count
//! is reported when the recording stops. A write that fails (a full disk) ends
//! the writer: the failure is logged once, shown on the recording
//! (`error`), and every frame offered after it is counted as dropped.

use std::fs::File;
use std::io::BufWriter;
use std::path::PathBuf;
use std::sync::{Arc, OnceLock};
use std::thread::JoinHandle;
use std::time::Duration;

use crossbeam_channel::{Receiver, RecvTimeoutError, Sender, TrySendError};
use fieldhub_log::{Direction, Format, Recorder, RecorderOptions};
use fieldhub_proto::Frame;
use tracing::warn;

/// Frames waiting for one recording's writer before it drops.
pub const RECORDING_QUEUE: usize = 64 * 1024;
/// Recordings at once: each holds a thread, a file and its queue.
pub const MAX_RECORDINGS: usize = 64;
/// How often an idle recording flushes what it has written.
const FLUSH_EVERY: Duration = Duration::from_millis(200);

/// One recording in progress.
pub struct Recording {
    pub id: u32,
    pub path: PathBuf,
    /// The path as the API was given it, relative to the recordings
    /// directory: how the file is downloaded again.
    pub name: String,
    pub format: Format,
    /// Channel ids and names recorded.
    pub channels: Vec<(u16, String)>,
    queue: Option<Sender<(u64, u16, Frame)>>,
    writer: Option<JoinHandle<std::io::Result<u64>>>,
    /// Frames lost because the writer fell behind or failed.
    pub dropped: u64,
    /// Why the writer stopped early, once it did.
    failure: Arc<OnceLock<String>>,
}

impl Recording {
    /// Create the file and start writing.
    pub fn start(
        id: u32,
        path: PathBuf,
        name: String,
        format: Format,
        channels: Vec<(u16, String)>,
        start_ns: u64,
    ) -> std::io::Result<Self> {
        let file = crate::recording_path::create(&path)?;
        Self::into_file(id, path, name, format, channels, start_ns, file)
    }

    /// Start writing into `file`, which is `path` opened.
    fn into_file(
        id: u32,
        path: PathBuf,
        name: String,
        format: Format,
        channels: Vec<(u16, String)>,
        start_ns: u64,
        file: File,
    ) -> std::io::Result<Self> {
        let options = RecorderOptions {
            channels: channels.iter().map(|(_, name)| name.clone()).collect(),
            start_ns,
            ..Default::default()
        };
        let recorder = Recorder::new(BufWriter::new(file), format, &options);
        let (queue, incoming) = crossbeam_channel::bounded(RECORDING_QUEUE);
        let names = channels.clone();
        let failure = Arc::new(OnceLock::new());
        let (failed, shown) = (Arc::clone(&failure), path.display().to_string());
        let writer = std::thread::Builder::new().name(format!("fh-record-{id}")).spawn(move || {
            let written = write_loop(recorder, &incoming, &names);
            if let Err(e) = &written {
                warn!(recording = id, path = %shown, "recording stopped: cannot write the file: {e}");
                let _ = failed.set(format!("cannot write the file: {e}"));
            }
            written
        })?;
        Ok(Self { id, path, name, format, channels, queue: Some(queue), writer: Some(writer), dropped: 0, failure })
    }

    /// Why the recording stopped writing, if it did.
    pub fn failure(&self) -> Option<&str> {
        self.failure.get().map(String::as_str)
    }

    /// Hand over a frame put on `channel`, if this recording covers it.
    pub fn offer(&mut self, timestamp_ns: u64, channel: u16, frame: &Frame) {
        if !self.channels.iter().any(|(id, _)| *id == channel) {
            return;
        }
        if let Some(queue) = &self.queue {
            // Full: the writer fell behind; disconnected: it failed.
            if let Err(TrySendError::Full(_) | TrySendError::Disconnected(_)) =
                queue.try_send((timestamp_ns, channel, *frame))
            {
                self.dropped += 1;
            }
        }
    }

    /// Finish the file; returns the number of frames written.
    pub fn stop(mut self) -> Result<u64, String> {
        drop(self.queue.take());
        match self.writer.take().map(JoinHandle::join) {
            Some(Ok(Ok(frames))) => Ok(frames),
            Some(Ok(Err(e))) => Err(format!("writing {} failed: {e}", self.path.display())),
            _ => Err(format!("the writer of {} stopped unexpectedly", self.path.display())),
        }
    }
}

fn write_loop(
    mut recorder: Recorder<BufWriter<File>>,
    incoming: &Receiver<(u64, u16, Frame)>,
    names: &[(u16, String)],
) -> std::io::Result<u64> {
    loop {
        match incoming.recv_timeout(FLUSH_EVERY) {
            Ok((timestamp_ns, channel, frame)) => {
                let name = names.iter().find(|(id, _)| *id == channel).map_or("?", |(_, n)| n.as_str());
                recorder.record(timestamp_ns, name, &frame, Direction::Rx)?;
            }
            Err(RecvTimeoutError::Timeout) => recorder.flush()?,
            Err(RecvTimeoutError::Disconnected) => break,
        }
    }
    let frames = recorder.frames();
    recorder.finish()?;
    Ok(frames)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_write_that_fails_is_reported_and_later_frames_are_counted_as_dropped() {
        // /dev/full: every write fails with ENOSPC, as on a full disk.
        let full = std::fs::OpenOptions::new().write(true).open("/dev/full").unwrap();
        let channels = vec![(0u16, "can0".to_owned())];
        let mut recording =
            Recording::into_file(1, "/dev/full".into(), "full.log".into(), Format::Candump, channels, 0, full).unwrap();
        let frame = Frame::can(0x123, false, &[1, 2, 3, 4, 5, 6, 7, 8]).unwrap();
        // Enough to fill the writer's buffer, so it writes and fails.
        let mut offered = 0u64;
        while recording.failure().is_none() {
            recording.offer(offered, 0, &frame);
            offered += 1;
            assert!(offered < 10_000_000, "the writer never failed");
            if offered % 1024 == 0 {
                std::thread::sleep(Duration::from_millis(1));
            }
        }
        assert!(recording.failure().unwrap().contains("No space left on device"), "{:?}", recording.failure());
        let before = recording.dropped;
        for _ in 0..3 {
            recording.offer(offered, 0, &frame);
        }
        assert_eq!(recording.dropped, before + 3, "frames offered after the failure are counted");
        let stopped = recording.stop().unwrap_err();
        assert!(stopped.contains("No space left on device"), "{stopped}");
    }
}
