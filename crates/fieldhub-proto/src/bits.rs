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

/// Unstuffed bits, most significant first, packed into words: the longest
/// stream (a 64-byte CAN FD frame with an extended id) is 552 bits. Built
/// and read without allocating; stuffing and CRC take it a byte at a time.
struct Stream {
    /// One spare word, so an 8-bit window at any position can read ahead.
    words: [u64; 10],
    len: usize,
}

impl Stream {
    fn new() -> Self {
        Self { words: [0; 10], len: 0 }
    }

    /// Append the low `width` bits of `value` (`width` ≤ 32).
    fn push(&mut self, value: u32, width: u32) {
        let value = u64::from(value) & ((1u64 << width) - 1);
        let (word, used) = (self.len / 64, (self.len % 64) as u32);
        let free = 64 - used;
        if width <= free {
            self.words[word] |= value << (free - width);
        } else {
            let over = width - free;
            self.words[word] |= value >> over;
            self.words[word + 1] |= value << (64 - over);
        }
        self.len += width as usize;
    }

    fn push_bytes(&mut self, bytes: &[u8]) {
        for &b in bytes {
            self.push(u32::from(b), 8);
        }
    }

    /// The 8 bits from position `at`, the first in the most significant place.
    fn byte_at(&self, at: usize) -> u8 {
        let (word, shift) = (at / 64, (at % 64) as u32);
        let window = match shift {
            0 => self.words[word],
            _ => (self.words[word] << shift) | (self.words[word + 1] >> (64 - shift)),
        };
        (window >> 56) as u8
    }

    fn bit(&self, at: usize) -> bool {
        (self.words[at / 64] >> (63 - at % 64)) & 1 == 1
    }
}

/// Read access to packed unstuffed bits, for the stuffing and CRC passes.
trait Bits {
    fn len(&self) -> usize;
    /// The 8 bits from position `at`, the first in the most significant place.
    fn byte_at(&self, at: usize) -> u8;
    fn bit(&self, at: usize) -> bool;
}

impl Bits for Stream {
    fn len(&self) -> usize {
        self.len
    }

    fn byte_at(&self, at: usize) -> u8 {
        Stream::byte_at(self, at)
    }

    fn bit(&self, at: usize) -> bool {
        Stream::bit(self, at)
    }
}

/// A classic frame's unstuffed bits in one register: at most 118 (an
/// 8-byte extended frame with its CRC), so building and reading them is a
/// shift — the common frame skips the general [`Stream`]'s word arithmetic.
#[derive(Default)]
struct Short {
    /// The bits so far, the last one in the least significant place.
    value: u128,
    len: usize,
}

impl Short {
    /// Append the low `width` bits of `value` (`width` ≤ 32).
    fn push(&mut self, value: u32, width: u32) {
        self.value = (self.value << width) | u128::from(value & (((1u64 << width) - 1) as u32));
        self.len += width as usize;
    }
}

impl Bits for Short {
    fn len(&self) -> usize {
        self.len
    }

    fn byte_at(&self, at: usize) -> u8 {
        (self.value >> (self.len - at - 8)) as u8
    }

    fn bit(&self, at: usize) -> bool {
        (self.value >> (self.len - at - 1)) & 1 == 1
    }
}

/// The stuffing state between two bits: the value of the run so far and its
/// length (1..=4), or [`START`] before the first bit.
type StuffState = u8;
const START: StuffState = 8;

/// One bit through the stuffing rule: the new state and whether a stuff bit
/// follows this bit (a complement after five equal bits, which starts a new
/// run of its own).
const fn stuff_step(state: StuffState, bit: bool) -> (StuffState, bool) {
    let (last, run) = if state == START { (!bit, 0) } else { (state >= 4, state % 4 + 1) };
    let run = if bit == last { run + 1 } else { 1 };
    if run == 5 {
        ((!bit as u8) * 4, true)
    } else {
        ((bit as u8) * 4 + run - 1, false)
    }
}

/// Eight bits at once: per state and byte, the state after it, the stuff
/// bits it causes and whether one follows its last bit.
const STUFF_TABLE: [[(StuffState, u8, bool); 256]; 9] = {
    let mut table = [[(0u8, 0u8, false); 256]; 9];
    let mut state = 0;
    while state < 9 {
        let mut byte = 0;
        while byte < 256 {
            let (mut s, mut count, mut last) = (state as u8, 0u8, false);
            let mut i = 0;
            while i < 8 {
                let (next, stuffed) = stuff_step(s, (byte >> (7 - i)) & 1 == 1);
                s = next;
                count += stuffed as u8;
                last = stuffed;
                i += 1;
            }
            table[state][byte] = (s, count, last);
            byte += 1;
        }
        state += 1;
    }
    table
};

