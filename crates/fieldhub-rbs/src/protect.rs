//! Alive counters and checksums, one rule per message, stamped into every
//! frame before it is sent so a receiving ECU's plausibility checks pass —
//! and the two faults a test injects on purpose: a counter that sticks, a
//! checksum that is wrong.
//!
//! Invariants:
//! - A counter runs `min, min+1, …, max, min, …`; a stuck counter repeats
//!   its value until released, then goes on from it.
//! - A checksum covers the data identifier first (low byte, then high
//!   byte, when the rule has one, as AUTOSAR E2E folds it in), then every
//!   byte of the payload but its own, in order; it is stamped after every
//!   other signal, the counter included. A corrupted checksum is the right
//!   one with every bit inverted, so it is never right by chance.
//! - SAE J1850 and CRC-8H2F come from the `crc` crate's catalogue
//!   (CRC-8/SAE-J1850, CRC-8/AUTOSAR); a user polynomial is computed bit by
//!   bit here, checked against the catalogue for the same parameters.

use can_dbc::ByteOrder;

use crate::bits::{insert, OutOfPayload};

const SAE_J1850: crc::Crc<u8> = crc::Crc::<u8>::new(&crc::CRC_8_SAE_J1850);
const CRC8_H2F: crc::Crc<u8> = crc::Crc::<u8>::new(&crc::CRC_8_AUTOSAR);

/// Why a rule cannot be used.
#[derive(Debug, PartialEq, Eq, thiserror::Error)]
pub enum RuleError {
    #[error("the counter's range {min}..={max} is empty; give min <= max")]
    EmptyRange { min: u64, max: u64 },
    #[error("the counter's maximum {max} does not fit its {size} bits; give a max below 2^{size}")]
    RangeTooWide { max: u64, size: u32 },
    #[error("the checksum byte {byte} lies outside the {len}-byte payload")]
    ChecksumOutside { byte: usize, len: usize },
    #[error(transparent)]
    OutOfPayload(#[from] OutOfPayload),
}

/// Where a signal lies in a payload (DBC bit numbering).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Place {
    pub start: u32,
    pub size: u32,
    pub order: ByteOrder,
}

/// An alive counter's signal and range.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct CounterRule {
    pub place: Place,
    pub min: u64,
    pub max: u64,
}

/// A message's alive counter as it runs.
#[derive(Debug)]
pub struct AliveCounter {
    rule: CounterRule,
    next: u64,
    stuck: bool,
}

impl AliveCounter {
    pub fn new(rule: CounterRule) -> Result<Self, RuleError> {
        let CounterRule { place, min, max } = rule;
        if min > max {
            return Err(RuleError::EmptyRange { min, max });
        }
        if place.size < 64 && max >> place.size != 0 {
            return Err(RuleError::RangeTooWide { max, size: place.size });
        }
        Ok(Self { rule, next: min, stuck: false })
    }

    /// Write the counter's value into `data` and move it on (unless it is
    /// stuck). Returns the value written.
    pub fn stamp(&mut self, data: &mut [u8]) -> Result<u64, OutOfPayload> {
        let Place { start, size, order } = self.rule.place;
        let value = self.next;
        insert(data, start, size, order, value)?;
        if !self.stuck {
            self.next = if value >= self.rule.max { self.rule.min } else { value + 1 };
        }
        Ok(value)
    }

    /// Make the counter repeat its value (`true`) or run again (`false`).
    pub fn stick(&mut self, stuck: bool) {
        self.stuck = stuck;
    }
}

/// How a checksum is computed.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Algorithm {
    /// Every covered byte XORed.
    Xor,
    /// CRC-8/SAE-J1850: polynomial 0x1D, initial 0xFF, final XOR 0xFF.
    SaeJ1850,
    /// CRC-8/AUTOSAR (CRC8H2F, E2E profile 2): polynomial 0x2F, initial
    /// 0xFF, final XOR 0xFF.
    Crc8H2F,
    /// A CRC-8 of the user's parameters (as the CRC catalogue writes them).
    Polynomial { poly: u8, init: u8, xorout: u8, reflect: bool },
}

impl Algorithm {
    /// The checksum of `bytes`.
    pub fn checksum(self, bytes: impl Iterator<Item = u8>) -> u8 {
        match self {
            Algorithm::Xor => bytes.fold(0, |acc, b| acc ^ b),
            Algorithm::SaeJ1850 => digest(&SAE_J1850, bytes),
            Algorithm::Crc8H2F => digest(&CRC8_H2F, bytes),
            Algorithm::Polynomial { poly, init, xorout, reflect } => crc8(poly, init, xorout, reflect, bytes),
        }
    }
}

fn digest(crc: &crc::Crc<u8>, bytes: impl Iterator<Item = u8>) -> u8 {
    let mut digest = crc.digest();
    for b in bytes {
        digest.update(&[b]);
    }
    digest.finalize()
}

/// A CRC-8 bit by bit; `reflect` reflects input and output alike.
fn crc8(poly: u8, init: u8, xorout: u8, reflect: bool, bytes: impl Iterator<Item = u8>) -> u8 {
    let mut crc = init;
    for b in bytes {
        crc ^= if reflect { b.reverse_bits() } else { b };
        for _ in 0..8 {
            crc = if crc & 0x80 != 0 { crc << 1 ^ poly } else { crc << 1 };
        }
    }
    let crc = if reflect { crc.reverse_bits() } else { crc };
    crc ^ xorout
}

/// A message's checksum: its byte, algorithm and data identifier.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ChecksumRule {
    pub byte: usize,
    pub algorithm: Algorithm,
    pub data_id: Option<u16>,
}

