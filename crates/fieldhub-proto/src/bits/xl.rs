//! The exact on-wire length of a CAN XL data frame, and the length model of
//! raw frames.
//!
//! # CAN XL: the frame format implemented and its sources
//!
//! The format is the CAN XL data frame of ISO 11898-1:2024 (CiA 610-1). The
//! standard itself is not public; the layout below is taken from public
//! descriptions, and the field list from the one public implementation that
//! names every field from SOF to EOF with its length:
//!
//! - **[XLA]** the Saleae CAN XL analyzer, `src/CAN_XLAnalyzer.cpp` of
//!   <https://github.com/xdvorakv/Salelale_CAN-XL_Protocol_Analyzer>
//!   (commit 884ca6b): a bit-level decoder (SIC mode) whose states walk
//!   every field below, its bit-rate switches and its stuffing.
//! - **[KV]** Kvaser's CAN XL course, "The CAN XL Frame":
//!   <https://kvaser.com/lesson/defining-the-data> (11-bit DLC for 1..2048
//!   bytes, SBC and PCRC protecting the DLC, SDT, VCID, the 32-bit
//!   acceptance field), <https://kvaser.com/?p=1011463139> (arbitration:
//!   SOF, 11-bit priority, RRS dominant, IDE dominant, FDF and XLF
//!   recessive, resXL) and <https://kvaser.com/lesson/switching-back/>
//!   (the DAH bit and the edges back to the nominal rate, ACK, EOF).
//! - **[SR]** sigrok's CAN XL decoder, libsigrokdecode pull request 133
//!   (<https://github.com/sigrokproject/libsigrokdecode/pull/133>): the data
//!   phase uses fixed stuffing "after every 10th bit", the bit rate
//!   switches at the end of the switching bit, the SBC has odd parity.
//! - **[CiA]** <https://can-cia.org/can-knowledge/can-xl>: 1..2048 data
//!   bytes, an 11-bit priority field and a 32-bit acceptance field.
//!
//! | field | bits | rate | stuffing |
//! |-------|------|------|----------|
//! | SOF, priority, RRS, IDE (0), FDF (1), XLF (1) | 1 + 11 + 1 + 1 + 1 + 1 | nominal | dynamic (a complement after five equal bits) |
//! | resXL (0), ADH (1) | 1 + 1 | nominal | none can fall here |
//! | DH1 (1), DH2 (1) | 1 + 1 | XL data | none |
//! | DL1 (0), SDT, SEC, DLC, SBC, PCRC, VCID, AF, data, FCRC | 1 + 8 + 1 + 11 + 3 + 13 + 8 + 32 + 8·n + 32 | XL data | fixed: a complement bit after every tenth bit, counted from DL1 |
//! | FCP (1100) | 4 | XL data | none |
//! | DAH (1), AH1 (1), AL1 (0), AH2 (1) | 4 | nominal | none |
//! | ACK slot, ACK delimiter, EOF | 1 + 1 + 7 | nominal | none |
//! | intermission | 3 | nominal | none |
//!
//! The dynamic stuff bits depend only on the priority and RRS, and the
//! fixed ones only on the length, so an XL frame's length does not depend
//! on its data or CRC values: `total = 34 + dynamic + 6 + m + (m − 1) / 10`
//! with `m = 109 + 8·n` (the fixed-stuffed bits). `m` is odd, so the
//! stretch never ends on a tenth bit: whether a fixed stuff bit would follow
//! the FCRC's last bit ([XLA] stops fixed stuffing with it) never arises.
//!
//! Where the sources are thin, said plainly:
//! - The ADH bit at the nominal rate and the switch at its end: [XLA] and
//!   [SR] agree.
//! - **The DAH bit's rate**: [XLA] switches back to the nominal rate after
//!   the FCP's last bit, so DAH is a nominal bit; [SR]'s wording ("the
//!   bitrate switch is done at the end of the mentioned bits") reads as a
//!   switch at DAH's end, which would make DAH an XL-rate bit. This model
//!   follows [XLA]; the other reading shortens a frame by one nominal bit
//!   time and lengthens it by one XL bit time.
//! - The fixed-stuff grid's start at DL1 and its end with the FCRC: [XLA]
//!   only ([SR] gives the period).
//! - The SBC's width (3 bits): [XLA] reads three bits; [SR] names its parity.
//! - No source here gives the ISO clause numbers; the ISO text was not
//!   consulted.
//!
//! # Raw frames
//!
//! A raw frame is a bus the hub has no model of, so its length is the
//! channel's stated model ([`RawShape`]): a fixed overhead plus a number of
//! bits per data byte, all at the nominal rate, no stuffing — a UART-framed
//! bus is 10 or 11 bits per byte, a synchronous one 8.

