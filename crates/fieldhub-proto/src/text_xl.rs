//! The text forms of CAN XL and raw frames, beside [`crate::text`]'s.
//!
//! - CAN XL, as can-utils writes and reads it (`lib.c`,
//!   `snprintf_canframe` / `parse_canframe`): `VVPPP#FF:SS:AAAAAAAA#data` —
//!   the VCID in two hex digits and the priority in three, `#`, the
//!   `canxl_frame.flags` byte (0x80 `CANXL_XLF`, which every XL frame has and
//!   which is implied when missing, 0x01 `CANXL_SEC`, 0x02 `CANXL_RRS`), `:`,
//!   the SDT, `:`, the acceptance field in eight digits, `#`, the data bytes
//!   (optionally separated by `.`). Like can-utils, a three-digit id before
//!   an XL header reads as the priority with VCID 0.
//! - Raw frames (fieldhub's own form: can-utils has none): `R`, the id in
//!   eight hex digits, `#`, the data — `R00000011#0A0B`, `R00000000#`.

use crate::canxl::{CANXL_PRIO_MASK, CANXL_VCID_OFFSET};
use crate::frame::{Frame, FrameFlags};
use crate::limits::MAX_RECORD_DATA;
use crate::text::TextError;

/// `canxl_frame.flags`' `CANXL_XLF`: the frame is an XL frame.
const CANXL_XLF: u8 = 0x80;
/// `CANXL_SEC`.
const CANXL_SEC: u8 = 0x01;
/// `CANXL_RRS`.
const CANXL_RRS: u8 = 0x02;

/// Whether the text after an id's `#` is a CAN XL header `FF:SS:AAAAAAAA#`
/// (can-utils tests the same three delimiter positions).
pub(crate) fn is_xl_body(rest: &str) -> bool {
    let b = rest.as_bytes();
    b.len() >= 15 && b[2] == b':' && b[5] == b':' && b[14] == b'#'
}

fn hex_u32(digits: &str, whole: &str) -> Result<u32, TextError> {
    if digits.is_empty() || !digits.bytes().all(|b| b.is_ascii_hexdigit()) {
        return Err(TextError::BadXl(whole.to_owned()));
    }
    u32::from_str_radix(digits, 16).map_err(|_| TextError::BadXl(whole.to_owned()))
}

/// Data bytes of up to 2,048: pairs of hex digits, optionally separated by `.`.
fn parse_long_hex(text: &str, whole: &str) -> Result<Vec<u8>, TextError> {
    let digits: Vec<u8> = text.bytes().filter(|&b| b != b'.').collect();
    if digits.len() % 2 != 0 {
        return Err(TextError::BadData(whole.to_owned()));
    }
    if digits.len() / 2 > MAX_RECORD_DATA {
        return Err(TextError::TooMuchXlData { text: whole.to_owned(), bytes: digits.len() / 2 });
    }
    digits
        .chunks(2)
        .map(|pair| {
            let s = std::str::from_utf8(pair).map_err(|_| TextError::BadData(whole.to_owned()))?;
            u8::from_str_radix(s, 16).map_err(|_| TextError::BadData(whole.to_owned()))
        })
        .collect()
}

/// Parse a CAN XL frame: `id_text` (3 or 5 hex digits) and the text after
/// its `#`, which [`is_xl_body`] accepted.
pub(crate) fn parse_xl(id_text: &str, rest: &str, whole: &str) -> Result<Frame, TextError> {
    let bad = || TextError::BadXl(whole.to_owned());
    if !matches!(id_text.len(), 3 | 5) {
        return Err(bad());
    }
    let id = hex_u32(id_text, whole)?;
    let (priority, vcid) = ((id & CANXL_PRIO_MASK) as u16, (id >> 12) as u8);
    // The priority has 11 bits; can-utils would mask a twelfth away.
    if id & 0x800 != 0 {
        return Err(bad());
    }
    let flag_bits = hex_u32(&rest[0..2], whole)? as u8;
    let sdt = hex_u32(&rest[3..5], whole)? as u8;
    let af = hex_u32(&rest[6..14], whole)?;
    if flag_bits & !(CANXL_XLF | CANXL_SEC | CANXL_RRS) != 0 {
        return Err(TextError::BadXlFlags { text: whole.to_owned(), flags: flag_bits });
    }
    let mut flags = FrameFlags::empty();
    if flag_bits & CANXL_SEC != 0 {
        flags |= FrameFlags::XL_SEC;
    }
    if flag_bits & CANXL_RRS != 0 {
        flags |= FrameFlags::XL_RRS;
    }
    let data = parse_long_hex(&rest[15..], whole)?;
    Frame::can_xl(priority, vcid, sdt, flags, af, &data)
        .map_err(|reason| TextError::Invalid { text: whole.to_owned(), reason })
}

