//! LIN 2.x frame arithmetic (LIN Specification Package 2.2A, ISO 17987):
//! the protected identifier, the classic and enhanced checksums, and a
//! frame's exact time on the wire.
//!
//! - Protected identifier (spec 2.3.1.3): the 6-bit frame identifier in bits
//!   0..=5 and two parity bits, P0 = ID0 ⊕ ID1 ⊕ ID2 ⊕ ID4 (bit 6) and
//!   P1 = ¬(ID1 ⊕ ID3 ⊕ ID4 ⊕ ID5) (bit 7). Of the 256 byte values exactly 64
//!   are valid, one per identifier.
//! - Checksum (spec 2.3.1.5): the inverted eight-bit sum with carry — each
//!   carry out of bit 7 is added back in — over the data bytes (classic) or
//!   the protected identifier and the data bytes (enhanced). LIN 2.x frames
//!   use the enhanced checksum except the diagnostic frames 0x3C and 0x3D,
//!   and 0x3E/0x3F (reserved), which keep the classic one
//!   ([`Checksum::lin2_for`]).
//! - Frame time (spec 2.3.2 and 2.4): every field is a byte of 10 bits (start
//!   bit, 8 data bits, stop bit) except the break: the header is the break
//!   (at least 13 dominant bits), the break delimiter (at least 1 recessive
//!   bit), the sync byte (0x55) and the protected identifier, so 34 bits
//!   nominal; the response is the data bytes and the checksum, 10 × (n + 1)
//!   bits, preceded by the response space and with an inter-byte space
//!   before each byte after the first. The nominal frame has no spaces and
//!   the shortest break and delimiter: 34 + 10 × (n + 1) bits; a frame may
//!   take up to 1.4 times that (`T_Frame_Maximum`, spec 2.4), the time a
//!   master's schedule must give each slot.
//! - The frame record (spec/protocol.md 4.1, kind `lin`): the 6-bit
//!   identifier in `id`, the data bytes, the checksum byte in the record's
//!   `len8_dlc` field and the checksum model in flag `CLASSIC`; a header no
//!   slave answered is a record with flag `NO_RESPONSE` and no data, a
//!   response whose checksum byte is wrong carries `CHECKSUM_ERROR`, and
//!   what the bus read when slaves' responses to an event-triggered header
//!   collided carries `COLLISION` ([`crate::Frame::lin_collision`]). A
//!   slave's standing response — it answers every header of its identifier
//!   until replaced — carries `STANDING`, and so does its withdrawal, a
//!   record without data ([`crate::Frame::lin_withdraw`]). A wake-up pulse
//!   carries `WAKE_UP` and nothing else ([`crate::Frame::lin_wake_up`]).
//!   [`check_record`] is the rule a decoder applies.
//! - Sleep and wake-up (LIN 2.1 §2.6.2–2.6.3, as Vector's LIN network
//!   management page and elektroniknet's LIN 2.1 summary state them): the
//!   go-to-sleep command is the master request frame 0x3C whose first data
//!   byte is 0 and whose other seven are 0xFF ([`GO_TO_SLEEP`]); a wake-up is
//!   a dominant pulse of 250 µs to 5 ms, which the character 0xF0 makes at
//!   every LIN bitrate — its start bit and four low data bits, 5 bit times:
//!   250 µs at 20 kbit/s, 5 ms at 1 kbit/s ([`WAKE_UP_BITS`]).

use thiserror::Error;

use crate::frame::FrameFlags;

/// The highest frame identifier (6 bits).
pub const MAX_ID: u8 = 0x3F;
/// Most data bytes in a LIN frame.
pub const MAX_DATA: usize = 8;
/// The slowest and fastest bitrate LIN 2.x allows (bit/s).
pub const MIN_BITRATE: u32 = 1_000;
pub const MAX_BITRATE: u32 = 20_000;

