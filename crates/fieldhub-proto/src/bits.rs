//! The exact on-wire length of a frame (ISO 11898-1:2015): the bit stream
//! from start-of-frame to the end of intermission, with the stuff bits its
//! actual content causes, and its duration at a nominal and a data bitrate.
//!
//! - Classic frames: SOF, arbitration (base id, RTR — or SRR, IDE, id
//!   extension, RTR), control (IDE/r1, r0, DLC), data, CRC-15 over the
//!   unstuffed bits SOF..data; dynamic stuffing (a complement bit after five
//!   equal bits) from SOF to the end of the CRC sequence.
//! - CAN FD frames: SOF, arbitration (RRS in place of RTR), control (IDE,
//!   FDF, res, BRS, ESI, DLC), data; dynamic stuffing from SOF to the end of
//!   the data field; then the CRC field with fixed stuffing: a stuff-count
//!   field (4 bits: Gray-coded count mod 8 and parity) and CRC-17 (≤ 16 data
//!   bytes) or CRC-21, with a fixed stuff bit before the stuff count and after
//!   every fourth bit — so the CRC value does not change the length.
//! - Then CRC delimiter, ACK slot, ACK delimiter, 7-bit EOF and the 3-bit
//!   intermission.
//! - With BRS the data phase — from the bit after BRS (ESI) to the end of the
//!   CRC field — runs at the data bitrate; the BRS bit, the CRC delimiter and
//!   everything after it at the nominal one. (The controller switches at the
//!   sample points of BRS and of the CRC delimiter, so those two bits together
//!   really take one nominal plus one data bit time; counting both at the
//!   nominal rate overstates a BRS frame by one nominal minus one data bit.)
//! - Error frames are counted as an error flag (6), its delimiter (8) and the
//!   intermission (3): 17 nominal bits.

use crate::frame::{Frame, FrameKind};

/// Length of a frame on the wire.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct FrameBits {
    /// Every bit from SOF through the 3-bit intermission.
    pub total: u32,
    /// Stuff bits among them (dynamic and, for CAN FD, fixed).
    pub stuff_bits: u32,
    /// Bits sent at the nominal bitrate.
    pub nominal_bits: u32,
    /// Bits sent at the data bitrate (CAN FD with BRS only).
    pub data_bits: u32,
}

const CRC_DELIMITER_ACK_EOF: u32 = 1 + 1 + 1 + 7;
const INTERMISSION: u32 = 3;
const ERROR_FRAME: u32 = 6 + 8 + INTERMISSION;

impl FrameBits {
    /// The bit stream of `frame`.
    pub fn of(frame: &Frame) -> Self {
        match frame.kind() {
            FrameKind::Error => Self { total: ERROR_FRAME, stuff_bits: 0, nominal_bits: ERROR_FRAME, data_bits: 0 },
            FrameKind::Can => classic(frame),
            FrameKind::CanFd => fd(frame),
        }
    }

    /// Time on the wire in nanoseconds at `nominal` and `data` bit/s.
    pub fn duration_ns(&self, nominal: u32, data: u32) -> u64 {
        let ns = |bits: u32, rate: u32| u64::from(bits) * 1_000_000_000 / u64::from(rate.max(1));
        // One division per phase keeps the rounding error below a nanosecond each.
        ns(self.nominal_bits, nominal) + ns(self.data_bits, data)
    }
}

/// Unstuffed bits, most significant first, with the phase each belongs to.
struct Stream {
    bits: [bool; 700],
    len: usize,
}

impl Stream {
    fn new() -> Self {
        Self { bits: [false; 700], len: 0 }
    }
    fn push(&mut self, value: u32, width: u32) {
        for i in (0..width).rev() {
            self.bits[self.len] = (value >> i) & 1 == 1;
            self.len += 1;
        }
    }
    fn push_bytes(&mut self, bytes: &[u8]) {
        for &b in bytes {
            self.push(u32::from(b), 8);
        }
    }
    fn bits(&self) -> &[bool] {
        &self.bits[..self.len]
    }
}