use super::{FrameBits, Stuffer, INTERMISSION};
use crate::frame::Frame;

/// SOF, priority, RRS, IDE, FDF, XLF: the dynamically stuffed stretch.
const ARBITRATION: u32 = 1 + 11 + 1 + 1 + 1 + 1;
/// resXL and ADH, the rest of the arbitration phase.
const RESXL_ADH: u32 = 2;
/// DH1 and DH2, the first XL-rate bits, before the fixed-stuffed stretch.
const DH1_DH2: u32 = 2;
/// The fixed-stuffed stretch without its data bytes: DL1, SDT, SEC, DLC,
/// SBC, PCRC, VCID, AF and FCRC.
const FIXED_STUFFED: u32 = 1 + 8 + 1 + 11 + 3 + 13 + 8 + 32 + 32;
/// A fixed stuff bit follows every this many bits of the stretch.
const FIXED_STUFF_PERIOD: u32 = 10;
/// The format check pattern, the last XL-rate bits.
const FCP: u32 = 4;
/// DAH, AH1, AL1, AH2: back to the nominal rate.
const DAS: u32 = 4;
/// ACK slot, ACK delimiter, EOF.
const ACK_EOF: u32 = 1 + 1 + 7;

/// The bit stream of a CAN XL data frame (the module's table).
pub(super) fn xl(frame: &Frame) -> FrameBits {
    let mut stuffer = Stuffer::before_sof();
    // SOF 0, priority, RRS, IDE 0, FDF 1, XLF 1.
    let header = u64::from(frame.priority()) << 4 | u64::from(frame.is_rrs()) << 3 | 0b011;
    stuffer.bits(header, ARBITRATION);
    let dynamic = stuffer.count;
    let fixed_stretch = FIXED_STUFFED + 8 * frame.len() as u32;
    let fixed = (fixed_stretch - 1) / FIXED_STUFF_PERIOD;
    let nominal_bits = ARBITRATION + dynamic + RESXL_ADH + DAS + ACK_EOF + INTERMISSION;
    let data_bits = DH1_DH2 + fixed_stretch + fixed + FCP;
    FrameBits { total: nominal_bits + data_bits, stuff_bits: dynamic + fixed, nominal_bits, data_bits }
}

/// How long a raw frame is on the wire: `overhead_bits` plus
/// `bits_per_byte` for each data byte, all at the nominal rate.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct RawShape {
    /// Bits each data byte takes (8 for a synchronous bit stream, 10 for
    /// UART 8N1, 11 for 8E1 or 8N2).
    pub bits_per_byte: u32,
    /// Bits every frame takes besides its data (preamble, addresses, check
    /// sequence, the gap before the next frame).
    pub overhead_bits: u32,
}

impl Default for RawShape {
    /// A bare synchronous bit stream: 8 bits per byte, no overhead.
    fn default() -> Self {
        Self { bits_per_byte: 8, overhead_bits: 0 }
    }
}

impl RawShape {
    /// The bit stream of `len` data bytes in this shape.
    pub fn bits(self, len: usize) -> FrameBits {
        let total = self.overhead_bits.saturating_add(self.bits_per_byte.saturating_mul(len as u32));
        FrameBits { total, stuff_bits: 0, nominal_bits: total, data_bits: 0 }
    }
}