/// The master request frame's identifier, which carries the go-to-sleep
/// command.
pub const MASTER_REQUEST: u8 = 0x3C;
/// The go-to-sleep command's data bytes (LIN 2.x: NAD 0, then 0xFF).
pub const GO_TO_SLEEP: [u8; 8] = [0x00, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF];
/// A wake-up pulse's dominant bit times: the character 0xF0 sent LSB first
/// is its start bit and four 0 data bits, so the pulse lasts 250 µs at
/// 20 kbit/s and 5 ms at 1 kbit/s — LIN 2.x's 250 µs to 5 ms at every bitrate.
pub const WAKE_UP_BITS: u32 = 5;

/// Bits of one byte field on the wire: start, 8 data, stop.
const BYTE_BITS: u32 = 10;

/// A value that is not a LIN identifier, protected identifier or frame.
#[derive(Clone, Copy, Debug, Error, PartialEq, Eq)]
pub enum LinError {
    #[error("LIN frame identifier 0x{0:02X} is over 0x3F (6 bits)")]
    IdOutOfRange(u32),
    #[error("0x{0:02X} is not a protected identifier: its parity bits should make it 0x{1:02X}")]
    Parity(u8, u8),
    #[error("a LIN frame carries 1 to 8 data bytes, not {0}")]
    DataLength(usize),
    #[error("{0} bit/s is not a LIN bitrate (1000..=20000)")]
    Bitrate(u32),
    #[error("a LIN break is at least 13 bits and its delimiter at least 1, not {0} and {1}")]
    Break(u32, u32),
    #[error("the LIN frame's checksum byte is 0x{given:02X}, its checksum model gives 0x{expected:02X} (set CHECKSUM_ERROR to send a wrong one on purpose)")]
    Checksum { given: u8, expected: u8 },
    #[error("a LIN frame flagged CHECKSUM_ERROR carries 0x{0:02X}, which is its right checksum")]
    ChecksumNotWrong(u8),
    #[error("a LIN NO_RESPONSE record is a header alone: no data, checksum 0, no other flag")]
    NoResponseShape,
    #[error("a LIN COLLISION record is what the bus read: 1 to 8 data bytes, no other flag")]
    CollisionShape,
    #[error("a LIN STANDING record is a response (1 to 8 data bytes, CLASSIC or CHECKSUM_ERROR at most) or, with no data, checksum 0 and no other flag, a withdrawal; it is never a header alone, a collision or an echo")]
    StandingShape,
    #[error("a LIN WAKE_UP record is a wake-up pulse: identifier 0, no data, checksum 0, no other flag but ECHO")]
    WakeUpShape,
    #[error("flag bits 0x{0:02X} are not LIN flags (CLASSIC 0x01, NO_RESPONSE 0x02, CHECKSUM_ERROR 0x04, COLLISION 0x08, ECHO 0x10, STANDING 0x20, WAKE_UP 0x40)")]
    Flags(u8),
}

/// The flags a `lin` record may carry.
const RECORD_FLAGS: FrameFlags = FrameFlags::LIN_CLASSIC
    .union(FrameFlags::LIN_NO_RESPONSE)
    .union(FrameFlags::LIN_CHECKSUM_ERROR)
    .union(FrameFlags::LIN_COLLISION)
    .union(FrameFlags::ECHO)
    .union(FrameFlags::LIN_STANDING)
    .union(FrameFlags::LIN_WAKE_UP);

/// The checksum model a record's flags name.
pub fn model_of(flags: FrameFlags) -> Checksum {
    if flags.contains(FrameFlags::LIN_CLASSIC) {
        Checksum::Classic
    } else {
        Checksum::Enhanced
    }
}

