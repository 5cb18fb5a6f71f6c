//! [`Recorder`]: frames in, a candump, ASC or BLF log out, to any `std::io::Write`.

use std::io::{Seek, Write};

use fieldhub_proto::Frame;

use crate::asc::AscWriter;
use crate::blf::BlfWriter;
use crate::{candump, DateZone, Direction, Format};

/// How to record.
#[derive(Clone, Debug, Default)]
pub struct RecorderOptions {
    /// ASC and BLF: channels numbered 1, 2, … in this order; channels not
    /// listed get the next numbers when their first frame comes. Ignored
    /// for candump.
    pub channels: Vec<String>,
    /// candump: append ` R` / ` T` to each line. Off by default because
    /// canplayer before can-utils 2023 and python-can before 4.0 reject it.
    pub mark_direction: bool,
    /// ASC and BLF: when the recording started (Unix ns), for the header
    /// of a recording that ends before its first frame.
    pub start_ns: u64,
    /// ASC: the zone the header's local dates are written in.
    pub zone: DateZone,
}

/// Writes frames as log lines or BLF objects. Output is buffered by the
/// caller's writer; call [`Recorder::flush`] to push it out and
/// [`Recorder::finish`] (or, to a file, [`Recorder::finish_file`]) to end
/// the file (ASC has a trailer, BLF a header with statistics).
pub struct Recorder<W: Write> {
    out: W,
    kind: Kind,
    /// The current frame's text, reused so recording does not allocate.
    line: String,
    frames: u64,
}

enum Kind {
    Candump { mark_direction: bool },
    Asc(AscWriter),
    Blf(BlfWriter),
}

impl<W: Write> Recorder<W> {
    /// Start a recording in `format`. Nothing is written until the first
    /// frame (or `finish`).
    pub fn new(out: W, format: Format, options: &RecorderOptions) -> Self {
        let kind = match format {
            Format::Candump => Kind::Candump { mark_direction: options.mark_direction },
            Format::Asc => Kind::Asc(AscWriter::new(&options.channels, options.start_ns, options.zone)),
            Format::Blf => Kind::Blf(BlfWriter::new(&options.channels, options.start_ns)),
        };
        Self { out, kind, line: String::with_capacity(512), frames: 0 }
    }

    /// Record one frame: `timestamp_ns` is Unix time in nanoseconds (the
    /// formats keep microseconds), `channel` the channel's name. The frame's
    /// `ECHO` flag is not written; a TX confirmation is `Direction::Tx`.
    pub fn record(
        &mut self,
        timestamp_ns: u64,
        channel: &str,
        frame: &Frame,
        direction: Direction,
    ) -> std::io::Result<()> {
        if (frame.is_xl() || frame.is_raw()) && !matches!(self.kind, Kind::Candump { .. }) {
            // ASC and BLF objects have no CAN XL or raw form (BLF's hold 64 bytes at most).
            let text = format!(
                "channel '{channel}' carries {frame:?}, which ASC and BLF cannot hold; record CAN XL and raw \
                 channels in candump format"
            );
            return Err(std::io::Error::new(std::io::ErrorKind::InvalidInput, text));
        }
        self.line.clear();
        match &mut self.kind {
            Kind::Candump { mark_direction } => {
                let direction = mark_direction.then_some(direction);
                candump::write_line(&mut self.line, timestamp_ns, channel, frame, direction);
            }
            Kind::Asc(writer) => writer.write_frame(&mut self.line, timestamp_ns, channel, frame, direction),
            Kind::Blf(writer) => {
                writer.record(&mut self.out, timestamp_ns, channel, frame, direction)?;
                self.frames += 1;
                return Ok(());
            }
        }
        self.out.write_all(self.line.as_bytes())?;
        self.frames += 1;
        Ok(())
    }

    /// Frames recorded so far.
    pub fn frames(&self) -> u64 {
        self.frames
    }

    /// Push buffered output to the writer's destination (BLF: what is
    /// recorded, as a container of its own).
    pub fn flush(&mut self) -> std::io::Result<()> {
        if let Kind::Blf(writer) = &mut self.kind {
            writer.flush(&mut self.out)?;
        }
        self.out.flush()
    }

    /// End the file, flush, and hand back the writer. A BLF header keeps
    /// the statistics it was first written with: use
    /// [`Recorder::finish_file`] where the writer can seek.
    pub fn finish(mut self) -> std::io::Result<W> {
        self.line.clear();
        match &mut self.kind {
            Kind::Asc(writer) => writer.finish(&mut self.line),
            Kind::Blf(writer) => writer.finish(&mut self.out)?,
            Kind::Candump { .. } => {}
        }
        self.out.write_all(self.line.as_bytes())?;
        self.out.flush()?;
        Ok(self.out)
    }

