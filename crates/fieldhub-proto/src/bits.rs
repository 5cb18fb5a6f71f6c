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
//! - LIN frames are [`crate::lin`]'s nominal frame — break, delimiter, sync,
//!   protected identifier, data and checksum bytes of 10 bits, no spaces —
//!   all at the nominal rate; a header no slave answered is the header's 34,
//!   a wake-up pulse its 5 dominant bits (`lin::WAKE_UP_BITS`).
//! - CAN XL frames (`xl`, ISO 11898-1:2024, the layout and its public
//!   sources in that module): the arbitration phase (SOF through ADH, with
//!   dynamic stuffing up to XLF) and the tail from DAH on at the nominal
//!   rate; DH1 through the format check pattern, with a fixed stuff bit
//!   after every tenth bit, at the XL data rate — `data_bits` are XL-rate
//!   bits, and [`FrameBits::duration_ns`] takes the XL data bitrate as its
//!   `data` rate for them.
//! - Raw frames have no protocol of their own: [`FrameBits::of`] gives the
//!   default [`RawShape`] (8 bits per byte, no overhead), a channel its own.

mod xl;

use crate::frame::{Frame, FrameKind};
pub use xl::RawShape;

/// Length of a frame on the wire.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct FrameBits {
    /// Every bit from SOF through the 3-bit intermission.
    pub total: u32,
    /// Stuff bits among them (dynamic and, for CAN FD and CAN XL, fixed).
    pub stuff_bits: u32,
    /// Bits sent at the nominal bitrate.
    pub nominal_bits: u32,
    /// Bits sent at the data bitrate: CAN FD with BRS at the FD data
    /// bitrate, CAN XL's data phase at the XL data bitrate.
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
            FrameKind::Lin => {
                let shape = crate::lin::FrameShape::default();
                let total = match frame.len() {
                    _ if frame.is_lin_wake_up() => crate::lin::WAKE_UP_BITS,
                    0 => shape.header_bits(),
                    len => shape.frame_bits(len).unwrap_or(shape.header_bits()),
                };
                Self { total, stuff_bits: 0, nominal_bits: total, data_bits: 0 }
            }
            FrameKind::CanXl => xl::xl(frame),
            FrameKind::Raw => RawShape::default().bits(frame.len()),
        }
    }

    /// Time on the wire in nanoseconds at `nominal` and `data` bit/s (for
    /// a CAN XL frame `data` is the XL data bitrate).
    pub fn duration_ns(&self, nominal: u32, data: u32) -> u64 {
        let ns = |bits: u32, rate: u32| u64::from(bits) * 1_000_000_000 / u64::from(rate.max(1));
        // One division per phase keeps the rounding error below a nanosecond each.
        ns(self.nominal_bits, nominal) + ns(self.data_bits, data)
    }
}

/// The stuffing state between two bits: the value of the run so far (bit
/// 2) and its length less one (bits 0–1, a run of 1..=4).
type StuffState = u8;
const STATES: usize = 8;

/// One bit through the stuffing rule: the new state and whether a stuff bit
/// follows this bit (a complement after five equal bits, which starts a new
/// run of its own).
const fn stuff_step(state: StuffState, bit: bool) -> (StuffState, bool) {
    let (last, run) = (state >= 4, state % 4 + 1);
    let run = if bit == last { run + 1 } else { 1 };
    if run == 5 {
        ((!bit as u8) * 4, true)
    } else {
        ((bit as u8) * 4 + run - 1, false)
    }
}

/// Bits per state in a [`STUFF_TABLE`] entry: the stuff bits the chunk
/// causes (bits 0–1: at most two in eight bits), whether one follows its
/// last bit (bit 2) and the next state (bits 3–5). The next state sits
/// where `state * FIELD_BITS` — the shift of that state's field — can be
/// masked out directly.
const FIELD_BITS: u32 = 8;
const FIELD_STATE: u64 = 0x38;