/// Whether the fields of a `lin` record make a valid LIN frame (spec 4.3):
/// identifier 0..=0x3F; a response of 1..=8 bytes whose `checksum` byte is
/// the one its model gives (or, with `CHECKSUM_ERROR`, is not); a
/// `NO_RESPONSE` header alone; a `COLLISION` of 1..=8 bytes; or with
/// `STANDING` a standing response, or its withdrawal (no data, checksum 0);
/// with `WAKE_UP` a wake-up pulse (identifier 0, no data, checksum 0).
pub fn check_record(flags: FrameFlags, id: u32, len: usize, checksum: u8, data: &[u8]) -> Result<(), LinError> {
    if !RECORD_FLAGS.contains(flags) {
        return Err(LinError::Flags(flags.difference(RECORD_FLAGS).bits()));
    }
    let id = u8::try_from(id).ok().filter(|&id| id <= MAX_ID).ok_or(LinError::IdOutOfRange(id))?;
    if flags.contains(FrameFlags::LIN_WAKE_UP) {
        let only = flags.difference(FrameFlags::ECHO) == FrameFlags::LIN_WAKE_UP;
        if !only || id != 0 || len != 0 || !data.is_empty() || checksum != 0 {
            return Err(LinError::WakeUpShape);
        }
        return Ok(());
    }
    if flags.contains(FrameFlags::LIN_STANDING) {
        // A client's request, never something the bus carried.
        let hub_only = FrameFlags::LIN_NO_RESPONSE | FrameFlags::LIN_COLLISION | FrameFlags::ECHO;
        let withdrawal = len == 0 && data.is_empty() && checksum == 0 && flags == FrameFlags::LIN_STANDING;
        if flags.intersects(hub_only) || (len == 0 && !withdrawal) {
            return Err(LinError::StandingShape);
        }
        if withdrawal {
            return Ok(());
        }
    }
    if flags.contains(FrameFlags::LIN_NO_RESPONSE) {
        let only = flags.difference(FrameFlags::ECHO) == FrameFlags::LIN_NO_RESPONSE;
        if !only || len != 0 || !data.is_empty() || checksum != 0 {
            return Err(LinError::NoResponseShape);
        }
        return Ok(());
    }
    if flags.contains(FrameFlags::LIN_COLLISION) {
        // Any checksum byte: the wired-AND of the colliding responses'.
        let only = flags.difference(FrameFlags::ECHO) == FrameFlags::LIN_COLLISION;
        if !only || !(1..=MAX_DATA).contains(&len) || data.len() != len {
            return Err(LinError::CollisionShape);
        }
        return Ok(());
    }
    if !(1..=MAX_DATA).contains(&len) || data.len() != len {
        return Err(LinError::DataLength(len));
    }
    let expected = model_of(flags).of(protected_id(id)?, data);
    match (flags.contains(FrameFlags::LIN_CHECKSUM_ERROR), checksum == expected) {
        (false, false) => Err(LinError::Checksum { given: checksum, expected }),
        (true, true) => Err(LinError::ChecksumNotWrong(checksum)),
        _ => Ok(()),
    }
}

/// The protected identifier of frame identifier `id` (0..=0x3F).
pub fn protected_id(id: u8) -> Result<u8, LinError> {
    if id > MAX_ID {
        return Err(LinError::IdOutOfRange(u32::from(id)));
    }
    let bit = |n: u8| (id >> n) & 1;
    let p0 = bit(0) ^ bit(1) ^ bit(2) ^ bit(4);
    let p1 = (bit(1) ^ bit(3) ^ bit(4) ^ bit(5)) ^ 1;
    Ok(id | p0 << 6 | p1 << 7)
}

/// The frame identifier of protected identifier `pid`, if its parity bits
/// are right.
pub fn id_of(pid: u8) -> Result<u8, LinError> {
    let id = pid & MAX_ID;
    let expected = protected_id(id)?;
    if pid == expected {
        Ok(id)
    } else {
        Err(LinError::Parity(pid, expected))
    }
}

/// Which bytes a checksum covers.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Checksum {
    /// The data bytes only (LIN 1.x, and the diagnostic frames of LIN 2.x).
    Classic,
    /// The protected identifier and the data bytes (LIN 2.x).
    Enhanced,
}