/// Stuff bits caused by bits `from..to`, continuing from `state`; and
/// whether one follows the last of them.
fn stuff_in(stream: &impl Bits, from: usize, to: usize, state: &mut StuffState) -> (u32, bool) {
    let (mut count, mut last) = (0u32, false);
    let mut at = from;
    while at + 8 <= to {
        let (next, stuffed, ends) = STUFF_TABLE[*state as usize][stream.byte_at(at) as usize];
        *state = next;
        count += u32::from(stuffed);
        last = ends;
        at += 8;
    }
    while at < to {
        let (next, stuffed) = stuff_step(*state, stream.bit(at));
        *state = next;
        count += u32::from(stuffed);
        last = stuffed;
        at += 1;
    }
    (count, last)
}

/// Dynamic stuff bits inserted into the stream; `count_last` says whether a
/// stuff bit due right after the last bit is part of the region (classic:
/// yes, before the CRC delimiter; CAN FD: no, the fixed stuff bit takes its
/// place). Returns the stuff bits that fall before bit `split` and at/after it.
fn dynamic_stuffing(stream: &impl Bits, split: usize, count_last: bool) -> (u32, u32) {
    let split = split.min(stream.len());
    let mut state = START;
    let (mut before, ends_before) = stuff_in(stream, 0, split, &mut state);
    let (mut after, ends_after) = stuff_in(stream, split, stream.len(), &mut state);
    if !count_last {
        if split < stream.len() {
            after -= u32::from(ends_after);
        } else {
            before -= u32::from(ends_before);
        }
    }
    (before, after)
}

/// CRC-15/CAN (polynomial 0x4599), a byte at a time.
const CRC15_TABLE: [u16; 256] = {
    let mut table = [0u16; 256];
    let mut byte = 0;
    while byte < 256 {
        let mut crc = (byte as u32) << 7;
        let mut i = 0;
        while i < 8 {
            crc = if crc & 0x4000 != 0 { (crc << 1) ^ 0x4599 } else { crc << 1 } & 0x7FFF;
            i += 1;
        }
        table[byte] = crc as u16;
        byte += 1;
    }
    table
};

fn crc15_byte(crc: u32, byte: u8) -> u32 {
    let index = ((crc >> 7) ^ u32::from(byte)) & 0xFF;
    ((crc << 8) ^ u32::from(CRC15_TABLE[index as usize])) & 0x7FFF
}

fn crc15_bit(crc: u32, bit: bool) -> u32 {
    let next = bit ^ ((crc >> 14) & 1 == 1);
    let crc = (crc << 1) & 0x7FFF;
    if next {
        crc ^ 0x4599
    } else {
        crc
    }
}

/// CRC-15 of a whole stream (the classic path folds it into its stuffing
/// pass; this is the form the oracle test checks).
#[cfg(test)]
fn crc15(stream: &impl Bits) -> u32 {
    let mut crc: u32 = 0;
    let mut at = 0;
    while at + 8 <= stream.len() {
        crc = crc15_byte(crc, stream.byte_at(at));
        at += 8;
    }
    while at < stream.len() {
        crc = crc15_bit(crc, stream.bit(at));
        at += 1;
    }
    crc
}

/// Where the arbitration field's bits go: a [`Stream`] or a [`Short`].
trait Push {
    fn push(&mut self, value: u32, width: u32);
}

impl Push for Stream {
    fn push(&mut self, value: u32, width: u32) {
        Stream::push(self, value, width)
    }
}

impl Push for Short {
    fn push(&mut self, value: u32, width: u32) {
        Short::push(self, value, width)
    }
}

