//! A signal's raw value into a payload, in DBC bit numbering: the inverse
//! of [`fieldhub_dbc::bits::extract`], which documents the numbering
//! (Intel runs upwards from its least significant bit, Motorola downwards
//! from its most significant bit, the "sawtooth").
//!
//! Invariant: only the signal's bits change; a value wider than the signal
//! is cut to its `size` low bits.

use can_dbc::ByteOrder;

/// Why a signal does not fit its payload.
#[derive(Debug, PartialEq, Eq, thiserror::Error)]
#[error("a {size}-bit signal at bit {start} does not fit a {len}-byte payload")]
pub struct OutOfPayload {
    pub start: u32,
    pub size: u32,
    pub len: usize,
}

/// Write the low `size` bits of `raw` as the signal starting at DBC bit `start`.
pub fn insert(data: &mut [u8], start: u32, size: u32, order: ByteOrder, raw: u64) -> Result<(), OutOfPayload> {
    let bits = data.len() as u32 * 8;
    let out = OutOfPayload { start, size, len: data.len() };
    let mut set = |byte: u32, k: u32, value: u64| {
        let mask = 1u8 << k;
        let cell = &mut data[byte as usize];
        *cell = if value & 1 == 1 { *cell | mask } else { *cell & !mask };
    };
    if size == 0 || size > 64 {
        return Err(out);
    }
    match order {
        ByteOrder::LittleEndian => {
            if start.checked_add(size).is_none_or(|end| end > bits) {
                return Err(out);
            }
            for i in 0..size {
                let at = start + i;
                set(at / 8, at % 8, raw >> i);
            }
        }
        ByteOrder::BigEndian => {
            let first = start / 8 * 8 + (7 - start % 8);
            if first.checked_add(size).is_none_or(|end| end > bits) {
                return Err(out);
            }
            for (i, at) in (first..first + size).enumerate() {
                set(at / 8, 7 - at % 8, raw >> (size - 1 - i as u32));
            }
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use fieldhub_dbc::bits::extract;

    #[test]
    fn every_placement_reads_back_as_written_and_leaves_the_other_bits() {
        for order in [ByteOrder::LittleEndian, ByteOrder::BigEndian] {
            for start in 0..64 {
                for size in 1..=16 {
                    let mut data = [0xA5u8; 8];
                    let raw = 0xBEEF_u64 & ((1 << size) - 1);
                    if insert(&mut data, start, size, order, raw).is_err() {
                        assert_eq!(extract(&data, start, size, order), None, "{order:?} {start} {size}");
                        continue;
                    }
                    assert_eq!(extract(&data, start, size, order), Some(raw), "{order:?} {start} {size}");
                    let mut again = data;
                    insert(&mut again, start, size, order, raw).unwrap();
                    assert_eq!(again, data);
                    let changed = data.iter().zip([0xA5u8; 8]).map(|(a, b)| (a ^ b).count_ones()).sum::<u32>();
                    assert!(changed <= size, "only the signal's bits change");
                }
            }
        }
    }

    #[test]
    fn motorola_counts_down_through_the_sawtooth() {
        // A 12-bit Motorola signal at bit 7: byte 0 whole, then byte 1's top nibble.
        let mut data = [0u8; 2];
        insert(&mut data, 7, 12, ByteOrder::BigEndian, 0xABC).unwrap();
        assert_eq!(data, [0xAB, 0xC0]);
    }

    #[test]
    fn a_signal_past_the_payload_is_refused_with_its_place() {
        let mut data = [0u8; 2];
        let err = insert(&mut data, 12, 8, ByteOrder::LittleEndian, 1).unwrap_err();
        assert_eq!(err.to_string(), "a 8-bit signal at bit 12 does not fit a 2-byte payload");
        assert_eq!(data, [0, 0]);
    }
}
