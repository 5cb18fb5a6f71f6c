//! can-utils text forms: cansend's frame syntax and candump's log line.
//!
//! - `123#DEADBEEF`: standard id, data; `12345678#...`: 8 hex digits make an
//!   extended id; `123#R` / `123#R4`: remote frame (optionally with a DLC);
//!   `123##1DEADBEEF`: CAN FD, the hex digit after `##` holds the flags
//!   (1 = BRS, 2 = ESI, 4 = FDF: every CAN FD frame has it, so it is accepted
//!   and implied, as newer can-utils write it); `123#1122334455667788_E`:
//!   classic 8-byte frame with
//!   raw DLC 0xE. Data bytes may be separated by `.`.
//! - Error frames print as `20000004#0000000000000000` (candump prints the
//!   id with `CAN_ERR_FLAG`, 8 hex digits).
//! - LIN frames (fieldhub's own form: cansend has none) read and print as
//!   `L10#4A5593E5` — `L`, the 6-bit identifier in two hex digits, the data —
//!   followed by `/C` under the classic checksum and `!96` (the byte sent)
//!   for a wrong checksum; a header no slave answered is `L10#-`, and what
//!   the bus read when responses to an event-triggered header collided is
//!   `L30#1000/X!78` (data, `/X`, the checksum byte read). A standing
//!   response (it answers every header of its identifier until replaced)
//!   is `LS10#4A5593E5`, `S` after the `L`; its withdrawal is `LS10#-`. A
//!   wake-up pulse, which has no identifier, is `LW#-`.
//! - CAN XL frames as can-utils writes them (`00123#80:00:00000000#A5`)
//!   and raw frames (`R00000011#0A0B`): [`crate::text_xl`].
//! - Log line: `(1700000000.123456) can0 123#DEADBEEF`, optionally followed
//!   by ` T` (TX confirmation) or ` R` (received) as newer candump writes.

use crate::frame::{Frame, FrameFlags, FrameKind};
use crate::lin::Checksum;

pub use crate::frame::CAN_ERR_FLAG;

/// Why a text frame could not be parsed.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum TextError {
    #[error("'{0}': expected <id>#<data>, <id>#R or <id>##<flags><data>")]
    MissingSeparator(String),
    #[error("'{0}': identifier must be 3 (standard) or 8 (extended) hex digits")]
    BadId(String),
    #[error("'{0}': data must be pairs of hex digits, optionally separated by '.'")]
    BadData(String),
    #[error("'{text}': {bytes} data bytes; a frame carries at most 64 (CAN FD)")]
    TooMuchData { text: String, bytes: usize },
    #[error("'{0}': an identifier with the error flag (0x20000000) makes an error frame, which carries exactly 8 data bytes")]
    ErrorFrameData(String),
    // The reason is part of this message, not a `source`: a report that
    // prints an error's causes would otherwise say it twice.
    #[error("'{text}': {reason}")]
    Invalid { text: String, reason: crate::frame::FrameError },
    #[error("'{0}': expected a log line '(SECONDS.MICROS) CHANNEL FRAME'")]
    BadLogLine(String),
    #[error("'{0}': a LIN frame is L, a two-digit identifier 00..3F, # and 1 to 8 data bytes (L10#4A55)")]
    BadLin(String),
    #[error("'{0}': a CAN XL frame is VVPPP#FF:SS:AAAAAAAA#data (VCID, 11-bit priority, flags, SDT, acceptance field in hex)")]
    BadXl(String),
    #[error("'{text}': CAN XL flags 0x{flags:02X} set bits other than XLF 0x80, SEC 0x01 and RRS 0x02")]
    BadXlFlags { text: String, flags: u8 },
    #[error("'{text}': {bytes} data bytes; a CAN XL or raw frame carries at most 2048")]
    TooMuchXlData { text: String, bytes: usize },
    #[error("'{0}': a raw frame is R, an 8-digit hex id, # and 0 to 2048 data bytes (R00000011#0A0B)")]
    BadRaw(String),
}

