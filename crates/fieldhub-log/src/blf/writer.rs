//! [`BlfWriter`]: frames in, BLF out — the file header, then zlib log
//! containers of the frames' objects.

use std::io::{Seek, SeekFrom, Write};

use fieldhub_proto::Frame;
use flate2::write::ZlibEncoder;
use flate2::Compression;

use super::header::{to_millisecond, FileHeader, FILE_HEADER};
use super::objects::{container_header, container_padding, encode_channel_name, encode_frame, CONTAINER_HEADER};
use crate::Direction;

/// Uncompressed bytes a container is filled to before it is written
/// (python-can's and CANoe's size).
const CONTAINER: usize = 128 * 1024;
/// zlib compression method of a container.
const ZLIB: u16 = 2;

/// Writes frames as BLF to any `Write`. The header goes out with the first
/// container, its start time the first frame's millisecond; its statistics
/// (size, object count, end time) are final only after
/// [`BlfWriter::finish_seekable`] rewrites it — a writer that cannot seek
/// (a pipe) keeps the first header's, which python-can's reader ignores.
pub struct BlfWriter {
    header: FileHeader,
    header_written: bool,
    /// The file's start (Unix ns, whole ms), fixed by the first frame.
    start_ns: Option<u64>,
    /// Channel names, numbered from 1 in order of first use.
    names: Vec<String>,
    frames: u64,
    /// Objects of the container being filled.
    objects: Vec<u8>,
    /// The compressed container, reused.
    compressed: Vec<u8>,
}

impl BlfWriter {
    /// A file whose channels are numbered 1, 2, … in the order of
    /// `channels`, then as their first frames come; `start_ns` is its start
    /// if no frame is recorded.
    pub fn new(channels: &[String], start_ns: u64) -> Self {
        let mut writer = Self {
            header: FileHeader { start_ns: to_millisecond(start_ns), ..FileHeader::default() },
            header_written: false,
            start_ns: None,
            names: Vec::new(),
            frames: 0,
            objects: Vec::with_capacity(CONTAINER + 1024),
            compressed: Vec::new(),
        };
        for channel in channels {
            if !writer.names.contains(channel) {
                writer.names.push(channel.clone());
            }
        }
        writer
    }

    /// Frames recorded so far.
    pub fn frames(&self) -> u64 {
        self.frames
    }

    /// Record one frame; writes a container to `out` when one is full.
    pub fn record(
        &mut self,
        out: &mut impl Write,
        timestamp_ns: u64,
        channel: &str,
        frame: &Frame,
        direction: Direction,
    ) -> std::io::Result<()> {
        if frame.is_lin() {
            return Err(std::io::Error::new(
                std::io::ErrorKind::InvalidInput,
                format!("BLF recordings carry CAN frames; channel '{channel}' sent a LIN frame (record it as candump)"),
            ));
        }
        let start_ns = match self.start_ns {
            Some(start) => start,
            None => self.begin(timestamp_ns),
        };
        let time_ns = timestamp_ns.saturating_sub(start_ns);
        let number = match self.names.iter().position(|name| name == channel) {
            Some(index) => index + 1,
            None => {
                self.names.push(channel.to_owned());
                encode_channel_name(&mut self.objects, time_ns, self.names.len() as u16, channel);
                self.header.objects += 1;
                self.names.len()
            }
        };
        let Ok(number) = u16::try_from(number) else {
            return Err(std::io::Error::new(
                std::io::ErrorKind::InvalidInput,
                format!("BLF numbers at most 65535 channels; '{channel}' would be one more"),
            ));
        };
        encode_frame(&mut self.objects, time_ns, number, frame, direction);
        self.header.objects += 1;
        self.header.end_ns = self.header.end_ns.max(to_millisecond(timestamp_ns));
        self.frames += 1;
        if self.objects.len() >= CONTAINER {
            self.write_container(out)?;
        }
        Ok(())
    }

    /// The first frame fixes the start and names the channels given up front.
    fn begin(&mut self, timestamp_ns: u64) -> u64 {
        let start = to_millisecond(timestamp_ns);
        self.start_ns = Some(start);
        self.header.start_ns = start;
        for (i, name) in self.names.iter().enumerate() {
            encode_channel_name(&mut self.objects, 0, i as u16 + 1, name);
            self.header.objects += 1;
        }
        start
    }

    /// Write what is recorded as a container (the header first, once).
    pub fn flush(&mut self, out: &mut impl Write) -> std::io::Result<()> {
        if !self.objects.is_empty() {
            self.write_container(out)?;
        }
        Ok(())
    }

    fn write_header(&mut self, out: &mut impl Write) -> std::io::Result<()> {
        if !self.header_written {
            out.write_all(&self.header.encode())?;
            self.header.file_size = FILE_HEADER as u64;
            self.header.uncompressed_size = FILE_HEADER as u64;
            self.header_written = true;
        }
        Ok(())
    }

    fn write_container(&mut self, out: &mut impl Write) -> std::io::Result<()> {
        self.write_header(out)?;
        let mut encoder = ZlibEncoder::new(std::mem::take(&mut self.compressed), Compression::default());
        encoder.write_all(&self.objects)?;
        self.compressed = encoder.finish()?;
        let padding = container_padding(self.compressed.len());
        out.write_all(&container_header(ZLIB, self.compressed.len(), self.objects.len()))?;
        out.write_all(&self.compressed)?;
        out.write_all(&[0; 3][..padding])?;
        self.header.file_size += (CONTAINER_HEADER + self.compressed.len() + padding) as u64;
        self.header.uncompressed_size += (CONTAINER_HEADER + self.objects.len()) as u64;
        self.objects.clear();
        self.compressed.clear();
        Ok(())
    }

    /// Write the last container (and the header, if none was written).
    pub fn finish(&mut self, out: &mut impl Write) -> std::io::Result<()> {
        self.flush(out)?;
        self.write_header(out)?;
        out.flush()
    }

    /// [`BlfWriter::finish`], then rewrite the header with the file's
    /// statistics; `out` is left at the file's end.
    pub fn finish_seekable(&mut self, out: &mut (impl Write + Seek)) -> std::io::Result<()> {
        self.finish(out)?;
        out.seek(SeekFrom::Start(0))?;
        out.write_all(&self.header.encode())?;
        out.seek(SeekFrom::End(0))?;
        out.flush()
    }
}