impl Checksum {
    /// The checksum a LIN 2.x frame with identifier `id` uses: classic for
    /// the diagnostic and reserved identifiers 0x3C..=0x3F, else enhanced.
    pub fn lin2_for(id: u8) -> Self {
        if id >= 0x3C {
            Self::Classic
        } else {
            Self::Enhanced
        }
    }

    /// The checksum byte of a frame with protected identifier `pid` and
    /// `data`: the inverted sum with carry.
    pub fn of(self, pid: u8, data: &[u8]) -> u8 {
        let first = match self {
            Self::Classic => 0,
            Self::Enhanced => u16::from(pid),
        };
        let sum = data.iter().fold(first, |sum, &byte| {
            let sum = sum + u16::from(byte);
            // The carry out of bit 7 is added back in.
            (sum & 0xFF) + (sum >> 8)
        });
        !(sum as u8)
    }
}

/// The bit-level shape of a LIN frame on one channel: break and delimiter
/// lengths and the spaces a slave leaves, in bit times.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct FrameShape {
    /// Dominant bits of the break (at least 13).
    pub break_bits: u32,
    /// Recessive bits of the break delimiter (at least 1).
    pub delimiter_bits: u32,
    /// Idle bits between the header and the response.
    pub response_space_bits: u32,
    /// Idle bits before each response byte after the first.
    pub inter_byte_bits: u32,
}

impl Default for FrameShape {
    /// The nominal frame: the shortest break and delimiter, no spaces.
    fn default() -> Self {
        Self { break_bits: 13, delimiter_bits: 1, response_space_bits: 0, inter_byte_bits: 0 }
    }
}

impl FrameShape {
    /// Check the break against the spec's minimums.
    pub fn check(&self) -> Result<(), LinError> {
        if self.break_bits < 13 || self.delimiter_bits < 1 {
            return Err(LinError::Break(self.break_bits, self.delimiter_bits));
        }
        Ok(())
    }

    /// Bits of the header: break, delimiter, sync byte and protected identifier.
    pub fn header_bits(&self) -> u32 {
        self.break_bits + self.delimiter_bits + 2 * BYTE_BITS
    }

    /// Bits of the response to a header, from the header's end: the response
    /// space, `len` data bytes and the checksum, with the inter-byte spaces.
    pub fn response_bits(&self, len: usize) -> Result<u32, LinError> {
        if !(1..=MAX_DATA).contains(&len) {
            return Err(LinError::DataLength(len));
        }
        let bytes = len as u32 + 1;
        Ok(self.response_space_bits + bytes * BYTE_BITS + (bytes - 1) * self.inter_byte_bits)
    }

    /// Bits of a whole frame with `len` data bytes.
    pub fn frame_bits(&self, len: usize) -> Result<u32, LinError> {
        Ok(self.header_bits() + self.response_bits(len)?)
    }
}

/// The duration in nanoseconds of `bits` at `bitrate` (rounded down).
pub fn duration_ns(bits: u32, bitrate: u32) -> Result<u64, LinError> {
    if !(MIN_BITRATE..=MAX_BITRATE).contains(&bitrate) {
        return Err(LinError::Bitrate(bitrate));
    }
    Ok(u64::from(bits) * 1_000_000_000 / u64::from(bitrate))
}