fn parse_hex_bytes(text: &str, whole: &str, out: &mut [u8; 64]) -> Result<usize, TextError> {
    let digits: Vec<u8> = text.bytes().filter(|&b| b != b'.').collect();
    if digits.len() % 2 != 0 {
        return Err(TextError::BadData(whole.to_owned()));
    }
    if digits.len() / 2 > out.len() {
        return Err(TextError::TooMuchData { text: whole.to_owned(), bytes: digits.len() / 2 });
    }
    for (i, pair) in digits.chunks(2).enumerate() {
        let s = std::str::from_utf8(pair).map_err(|_| TextError::BadData(whole.to_owned()))?;
        out[i] = u8::from_str_radix(s, 16).map_err(|_| TextError::BadData(whole.to_owned()))?;
    }
    Ok(digits.len() / 2)
}

fn parse_id(text: &str, whole: &str) -> Result<(u32, bool), TextError> {
    let bad = || TextError::BadId(whole.to_owned());
    if !text.bytes().all(|b| b.is_ascii_hexdigit()) {
        return Err(bad());
    }
    let id = u32::from_str_radix(text, 16).map_err(|_| bad())?;
    match text.len() {
        3 => Ok((id, false)),
        8 => Ok((id, true)),
        _ => Err(bad()),
    }
}

/// Parse a LIN frame's text after its `L`: `10#4A55`, `10#4A55/C`,
/// `10#4A55!00`, `10#-`; after `LS` a standing response or, `10#-`, its
/// withdrawal.
fn parse_lin(lin: &str, text: &str) -> Result<Frame, TextError> {
    if lin == "W#-" {
        return Ok(Frame::lin_wake_up());
    }
    if let Some(standing) = lin.strip_prefix('S') {
        let invalid = |reason| TextError::Invalid { text: text.to_owned(), reason };
        if let Some(id) = standing.strip_suffix("#-") {
            let id = u8::from_str_radix(id, 16).ok().filter(|_| id.len() == 2);
            let id = id.ok_or_else(|| TextError::BadLin(text.to_owned()))?;
            return Frame::lin_withdraw(id).map_err(invalid);
        }
        let response = parse_lin(standing, text)?;
        if response.flags().intersects(FrameFlags::LIN_NO_RESPONSE | FrameFlags::LIN_COLLISION) {
            return Err(TextError::BadLin(text.to_owned()));
        }
        return Frame::from_parts(
            FrameKind::Lin,
            response.flags() | FrameFlags::LIN_STANDING,
            response.id(),
            response.len(),
            response.len8_dlc(),
            0,
            response.data(),
        )
        .map_err(invalid);
    }
    let invalid = |reason| TextError::Invalid { text: text.to_owned(), reason };
    let bad = || TextError::BadLin(text.to_owned());
    let (id_text, rest) = lin.split_once('#').ok_or_else(bad)?;
    if id_text.len() != 2 {
        return Err(bad());
    }
    let id = u8::from_str_radix(id_text, 16).map_err(|_| bad())?;
    if rest == "-" {
        return Frame::lin_no_response(id).map_err(invalid);
    }
    let (rest, checksum) = match rest.split_once('!') {
        Some((rest, byte)) if byte.len() == 2 => (rest, Some(u8::from_str_radix(byte, 16).map_err(|_| bad())?)),
        Some(_) => return Err(bad()),
        None => (rest, None),
    };
    let mut data = [0u8; 64];
    if let (Some(hex), Some(byte)) = (rest.strip_suffix("/X"), checksum) {
        // What the bus read in a collision: the data, then the checksum byte.
        let len = parse_hex_bytes(hex, text, &mut data)?;
        let read =
            Frame::from_parts(FrameKind::Lin, FrameFlags::LIN_COLLISION, u32::from(id), len, byte, 0, &data[..len]);
        return read.map_err(invalid);
    }
    let (hex, model) = match rest.strip_suffix("/C") {
        Some(hex) => (hex, Checksum::Classic),
        None => (rest, Checksum::Enhanced),
    };
    let len = parse_hex_bytes(hex, text, &mut data)?;
    match checksum {
        Some(byte) => Frame::lin_with_checksum(id, model, &data[..len], byte),
        None => Frame::lin(id, model, &data[..len]),
    }
    .map_err(invalid)
}

