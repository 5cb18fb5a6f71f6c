//! The hub's recorder: every frame the bus offers a recording is written to
//! a candump log or Vector ASC file ([`FileRecorder`], the bus's
//! [`Recorder`]).
//!
//! The bus thread only hands `(timestamp, channel, frame)` to a bounded
//! queue; a thread per recording does the formatting and the file I/O, so a
//! slow disk never holds the bus. A full queue drops and counts, and the count
//! is reported when the recording stops. A write that fails (a full disk) ends
//! the writer: the failure is logged once, shown on the recording
//! (`error`), and every frame offered after it is counted as dropped.

use std::fs::File;
use std::io::BufWriter;
use std::sync::{Arc, OnceLock};
use std::thread::JoinHandle;
use std::time::Duration;

use crossbeam_channel::{Receiver, RecvTimeoutError, Sender, TrySendError};
use fieldhub_bus::recording::{Recorder, RecordingFormat, RecordingStart, RecordingTap};
use fieldhub_log::{Direction, Format, RecorderOptions};
use fieldhub_proto::Frame;
use tracing::warn;

/// Frames waiting for one recording's writer before it drops.
pub const RECORDING_QUEUE: usize = 64 * 1024;
/// How often an idle recording flushes what it has written.
const FLUSH_EVERY: Duration = Duration::from_millis(200);

/// Writes recordings as files, each from a thread of its own.
pub struct FileRecorder;

impl Recorder for FileRecorder {
    fn start(&self, recording: RecordingStart<'_>) -> std::io::Result<Box<dyn RecordingTap>> {
        let file = super::path::create(recording.path)?;
        Ok(Box::new(FileTap::into_file(recording, file)?))
    }
}

/// One recording's file writer.
struct FileTap {
    path: String,
    queue: Option<Sender<(u64, u16, Frame)>>,
    writer: Option<JoinHandle<std::io::Result<u64>>>,
    /// Frames lost because the writer fell behind or failed.
    dropped: u64,
    /// Why the writer stopped early, once it did.
    failure: Arc<OnceLock<String>>,
}

impl FileTap {
    /// Start writing into `file`, which is `recording.path` opened.
    fn into_file(recording: RecordingStart<'_>, file: File) -> std::io::Result<Self> {
        let RecordingStart { id, path, format, channels, start_ns } = recording;
        let options = RecorderOptions {
            channels: channels.iter().map(|(_, name)| name.clone()).collect(),
            start_ns,
            ..Default::default()
        };
        let format = match format {
            RecordingFormat::Candump => Format::Candump,
            RecordingFormat::Asc => Format::Asc,
        };
        let recorder = fieldhub_log::Recorder::new(BufWriter::new(file), format, &options);
        let (queue, incoming) = crossbeam_channel::bounded(RECORDING_QUEUE);
        let names = channels.to_vec();
        let failure = Arc::new(OnceLock::new());
        let shown = path.display().to_string();
        let (failed, logged) = (Arc::clone(&failure), shown.clone());
        let writer = std::thread::Builder::new().name(format!("fh-record-{id}")).spawn(move || {
            let written = write_loop(recorder, &incoming, &names);
            if let Err(e) = &written {
                warn!(recording = id, path = %logged, "recording stopped: cannot write the file: {e}");
                let _ = failed.set(format!("cannot write the file: {e}"));
            }
            written
        })?;
        Ok(Self { path: shown, queue: Some(queue), writer: Some(writer), dropped: 0, failure })
    }
}

impl RecordingTap for FileTap {
    fn offer(&mut self, timestamp_ns: u64, channel: u16, frame: &Frame) {
        if let Some(queue) = &self.queue {
            // Full: the writer fell behind; disconnected: it failed.
            if let Err(TrySendError::Full(_) | TrySendError::Disconnected(_)) =
                queue.try_send((timestamp_ns, channel, *frame))
            {
                self.dropped += 1;
            }
        }
    }

    fn dropped(&self) -> u64 {
        self.dropped
    }

    fn failure(&self) -> Option<String> {
        self.failure.get().cloned()
    }

    fn stop(mut self: Box<Self>) -> Result<u64, String> {
        drop(self.queue.take());
        match self.writer.take().map(JoinHandle::join) {
            Some(Ok(Ok(frames))) => Ok(frames),
            Some(Ok(Err(e))) => Err(format!("writing {} failed: {e}", self.path)),
            _ => Err(format!("the writer of {} stopped unexpectedly", self.path)),
        }
    }
}

fn write_loop(
    mut recorder: fieldhub_log::Recorder<BufWriter<File>>,
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
    use std::path::Path;

    use super::*;

    #[test]
    fn a_write_that_fails_is_reported_and_later_frames_are_counted_as_dropped() {
        // /dev/full: every write fails with ENOSPC, as on a full disk.
        let full = std::fs::OpenOptions::new().write(true).open("/dev/full").unwrap();
        let channels = vec![(0u16, "can0".to_owned())];
        let start = RecordingStart {
            id: 1,
            path: Path::new("/dev/full"),
            format: RecordingFormat::Candump,
            channels: &channels,
            start_ns: 0,
        };
        let mut recording = Box::new(FileTap::into_file(start, full).unwrap());
        let frame = Frame::can(0x123, false, &[1, 2, 3, 4, 5, 6, 7, 8]).unwrap();
        // Enough to fill the writer's buffer, so it writes and fails.
        let mut offered = 0u64;
        while recording.failure().is_none() {
            recording.offer(offered, 0, &frame);
            offered += 1;
            assert!(offered < 10_000_000, "the writer never failed");
            if offered % 1024 == 0 {
                // Lets the writer thread run on a loaded machine; the loop
                // ends on the failure, not on this pause.
                std::thread::yield_now();
            }
        }
        assert!(recording.failure().unwrap().contains("No space left on device"), "{:?}", recording.failure());
        let before = recording.dropped();
        for _ in 0..3 {
            recording.offer(offered, 0, &frame);
        }
        assert_eq!(recording.dropped(), before + 3, "frames offered after the failure are counted");
        let stopped = recording.stop().unwrap_err();
        assert!(stopped.contains("No space left on device"), "{stopped}");
    }
}