    /// [`Recorder::finish`] a file: a BLF header is rewritten with the
    /// file's statistics (its size, object count and end time).
    pub fn finish_file(mut self) -> std::io::Result<W>
    where
        W: Seek,
    {
        if let Kind::Blf(writer) = &mut self.kind {
            writer.finish_seekable(&mut self.out)?;
        }
        self.finish()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{LogReader, ReadOptions, Record};
    use fieldhub_proto::text::parse_cansend;

    fn sample() -> Vec<Record> {
        let frames = [
            ("can0", "123#DEADBEEF"),
            ("can0", "12345678#R"),
            ("fd0", "123##3DEADBEEF"),
            ("can0", "20000080#0000000000000000"),
            ("fd0", "1FFFFFFF##0"),
            ("can1", "7FF#1122334455667788_9"),
        ];
        frames
            .iter()
            .enumerate()
            .map(|(i, (channel, frame))| Record {
                timestamp_ns: 1_700_000_000_000_000_000 + i as u64 * 3_333_000,
                channel: channel.to_string(),
                frame: parse_cansend(frame).unwrap(),
                direction: Some(if i % 2 == 0 { Direction::Rx } else { Direction::Tx }),
            })
            .collect()
    }

    fn record_and_read(format: Format, options: &RecorderOptions) -> (String, Vec<Record>) {
        let mut recorder = Recorder::new(Vec::new(), format, options);
        for r in sample() {
            recorder.record(r.timestamp_ns, &r.channel, &r.frame, r.direction.unwrap()).unwrap();
        }
        assert_eq!(recorder.frames(), 6);
        let bytes = recorder.finish().unwrap();
        let read = LogReader::new(&bytes[..], format, &ReadOptions::default()).collect::<Result<Vec<_>, _>>().unwrap();
        (String::from_utf8(bytes).unwrap(), read)
    }

    #[test]
    fn can_xl_and_raw_frames_go_into_candump_logs_and_asc_and_blf_refuse_them_by_name() {
        let xl = Frame::can_xl(0x123, 0x42, 3, fieldhub_proto::FrameFlags::empty(), 7, &[0xA5; 2048]).unwrap();
        let raw = Frame::raw(0xDEAD_BEEF, &[1, 2]).unwrap();
        let mut candump = Recorder::new(Vec::new(), Format::Candump, &RecorderOptions::default());
        for frame in [&xl, &raw] {
            candump.record(1_700_000_000_000_000_000, "xl0", frame, Direction::Rx).unwrap();
        }
        let text = String::from_utf8(candump.finish().unwrap()).unwrap();
        assert!(text.contains(" xl0 42123#80:03:00000007#A5A5") && text.contains(" xl0 RDEADBEEF#0102"), "{text}");
        for format in [Format::Asc, Format::Blf] {
            let mut recorder = Recorder::new(std::io::Cursor::new(Vec::new()), format, &RecorderOptions::default());
            let error = recorder.record(1, "xl0", &xl, Direction::Rx).unwrap_err();
            assert_eq!(error.kind(), std::io::ErrorKind::InvalidInput);
            assert!(error.to_string().contains("record CAN XL and raw channels in candump format"), "{error}");
        }
    }

    #[test]
    fn candump_recording_reads_back_identically() {
        let options = RecorderOptions { mark_direction: true, ..Default::default() };
        let (text, read) = record_and_read(Format::Candump, &options);
        assert_eq!(read, sample(), "{text}");
        let (_, unmarked) = record_and_read(Format::Candump, &RecorderOptions::default());
        assert!(unmarked.iter().all(|r| r.direction.is_none()));
    }

    #[test]
    fn asc_recording_reads_back_identically_in_any_zone() {
        for zone in [DateZone::Local, DateZone::Fixed(9 * 3600)] {
            let options = RecorderOptions { channels: vec!["fd0".into()], zone, ..Default::default() };
            let (text, read) = record_and_read(Format::Asc, &options);
            assert!(text.contains("// fieldhub channel 1 = fd0\n// fieldhub channel 2 = can0\n"), "{text}");
            let mut expected = sample();
            // ASC error frames carry no direction.
            expected[3].direction = None;
            assert_eq!(read, expected, "{text}");
        }
    }
}
