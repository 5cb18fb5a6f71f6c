//! A signal's raw bits out of a payload, in DBC bit numbering.
//!
//! DBC numbers bits per byte, least significant first: bit `8 * b + k` is
//! bit `k` of byte `b`. An Intel (little-endian) signal's start bit is its
//! least significant bit and it runs upwards through the bytes. A Motorola
//! (big-endian) signal's start bit is its most significant bit; it runs
//! down within a byte and on into the next byte's bit 7 (the "sawtooth").
//! In big-endian linear numbering — position `8 * b + (7 - k)` — that is a
//! straight run, which is how it is read here.

use can_dbc::ByteOrder;

/// The raw value of a `size`-bit signal starting at DBC bit `start`, or
/// `None` if any of its bits lies beyond `data`.
pub fn extract(data: &[u8], start: u32, size: u32, order: ByteOrder) -> Option<u64> {
    let bits = data.len() as u32 * 8;
    let bit = |byte: u32, k: u32| u64::from(data[byte as usize] >> k & 1);
    match order {
        ByteOrder::LittleEndian => {
            if start + size > bits {
                return None;
            }
            Some((0..size).fold(0, |raw, i| {
                let at = start + i;
                raw | bit(at / 8, at % 8) << i
            }))
        }
        ByteOrder::BigEndian => {
            let first = start / 8 * 8 + (7 - start % 8);
            if first + size > bits {
                return None;
            }
            Some((first..first + size).fold(0, |raw, at| raw << 1 | bit(at / 8, 7 - at % 8)))
        }
    }
}

/// `raw`, a two's complement number of `size` bits, as a signed value.
pub fn sign_extend(raw: u64, size: u32) -> i64 {
    if size >= 64 {
        return raw as i64;
    }
    let shift = 64 - size;
    ((raw << shift) as i64) >> shift
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn motorola_runs_down_a_byte_then_into_the_next() {
        // 12 bits from bit 7: byte 0 (all 8 bits) then the top 4 of byte 1.
        assert_eq!(extract(&[0xAB, 0xC0], 7, 12, ByteOrder::BigEndian), Some(0xABC));
        // 4 bits from bit 3: the low nibble of byte 0.
        assert_eq!(extract(&[0x5A], 3, 4, ByteOrder::BigEndian), Some(0xA));
        assert_eq!(extract(&[0xAB], 7, 12, ByteOrder::BigEndian), None, "beyond the payload");
    }

    #[test]
    fn intel_runs_up_through_the_bytes() {
        assert_eq!(extract(&[0xBC, 0x0A], 0, 12, ByteOrder::LittleEndian), Some(0xABC));
        assert_eq!(extract(&[0xF0], 4, 4, ByteOrder::LittleEndian), Some(0xF));
        assert_eq!(extract(&[0xFF; 8], 0, 64, ByteOrder::LittleEndian), Some(u64::MAX));
    }

    #[test]
    fn signs_extend_from_the_signals_top_bit() {
        assert_eq!(sign_extend(0xF6, 8), -10);
        assert_eq!(sign_extend(0x7F, 8), 127);
        assert_eq!(sign_extend(1, 1), -1);
        assert_eq!(sign_extend(u64::MAX, 64), -1);
    }
}