/// Dynamic stuff bits inserted into `bits`; `count_last` says whether a stuff
/// bit due right after the last bit is part of the region (classic: yes,
/// before the CRC delimiter; CAN FD: no, the fixed stuff bit takes its place).
/// Returns the stuff bits that fall before index `split` and at/after it.
fn dynamic_stuffing(bits: &[bool], split: usize, count_last: bool) -> (u32, u32) {
    let (mut before, mut after) = (0, 0);
    let mut last = None;
    let mut run = 0;
    for (i, &bit) in bits.iter().enumerate() {
        if Some(bit) == last {
            run += 1;
        } else {
            last = Some(bit);
            run = 1;
        }
        if run == 5 && (i + 1 < bits.len() || count_last) {
            if i < split {
                before += 1;
            } else {
                after += 1;
            }
            // The stuff bit is the complement and starts a new run.
            last = Some(!bit);
            run = 1;
        }
    }
    (before, after)
}

fn crc15(bits: &[bool]) -> u32 {
    let mut crc: u32 = 0;
    for &bit in bits {
        let next = bit ^ ((crc >> 14) & 1 == 1);
        crc = (crc << 1) & 0x7FFF;
        if next {
            crc ^= 0x4599;
        }
    }
    crc
}

fn arbitration(stream: &mut Stream, frame: &Frame, rtr_or_rrs: bool) {
    stream.push(0, 1); // SOF
    if frame.is_extended() {
        stream.push(frame.id() >> 18, 11);
        stream.push(1, 1); // SRR
        stream.push(1, 1); // IDE
        stream.push(frame.id() & 0x3_FFFF, 18);
        stream.push(u32::from(rtr_or_rrs), 1);
    } else {
        stream.push(frame.id(), 11);
        stream.push(u32::from(rtr_or_rrs), 1);
        stream.push(0, 1); // IDE
    }
}

fn classic(frame: &Frame) -> FrameBits {
    let mut s = Stream::new();
    arbitration(&mut s, frame, frame.is_remote());
    if frame.is_extended() {
        s.push(0, 2); // r1, r0
    } else {
        s.push(0, 1); // r0
    }
    s.push(u32::from(frame.dlc()), 4);
    s.push_bytes(frame.data());
    let crc = crc15(s.bits());
    s.push(crc, 15);
    let (stuff, _) = dynamic_stuffing(s.bits(), s.len, true);
    let total = s.len as u32 + stuff + CRC_DELIMITER_ACK_EOF + INTERMISSION;
    FrameBits { total, stuff_bits: stuff, nominal_bits: total, data_bits: 0 }
}

