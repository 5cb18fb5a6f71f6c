//! The can-utils candump log format, one frame a line:
//!
//! ```text
//! (1700000000.123456) can0 123#DEADBEEF
//! (1700000000.123789) can0 12345678#R
//! (1700000000.124000) fd0 123##1DEADBEEF
//! (1700000000.125000) can0 20000080#0000000000000000
//! (1700000000.126000) can0 123#11 T
//! ```
//!
//! The frame text is cansend syntax (`fieldhub_proto::text`). A trailing ` R`
//! (received) or ` T` (transmitted) is the direction marker newer candump and
//! python-can write; older readers (canplayer before 2023, python-can before
//! 4.0) reject it, so [`crate::RecorderOptions::mark_direction`] is off by
//! default. Error frames python-can wrote without data (`20000080#`) read as
//! error frames with zeroed detail bytes.

use std::fmt::Write as _;
use std::io::BufRead;

use fieldhub_proto::frame::{CAN_ERR_FLAG, ERROR_FRAME_LEN};
use fieldhub_proto::text::{parse_log_line, write_cansend};
use fieldhub_proto::Frame;

use crate::line_reader::Lines;
use crate::{Direction, LogError, Record};

/// Append one log line (with newline) to `out`.
pub fn write_line(out: &mut String, timestamp_ns: u64, channel: &str, frame: &Frame, direction: Option<Direction>) {
    let secs = timestamp_ns / 1_000_000_000;
    let micros = (timestamp_ns % 1_000_000_000) / 1_000;
    let _ = write!(out, "({secs}.{micros:06}) {channel} ");
    write_cansend(out, frame);
    match direction {
        Some(Direction::Rx) => out.push_str(" R"),
        Some(Direction::Tx) => out.push_str(" T"),
        None => {}
    }
    out.push('\n');
}

/// Parse one non-blank log line.
pub fn parse_line(line: &str) -> Result<Record, String> {
    let fields: Vec<&str> = line.split_whitespace().collect();
    let direction = match fields.as_slice() {
        [_, _, _] => None,
        [_, _, _, marker] => Some(match *marker {
            "R" | "r" => Direction::Rx,
            "T" | "t" => Direction::Tx,
            other => return Err(format!("'{other}' after the frame: expected R (received) or T (transmitted)")),
        }),
        _ => return Err(format!("'{}': expected '(SECONDS.MICROS) CHANNEL FRAME [R|T]'", line.trim())),
    };
    let frame_text = pad_short_error_frame(fields[2]);
    let text = format!("{} {} {}", fields[0], fields[1], frame_text);
    let parsed = parse_log_line(&text).map_err(|e| e.to_string())?;
    Ok(Record { timestamp_ns: parsed.timestamp_ns, channel: parsed.channel, frame: parsed.frame, direction })
}

/// python-can writes error frames as `20000080#` without detail bytes;
/// candump always writes eight. Pad the short form with zeros.
fn pad_short_error_frame(frame: &str) -> String {
    let Some((id, data)) = frame.split_once('#') else { return frame.to_owned() };
    let is_error = id.len() == 8 && u32::from_str_radix(id, 16).is_ok_and(|id| id & CAN_ERR_FLAG != 0);
    let digits = data.bytes().filter(|&b| b != b'.').count();
    if is_error && digits < 2 * ERROR_FRAME_LEN && digits % 2 == 0 && !data.starts_with('#') {
        let mut padded = frame.to_owned();
        padded.extend(std::iter::repeat_n('0', 2 * ERROR_FRAME_LEN - digits));
        padded
    } else {
        frame.to_owned()
    }
}

/// Records from a candump log. Blank lines are skipped; any other line that
/// does not parse ends the iteration with an error naming its line number.
pub struct CandumpReader<R> {
    lines: Lines<R>,
}

impl<R: BufRead> CandumpReader<R> {
    pub fn new(input: R) -> Self {
        Self { lines: Lines::new(input) }
    }
}

