//! Reading logs of any format but MDF4 (read whole, [`crate::mdf4`]) through one iterator.

use std::fs::File;
use std::io::{BufRead, BufReader, Read};
use std::path::Path;

use crate::asc::AscReader;
use crate::blf::BlfReader;
use crate::candump::CandumpReader;
use crate::line_reader::Lines;
use crate::{DateZone, Format, LogError, Record};

/// How to read a log.
#[derive(Clone, Debug, Default)]
pub struct ReadOptions {
    /// How to turn ASC dates (local time) into Unix time. Files fieldhub
    /// wrote carry the exact start in a comment and do not need it.
    pub zone: DateZone,
}

/// Records from a log of any of these formats.
pub enum LogReader<R> {
    Candump(CandumpReader<R>),
    Asc(AscReader<R>),
    Blf(BlfReader<R>),
}

impl<R: BufRead> LogReader<R> {
    /// Read `input` as `format`.
    pub fn new(input: R, format: Format, options: &ReadOptions) -> Self {
        match format {
            Format::Candump => Self::Candump(CandumpReader::new(input)),
            Format::Asc => Self::Asc(AscReader::new(input, options.zone)),
            Format::Blf => Self::Blf(BlfReader::new(input)),
        }
    }

    /// The format being read.
    pub fn format(&self) -> Format {
        match self {
            Self::Candump(_) => Format::Candump,
            Self::Asc(_) => Format::Asc,
            Self::Blf(_) => Format::Blf,
        }
    }
}

impl<R: BufRead> Iterator for LogReader<R> {
    type Item = Result<Record, LogError>;

    fn next(&mut self) -> Option<Self::Item> {
        match self {
            Self::Candump(reader) => reader.next(),
            Self::Asc(reader) => reader.next(),
            Self::Blf(reader) => reader.next(),
        }
    }
}

/// Open a log file. `format` `None` takes it from the extension (`.log`,
/// `.asc`, `.blf`), else from its first bytes: `LOGG` is BLF, else the
/// first non-blank line tells candump from ASC.
pub fn open(
    path: &Path,
    format: Option<Format>,
    options: &ReadOptions,
) -> Result<LogReader<BufReader<File>>, LogError> {
    let format = match format.or_else(|| Format::from_path(path)) {
        Some(format) => format,
        None if starts_with(path, b"LOGG")? => Format::Blf,
        None => {
            let mut lines = Lines::new(BufReader::new(File::open(path)?));
            let mut format = Format::Candump;
            while let Some(line) = lines.next_line() {
                let (_, line) = line?;
                if !line.trim().is_empty() {
                    format = Format::sniff(line);
                    break;
                }
            }
            format
        }
    };
    Ok(LogReader::new(BufReader::new(File::open(path)?), format, options))
}

/// Whether the file at `path` starts with `magic`.
fn starts_with(path: &Path, magic: &[u8]) -> std::io::Result<bool> {
    let mut head = Vec::with_capacity(magic.len());
    File::open(path)?.take(magic.len() as u64).read_to_end(&mut head)?;
    Ok(head == magic)
}