/// Parse cansend syntax (with can-utils' CAN XL form and fieldhub's LIN and
/// raw forms, `L10#4A55`, `R00000011#0A0B`).
pub fn parse_cansend(text: &str) -> Result<Frame, TextError> {
    if let Some(lin) = text.strip_prefix('L') {
        return parse_lin(lin, text);
    }
    if let Some(raw) = text.strip_prefix('R') {
        return crate::text_xl::parse_raw(raw, text);
    }
    let invalid = |reason| TextError::Invalid { text: text.to_owned(), reason };
    let (id_text, rest) = text.split_once('#').ok_or_else(|| TextError::MissingSeparator(text.to_owned()))?;
    if crate::text_xl::is_xl_body(rest) {
        return crate::text_xl::parse_xl(id_text, rest, text);
    }
    let (id, extended) = parse_id(id_text, text)?;
    let mut data = [0u8; 64];
    if let Some(fd) = rest.strip_prefix('#') {
        let mut chars = fd.chars();
        let flags_digit =
            chars.next().and_then(|c| c.to_digit(16)).ok_or_else(|| TextError::BadData(text.to_owned()))?;
        let mut flags = FrameFlags::empty();
        if flags_digit & 0x1 != 0 {
            flags = flags.union(FrameFlags::BRS);
        }
        if flags_digit & 0x2 != 0 {
            flags = flags.union(FrameFlags::ESI);
        }
        if extended {
            flags = flags.union(FrameFlags::EXTENDED);
        }
        let len = parse_hex_bytes(chars.as_str(), text, &mut data)?;
        return Frame::can_fd(id, flags, &data[..len]).map_err(invalid);
    }
    if extended && id & CAN_ERR_FLAG != 0 {
        let len = parse_hex_bytes(rest, text, &mut data)?;
        if len != 8 {
            return Err(TextError::ErrorFrameData(text.to_owned()));
        }
        let mut bytes = [0u8; 8];
        bytes.copy_from_slice(&data[..8]);
        return Frame::error(id & !CAN_ERR_FLAG, bytes).map_err(invalid);
    }
    if let Some(remote) = rest.strip_prefix(['R', 'r']) {
        let len = match remote {
            "" => 0,
            digit => digit.parse::<usize>().map_err(|_| TextError::BadData(text.to_owned()))?,
        };
        return Frame::remote(id, extended, len).map_err(invalid);
    }
    let (hex, raw_dlc) = match rest.split_once('_') {
        Some((hex, dlc)) => {
            let dlc = u8::from_str_radix(dlc, 16).map_err(|_| TextError::BadData(text.to_owned()))?;
            (hex, Some(dlc))
        }
        None => (rest, None),
    };
    let len = parse_hex_bytes(hex, text, &mut data)?;
    let mut frame = Frame::can(id, extended, &data[..len]).map_err(invalid)?;
    if let Some(dlc) = raw_dlc {
        frame.set_len8_dlc(dlc).map_err(invalid)?;
    }
    Ok(frame)
}

/// Format a frame in cansend syntax (as candump's log format prints it).
pub fn format_cansend(frame: &Frame) -> String {
    let mut out = String::with_capacity(16 + 2 * frame.len());
    write_cansend(&mut out, frame);
    out
}

pub(crate) fn push_hex(out: &mut String, bytes: &[u8]) {
    const HEX: &[u8; 16] = b"0123456789ABCDEF";
    for &b in bytes {
        out.push(HEX[(b >> 4) as usize] as char);
        out.push(HEX[(b & 0xF) as usize] as char);
    }
}

fn push_id(out: &mut String, id: u32, width: usize) {
    use std::fmt::Write;
    let _ = write!(out, "{id:0width$X}");
}