/// A chunk of 1..=8 bits through the stuffing rule, for every state at once:
/// `STUFF_TABLE[width - 1][chunk]` holds each state's outcome in its own
/// [`FIELD_BITS`]-bit field. The look-up does not depend on the state, so
/// the processor loads the entries of a whole frame ahead; what chains from
/// chunk to chunk is only a shift and a mask (two cycles a chunk: a state
/// kept as a number to multiply into the shift made it four, most of
/// [`FrameBits::of`]'s time in perf).
const STUFF_TABLE: [[u64; 256]; 8] = {
    let mut table = [[0u64; 256]; 8];
    let mut width = 1;
    while width <= 8 {
        let mut chunk = 0;
        while chunk < (1 << width) {
            let mut entry = 0u64;
            let mut state = 0;
            while state < STATES {
                let (mut s, mut count, mut ends) = (state as u8, 0u64, false);
                let mut i = 0;
                while i < width {
                    let (next, stuffed) = stuff_step(s, (chunk >> (width - 1 - i)) & 1 == 1);
                    s = next;
                    count += stuffed as u64;
                    ends = stuffed;
                    i += 1;
                }
                let field = count | (ends as u64) << 2 | (s as u64) << 3;
                entry |= field << (FIELD_BITS as usize * state);
                state += 1;
            }
            table[width - 1][chunk] = entry;
            chunk += 1;
        }
        width += 1;
    }
    table
};

/// Dynamic stuffing over a bit stream fed in order from its first bit.
struct Stuffer {
    /// The state times [`FIELD_BITS`]: the shift of its field.
    shift: u32,
    /// Stuff bits so far, one due right after the last bit fed included.
    count: u32,
    /// A stuff bit is due right after the last bit fed.
    ends: bool,
}

impl Stuffer {
    /// Before a stream whose first bit is `first`. Nothing is stuffed
    /// before a stream starts, and a run of one opposite bit behaves the
    /// same on that first bit — a new run of 1 — so the state before it is
    /// one of the eight, with no ninth to widen the table's entries.
    fn before(first: bool) -> Self {
        Self { shift: u32::from(!first) * 4 * FIELD_BITS, count: 0, ends: false }
    }

    /// Before a frame: its first bit is the dominant start-of-frame.
    fn before_sof() -> Self {
        Self::before(false)
    }

    /// Feed the low `width` (1..=8) bits of `chunk`, the first in the most
    /// significant place.
    #[inline(always)]
    fn chunk(&mut self, chunk: u32, width: u32) {
        let entry = STUFF_TABLE[width as usize - 1][(chunk & ((1 << width) - 1)) as usize];
        let field = entry >> self.shift;
        self.shift = (field & FIELD_STATE) as u32;
        self.count += field as u32 & 3;
        self.ends = field & 4 != 0;
    }

    /// Feed the low `width` (≤ 64) bits of `bits`, most significant first:
    /// the odd bits as one short chunk, then whole bytes.
    #[inline(always)]
    fn bits(&mut self, bits: u64, width: u32) {
        let mut left = width;
        if left % 8 != 0 {
            left -= left % 8;
            self.chunk((bits >> left) as u32, width % 8);
        }
        while left > 0 {
            left -= 8;
            self.chunk((bits >> left) as u32, 8);
        }
    }

    fn bytes(&mut self, bytes: &[u8]) {
        for &byte in bytes {
            self.chunk(u32::from(byte), 8);
        }
    }
}

/// CRC-15/CAN (polynomial 0x4599, initial value 0) of one byte.
const fn crc15_byte(crc: u32, byte: u8) -> u32 {
    let mut crc = crc ^ ((byte as u32) << 7);
    let mut i = 0;
    while i < 8 {
        crc = if crc & 0x4000 != 0 { (crc << 1) ^ 0x4599 } else { crc << 1 } & 0x7FFF;
        i += 1;
    }
    crc
}

/// Bytes of a classic frame's CRC input: at most 5 of header (39 bits with
/// an extended id) and 8 of data.
const CRC_BYTES: usize = 13;

/// The CRC is linear and starts at 0, so a message's CRC is the XOR of each
/// byte's contribution at its distance from the end:
/// `CRC15_AT[k][b]` is the CRC-15 of byte `b` followed by `8k` zero bits.
/// The look-ups of a frame are independent of each other — no chain of
/// table reads through the CRC register — and leading zero bits (the
/// dominant SOF, an unaligned first byte) change nothing.
const CRC15_AT: [[u16; 256]; CRC_BYTES] = {
    let mut table = [[0u16; 256]; CRC_BYTES];
    let mut byte = 0;
    while byte < 256 {
        let mut crc = crc15_byte(0, byte as u8);
        let mut k = 0;
        while k < CRC_BYTES {
            table[k][byte] = crc as u16;
            crc = crc15_byte(crc, 0);
            k += 1;
        }
        byte += 1;
    }
    table
};