/// The bit-by-bit construction of the module's table, kept as the oracle the
/// closed form is checked against.
#[cfg(test)]
pub(super) mod reference {
    use super::super::reference::bits_of;
    use super::*;

    /// `(bit, at the XL rate)` for every bit on the wire, stuff bits included,
    /// and the number of stuff bits.
    pub fn wire(frame: &Frame) -> (Vec<(bool, bool)>, u32) {
        let mut arbitration = vec![false];
        arbitration.extend(bits_of(u64::from(frame.priority()), 11));
        arbitration.extend([frame.is_rrs(), false, true, true]); // RRS, IDE, FDF, XLF
        let mut wire: Vec<(bool, bool)> = Vec::new();
        let mut stuff = 0;
        let (mut last, mut run) = (None, 0);
        for bit in arbitration {
            wire.push((bit, false));
            run = if Some(bit) == last { run + 1 } else { 1 };
            last = Some(bit);
            if run == 5 {
                wire.push((!bit, false));
                stuff += 1;
                (last, run) = (Some(!bit), 1);
            }
        }
        wire.extend([(false, false), (true, false)]); // resXL, ADH
        wire.extend([(true, true), (true, true)]); // DH1, DH2
        let mut stretch = vec![false]; // DL1
        stretch.extend(bits_of(u64::from(frame.sdt()), 8));
        stretch.push(frame.is_sec());
        stretch.extend(bits_of(u64::from(frame.xl_dlc()), 11));
        stretch.extend(bits_of(0b001, 3)); // SBC: its value does not change the length
        stretch.extend(bits_of(0x1ABC, 13)); // PCRC: likewise
        stretch.extend(bits_of(u64::from(frame.vcid()), 8));
        stretch.extend(bits_of(u64::from(frame.acceptance_field()), 32));
        frame.data().iter().for_each(|&b| stretch.extend(bits_of(u64::from(b), 8)));
        stretch.extend(bits_of(0xDEAD_BEEF, 32)); // FCRC: likewise
        let count = stretch.len();
        for (i, &bit) in stretch.iter().enumerate() {
            wire.push((bit, true));
            if (i + 1) % 10 == 0 && i + 1 < count {
                wire.push((!bit, true));
                stuff += 1;
            }
        }
        wire.extend([true, true, false, false].map(|b| (b, true))); // FCP
        wire.extend([true, true, false, true].map(|b| (b, false))); // DAH, AH1, AL1, AH2
        wire.extend([false, true].map(|b| (b, false))); // ACK slot (acknowledged), delimiter
        wire.extend([(true, false); 7 + 3]); // EOF, intermission
        (wire, stuff)
    }

