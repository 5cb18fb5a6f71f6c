//! Bus traffic logs: recording frames to, and reading them back from, the
//! formats the CAN world exchanges.
//!
//! - **candump log** (can-utils `candump -L`, `canplayer`, python-can `.log`):
//!   `(1700000000.123456) can0 123#DEADBEEF`, CAN FD as `123##1…`, remote
//!   frames `123#R`, error frames `20000080#…`, optionally ` T` / ` R` after
//!   the frame for the direction. See [`candump`].
//! - **Vector ASC** (CANoe/CANalyzer, python-can `.asc`): a header with the
//!   measurement's date, then one event a line (`   0.123456 1  123  Rx   d 4
//!   DE AD BE EF`, `CANFD` lines, `ErrorFrame`). See [`asc`].
//! - **Vector BLF** (CANoe/CANalyzer's binary log, python-can `.blf`):
//!   objects in zlib containers. See [`blf`].
//! - **ASAM MDF4** (`.mf4`), read and written whole. See [`mdf4`].
//!
//! # Layout
//!
//! - [`Recorder`]: takes `(timestamp_ns, channel, &Frame, Direction)` and
//!   writes candump, ASC or BLF to any `std::io::Write`. The `fieldhub record`
//!   command and the hub's own recorder both use it.
//! - [`LogReader`]: an iterator of [`Record`]s over any `BufRead`, in any
//!   of those formats; [`open`] picks the format from the file name or its
//!   first bytes.
//!   Each format's reader ([`asc`], [`candump`]) takes its input through
//!   `line_reader.rs`, numbered lines that name the line of any failure.
//!
//! # Invariants
//!
//! - No sockets, threads or clocks: the caller supplies every timestamp.
//! - What a [`Recorder`] writes, a [`LogReader`] reads back as the same
//!   records (timestamps at the formats' microsecond precision).
//! - Bad input is a [`LogError`] naming the line; reading never panics.
//! - Recording one frame formats into a reused buffer: no allocation per
//!   frame once a channel has been seen.

pub mod asc;
pub mod blf;
pub mod candump;
mod line_reader;
pub mod mdf4;
mod reader;
mod recorder;

use std::path::Path;

pub use fieldhub_proto::Frame;
pub use reader::{open, LogReader, ReadOptions};
pub use recorder::{Recorder, RecorderOptions};

/// Which way a frame went, seen from the recording point.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Direction {
    /// Received from the bus.
    Rx,
    /// Transmitted by the recording point's own node (a TX confirmation).
    Tx,
}

/// One frame read from a log.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Record {
    /// Nanoseconds since the Unix epoch (the formats hold microseconds).
    pub timestamp_ns: u64,
    /// Channel name: as written in a candump log; in ASC the name the file's
    /// `// fieldhub channel N = NAME` comment gives, else `can{N-1}`.
    pub channel: String,
    pub frame: Frame,
    /// `None` when the line does not say (a candump line without marker).
    pub direction: Option<Direction>,
}

/// A log file format.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Format {
    /// can-utils candump log (`candump -L`).
    Candump,
    /// Vector ASC.
    Asc,
    /// Vector BLF (binary).
    Blf,
}

impl Format {
    /// The format a file name implies: `.log` → candump, `.asc` → ASC,
    /// `.blf` → BLF.
    pub fn from_path(path: &Path) -> Option<Self> {
        let ext = path.extension()?.to_str()?.to_ascii_lowercase();
        match ext.as_str() {
            "log" => Some(Self::Candump),
            "asc" => Some(Self::Asc),
            "blf" => Some(Self::Blf),
            _ => None,
        }
    }

    /// The format a log's first non-blank line implies: candump lines start
    /// with `(`; anything else is taken for an ASC header.
    pub fn sniff(first_line: &str) -> Self {
        if first_line.trim_start().starts_with('(') {
            Self::Candump
        } else {
            Self::Asc
        }
    }

    /// The name used on command lines.
    pub fn name(self) -> &'static str {
        match self {
            Self::Candump => "candump",
            Self::Asc => "asc",
            Self::Blf => "blf",
        }
    }
}

impl std::str::FromStr for Format {
    type Err = String;
    fn from_str(text: &str) -> Result<Self, String> {
        match text.to_ascii_lowercase().as_str() {
            "candump" | "log" => Ok(Self::Candump),
            "asc" => Ok(Self::Asc),
            "blf" => Ok(Self::Blf),
            _ => Err(format!("unknown log format '{text}': use candump, asc or blf")),
        }
    }
}

impl std::fmt::Display for Format {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

/// Any format this crate reads: the streamed ones of [`Format`], and MDF4,
/// which is read and written whole ([`mdf4`]). One type for every user, so
/// `fieldhub convert` and the hub's recording endpoint name and tell formats
/// alike.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum LogFormat {
    Streamed(Format),
    Mf4,
}