/// Append a frame in cansend syntax to `out`.
pub fn write_cansend(out: &mut String, frame: &Frame) {
    match frame.kind() {
        FrameKind::CanXl => crate::text_xl::write_xl(out, frame),
        FrameKind::Raw => crate::text_xl::write_raw(out, frame),
        FrameKind::Error => {
            push_id(out, frame.id() | CAN_ERR_FLAG, 8);
            out.push('#');
            push_hex(out, frame.data());
        }
        FrameKind::Lin if frame.is_lin_wake_up() => out.push_str("LW#-"),
        FrameKind::Lin => {
            out.push('L');
            if frame.is_lin_standing() {
                out.push('S');
            }
            push_id(out, frame.id(), 2);
            out.push('#');
            if frame.flags().contains(FrameFlags::LIN_NO_RESPONSE) || (frame.is_lin_standing() && frame.is_empty()) {
                out.push('-');
                return;
            }
            push_hex(out, frame.data());
            if frame.flags().contains(FrameFlags::LIN_CLASSIC) {
                out.push_str("/C");
            }
            if frame.flags().contains(FrameFlags::LIN_COLLISION) {
                out.push_str("/X");
            }
            if frame.flags().intersects(FrameFlags::LIN_CHECKSUM_ERROR | FrameFlags::LIN_COLLISION) {
                out.push('!');
                push_hex(out, &[frame.len8_dlc()]);
            }
        }
        FrameKind::Can | FrameKind::CanFd => {
            push_id(out, frame.id(), if frame.is_extended() { 8 } else { 3 });
            out.push('#');
            if frame.is_fd() {
                let mut flags = 0u8;
                if frame.flags().contains(FrameFlags::BRS) {
                    flags |= 1;
                }
                if frame.flags().contains(FrameFlags::ESI) {
                    flags |= 2;
                }
                out.push('#');
                out.push(char::from(b'0' + flags));
                push_hex(out, frame.data());
            } else if frame.is_remote() {
                out.push('R');
                if !frame.is_empty() {
                    out.push(char::from(b'0' + frame.len() as u8));
                }
            } else {
                push_hex(out, frame.data());
                if frame.len8_dlc() != 0 {
                    out.push('_');
                    out.push(char::from_digit(u32::from(frame.len8_dlc()), 16).unwrap_or('F').to_ascii_uppercase());
                }
            }
        }
    }
}

/// One line of a candump log.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct LogLine {
    /// Timestamp in nanoseconds since the Unix epoch (microsecond precision).
    pub timestamp_ns: u64,
    pub channel: String,
    pub frame: Frame,
}

/// Format a candump log line: `(1700000000.123456) can0 123#DEADBEEF`.
pub fn format_log_line(timestamp_ns: u64, channel: &str, frame: &Frame) -> String {
    let secs = timestamp_ns / 1_000_000_000;
    let micros = (timestamp_ns % 1_000_000_000) / 1_000;
    let mut out = format!("({secs}.{micros:06}) {channel} ");
    write_cansend(&mut out, frame);
    out
}

