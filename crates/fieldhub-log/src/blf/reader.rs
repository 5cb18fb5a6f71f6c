//! [`BlfReader`]: a BLF file's frames as [`Record`]s, read as a stream.
//!
//! Top-level objects are read one at a time; a container's data (inflated)
//! and any object outside a container go to one buffer of object bytes,
//! from which whole objects are taken — an object may continue in the next
//! container, so the buffer keeps the part it has until the rest comes.

use std::io::Read;

use flate2::read::ZlibDecoder;

use super::header::{FileHeader, HEADER_FIELDS};
use super::objects::{decode, Object, ObjectHeader, BASE_HEADER, LOG_CONTAINER};
use super::{BlfError, MAX_OBJECT};
use crate::{LogError, Record};

/// Container compression methods.
const STORED: u16 = 0;
const ZLIB: u16 = 2;

/// Reads a BLF file's CAN, CAN FD and error frames in file order; other
/// objects are skipped. Fails once, then ends.
pub struct BlfReader<R> {
    input: R,
    /// The header's start (Unix ns), once read.
    start_ns: Option<u64>,
    /// File offset of the next top-level object.
    offset: u64,
    /// File offset of the top-level object whose bytes are being parsed.
    source: u64,
    /// Object bytes not yet parsed start at `at`.
    pending: Vec<u8>,
    at: usize,
    /// Padding still to skip after the last object taken.
    skip: usize,
    /// A container's compressed data, reused.
    raw: Vec<u8>,
    names: Vec<(u16, String)>,
    done: bool,
}

/// A step of parsing the pending bytes.
enum Step {
    Object(Object),
    NeedMore,
}

impl<R: Read> BlfReader<R> {
    /// Read `input`, a whole BLF file from its first byte.
    pub fn new(input: R) -> Self {
        Self {
            input,
            start_ns: None,
            offset: 0,
            source: 0,
            pending: Vec::new(),
            at: 0,
            skip: 0,
            raw: Vec::new(),
            names: Vec::new(),
            done: false,
        }
    }

    fn error(&self, error: BlfError) -> LogError {
        LogError::Blf { offset: self.source, error }
    }

    fn read_header(&mut self) -> Result<u64, LogError> {
        let mut fields = [0; HEADER_FIELDS];
        let got = read_full(&mut self.input, &mut fields)?;
        if got < 4 || &fields[..4] != b"LOGG" {
            return Err(self.error(BlfError::NotBlf));
        }
        if got < HEADER_FIELDS {
            return Err(self.error(BlfError::Truncated(format!("the file header has {got} of its 72 bytes"))));
        }
        let (header, size) = FileHeader::decode(&fields).map_err(|e| self.error(e))?;
        let rest = u64::from(size) - HEADER_FIELDS as u64;
        if std::io::copy(&mut (&mut self.input).take(rest), &mut std::io::sink())? < rest {
            return Err(self.error(BlfError::Truncated(format!("the file header of {size} bytes"))));
        }
        self.offset = size.into();
        Ok(header.start_ns)
    }

    /// Take the next object from the pending bytes, if they hold all of it.
    fn parse(&mut self) -> Result<Step, BlfError> {
        let skipped = self.skip.min(self.pending.len() - self.at);
        self.at += skipped;
        self.skip -= skipped;
        let rest = &self.pending[self.at..];
        let Some(base) = rest.first_chunk::<BASE_HEADER>() else { return Ok(Step::NeedMore) };
        let header = ObjectHeader::parse(base)?;
        let Some(bytes) = rest.get(..header.size as usize) else { return Ok(Step::NeedMore) };
        let object = if header.kind == LOG_CONTAINER { Object::Other } else { decode(header, bytes)? };
        self.at += header.size as usize;
        self.skip = header.padding();
        Ok(Step::Object(object))
    }