impl LogFormat {
    /// The format a file name implies: `.log`, `.asc`, `.blf`, `.mf4`/`.mdf`.
    pub fn from_path(path: &Path) -> Option<Self> {
        match path.extension()?.to_str()?.to_ascii_lowercase().as_str() {
            "mf4" | "mdf" => Some(Self::Mf4),
            _ => Format::from_path(path).map(Self::Streamed),
        }
    }

    /// The format a log's first bytes imply: `MDF     ` is MDF4, `LOGG` is
    /// BLF, else the first non-blank line tells candump from ASC
    /// ([`Format::sniff`]).
    pub fn sniff(head: &[u8]) -> Self {
        if head.starts_with(b"MDF     ") {
            return Self::Mf4;
        }
        if head.starts_with(b"LOGG") {
            return Self::Streamed(Format::Blf);
        }
        let first = head
            .split(|&b| b == b'\n')
            .map(String::from_utf8_lossy)
            .find(|line| !line.trim().is_empty())
            .unwrap_or_default();
        Self::Streamed(Format::sniff(&first))
    }

    /// The name used on command lines and in the control API.
    pub fn name(self) -> &'static str {
        match self {
            Self::Streamed(format) => format.name(),
            Self::Mf4 => "mf4",
        }
    }
}

impl std::str::FromStr for LogFormat {
    type Err = String;
    fn from_str(text: &str) -> Result<Self, String> {
        match text.to_ascii_lowercase().as_str() {
            "mf4" | "mdf4" | "mdf" => Ok(Self::Mf4),
            other => other
                .parse()
                .map(Self::Streamed)
                .map_err(|_| format!("unknown log format '{text}': use candump, asc, blf or mf4")),
        }
    }
}

impl std::fmt::Display for LogFormat {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

/// How ASC dates (local wall-clock time, as CANoe writes them) map to Unix time.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum DateZone {
    /// This machine's local time zone, as CANoe and python-can use.
    #[default]
    Local,
    /// A fixed offset east of UTC, in seconds (`Fixed(0)` is UTC).
    Fixed(i32),
}

/// Why a log could not be read or written.
#[derive(Debug, thiserror::Error)]
pub enum LogError {
    /// A line that does not parse; `line` counts from 1.
    #[error("line {line}: {message}")]
    Line { line: usize, message: String },
    /// An MDF4 file that cannot be read; `offset` is the block's byte offset.
    #[error("MDF4 block at byte {offset}: {message}")]
    Mdf4 { offset: u64, message: String },
    /// A BLF file that cannot be read; `offset` is the top-level object's
    /// (the container's) byte offset.
    #[error("BLF at byte {offset}: {error}")]
    Blf { offset: u64, error: blf::BlfError },
    #[error(transparent)]
    Io(#[from] std::io::Error),
}

impl LogError {
    pub(crate) fn line(line: usize, message: impl Into<String>) -> Self {
        Self::Line { line, message: message.into() }
    }
}

impl From<line_reader::LineError> for LogError {
    fn from(error: line_reader::LineError) -> Self {
        match error {
            line_reader::LineError::Io(e) => Self::Io(e),
            line_reader::LineError::NotText(line) => {
                Self::line(line, "not UTF-8 text; is this a binary log (BLF, MF4)?")
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn format_follows_the_file_extension() {
        assert_eq!(Format::from_path(Path::new("x/trace.log")), Some(Format::Candump));
        assert_eq!(Format::from_path(Path::new("trace.ASC")), Some(Format::Asc));
        assert_eq!(Format::from_path(Path::new("trace.blf")), Some(Format::Blf));
        assert_eq!(Format::from_path(Path::new("trace.txt")), None);
        assert_eq!(Format::from_path(Path::new("trace")), None);
    }

    #[test]
    fn format_names_parse_and_unknown_ones_are_explained() {
        assert_eq!("candump".parse::<Format>(), Ok(Format::Candump));
        assert_eq!("ASC".parse::<Format>(), Ok(Format::Asc));
        assert_eq!("BLF".parse::<Format>(), Ok(Format::Blf));
        assert!("trc".parse::<Format>().unwrap_err().contains("candump, asc or blf"));
    }

    #[test]
    fn binary_input_is_reported_with_its_line() {
        let mut reader = candump::CandumpReader::new(&b"(1.000000) can0 123#\n\xff\xfe\n"[..]);
        assert!(reader.next().unwrap().is_ok());
        let error = reader.next().unwrap().unwrap_err().to_string();
        assert!(error.starts_with("line 2: not UTF-8"), "{error}");
    }

    #[test]
    fn sniffing_tells_candump_from_asc() {
        assert_eq!(Format::sniff("(1700000000.000000) can0 123#"), Format::Candump);
        assert_eq!(Format::sniff("date Wed Nov 15 10:13:20.123 am 2023"), Format::Asc);
    }
}