/// `T_Frame_Maximum` of a frame with `len` data bytes at `bitrate`, in
/// nanoseconds (rounded down): 1.4 × its nominal time, the least a
/// schedule table's slot for it may last (spec 2.4).
pub fn max_frame_ns(len: usize, bitrate: u32) -> Result<u64, LinError> {
    let nominal = FrameShape::default().frame_bits(len)?;
    Ok(duration_ns(nominal * 14, bitrate)? / 10)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn protected_identifiers_match_the_spec_table_and_only_64_bytes_are_valid() {
        // LIN 2.x, "Table of valid frame identifiers" (appendix).
        let table = [
            (0x00, 0x80),
            (0x01, 0xC1),
            (0x02, 0x42),
            (0x03, 0x03),
            (0x10, 0x50),
            (0x3C, 0x3C),
            (0x3D, 0x7D),
            (0x3E, 0xFE),
            (0x3F, 0xBF),
        ];
        for (id, pid) in table {
            assert_eq!(protected_id(id), Ok(pid), "id 0x{id:02X}");
            assert_eq!(id_of(pid), Ok(id), "pid 0x{pid:02X}");
        }
        let valid: Vec<u8> = (0..=255u8).filter(|&b| id_of(b).is_ok()).collect();
        assert_eq!(valid.len(), 64);
        assert!((0..=MAX_ID).all(|id| id_of(protected_id(id).unwrap()) == Ok(id)));
        assert_eq!(id_of(0x00), Err(LinError::Parity(0x00, 0x80)));
        assert_eq!(protected_id(0x40), Err(LinError::IdOutOfRange(0x40)));
    }

    #[test]
    fn checksums_match_the_spec_example_and_enhanced_adds_the_protected_identifier() {
        // LIN 2.x 2.3.1.5: 0x4A, 0x55, 0x93, 0xE5 sum with carry to 0x19,
        // inverted 0xE6.
        let data = [0x4A, 0x55, 0x93, 0xE5];
        assert_eq!(Checksum::Classic.of(0x50, &data), 0xE6);
        // The same bytes after PID 0x50 (id 0x10): 0x50 + 0x4A + … = 0x69 with
        // the carries, inverted 0x96.
        assert_eq!(Checksum::Enhanced.of(0x50, &data), 0x96);
        // The receiver's check: the sum with carry of everything and the
        // checksum is 0xFF.
        let mut all = vec![0x50];
        all.extend_from_slice(&data);
        all.push(0x96);
        assert_eq!(Checksum::Classic.of(0, &all), 0x00);
        assert_eq!(Checksum::lin2_for(0x3C), Checksum::Classic);
        assert_eq!(Checksum::lin2_for(0x3B), Checksum::Enhanced);
    }

    #[test]
    fn frame_times_are_exact_at_19200_and_other_rates() {
        let nominal = FrameShape::default();
        assert_eq!(nominal.header_bits(), 34);
        // 8 data bytes: 34 + 90 = 124 bits; at 19.2 kbit/s 6.458333 ms.
        assert_eq!(nominal.frame_bits(8), Ok(124));
        assert_eq!(duration_ns(124, 19_200), Ok(6_458_333));
        assert_eq!(duration_ns(nominal.frame_bits(2).unwrap(), 19_200), Ok(3_333_333), "64 bits");
        assert_eq!(duration_ns(nominal.frame_bits(1).unwrap(), 10_400), Ok(5_192_307), "54 bits");
        assert_eq!(duration_ns(nominal.frame_bits(4).unwrap(), 9_600), Ok(8_750_000), "84 bits");
        // T_Frame_Maximum = 1.4 × nominal: 173.6 bits for 8 bytes.
        assert_eq!(max_frame_ns(8, 19_200), Ok(9_041_666));
        // A slave's response space and inter-byte spaces, a long break.
        let slow = FrameShape { break_bits: 15, delimiter_bits: 2, response_space_bits: 5, inter_byte_bits: 1 };
        assert_eq!(slow.header_bits(), 37);
        assert_eq!(slow.response_bits(2), Ok(5 + 30 + 2));
        assert_eq!(slow.frame_bits(2), Ok(74));
    }

    #[test]
    fn impossible_shapes_lengths_and_rates_are_refused_by_name() {
        assert_eq!(FrameShape { break_bits: 12, ..FrameShape::default() }.check(), Err(LinError::Break(12, 1)));
        assert_eq!(FrameShape::default().frame_bits(0), Err(LinError::DataLength(0)));
        assert_eq!(FrameShape::default().frame_bits(9), Err(LinError::DataLength(9)));
        assert_eq!(duration_ns(34, 500_000), Err(LinError::Bitrate(500_000)));
        let text = id_of(0x01).unwrap_err().to_string();
        assert_eq!(text, "0x01 is not a protected identifier: its parity bits should make it 0xC1");
    }
}

