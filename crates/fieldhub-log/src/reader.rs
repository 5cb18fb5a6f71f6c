//! Reading logs of either format through one iterator.

use std::fs::File;
use std::io::{BufRead, BufReader};
use std::path::Path;

use crate::asc::AscReader;
use crate::candump::CandumpReader;
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

/// Lines of a text input with their numbers (from 1), read into one reused
/// buffer; a line that is not UTF-8 is an error naming it.
pub(crate) struct Lines<R> {
    input: R,
    bytes: Vec<u8>,
    number: usize,
}

impl<R: BufRead> Lines<R> {
    pub(crate) fn new(input: R) -> Self {
        Self { input, bytes: Vec::new(), number: 0 }
    }

    /// The next line without its line ending, or `None` at the end.
    pub(crate) fn next_line(&mut self) -> Option<Result<(usize, &str), LogError>> {
        self.bytes.clear();
        match self.input.read_until(b'\n', &mut self.bytes) {
            Ok(0) => return None,
            Ok(_) => {}
            Err(e) => return Some(Err(e.into())),
        }
        self.number += 1;
        while matches!(self.bytes.last(), Some(b'\n' | b'\r')) {
            self.bytes.pop();
        }
        let number = self.number;
        Some(
            std::str::from_utf8(&self.bytes)
                .map(|line| (number, line))
                .map_err(|_| LogError::line(number, "not UTF-8 text; is this a binary log (BLF, MF4)?")),
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lines_are_numbered_and_stripped_of_line_endings() {
        let mut lines = Lines::new("a\r\nb\n\nc".as_bytes());
        let mut seen = Vec::new();
        while let Some(line) = lines.next_line() {
            let (n, text) = line.unwrap();
            seen.push((n, text.to_owned()));
        }
        assert_eq!(seen, [(1, "a".into()), (2, "b".into()), (3, String::new()), (4, "c".into())]);
    }

    #[test]
    fn binary_input_is_reported_with_its_line() {
        let mut lines = Lines::new(&b"ok\n\xff\xfe\n"[..]);
        assert!(lines.next_line().unwrap().is_ok());
        let error = lines.next_line().unwrap().unwrap_err().to_string();
        assert!(error.starts_with("line 2: not UTF-8"), "{error}");
    }
}
