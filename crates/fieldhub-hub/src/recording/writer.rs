//! The hub's recorder: every frame the bus offers a recording is written to
//! a candump log or Vector ASC file ([`FileRecorder`], the bus's
//! [`Recorder`]).
//!
//! The bus thread only hands `(timestamp, channel, frame)` to a bounded
//! queue; a thread per recording opens the file (see [`super::path::create`]),
//! formats and writes, so neither a slow disk nor a stuck one ever holds the
//! bus: the bus thread makes no file system call for a recording. A full
//! queue drops and counts, shown on the recording. A write that fails (a
//! full disk) ends the writer: the failure is logged once, shown on the
//! recording (`error`), and every frame offered after it is counted as
//! dropped. Stopping drops the queue's sender and returns; the writer drains
//! what is queued, finishes the file and publishes how it ended, which the
//! recording's `state` shows.

use std::fs::File;
use std::io::BufWriter;
use std::path::PathBuf;
use std::sync::{Arc, OnceLock};
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
        let path = recording.path.to_path_buf();
        Ok(Box::new(FileTap::spawn(recording, move || super::path::create(&path))?))
    }
}

/// What a writer tells its recording.
#[derive(Default)]
struct Shared {
    /// Why the writer stopped early, once it did.
    failure: OnceLock<String>,
    /// How it ended: frames written, or why the file is incomplete.
    outcome: OnceLock<Result<u64, String>>,
}

/// One recording's file writer.
struct FileTap {
    queue: Option<Sender<(u64, u16, Frame)>>,
    /// Disconnected once the writer has published its outcome.
    done: Receiver<()>,
    /// Frames lost because the writer fell behind or failed.
    dropped: u64,
    shared: Arc<Shared>,
}

impl FileTap {
    /// Start the writer thread, which opens the file with `open` and then
    /// writes what the queue brings.
    fn spawn(
        recording: RecordingStart<'_>,
        open: impl FnOnce() -> std::io::Result<File> + Send + 'static,
    ) -> std::io::Result<Self> {
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
        let (queue, incoming) = crossbeam_channel::bounded(RECORDING_QUEUE);
        let (finished, done) = crossbeam_channel::bounded::<()>(0);
        let names = channels.to_vec();
        let shared = Arc::new(Shared::default());
        let (told, shown): (Arc<Shared>, PathBuf) = (Arc::clone(&shared), path.to_path_buf());
        std::thread::Builder::new().name(format!("fh-record-{id}")).spawn(move || {
            let written = open().map_err(|e| format!("cannot open the file: {e}")).and_then(|file| {
                let recorder = fieldhub_log::Recorder::new(BufWriter::new(file), format, &options);
                write_loop(recorder, &incoming, &names).map_err(|e| format!("cannot write the file: {e}"))
            });
            // Later offers find the queue gone and count as dropped.
            drop(incoming);
            if let Err(e) = &written {
                warn!(recording = id, path = %shown.display(), "recording stopped: {e}");
                let _ = told.failure.set(e.clone());
            }
            let _ = told.outcome.set(written.map_err(|e| format!("{}: {e}", shown.display())));
            drop(finished);
        })?;
        Ok(Self { queue: Some(queue), done, dropped: 0, shared })
    }
}

impl RecordingTap for FileTap {
    fn offer(&mut self, timestamp_ns: u64, channel: u16, frame: &Frame) {
        if let Some(queue) = &self.queue {
            // Full: the writer fell behind; disconnected: it failed.
            if let Err(TrySendError::Full(_) | TrySendError::Disconnected(_)) =
                queue.try_send((timestamp_ns, channel, frame.clone()))
            {
                self.dropped += 1;
            }
        }
    }

    fn dropped(&self) -> u64 {
        self.dropped
    }

    fn failure(&self) -> Option<String> {
        self.shared.failure.get().cloned()
    }

    fn finish(&mut self) {
        drop(self.queue.take());
    }

    fn outcome(&self) -> Option<Result<u64, String>> {
        self.shared.outcome.get().cloned()
    }

    fn wait(&self, patience: Duration) -> Option<Result<u64, String>> {
        // Nothing is ever sent: this returns when the writer is done.
        let _ = self.done.recv_timeout(patience);
        self.outcome()
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
    fn a_stuck_write_costs_only_the_recording_and_stopping_never_waits_for_it() {
        // A pipe nobody reads: once its buffer is full, write() blocks, as on
        // a stuck disk.
        let (mut reader, writer) = std::io::pipe().unwrap();
        let file = File::from(std::os::fd::OwnedFd::from(writer));
        let channels = vec![(0u16, "can0".to_owned())];
        let start = RecordingStart {
            id: 2,
            path: Path::new("stuck.log"),
            format: RecordingFormat::Candump,
            channels: &channels,
            start_ns: 0,
        };
        let mut recording = FileTap::spawn(start, move || Ok(file)).unwrap();
        let frame = Frame::can(0x123, false, &[1, 2, 3, 4, 5, 6, 7, 8]).unwrap();
        let mut offered = 0u64;
        while recording.dropped() == 0 {
            recording.offer(offered, 0, &frame);
            offered += 1;
            if offered % 1024 == 0 {
                std::thread::yield_now();
            }
        }
        // The writer is stuck and its queue full: offers count as dropped
        // and return, and finishing only tells it.
        recording.finish();
        assert_eq!(recording.outcome(), None, "the writer cannot have finished: the pipe is unread");
        assert_eq!(recording.failure(), None, "a slow disk is no failure");
        let read = std::thread::spawn(move || {
            let mut text = String::new();
            std::io::Read::read_to_string(&mut reader, &mut text).unwrap();
            text
        });
        let written = recording.wait(Duration::from_secs(60)).expect("the writer ends once read").unwrap();
        assert_eq!(written + recording.dropped(), offered, "every frame offered is written or counted as dropped");
        assert_eq!(read.join().unwrap().lines().count() as u64, written);
    }

    #[test]
    fn a_write_that_fails_is_reported_and_later_frames_are_counted_as_dropped() {
        // /dev/full: every write fails with ENOSPC, as on a full disk.
        let full = || std::fs::OpenOptions::new().write(true).open("/dev/full");
        let channels = vec![(0u16, "can0".to_owned())];
        let start = RecordingStart {
            id: 1,
            path: Path::new("/dev/full"),
            format: RecordingFormat::Candump,
            channels: &channels,
            start_ns: 0,
        };
        let mut recording = FileTap::spawn(start, full).unwrap();
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
        recording.finish();
        let stopped = recording.wait(Duration::from_secs(60)).expect("the writer has ended").unwrap_err();
        assert!(stopped.contains("No space left on device"), "{stopped}");
    }
}