#[cfg(test)]
mod sleep_tests {
    use super::*;
    use crate::bits::FrameBits;
    use crate::Frame;

    #[test]
    fn a_wake_up_pulse_lasts_250_us_to_5_ms_at_every_lin_bitrate() {
        let pulse = Frame::lin_wake_up();
        assert!(pulse.is_lin_wake_up() && pulse.is_empty() && pulse.id() == 0);
        let ns = |rate| FrameBits::of(&pulse).duration_ns(rate, rate);
        assert_eq!(FrameBits::of(&pulse).total, WAKE_UP_BITS);
        assert_eq!(ns(MAX_BITRATE), 250_000);
        assert_eq!(ns(MIN_BITRATE), 5_000_000);
        assert_eq!(ns(19_200), 260_416);
        assert!((MIN_BITRATE..=MAX_BITRATE).step_by(100).all(|rate| (250_000..=5_000_000).contains(&ns(rate))));
    }

    #[test]
    fn the_go_to_sleep_command_is_master_request_0x3c_with_nad_0_and_classic_checksum() {
        let sleep = Frame::lin_go_to_sleep();
        assert_eq!((sleep.id(), sleep.data()), (0x3C, &GO_TO_SLEEP[..]));
        assert!(sleep.flags().contains(FrameFlags::LIN_CLASSIC) && sleep.is_lin_go_to_sleep());
        // Classic checksum over 00 and seven FF: 7 × 0xFF with carries is
        // 0xFF, inverted 0x00.
        assert_eq!(sleep.len8_dlc(), 0x00);
        assert_eq!(Frame::lin(0x3C, Checksum::Classic, &GO_TO_SLEEP).unwrap(), sleep);
        assert!(!Frame::lin(0x3C, Checksum::Classic, &[0x01, 0xFF]).unwrap().is_lin_go_to_sleep());
        assert!(!Frame::lin(0x3D, Checksum::Classic, &GO_TO_SLEEP).unwrap().is_lin_go_to_sleep());
        // 124 bits: 6.458333 ms at 19.2 kbit/s.
        assert_eq!(FrameBits::of(&sleep).duration_ns(19_200, 19_200), 6_458_333);
    }

    #[test]
    fn a_wake_up_record_with_anything_but_its_flag_is_refused_by_name() {
        let wake = FrameFlags::LIN_WAKE_UP;
        assert_eq!(check_record(wake, 0, 0, 0, &[]), Ok(()));
        assert_eq!(check_record(wake | FrameFlags::ECHO, 0, 0, 0, &[]), Ok(()));
        assert_eq!(check_record(wake, 0x10, 0, 0, &[]), Err(LinError::WakeUpShape));
        assert_eq!(check_record(wake, 0, 1, 0, &[1]), Err(LinError::WakeUpShape));
        assert_eq!(check_record(wake, 0, 0, 7, &[]), Err(LinError::WakeUpShape));
        assert_eq!(check_record(wake | FrameFlags::LIN_STANDING, 0, 0, 0, &[]), Err(LinError::WakeUpShape));
        assert!(LinError::WakeUpShape.to_string().contains("wake-up pulse"));
        assert!(LinError::Flags(0x80).to_string().contains("WAKE_UP 0x40"));
        let can = Frame::from_parts(crate::FrameKind::Can, wake, 0x10, 0, 0, 0, &[]);
        assert!(can.unwrap_err().to_string().contains("wake_up"));
    }
}