/// Parse a raw frame's text after its `R`: `00000011#0A0B`.
pub(crate) fn parse_raw(raw: &str, whole: &str) -> Result<Frame, TextError> {
    let bad = || TextError::BadRaw(whole.to_owned());
    let (id_text, hex) = raw.split_once('#').ok_or_else(bad)?;
    if id_text.len() != 8 || !id_text.bytes().all(|b| b.is_ascii_hexdigit()) {
        return Err(bad());
    }
    let id = u32::from_str_radix(id_text, 16).map_err(|_| bad())?;
    let data = parse_long_hex(hex, whole)?;
    Frame::raw(id, &data).map_err(|reason| TextError::Invalid { text: whole.to_owned(), reason })
}

/// Append a CAN XL frame as can-utils prints it.
pub(crate) fn write_xl(out: &mut String, frame: &Frame) {
    use std::fmt::Write;
    let mut flags = CANXL_XLF;
    if frame.is_sec() {
        flags |= CANXL_SEC;
    }
    if frame.is_rrs() {
        flags |= CANXL_RRS;
    }
    let vcid = frame.id() >> CANXL_VCID_OFFSET;
    let _ = write!(
        out,
        "{vcid:02X}{:03X}#{flags:02X}:{:02X}:{:08X}#",
        frame.priority(),
        frame.sdt(),
        frame.acceptance_field()
    );
    crate::text::push_hex(out, frame.data());
}

/// Append a raw frame in fieldhub's form.
pub(crate) fn write_raw(out: &mut String, frame: &Frame) {
    use std::fmt::Write;
    let _ = write!(out, "R{:08X}#", frame.id());
    crate::text::push_hex(out, frame.data());
}

#[cfg(test)]
mod tests {
    use crate::frame::FrameFlags;
    use crate::text::{format_cansend, parse_cansend, TextError};

    #[test]
    fn xl_forms_round_trip_as_can_utils_prints_them() {
        for text in ["00123#80:00:00000000#A5", "AB7FF#81:03:12345678#000102030405", "FF000#82:FF:FFFFFFFF#00"] {
            let frame = parse_cansend(text).unwrap_or_else(|e| panic!("{text}: {e}"));
            assert!(frame.is_xl(), "{text}");
            assert_eq!(format_cansend(&frame), text);
        }
        let frame = parse_cansend("AB7FF#81:03:12345678#0001").unwrap();
        assert_eq!(
            (frame.vcid(), frame.priority(), frame.sdt(), frame.acceptance_field()),
            (0xAB, 0x7FF, 3, 0x1234_5678)
        );
        assert_eq!(frame.flags(), FrameFlags::XL_SEC);
    }

    #[test]
    fn an_xl_header_without_xlf_or_after_three_digits_reads_as_can_utils_reads_it() {
        let implied = parse_cansend("123#01:00:00000000#A5").unwrap();
        assert_eq!(format_cansend(&implied), "00123#81:00:00000000#A5");
        let long = format!("00100#80:00:00000000#{}", "5A".repeat(2048));
        assert_eq!(parse_cansend(&long).unwrap().len(), 2048);
    }

    #[test]
    fn bad_xl_forms_are_refused_naming_the_problem() {
        assert!(matches!(parse_cansend("00123#84:00:00000000#A5"), Err(TextError::BadXlFlags { flags: 0x84, .. })));
        assert!(matches!(parse_cansend("00123#80:00:00000000#"), Err(TextError::Invalid { .. })));
        assert!(matches!(parse_cansend("00823#80:00:00000000#A5"), Err(TextError::BadXl(_))));
        assert!(matches!(parse_cansend("0123#80:00:00000000#A5"), Err(TextError::BadXl(_))));
        assert!(matches!(parse_cansend("00123#80:0G:00000000#A5"), Err(TextError::BadXl(_))));
        let too_long = format!("00100#80:00:00000000#{}", "00".repeat(2049));
        assert!(matches!(parse_cansend(&too_long), Err(TextError::TooMuchXlData { bytes: 2049, .. })));
    }

    #[test]
    fn raw_forms_round_trip() {
        for text in ["R00000011#0A0B", "R00000000#", "RFFFFFFFF#00"] {
            let frame = parse_cansend(text).unwrap_or_else(|e| panic!("{text}: {e}"));
            assert!(frame.is_raw(), "{text}");
            assert_eq!(format_cansend(&frame), text);
        }
        assert!(matches!(parse_cansend("R11#00"), Err(TextError::BadRaw(_))));
    }
}