    /// Read the next top-level object into the pending bytes; false at the
    /// end of the file.
    fn refill(&mut self) -> Result<bool, LogError> {
        self.pending.drain(..self.at);
        self.at = 0;
        let mut base = [0; BASE_HEADER];
        self.source = self.offset;
        match read_full(&mut self.input, &mut base)? {
            0 => return Ok(false),
            n if n < BASE_HEADER => {
                return Err(self.error(BlfError::Truncated(format!("{n} bytes of an object's 16-byte header"))))
            }
            _ => {}
        }
        let header = ObjectHeader::parse(&base).map_err(|e| self.error(e))?;
        let body = header.size as usize - BASE_HEADER;
        self.raw.clear();
        let got = (&mut self.input).take(body as u64).read_to_end(&mut self.raw)?;
        if got < body {
            return Err(self.error(BlfError::Truncated(format!("{got} of an object's {body} body bytes"))));
        }
        // The padding may be missing after the file's last object.
        let padding = header.padding() as u64;
        std::io::copy(&mut (&mut self.input).take(padding), &mut std::io::sink())?;
        self.offset += u64::from(header.size) + padding;
        if header.kind != LOG_CONTAINER {
            self.pending.extend_from_slice(&base);
            self.pending.extend_from_slice(&self.raw);
            self.pending.resize(self.pending.len() + header.padding(), 0);
            return Ok(true);
        }
        self.inflate().map_err(|e| self.error(e))?;
        Ok(true)
    }

    /// Append a container's data (in `raw`, after its 16-byte header) to
    /// the pending bytes.
    fn inflate(&mut self) -> Result<(), BlfError> {
        let Some(head) = self.raw.get(..16) else {
            return Err(BlfError::ShortObject {
                object: "LOG_CONTAINER",
                size: self.raw.len() + BASE_HEADER,
                needs: 32,
            });
        };
        let method = u16::from_le_bytes([head[0], head[1]]);
        let declared = u32::from_le_bytes(head[8..12].try_into().expect("4 bytes"));
        if declared > MAX_OBJECT {
            return Err(BlfError::Oversize { size: declared.into(), max: MAX_OBJECT });
        }
        let data = &self.raw[16..];
        let before = self.pending.len();
        match method {
            STORED => self.pending.extend_from_slice(data),
            ZLIB => {
                // One byte past the declared size shows a container that holds more.
                let mut decoder = ZlibDecoder::new(data).take(u64::from(declared) + 1);
                decoder.read_to_end(&mut self.pending).map_err(|e| BlfError::BadZlib(e.to_string()))?;
            }
            other => return Err(BlfError::UnknownCompression(other)),
        }
        let actual = (self.pending.len() - before) as u64;
        if actual != u64::from(declared) {
            return Err(BlfError::ContainerSize { declared, actual });
        }
        Ok(())
    }

    fn next_record(&mut self) -> Result<Option<Record>, LogError> {
        let start_ns = match self.start_ns {
            Some(start) => start,
            None => {
                let start = self.read_header()?;
                self.start_ns = Some(start);
                start
            }
        };
        loop {
            match self.parse().map_err(|e| self.error(e))? {
                Step::Object(Object::Frame { time_ns, channel, frame, direction }) => {
                    let timestamp_ns = start_ns.checked_add(time_ns).ok_or(BlfError::TimeOverflow(time_ns));
                    let timestamp_ns = timestamp_ns.map_err(|e| self.error(e))?;
                    let channel = match self.names.iter().find(|(n, _)| *n == channel) {
                        Some((_, name)) => name.clone(),
                        None => format!("can{}", channel - 1),
                    };
                    return Ok(Some(Record { timestamp_ns, channel, frame, direction }));
                }
                Step::Object(Object::ChannelName { channel, name }) => {
                    self.names.retain(|(n, _)| *n != channel);
                    self.names.push((channel, name));
                }
                Step::Object(Object::Other) => {}
                Step::NeedMore => {
                    if !self.refill()? {
                        let left = self.pending.len() - self.at;
                        if left > self.skip && self.pending[self.at + self.skip..].iter().any(|&b| b != 0) {
                            let message = format!("{left} bytes of an object at the end of the last container");
                            return Err(self.error(BlfError::Truncated(message)));
                        }
                        return Ok(None);
                    }
                }
            }
        }
    }
}

impl<R: Read> Iterator for BlfReader<R> {
    type Item = Result<Record, LogError>;

    fn next(&mut self) -> Option<Self::Item> {
        if self.done {
            return None;
        }
        let next = self.next_record();
        if !matches!(next, Ok(Some(_))) {
            self.done = true;
        }
        next.transpose()
    }
}

/// Fill `buf` as far as the input goes; returns the bytes read.
fn read_full(input: &mut impl Read, buf: &mut [u8]) -> std::io::Result<usize> {
    let mut got = 0;
    while got < buf.len() {
        match input.read(&mut buf[got..]) {
            Ok(0) => break,
            Ok(n) => got += n,
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
        }
    }
    Ok(got)
}