/// CRC-15 of the `header_bits` low bits of `header` followed by `data`.
fn crc15(header: u64, header_bits: u32, data: &[u8]) -> u32 {
    let mut crc = 0u32;
    for (i, &byte) in data.iter().enumerate() {
        crc ^= u32::from(CRC15_AT[data.len() - 1 - i][byte as usize]);
    }
    for k in 0..header_bits.div_ceil(8) as usize {
        crc ^= u32::from(CRC15_AT[data.len() + k][(header >> (8 * k)) as u8 as usize]);
    }
    crc
}

/// A frame's leading fields, most significant first, in one word (at most
/// 41 bits: an extended CAN FD header through its DLC).
#[derive(Default)]
struct Header {
    bits: u64,
    len: u32,
}

impl Header {
    #[inline(always)]
    fn push(&mut self, value: u32, width: u32) {
        self.bits = (self.bits << width) | u64::from(value) & ((1u64 << width) - 1);
        self.len += width;
    }
}

/// SOF and the arbitration field (RTR, or RRS for CAN FD, last).
fn arbitration(frame: &Frame, rtr_or_rrs: bool) -> Header {
    let mut h = Header::default();
    h.push(0, 1); // SOF
    if frame.is_extended() {
        h.push(frame.id() >> 18, 11);
        h.push(1, 1); // SRR
        h.push(1, 1); // IDE
        h.push(frame.id() & 0x3_FFFF, 18);
        h.push(u32::from(rtr_or_rrs), 1);
    } else {
        h.push(frame.id(), 11);
        h.push(u32::from(rtr_or_rrs), 1);
        h.push(0, 1); // IDE
    }
    h
}

fn classic(frame: &Frame) -> FrameBits {
    let mut h = arbitration(frame, frame.is_remote());
    h.push(0, if frame.is_extended() { 2 } else { 1 }); // r1, r0 or r0
    h.push(u32::from(frame.dlc()), 4);
    let data = frame.data();
    let crc = crc15(h.bits, h.len, data);
    let mut stuffer = Stuffer::before_sof();
    stuffer.bits(h.bits, h.len);
    stuffer.bytes(data);
    stuffer.bits(u64::from(crc), 15);
    // Stuffing runs through the CRC sequence: one due after its last bit
    // comes before the CRC delimiter and counts.
    let stuff = stuffer.count;
    let total = h.len + 8 * data.len() as u32 + 15 + stuff + CRC_DELIMITER_ACK_EOF + INTERMISSION;
    FrameBits { total, stuff_bits: stuff, nominal_bits: total, data_bits: 0 }
}

fn fd(frame: &Frame) -> FrameBits {
    let brs = frame.flags().contains(crate::FrameFlags::BRS);
    let mut h = arbitration(frame, false);
    h.push(1, 1); // FDF (after RRS; in the r0 position of a base-format frame)
    h.push(0, 1); // res
    h.push(u32::from(brs), 1);
    let mut stuffer = Stuffer::before_sof();
    stuffer.bits(h.bits, h.len);
    // ESI is the first bit of the data phase.
    let stuff_arbitration = stuffer.count;
    let arbitration_bits = h.len + stuff_arbitration;
    let esi = u32::from(frame.flags().contains(crate::FrameFlags::ESI));
    stuffer.chunk(esi << 4 | u32::from(frame.dlc()), 5);
    let data = frame.data();
    stuffer.bytes(data);
    // Dynamic stuffing ends with the data field: a stuff bit due after its
    // last bit gives way to the CRC field's fixed stuff bit.
    let stuff_data = stuffer.count - stuff_arbitration - u32::from(stuffer.ends);
    let crc_len: u32 = if frame.len() <= 16 { 17 } else { 21 };
    let crc_field = 4 + crc_len;
    // A fixed stuff bit before the stuff count and after every fourth bit.
    let fixed = 1 + (crc_field - 1) / 4;
    let data_phase_bits = 5 + 8 * data.len() as u32 + stuff_data + crc_field + fixed;
    let tail = CRC_DELIMITER_ACK_EOF + INTERMISSION;
    let total = arbitration_bits + data_phase_bits + tail;
    let stuff_bits = stuff_arbitration + stuff_data + fixed;
    if brs {
        FrameBits { total, stuff_bits, nominal_bits: arbitration_bits + tail, data_bits: data_phase_bits }
    } else {
        FrameBits { total, stuff_bits, nominal_bits: total, data_bits: 0 }
    }
}