fn arbitration(stream: &mut impl Push, frame: &Frame, rtr_or_rrs: bool) {
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
    let mut s = Short::default();
    arbitration(&mut s, frame, frame.is_remote());
    if frame.is_extended() {
        s.push(0, 2); // r1, r0
    } else {
        s.push(0, 1); // r0
    }
    s.push(u32::from(frame.dlc()), 4);
    for &byte in frame.data() {
        s.push(u32::from(byte), 8);
    }
    // The CRC and the stuffing of the bits before it in one pass: two
    // independent chains of table look-ups that the processor overlaps.
    let (mut crc, mut state, mut stuff) = (0u32, START, 0u32);
    let mut at = 0;
    while at + 8 <= s.len {
        let byte = s.byte_at(at);
        crc = crc15_byte(crc, byte);
        let (next, stuffed, _) = STUFF_TABLE[state as usize][byte as usize];
        state = next;
        stuff += u32::from(stuffed);
        at += 8;
    }
    while at < s.len {
        crc = crc15_bit(crc, s.bit(at));
        let (next, stuffed) = stuff_step(state, s.bit(at));
        state = next;
        stuff += u32::from(stuffed);
        at += 1;
    }
    s.push(crc, 15);
    stuff += stuff_in(&s, at, s.len, &mut state).0;
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
    let (stuff_arbitration, stuff_data) = dynamic_stuffing(&s, data_phase_from, false);
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

/// The bit-by-bit computation the packed one replaced, kept as the oracle
/// the fast one is checked against.
#[cfg(test)]
mod reference {
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

    fn stream(bits: &[bool]) -> Stream {
        let mut s = Stream::new();
        bits.iter().for_each(|&b| s.push(u32::from(b), 1));
        s
    }

    #[test]
    fn stuffing_inserts_after_five_equal_bits_and_the_stuff_bit_starts_a_new_run() {
        let ones = stream(&[true; 5]);
        assert_eq!(dynamic_stuffing(&ones, 5, true), (1, 0));
        assert_eq!(dynamic_stuffing(&ones, 5, false), (0, 0), "a stuff bit due after the region is not counted");
        // 5 ones, stuff 0, then 4 zeros make five zeros with the stuff bit.
        let mixed = stream(&[true, true, true, true, true, false, false, false, false, true]);
        assert_eq!(dynamic_stuffing(&mixed, 10, true), (2, 0));
        assert_eq!(dynamic_stuffing(&stream(&[true; 10]), 10, true), (2, 0));
        assert_eq!(dynamic_stuffing(&stream(&[true; 9]), 10, true), (1, 0));
        assert_eq!(dynamic_stuffing(&stream(&[true; 8]), 10, true), (1, 0));
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
        let crc = crc15(&s);
        // Appending the CRC makes the remainder of the whole sequence zero.
        s.push(crc, 15);
        assert_eq!(crc15(&s), 0);
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

    /// The classic path's one-pass CRC and stuffing give the figures of the
    /// general passes over the same bits, for random ids, lengths and data.
    #[test]
    fn one_pass_classic_bits_match_the_general_passes() {
        let mut next = xorshift(0x2545_F491_4F6C_DD1Du64);
        for _ in 0..20_000 {
            let extended = next() & 1 == 1;
            let id = (next() as u32) & if extended { 0x1FFF_FFFF } else { 0x7FF };
            let len = (next() % 9) as usize;
            // Sparse data makes long runs, and so stuff bits, common.
            let data: Vec<u8> = (0..len).map(|_| if next() % 3 == 0 { next() as u8 } else { 0 }).collect();
            let frame = if next() % 5 == 0 {
                Frame::remote(id, extended, len).unwrap()
            } else {
                Frame::can(id, extended, &data).unwrap()
            };
            let mut general = Stream::new();
            arbitration(&mut general, &frame, frame.is_remote());
            general.push(0, if extended { 2 } else { 1 });
            general.push(u32::from(frame.dlc()), 4);
            general.push_bytes(frame.data());
            let crc = crc15(&general);
            general.push(crc, 15);
            let (stuff, _) = dynamic_stuffing(&general, general.len, true);
            let bits = FrameBits::of(&frame);
            assert_eq!(bits.stuff_bits, stuff, "{frame:?}");
            assert_eq!(bits.total, general.len as u32 + stuff + CRC_DELIMITER_ACK_EOF + INTERMISSION, "{frame:?}");
        }
    }

    /// Streams of every length up to 600 bits with pseudo-random content and
    /// long runs, and every split: the packed, table-driven stuffing and CRC
    /// agree with the bit-by-bit oracle.
    #[test]
    fn packed_stuffing_and_crc_match_the_bit_by_bit_oracle() {
        let mut next = xorshift(0x9E37_79B9_7F4A_7C15u64);
        for round in 0..3000 {
            let len = (next() % 552) as usize + 1;
            // Runs of random length make stuffing common, as in real frames.
            let mut bits = Vec::with_capacity(len);
            while bits.len() < len {
                let (value, run) = (next() & 1 == 1, (next() % 9) as usize + 1);
                bits.extend(std::iter::repeat_n(value, run.min(len - bits.len())));
            }
            let packed = stream(&bits);
            assert_eq!(crc15(&packed), reference::crc15(&bits), "round {round}");
            if len <= 128 {
                let mut short = Short::default();
                bits.iter().for_each(|&b| short.push(u32::from(b), 1));
                assert_eq!(crc15(&short), reference::crc15(&bits), "round {round}, in one register");
                let split = (next() as usize) % (len + 1);
                assert_eq!(dynamic_stuffing(&short, split, true), reference::stuffing(&bits, split, true));
            }
            let split = (next() as usize) % (len + 1);
            for count_last in [true, false] {
                assert_eq!(
                    dynamic_stuffing(&packed, split, count_last),
                    reference::stuffing(&bits, split, count_last),
                    "round {round}, len {len}, split {split}, count_last {count_last}"
                );
            }
        }
    }
}