    /// The figures of [`wire`].
    pub fn frame_bits(frame: &Frame) -> FrameBits {
        let (wire, stuff_bits) = wire(frame);
        let data_bits = wire.iter().filter(|(_, fast)| *fast).count() as u32;
        let total = wire.len() as u32;
        FrameBits { total, stuff_bits, nominal_bits: total - data_bits, data_bits }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::frame::FrameFlags;

    fn xl(priority: u16, flags: FrameFlags, len: usize) -> Frame {
        Frame::can_xl(priority, 0, 0, flags, 0, &vec![0x55; len]).unwrap()
    }

    #[test]
    fn a_one_byte_xl_frame_is_168_bits_by_hand() {
        // 0x123: SOF 0, 001 0010 0011, RRS 0, IDE 0, FDF 1, XLF 1 — no run of five.
        // Nominal: 16 + resXL, ADH 2 + DAS 4 + ACK, EOF 9 + intermission 3 = 34.
        // XL rate: DH1, DH2 2 + m = 109 + 8 = 117 + (117 − 1) / 10 = 11 fixed + FCP 4 = 134.
        let bits = FrameBits::of(&xl(0x123, FrameFlags::empty(), 1));
        assert_eq!(bits, FrameBits { total: 168, stuff_bits: 11, nominal_bits: 34, data_bits: 134 });
        // 34 bits at 500 kbit/s and 134 at 10 Mbit/s.
        assert_eq!(bits.duration_ns(500_000, 10_000_000), 34 * 2_000 + 134 * 100);
    }

    #[test]
    fn priority_zero_stuffs_twice_in_the_arbitration_phase() {
        // SOF, eleven zero bits, RRS and IDE: fourteen dominant bits, a
        // stuff bit after the fifth and the tenth.
        let bits = FrameBits::of(&xl(0, FrameFlags::empty(), 1));
        assert_eq!((bits.stuff_bits, bits.nominal_bits), (11 + 2, 36));
        // A recessive RRS after 0x7FF: twelve recessive bits, two stuff bits.
        assert_eq!(FrameBits::of(&xl(0x7FF, FrameFlags::XL_RRS, 1)).nominal_bits, 36);
    }

    #[test]
    fn the_longest_xl_frame_is_18148_bits_at_the_xl_rate() {
        // m = 109 + 8 · 2048 = 16493 bits, 1649 fixed stuff bits.
        let bits = FrameBits::of(&xl(0x123, FrameFlags::empty(), 2048));
        assert_eq!(bits.data_bits, 2 + 16_493 + 1_649 + 4);
        assert_eq!(bits.stuff_bits, 1_649);
        // 1.8148 ms at 10 Mbit/s plus 34 nominal bits at 1 Mbit/s.
        assert_eq!(bits.duration_ns(1_000_000, 10_000_000), 34_000 + 1_814_800);
    }

    #[test]
    fn a_fixed_stuff_bit_follows_every_tenth_bit_of_the_stretch() {
        // m = 109 + 8n: n = 1 → 117 bits, 11 stuff bits; 2 → 125, 12; 6 → 157, 15; 7 → 165, 16.
        let fixed = |len| FrameBits::of(&xl(0x123, FrameFlags::empty(), len)).stuff_bits;
        assert_eq!([fixed(1), fixed(2), fixed(6), fixed(7)], [11, 12, 15, 16]);
    }

    #[test]
    fn data_and_header_values_do_not_change_an_xl_frames_length() {
        let plain = FrameBits::of(&Frame::can_xl(0x123, 0, 0, FrameFlags::empty(), 0, &[0; 64]).unwrap());
        let busy = FrameBits::of(&Frame::can_xl(0x123, 0xFF, 0xFF, FrameFlags::XL_SEC, !0, &[0xFF; 64]).unwrap());
        assert_eq!(plain, busy);
    }

    /// Random priorities, flags and lengths: the closed form equals the
    /// bit-by-bit construction.
    #[test]
    fn xl_frame_bits_match_the_bit_by_bit_oracle() {
        let mut seed = 0x5DEE_CE66_D1CE_4E5Bu64;
        for round in 0..3_000 {
            seed ^= seed << 13;
            seed ^= seed >> 7;
            seed ^= seed << 17;
            let priority = [0, 0x7FF, 0x400, 0x3E0, (seed >> 20) as u16 & 0x7FF][round % 5];
            let flags = FrameFlags::from_bits_truncate(seed as u8) & (FrameFlags::XL_SEC | FrameFlags::XL_RRS);
            let len = 1 + (seed >> 33) as usize % 2048;
            let frame = Frame::can_xl(
                priority,
                (seed >> 8) as u8,
                (seed >> 16) as u8,
                flags,
                seed as u32,
                &vec![(seed >> 40) as u8; len],
            )
            .unwrap();
            assert_eq!(FrameBits::of(&frame), reference::frame_bits(&frame), "round {round}: {frame:?}");
        }
    }

    #[test]
    fn a_raw_frame_is_its_overhead_and_bits_per_byte_at_the_nominal_rate() {
        let modbus_rtu = RawShape { bits_per_byte: 11, overhead_bits: 39 };
        assert_eq!(modbus_rtu.bits(8), FrameBits { total: 39 + 88, stuff_bits: 0, nominal_bits: 127, data_bits: 0 });
        assert_eq!(FrameBits::of(&Frame::raw(1, &[0; 3]).unwrap()), RawShape::default().bits(3));
        assert_eq!(RawShape::default().bits(0).total, 0);
    }
}