impl<R: BufRead> Iterator for CandumpReader<R> {
    type Item = Result<Record, LogError>;

    fn next(&mut self) -> Option<Self::Item> {
        loop {
            let (number, line) = match self.lines.next_line()? {
                Ok(line) => line,
                Err(e) => return Some(Err(e.into())),
            };
            if line.trim().is_empty() {
                continue;
            }
            return Some(parse_line(line).map_err(|message| LogError::line(number, message)));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use fieldhub_proto::text::parse_cansend;

    fn line(timestamp_ns: u64, channel: &str, frame: &str, direction: Option<Direction>) -> String {
        let mut out = String::new();
        write_line(&mut out, timestamp_ns, channel, &parse_cansend(frame).unwrap(), direction);
        out
    }

    #[test]
    fn lines_are_written_as_candump_writes_them() {
        assert_eq!(
            line(1_700_000_000_123_456_000, "can0", "123#DEADBEEF", None),
            "(1700000000.123456) can0 123#DEADBEEF\n"
        );
        assert_eq!(line(1_000, "vcan0", "123##1DEADBEEF", Some(Direction::Tx)), "(0.000001) vcan0 123##1DEADBEEF T\n");
        assert_eq!(line(0, "can1", "12345678#R", Some(Direction::Rx)), "(0.000000) can1 12345678#R R\n");
    }

    #[test]
    fn every_frame_kind_round_trips_with_and_without_direction() {
        let fd64 = format!("1ABCDEF0##3{}", (0..64u8).map(|b| format!("{b:02X}")).collect::<String>());
        for frame in [
            "123#DEADBEEF",
            "123#",
            "1ABCDEF0#0011223344556677",
            "123#R",
            "123#R8",
            "00000123#R3",
            "123##0",
            "123##1DEADBEEF",
            &fd64,
            "123#1122334455667788_F",
            "20000004#0000000000000000",
            "20000080#0102030405060708",
        ] {
            for direction in [None, Some(Direction::Rx), Some(Direction::Tx)] {
                let text = line(1_700_000_000_999_999_000, "can0", frame, direction);
                let record = parse_line(&text).unwrap_or_else(|e| panic!("{text}: {e}"));
                assert_eq!(record.timestamp_ns, 1_700_000_000_999_999_000, "{text}");
                assert_eq!(record.channel, "can0");
                assert_eq!(record.frame, parse_cansend(frame).unwrap(), "{text}");
                assert_eq!(record.direction, direction, "{text}");
            }
        }
    }

    #[test]
    fn python_can_error_frames_without_data_read_as_error_frames() {
        let record = parse_line("(1700000000.000000) vcan0 20000080# R").unwrap();
        assert!(record.frame.is_error());
        assert_eq!(record.frame.id(), 0x80);
        assert_eq!(record.frame.data(), &[0; 8]);
    }

    #[test]
    fn malformed_lines_are_rejected_with_the_reason() {
        for (text, reason) in [
            ("can0 123#00", "expected '(SECONDS.MICROS) CHANNEL FRAME"),
            ("(1.0) can0 123#00 X", "expected R (received) or T"),
            ("(1.0) can0 123#0", "pairs of hex digits"),
            ("(1.0) can0 800#00", "11-bit"),
            ("(abc) can0 123#00", "expected a log line"),
            ("(1.0) can0 123#00 R extra", "expected '(SECONDS.MICROS)"),
        ] {
            let error = parse_line(text).unwrap_err();
            assert!(error.contains(reason), "{text}: {error}");
        }
    }

    #[test]
    fn reader_names_the_line_of_a_malformed_entry() {
        let text = "(1.000000) can0 123#00\n\n(1.000001) can0 123#0G\n";
        let mut reader = CandumpReader::new(text.as_bytes());
        assert!(reader.next().unwrap().is_ok());
        let error = reader.next().unwrap().unwrap_err().to_string();
        assert!(error.starts_with("line 3: "), "{error}");
    }
}
