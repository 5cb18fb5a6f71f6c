//! Recordings started through the control API: every frame put on the
//! recorded channels is written to a candump log or Vector ASC file.
//!
//! The bus thread only hands `(timestamp, channel, frame)` to a bounded
//! queue; a thread per recording does the formatting and the file I/O, so a
//! slow disk never holds the bus. A full queue drops and counts, and the count
//! is reported when the recording stops.

use std::fs::File;
use std::io::BufWriter;
use std::path::PathBuf;
use std::thread::JoinHandle;
use std::time::Duration;

use crossbeam_channel::{Receiver, RecvTimeoutError, Sender, TrySendError};
use fieldhub_log::{Direction, Format, Recorder, RecorderOptions};
use fieldhub_proto::Frame;

/// Frames waiting for one recording's writer before it drops.
pub const RECORDING_QUEUE: usize = 64 * 1024;
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
    /// Frames lost because the writer fell behind.
    pub dropped: u64,
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
        let options = RecorderOptions {
            channels: channels.iter().map(|(_, name)| name.clone()).collect(),
            start_ns,
            ..Default::default()
        };
        let recorder = Recorder::new(BufWriter::new(file), format, &options);
        let (queue, incoming) = crossbeam_channel::bounded(RECORDING_QUEUE);
        let names = channels.clone();
        let writer = std::thread::Builder::new()
            .name(format!("fh-record-{id}"))
            .spawn(move || write_loop(recorder, &incoming, &names))?;
        Ok(Self { id, path, name, format, channels, queue: Some(queue), writer: Some(writer), dropped: 0 })
    }

    /// Hand over a frame put on `channel`, if this recording covers it.
    pub fn offer(&mut self, timestamp_ns: u64, channel: u16, frame: &Frame) {
        if !self.channels.iter().any(|(id, _)| *id == channel) {
            return;
        }
        if let Some(queue) = &self.queue {
            if let Err(TrySendError::Full(_)) = queue.try_send((timestamp_ns, channel, *frame)) {
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