/// Parse a candump log line.
pub fn parse_log_line(line: &str) -> Result<LogLine, TextError> {
    let bad = || TextError::BadLogLine(line.to_owned());
    let rest = line.trim().strip_prefix('(').ok_or_else(bad)?;
    let (stamp, rest) = rest.split_once(')').ok_or_else(bad)?;
    let (secs, frac) = stamp.split_once('.').ok_or_else(bad)?;
    let secs: u64 = secs.parse().map_err(|_| bad())?;
    if frac.is_empty() || frac.len() > 9 || !frac.bytes().all(|b| b.is_ascii_digit()) {
        return Err(bad());
    }
    let frac_ns: u64 = frac.parse::<u64>().map_err(|_| bad())? * 10u64.pow(9 - frac.len() as u32);
    let mut fields = rest.split_whitespace();
    let channel = fields.next().ok_or_else(bad)?.to_owned();
    let frame = parse_cansend(fields.next().ok_or_else(bad)?)?;
    let timestamp_ns = secs.checked_mul(1_000_000_000).and_then(|s| s.checked_add(frac_ns)).ok_or_else(bad)?;
    Ok(LogLine { timestamp_ns, channel, frame })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lin_forms_round_trip_and_carry_the_checksum_model() {
        let forms = [
            "L10#4A5593E5",
            "L3C#0102030405060708/C",
            "L10#4A5593E5!00",
            "L22#-",
            "L00#FF/C!12",
            "L30#1000/X!78",
            "LS10#4A5593E5",
            "LS3C#01/C",
            "LS22#-",
            "LW#-",
        ];
        for text in forms {
            let frame = parse_cansend(text).unwrap_or_else(|e| panic!("{text}: {e}"));
            assert!(frame.is_lin(), "{text}");
            assert_eq!(format_cansend(&frame), text);
        }
        let frame = parse_cansend("L10#4A5593E5").unwrap();
        assert_eq!((frame.id(), frame.len8_dlc(), frame.flags()), (0x10, 0x96, FrameFlags::empty()));
        assert_eq!(parse_cansend("L10#4A5593E5/C").unwrap().len8_dlc(), 0xE6);
        // The right checksum given as a wrong one is simply the right one.
        assert_eq!(parse_cansend("L10#4A5593E5!96").unwrap(), frame);
        let collision = parse_cansend("L30#1000/X!78").unwrap();
        assert_eq!((collision.len(), collision.len8_dlc(), collision.flags()), (2, 0x78, FrameFlags::LIN_COLLISION));
        for bad in ["L40#01", "L1#01", "L10#", "L10#010203040506070809", "L10#01!1", "L10", "L30#/X!00"] {
            assert!(parse_cansend(bad).is_err(), "{bad}");
        }
        assert!(parse_cansend("L40#01").unwrap_err().to_string().contains("over 0x3F"));
    }

    #[test]
    fn cansend_forms_round_trip() {
        for text in [
            "123#DEADBEEF",
            "123#",
            "1ABCDEF0#00",
            "123#R",
            "123#R4",
            "00000123#R8",
            "123##1DEADBEEF",
            "123##3",
            "7FF##0112233445566778899AABBCC",
            "123#1122334455667788_E",
            "20000004#0000000000000000",
        ] {
            let frame = parse_cansend(text).unwrap_or_else(|e| panic!("{text}: {e}"));
            assert_eq!(format_cansend(&frame), text);
        }
    }

    #[test]
    fn the_fdf_bit_of_the_flags_nibble_is_accepted_and_implied() {
        let plain = parse_cansend("123##4DEAD").unwrap();
        assert!(plain.is_fd() && plain.flags() == parse_cansend("123##0DEAD").unwrap().flags());
        let brs = parse_cansend("123##5DEAD").unwrap();
        assert_eq!(brs, parse_cansend("123##1DEAD").unwrap());
    }

    #[test]
    fn cansend_accepts_dot_separators() {
        assert_eq!(format_cansend(&parse_cansend("123#DE.AD.BE.EF").unwrap()), "123#DEADBEEF");
    }

    #[test]
    fn cansend_rejects_bad_forms() {
        assert!(matches!(parse_cansend("123DEADBEEF"), Err(TextError::MissingSeparator(_))));
        assert!(matches!(parse_cansend("12#00"), Err(TextError::BadId(_))));
        assert!(matches!(parse_cansend("800#00"), Err(TextError::Invalid { .. })));
        assert!(matches!(parse_cansend("123#0"), Err(TextError::BadData(_))));
        assert!(matches!(parse_cansend("123#112233445566778899"), Err(TextError::Invalid { .. })));
        let too_long = parse_cansend(&format!("123##0{}", "00".repeat(65))).unwrap_err();
        assert_eq!(too_long, TextError::TooMuchData { text: format!("123##0{}", "00".repeat(65)), bytes: 65 });
        let error_frame = parse_cansend("20000000#00").unwrap_err().to_string();
        assert!(error_frame.contains("error flag (0x20000000)"), "{error_frame}");
        // The reason is said once, also where causes are printed.
        let nine = parse_cansend("123#112233445566778899").unwrap_err();
        assert!(std::error::Error::source(&nine).is_none());
        assert_eq!(nine.to_string().matches("at most 8").count(), 1, "{nine}");
        assert!(matches!(parse_cansend("123##1001122334455667788"), Err(TextError::Invalid { .. })));
    }

    #[test]
    fn log_line_round_trips() {
        let frame = parse_cansend("123##1DEADBEEF").unwrap();
        let line = format_log_line(1_700_000_000_123_456_000, "can0", &frame);
        assert_eq!(line, "(1700000000.123456) can0 123##1DEADBEEF");
        let parsed = parse_log_line(&line).unwrap();
        assert_eq!(parsed.timestamp_ns, 1_700_000_000_123_456_000);
        assert_eq!(parsed.channel, "can0");
        assert_eq!(parsed.frame, frame);
    }

    #[test]
    fn log_line_with_trailing_direction_parses() {
        let parsed = parse_log_line("(1700000000.000001) vcan0 123#11 R").unwrap();
        assert_eq!(parsed.frame.data(), &[0x11]);
    }
}
