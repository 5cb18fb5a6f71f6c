//! Reading logs of either format through one iterator.

use std::fs::File;
use std::io::{BufRead, BufReader};
use std::path::Path;

use crate::asc::AscReader;
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

/// Records from a log of either format.
pub enum LogReader<R> {
    Candump(CandumpReader<R>),
    Asc(AscReader<R>),
}

impl<R: BufRead> LogReader<R> {
    /// Read `input` as `format`.
    pub fn new(input: R, format: Format, options: &ReadOptions) -> Self {
        match format {
            Format::Candump => Self::Candump(CandumpReader::new(input)),
            Format::Asc => Self::Asc(AscReader::new(input, options.zone)),
        }
    }

    /// The format being read.
    pub fn format(&self) -> Format {
        match self {
            Self::Candump(_) => Format::Candump,
            Self::Asc(_) => Format::Asc,
        }
    }
}

impl<R: BufRead> Iterator for LogReader<R> {
    type Item = Result<Record, LogError>;

    fn next(&mut self) -> Option<Self::Item> {
        match self {
            Self::Candump(reader) => reader.next(),
            Self::Asc(reader) => reader.next(),
        }
    }
}

/// Open a log file. `format` `None` takes it from the extension (`.log`,
/// `.asc`), else from the first non-blank line.
pub fn open(
    path: &Path,
    format: Option<Format>,
    options: &ReadOptions,
) -> Result<LogReader<BufReader<File>>, LogError> {
    let format = match format.or_else(|| Format::from_path(path)) {
        Some(format) => format,
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