/// A message's checksum as it runs.
#[derive(Debug)]
pub struct Checksum {
    rule: ChecksumRule,
    corrupt: bool,
}

impl Checksum {
    /// A checksum for payloads of `len` bytes.
    pub fn new(rule: ChecksumRule, len: usize) -> Result<Self, RuleError> {
        if rule.byte >= len {
            return Err(RuleError::ChecksumOutside { byte: rule.byte, len });
        }
        Ok(Self { rule, corrupt: false })
    }

    /// Compute the checksum of `data` and write it (inverted while
    /// corrupted). Returns the byte written.
    pub fn stamp(&self, data: &mut [u8]) -> Result<u8, RuleError> {
        let ChecksumRule { byte, algorithm, data_id } = self.rule;
        if byte >= data.len() {
            return Err(RuleError::ChecksumOutside { byte, len: data.len() });
        }
        let id = data_id.map(u16::to_le_bytes).into_iter().flatten();
        let rest = data.iter().enumerate().filter(|&(i, _)| i != byte).map(|(_, &b)| b);
        let right = algorithm.checksum(id.chain(rest));
        data[byte] = if self.corrupt { !right } else { right };
        Ok(data[byte])
    }

    /// Make the checksum wrong (`true`) or right again (`false`).
    pub fn corrupt(&mut self, corrupt: bool) {
        self.corrupt = corrupt;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const CHECK: &[u8] = b"123456789";

    #[test]
    fn the_catalogued_crcs_give_their_check_values() {
        assert_eq!(Algorithm::SaeJ1850.checksum(CHECK.iter().copied()), 0x4B);
        assert_eq!(Algorithm::Crc8H2F.checksum(CHECK.iter().copied()), 0xDF);
        assert_eq!(Algorithm::Xor.checksum([0x0F, 0xF0, 0x11].into_iter()), 0xEE);
    }

    #[test]
    fn a_user_polynomial_matches_the_catalogue_for_the_same_parameters() {
        let bytes = || CHECK.iter().copied();
        let of = |poly, init, xorout, reflect| Algorithm::Polynomial { poly, init, xorout, reflect }.checksum(bytes());
        assert_eq!(of(0x1D, 0xFF, 0xFF, false), Algorithm::SaeJ1850.checksum(bytes()));
        assert_eq!(of(0x2F, 0xFF, 0xFF, false), Algorithm::Crc8H2F.checksum(bytes()));
        assert_eq!(of(0x07, 0x00, 0x00, false), crc::Crc::<u8>::new(&crc::CRC_8_SMBUS).checksum(CHECK));
        assert_eq!(of(0x07, 0xFF, 0x00, true), crc::Crc::<u8>::new(&crc::CRC_8_ROHC).checksum(CHECK));
    }

    fn counter(min: u64, max: u64) -> AliveCounter {
        let place = Place { start: 8, size: 4, order: ByteOrder::LittleEndian };
        AliveCounter::new(CounterRule { place, min, max }).unwrap()
    }

    #[test]
    fn a_counter_runs_through_its_range_and_wraps_and_sticks_when_told() {
        let mut c = counter(0, 14);
        let mut data = [0u8; 8];
        let values: Vec<u64> = (0..17).map(|_| c.stamp(&mut data).unwrap()).collect();
        assert_eq!(values, [0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 0, 1]);
        assert_eq!(data[1] & 0x0F, 1);
        c.stick(true);
        assert_eq!((c.stamp(&mut data).unwrap(), c.stamp(&mut data).unwrap()), (2, 2));
        c.stick(false);
        assert_eq!((c.stamp(&mut data).unwrap(), c.stamp(&mut data).unwrap()), (2, 3));
    }

    #[test]
    fn a_counter_range_that_is_empty_or_too_wide_is_refused_saying_which() {
        let place = Place { start: 0, size: 4, order: ByteOrder::LittleEndian };
        let err = AliveCounter::new(CounterRule { place, min: 3, max: 2 }).unwrap_err();
        assert_eq!(err, RuleError::EmptyRange { min: 3, max: 2 });
        let err = AliveCounter::new(CounterRule { place, min: 0, max: 16 }).unwrap_err();
        assert!(err.to_string().contains("16 does not fit its 4 bits"), "{err}");
    }

    #[test]
    fn a_checksum_covers_the_data_id_and_every_other_byte_and_corrupts_to_its_inverse() {
        let rule = ChecksumRule { byte: 0, algorithm: Algorithm::Crc8H2F, data_id: Some(0x1234) };
        let mut sum = Checksum::new(rule, 8).unwrap();
        let mut data = [0xAA, 1, 2, 3, 4, 5, 6, 7];
        let right = sum.stamp(&mut data).unwrap();
        let covered = [0x34, 0x12, 1, 2, 3, 4, 5, 6, 7];
        assert_eq!(right, crc::Crc::<u8>::new(&crc::CRC_8_AUTOSAR).checksum(&covered));
        assert_eq!(data[0], right);
        sum.corrupt(true);
        assert_eq!(sum.stamp(&mut data).unwrap(), !right);
        sum.corrupt(false);
        assert_eq!(sum.stamp(&mut data).unwrap(), right);
    }

    #[test]
    fn a_checksum_byte_outside_the_payload_is_refused_with_both_sizes() {
        let rule = ChecksumRule { byte: 8, algorithm: Algorithm::Xor, data_id: None };
        let err = Checksum::new(rule, 8).unwrap_err();
        assert_eq!(err.to_string(), "the checksum byte 8 lies outside the 8-byte payload");
    }
}