fn fd(frame: &Frame) -> FrameBits {
    let brs = frame.flags().contains(crate::FrameFlags::BRS);
    let mut s = Stream::new();
    arbitration(&mut s, frame, false);
    if frame.is_extended() {
        s.push(1, 1); // FDF after RRS (IDE was sent in the arbitration field)
    } else {
        s.push(1, 1); // FDF (the r0 position of classic frames)
    }
    s.push(0, 1); // res
    s.push(u32::from(brs), 1);
    let data_phase_from = s.len; // ESI is the first data-phase bit
    s.push(u32::from(frame.flags().contains(crate::FrameFlags::ESI)), 1);
    s.push(u32::from(frame.dlc()), 4);
    s.push_bytes(frame.data());
    let (stuff_arbitration, stuff_data) = dynamic_stuffing(s.bits(), data_phase_from, false);
    let crc_len: u32 = if frame.len() <= 16 { 17 } else { 21 };
    let crc_field = 4 + crc_len;
    // A fixed stuff bit before the stuff count and after every fourth bit.
    let fixed = 1 + (crc_field - 1) / 4;
    let arbitration_bits = data_phase_from as u32 + stuff_arbitration;
    let data_phase_bits = (s.len - data_phase_from) as u32 + stuff_data + crc_field + fixed;
    let tail = CRC_DELIMITER_ACK_EOF + INTERMISSION;
    let total = arbitration_bits + data_phase_bits + tail;
    let stuff_bits = stuff_arbitration + stuff_data + fixed;
    if brs {
        FrameBits { total, stuff_bits, nominal_bits: arbitration_bits + tail, data_bits: data_phase_bits }
    } else {
        FrameBits { total, stuff_bits, nominal_bits: total, data_bits: 0 }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::text::parse_cansend;

    fn bits(text: &str) -> FrameBits {
        FrameBits::of(&parse_cansend(text).unwrap())
    }

    #[test]
    fn stuffing_inserts_after_five_equal_bits_and_the_stuff_bit_starts_a_new_run() {
        let ones = [true; 5];
        assert_eq!(dynamic_stuffing(&ones, 5, true), (1, 0));
        assert_eq!(dynamic_stuffing(&ones, 5, false), (0, 0), "a stuff bit due after the region is not counted");
        // 5 ones, stuff 0, then 4 zeros make five zeros with the stuff bit.
        let mixed = [true, true, true, true, true, false, false, false, false, true];
        assert_eq!(dynamic_stuffing(&mixed, 10, true), (2, 0));
        assert_eq!(dynamic_stuffing(&[true; 10], 10, true), (2, 0));
        assert_eq!(dynamic_stuffing(&[true; 9], 10, true), (1, 0));
        assert_eq!(dynamic_stuffing(&[true; 8], 10, true), (1, 0));
    }

    #[test]
    fn crc15_of_a_known_frame() {
        // SOF, id 0x001, RTR 0, IDE 0, r0 0, DLC 0: the CRC-15 the CAN
        // polynomial 0x4599 gives over these 19 bits.
        let mut s = Stream::new();
        s.push(0, 1);
        s.push(1, 11);
        s.push(0, 3);
        s.push(0, 4);
        let crc = crc15(s.bits());
        // Appending the CRC makes the remainder of the whole sequence zero.
        s.push(crc, 15);
        assert_eq!(crc15(s.bits()), 0);
    }

    #[test]
    fn a_frame_without_stuff_bits_is_44_plus_8n_bits_plus_intermission() {
        // 0-byte frames always stuff (RTR, IDE, r0 and DLC 0000 are seven
        // dominant bits); 8-byte frames with DLC 1000 need not.
        let found = (0..=0x7FF)
            .flat_map(|id| [0x55u8, 0xAA, 0x5A].map(|b| Frame::can(id, false, &[b; 8]).unwrap()))
            .find(|f| FrameBits::of(f).stuff_bits == 0);
        let frame = found.expect("some 8-byte frame stuffs nothing");
        assert_eq!(FrameBits::of(&frame).total, 44 + 64 + 3, "{frame:?}");
    }

    #[test]
    fn the_reachable_worst_cases_are_133_and_158_bits() {
        // Frames an exhaustive search found to stuff the most: below the
        // published bounds of 135 (standard) and 160 (extended) bits.
        assert_eq!(bits("000#01E1E1E1E1E1E1E1").total, 133);
        assert_eq!(bits("03E#01E00F83C3FE1E1E").stuff_bits, 22);
        assert_eq!(bits("000C3C3C#3C3C3FFF0F0F0F0F").total, 158);
    }

    #[test]
    fn eight_byte_standard_frames_never_exceed_the_published_worst_case() {
        let mut x: u64 = 0x1234_5678_9ABC_DEF0;
        let mut longest = 0;
        for _ in 0..200_000 {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            let data = x.to_le_bytes();
            let id = (x >> 40) as u32 & 0x7FF;
            longest = longest.max(FrameBits::of(&Frame::can(id, false, &data).unwrap()).total);
        }
        for pattern in [0x00u8, 0xFF, 0x0F, 0xF0, 0x3C, 0x78] {
            for id in [0x000, 0x7FF, 0x555, 0x0F0] {
                longest = longest.max(FrameBits::of(&Frame::can(id, false, &[pattern; 8]).unwrap()).total);
            }
        }
        assert!(longest <= 135, "{longest} bits");
        assert!(longest >= 125, "stuffing happens: {longest}");
    }

    #[test]
    fn fd_lengths_follow_the_crc_field_rules() {
        let short = bits("123##0");
        // SOF 1 + id 11 + RRS, IDE, FDF, res, BRS 5 + ESI 1 + DLC 4 = 22 (+ dynamic stuffing),
        // CRC field 4 + 17 + 6 fixed, then 10 + 3.
        assert_eq!(short.total - short.stuff_bits + 6, 22 + 21 + 6 + 13);
        let long = bits("123##0".to_owned().as_str().replace("##0", &format!("##0{}", "AA".repeat(64))).as_str());
        assert_eq!(long.total - long.stuff_bits, 22 + 512 + 25 + 13, "CRC-21 above 16 bytes");
    }

    #[test]
    fn brs_moves_the_data_phase_to_the_data_bitrate() {
        let slow = bits("123##0DEADBEEF");
        let fast = bits("123##1DEADBEEF");
        assert_eq!(slow.total, fast.total);
        assert_eq!(fast.nominal_bits + fast.data_bits, fast.total);
        assert!(fast.duration_ns(500_000, 2_000_000) < slow.duration_ns(500_000, 2_000_000));
        assert_eq!(slow.duration_ns(500_000, 2_000_000), u64::from(slow.total) * 2_000);
    }
}
