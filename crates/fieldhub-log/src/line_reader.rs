//! Numbered lines of a text log, the one way every log reader reads its
//! input. A leaf: it imports nothing from the crate, so the readers
//! (`asc.rs`, `candump.rs`) depend on it and `reader.rs` on them, one way.

use std::io::{self, BufRead};

/// Lines of a text input with their numbers (from 1), read into one reused
/// buffer; a line that is not UTF-8 is an error naming it.
pub(crate) struct Lines<R> {
    input: R,
    bytes: Vec<u8>,
    number: usize,
}

/// Why the next line could not be read. The crate's
/// [`LogError`](crate::LogError) takes it with `?`, so a reader never
/// spells the message itself.
#[derive(Debug)]
pub(crate) enum LineError {
    /// Reading the input failed.
    Io(io::Error),
    /// The line with this number is not UTF-8 text.
    NotText(usize),
}

impl<R: BufRead> Lines<R> {
    pub(crate) fn new(input: R) -> Self {
        Self { input, bytes: Vec::new(), number: 0 }
    }

    /// The next line without its line ending, or `None` at the end.
    pub(crate) fn next_line(&mut self) -> Option<Result<(usize, &str), LineError>> {
        self.bytes.clear();
        match self.input.read_until(b'\n', &mut self.bytes) {
            Ok(0) => return None,
            Ok(_) => {}
            Err(e) => return Some(Err(LineError::Io(e))),
        }
        self.number += 1;
        while matches!(self.bytes.last(), Some(b'\n' | b'\r')) {
            self.bytes.pop();
        }
        let number = self.number;
        Some(std::str::from_utf8(&self.bytes).map(|line| (number, line)).map_err(|_| LineError::NotText(number)))
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
        assert!(matches!(lines.next_line().unwrap(), Err(LineError::NotText(2))));
    }
}