/// The bit-by-bit computation the packed one replaced, kept as the oracle
/// the fast one is checked against.
#[cfg(test)]
mod reference {
    use super::FrameBits;
    use crate::frame::{Frame, FrameKind};

    pub fn stuffing(bits: &[bool], split: usize, count_last: bool) -> (u32, u32) {
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
                last = Some(!bit);
                run = 1;
            }
        }
        (before, after)
    }

    /// The low `width` bits of `value`, most significant first.
    pub fn bits_of(value: u64, width: u32) -> Vec<bool> {
        (0..width).rev().map(|i| (value >> i) & 1 == 1).collect()
    }

    /// A frame's figures from its bit sequence, built field by field and
    /// stuffed and checked one bit at a time.
    pub fn frame_bits(frame: &Frame) -> FrameBits {
        use crate::FrameFlags;
        if frame.kind() == FrameKind::CanXl {
            return super::xl::reference::frame_bits(frame);
        }
        if matches!(frame.kind(), FrameKind::Error | FrameKind::Lin | FrameKind::Raw) {
            return FrameBits::of(frame);
        }
        let fd = frame.kind() == FrameKind::CanFd;
        let mut b = vec![false]; // SOF
        let id = u64::from(frame.id());
        if frame.is_extended() {
            b.extend(bits_of(id >> 18, 11));
            b.extend([true, true]); // SRR, IDE
            b.extend(bits_of(id & 0x3_FFFF, 18));
            b.push(!fd && frame.is_remote()); // RTR or RRS
            if !fd {
                b.extend([false, false]); // r1, r0
            }
        } else {
            b.extend(bits_of(id, 11));
            b.push(!fd && frame.is_remote()); // RTR or RRS
            b.push(false); // IDE
            if !fd {
                b.push(false); // r0
            }
        }
        let tail = 1 + 1 + 1 + 7 + 3;
        if !fd {
            b.extend(bits_of(u64::from(frame.dlc()), 4));
            frame.data().iter().for_each(|&d| b.extend(bits_of(u64::from(d), 8)));
            b.extend(bits_of(u64::from(crc15(&b)), 15));
            let (stuff, _) = stuffing(&b, b.len(), true);
            let total = b.len() as u32 + stuff + tail;
            return FrameBits { total, stuff_bits: stuff, nominal_bits: total, data_bits: 0 };
        }
        let brs = frame.flags().contains(FrameFlags::BRS);
        b.extend([true, false, brs]); // FDF, res, BRS
        let split = b.len();
        b.push(frame.flags().contains(FrameFlags::ESI));
        b.extend(bits_of(u64::from(frame.dlc()), 4));
        frame.data().iter().for_each(|&d| b.extend(bits_of(u64::from(d), 8)));
        let (before, after) = stuffing(&b, split, false);
        // Stuff count (4) and CRC-17 or CRC-21, a fixed stuff bit before
        // the stuff count and after every fourth bit.
        let crc_field: u32 = 4 + if frame.len() <= 16 { 17 } else { 21 };
        let fixed = crc_field.div_ceil(4);
        let nominal = split as u32 + before + tail;
        let data = (b.len() - split) as u32 + after + crc_field + fixed;
        let total = nominal + data;
        let stuff_bits = before + after + fixed;
        if brs {
            FrameBits { total, stuff_bits, nominal_bits: nominal, data_bits: data }
        } else {
            FrameBits { total, stuff_bits, nominal_bits: total, data_bits: 0 }
        }
    }

    pub fn crc15(bits: &[bool]) -> u32 {
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
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::text::parse_cansend;

    fn bits(text: &str) -> FrameBits {
        FrameBits::of(&parse_cansend(text).unwrap())
    }

    /// A deterministic pseudo-random sequence (xorshift64) from `seed`.
    fn xorshift(mut seed: u64) -> impl FnMut() -> u64 {
        move || {
            seed ^= seed << 13;
            seed ^= seed >> 7;
            seed ^= seed << 17;
            seed
        }
    }

    /// The stuff bits a stream causes when fed one bit at a time.
    fn stuff_count(bits: &[bool]) -> (u32, bool) {
        let mut stuffer = Stuffer::before(bits[0]);
        bits.iter().for_each(|&b| stuffer.chunk(u32::from(b), 1));
        (stuffer.count, stuffer.ends)
    }

    #[test]
    fn stuffing_inserts_after_five_equal_bits_and_the_stuff_bit_starts_a_new_run() {
        assert_eq!(stuff_count(&[true; 5]), (1, true), "a stuff bit is due after the fifth");
        assert_eq!(stuff_count(&[true; 4]), (0, false));
        // 5 ones, stuff 0, then 4 zeros make five zeros with the stuff bit.
        assert_eq!(stuff_count(&[true, true, true, true, true, false, false, false, false, true]), (2, false));
        assert_eq!(stuff_count(&[true; 10]), (2, true));
        assert_eq!(stuff_count(&[true; 9]), (1, false));
        assert_eq!(stuff_count(&[true; 8]), (1, false));
    }

    #[test]
    fn crc15_of_a_known_frame() {
        // SOF, id 0x001, RTR 0, IDE 0, r0 0, DLC 0: 19 bits.
        let header = 1u64 << 7;
        let crc = crc15(header, 19, &[]);
        assert_eq!(crc, reference::crc15(&reference::bits_of(header, 19)));
        // Appending the CRC makes the remainder of the whole sequence zero.
        assert_eq!(crc15(header << 15 | u64::from(crc), 34, &[]), 0);
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

    /// Random frames of every kind, id format and length, with sparse data
    /// so long runs (and stuff bits) are common: the table-driven figures
    /// equal the bit-by-bit oracle's.
    #[test]
    fn frame_bits_match_the_bit_by_bit_oracle() {
        let mut next = xorshift(0x2545_F491_4F6C_DD1Du64);
        for round in 0..30_000 {
            let extended = next() & 1 == 1;
            let id = (next() as u32) & if extended { 0x1FFF_FFFF } else { 0x7FF };
            let mut byte = || if next() % 3 == 0 { next() as u8 } else { [0x00, 0xFF][(next() & 1) as usize] };
            let frame = match round % 3 {
                0 => {
                    let len = [0, 1, 2, 3, 4, 5, 6, 7, 8, 12, 16, 20, 24, 32, 48, 64][round / 3 % 16];
                    let data: Vec<u8> = (0..len).map(|_| byte()).collect();
                    let mut flags = crate::FrameFlags::from_bits_truncate(next() as u8)
                        & (crate::FrameFlags::BRS | crate::FrameFlags::ESI);
                    flags.set(crate::FrameFlags::EXTENDED, extended);
                    Frame::can_fd(id, flags, &data).unwrap()
                }
                1 => Frame::remote(id, extended, round / 3 % 9).unwrap(),
                _ => {
                    let data: Vec<u8> = (0..round / 3 % 9).map(|_| byte()).collect();
                    Frame::can(id, extended, &data).unwrap()
                }
            };
            assert_eq!(FrameBits::of(&frame), reference::frame_bits(&frame), "round {round}: {frame:?}");
        }
    }

    /// Streams of every length up to 64 bits fed in chunks of random widths:
    /// the table-driven stuffing and the positional CRC agree with the
    /// bit-by-bit oracle.
    #[test]
    fn chunked_stuffing_and_crc_match_the_bit_by_bit_oracle() {
        let mut next = xorshift(0x9E37_79B9_7F4A_7C15u64);
        for round in 0..20_000 {
            let width = (next() % 64) as u32 + 1;
            // Runs of random length make stuffing common, as in real frames.
            let value = (0..width)
                .fold((0u64, next() & 1, 0u64), |(v, bit, run), _| {
                    let (bit, run) = if run == 0 { (bit ^ 1, next() % 9 + 1) } else { (bit, run) };
                    (v << 1 | bit, bit, run - 1)
                })
                .0;
            let bits = reference::bits_of(value, width);
            let mut stuffer = Stuffer::before(bits[0]);
            stuffer.bits(value, width);
            let (count, _) = reference::stuffing(&bits, bits.len(), true);
            assert_eq!(stuffer.count, count, "round {round}: {width} bits {value:#x}");
            assert_eq!(stuffer.ends, reference::stuffing(&bits, bits.len(), false).0 < count, "round {round}");
            let data: Vec<u8> = (0..next() % 9).map(|_| next() as u8).collect();
            let header_width = width.min(40);
            let header = value & ((1u64 << header_width) - 1);
            let mut all = reference::bits_of(header, header_width);
            data.iter().for_each(|&b| all.extend(reference::bits_of(u64::from(b), 8)));
            assert_eq!(crc15(header, header_width, &data), reference::crc15(&all), "round {round}");
        }
    }
}
