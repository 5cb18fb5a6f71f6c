//! One frame of ISO-TP: its protocol control information (N_PCI) written
//! and read, and the length of the frame that carries it.
//!
//! Frame types (ISO 15765-2:2016 9.6), after the extended address byte
//! when there is one:
//! - single frame `0L` + L bytes (L 1–7); on CAN FD `00 LL` + LL bytes (escape);
//! - first frame `1H LL` (12-bit length 8–4,095), or `10 00` + 32-bit length
//!   (escape, for longer payloads), then as many bytes as the frame holds;
//! - consecutive frame `2N` (sequence number N, 1, 2, … 15, 0, 1, …) + bytes;
//! - flow control `3S BS ST` (S: 0 continue to send, 1 wait, 2 overflow).
//!
//! Frame lengths follow Linux's isotp: with padding a frame is filled to 8
//! bytes, or to the next CAN FD length; without, it is as long as its content,
//! except that CAN FD has no lengths between 8 and 64 but 12, 16, 20, 24,
//! 32, 48 and 64 — such a frame is filled with 0xCC, the standard's byte.

use crate::{Config, StMin, MAX_12BIT_LENGTH};

/// The byte ISO 15765-2 fills a CAN FD frame with when no padding is set.
pub const FD_FILL: u8 = 0xCC;

/// Flow control's flow status: continue to send.
pub const FS_CONTINUE: u8 = 0;
/// Flow control's flow status: wait for another flow control.
pub const FS_WAIT: u8 = 1;
/// Flow control's flow status: the payload does not fit the receiver's buffer.
pub const FS_OVERFLOW: u8 = 2;

/// The data of one frame to send, up to 64 bytes, built in place.
#[derive(Clone, Copy, PartialEq, Eq)]
pub struct FrameData {
    bytes: [u8; 64],
    len: usize,
}

impl FrameData {
    fn start(config: &Config) -> Self {
        let mut frame = Self { bytes: [0; 64], len: 0 };
        if let Some(address) = config.tx_address {
            frame.push(&[address]);
        }
        frame
    }

    fn push(&mut self, bytes: &[u8]) {
        self.bytes[self.len..self.len + bytes.len()].copy_from_slice(bytes);
        self.len += bytes.len();
    }

    /// Fill to the frame's length (see the module doc).
    fn finish(mut self, padding: Option<u8>) -> Self {
        let (len, fill) = match padding {
            Some(byte) => (fd_round_up(self.len.max(8)), byte),
            None if self.len > 8 => (fd_round_up(self.len), FD_FILL),
            None => return self,
        };
        self.bytes[self.len..len].fill(fill);
        self.len = len;
        self
    }

    /// The frame's data bytes.
    pub fn as_slice(&self) -> &[u8] {
        &self.bytes[..self.len]
    }
}

impl std::fmt::Debug for FrameData {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        for (i, byte) in self.as_slice().iter().enumerate() {
            write!(f, "{}{byte:02X}", if i == 0 { "" } else { " " })?;
        }
        Ok(())
    }
}

/// The shortest CAN FD data length of at least `len` bytes (`len` ≤ 64).
fn fd_round_up(len: usize) -> usize {
    [0, 1, 2, 3, 4, 5, 6, 7, 8, 12, 16, 20, 24, 32, 48, 64].into_iter().find(|&l| l >= len).unwrap_or(64)
}

/// The longest payload a single frame carries under `config`.
pub fn max_single(config: &Config) -> usize {
    let classic = 7 - config.tx_offset();
    if config.tx_dl > 8 {
        config.tx_dl - 2 - config.tx_offset()
    } else {
        classic
    }
}

/// A single frame carrying `payload` (at most [`max_single`] bytes).
pub fn single(config: &Config, payload: &[u8]) -> FrameData {
    let mut frame = FrameData::start(config);
    if payload.len() <= 7 - config.tx_offset() {
        frame.push(&[payload.len() as u8]);
    } else {
        frame.push(&[0, payload.len() as u8]);
    }
    frame.push(payload);
    frame.finish(config.padding)
}

/// A first frame announcing `total` bytes and carrying as many of
/// `payload`'s first bytes as fit; returns the frame and that count.
pub fn first(config: &Config, total: usize, payload: &[u8]) -> (FrameData, usize) {
    let mut frame = FrameData::start(config);
    if total <= MAX_12BIT_LENGTH {
        frame.push(&[0x10 | (total >> 8) as u8, total as u8]);
    } else {
        frame.push(&[0x10, 0]);
        frame.push(&(total as u32).to_be_bytes());
    }
    let carried = payload.len().min(config.tx_dl - frame.len);
    frame.push(&payload[..carried]);
    (frame.finish(config.padding), carried)
}

/// A consecutive frame with sequence number `sn` (its low 4 bits) and as
/// many of `payload`'s first bytes as fit; returns the frame and that count.
pub fn consecutive(config: &Config, sn: u8, payload: &[u8]) -> (FrameData, usize) {
    let mut frame = FrameData::start(config);
    frame.push(&[0x20 | (sn & 0x0F)]);
    let carried = payload.len().min(config.tx_dl - frame.len);
    frame.push(&payload[..carried]);
    (frame.finish(config.padding), carried)
}

/// A flow control frame: `status` ([`FS_CONTINUE`], [`FS_WAIT`],
/// [`FS_OVERFLOW`]) with the block size and STmin `config` asks for.
pub fn flow_control(config: &Config, status: u8) -> FrameData {
    let mut frame = FrameData::start(config);
    frame.push(&[0x30 | status, config.block_size, config.st_min.0]);
    frame.finish(config.padding)
}

/// A frame's N_PCI, read.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Pci {
    /// A whole payload of `len` bytes.
    Single { len: usize },
    /// The start of a payload of `len` bytes; `escape`: announced in 32 bits.
    First { len: usize, escape: bool },
    /// The next part of a payload.
    Consecutive { sn: u8 },
    /// The receiver's flow control.
    FlowControl { status: u8, block_size: u8, st_min: StMin },
}

/// A frame read: its N_PCI and where its payload bytes start.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Parsed {
    pub pci: Pci,
    /// Index of the first payload byte in the frame's data.
    pub data_at: usize,
}

/// A frame that is not ISO-TP.
#[derive(Clone, Debug, thiserror::Error, PartialEq, Eq)]
pub enum PciError {
    #[error("a frame of {len} bytes is too short for its N_PCI")]
    Short { len: usize },
    #[error("N_PCI type {0:#x} is none of single (0), first (1), consecutive (2) or flow control (3) frame")]
    UnknownType(u8),
    #[error("a single frame of length 0")]
    EmptySingle,
    #[error("a single frame of {announced} bytes in a frame that holds {holds}")]
    SingleTooLong { announced: usize, holds: usize },
    #[error("a first frame announcing a payload of 0 bytes")]
    EmptyFirst,
}

/// Read the N_PCI of a frame's `data`, whose first `offset` bytes are
/// addressing (1 with extended addressing, else 0).
pub fn parse(data: &[u8], offset: usize) -> Result<Parsed, PciError> {
    let short = || PciError::Short { len: data.len() };
    let byte = |i: usize| data.get(offset + i).copied().ok_or_else(short);
    let pci = byte(0)?;
    let parsed = match pci >> 4 {
        0 => {
            let (len, data_at) = match pci & 0x0F {
                0 => (usize::from(byte(1)?), offset + 2),
                len => (usize::from(len), offset + 1),
            };
            if len == 0 {
                return Err(PciError::EmptySingle);
            }
            let holds = data.len() - data_at;
            if len > holds {
                return Err(PciError::SingleTooLong { announced: len, holds });
            }
            Parsed { pci: Pci::Single { len }, data_at }
        }
        1 => {
            let short_len = (usize::from(pci & 0x0F) << 8) | usize::from(byte(1)?);
            let parsed = if short_len != 0 {
                Parsed { pci: Pci::First { len: short_len, escape: false }, data_at: offset + 2 }
            } else {
                let long = [byte(2)?, byte(3)?, byte(4)?, byte(5)?];
                let len = u32::from_be_bytes(long) as usize;
                Parsed { pci: Pci::First { len, escape: true }, data_at: offset + 6 }
            };
            if matches!(parsed.pci, Pci::First { len: 0, .. }) {
                return Err(PciError::EmptyFirst);
            }
            parsed
        }
        2 => Parsed { pci: Pci::Consecutive { sn: pci & 0x0F }, data_at: offset + 1 },
        3 => Parsed {
            pci: Pci::FlowControl { status: pci & 0x0F, block_size: byte(1)?, st_min: StMin(byte(2)?) },
            data_at: offset + 3,
        },
        other => return Err(PciError::UnknownType(other)),
    };
    Ok(parsed)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn classic() -> Config {
        Config::default()
    }

    fn fd(tx_dl: usize) -> Config {
        Config { tx_dl, ..Config::default() }
    }

    #[test]
    fn a_short_payload_is_one_single_frame_as_long_as_its_content() {
        assert_eq!(single(&classic(), &[0x3E, 0x00]).as_slice(), [0x02, 0x3E, 0x00]);
        let padded = Config { padding: Some(0xAA), ..classic() };
        assert_eq!(single(&padded, &[0x3E, 0x00]).as_slice(), [0x02, 0x3E, 0x00, 0xAA, 0xAA, 0xAA, 0xAA, 0xAA]);
        let extended = Config { tx_address: Some(0xF1), ..classic() };
        assert_eq!(single(&extended, &[1, 2, 3, 4, 5, 6]).as_slice(), [0xF1, 0x06, 1, 2, 3, 4, 5, 6]);
        assert_eq!(max_single(&classic()), 7);
        assert_eq!(max_single(&extended), 6);
    }

    #[test]
    fn can_fd_single_frames_over_7_bytes_escape_their_length_and_fill_to_a_fd_length() {
        let payload: Vec<u8> = (1..=10).collect();
        let frame = single(&fd(64), &payload);
        // 00 0A + 10 bytes = 12 bytes: a CAN FD length already.
        assert_eq!(frame.as_slice()[..2], [0x00, 0x0A]);
        assert_eq!(frame.as_slice().len(), 12);
        let frame = single(&fd(64), &(1..=11).collect::<Vec<u8>>());
        assert_eq!(frame.as_slice().len(), 16);
        assert_eq!(frame.as_slice()[13..], [FD_FILL; 3]);
        assert_eq!(max_single(&fd(64)), 62);
        // Up to 7 bytes the classic single frame, also on CAN FD.
        assert_eq!(single(&fd(64), &[9; 7]).as_slice()[0], 0x07);
    }

    #[test]
    fn first_frames_take_12_bits_up_to_4095_bytes_and_the_32_bit_escape_above() {
        let payload = vec![0x55; 60_000];
        let (frame, carried) = first(&classic(), 4095, &payload[..4095]);
        assert_eq!(frame.as_slice(), [0x1F, 0xFF, 0x55, 0x55, 0x55, 0x55, 0x55, 0x55]);
        assert_eq!(carried, 6);
        let (frame, carried) = first(&classic(), 60_000, &payload);
        assert_eq!(frame.as_slice(), [0x10, 0x00, 0x00, 0x00, 0xEA, 0x60, 0x55, 0x55]);
        assert_eq!(carried, 2);
        let (frame, carried) = first(&fd(64), 60_000, &payload);
        assert_eq!((frame.as_slice().len(), carried), (64, 58));
    }

    #[test]
    fn consecutive_frames_number_modulo_16_and_a_short_last_one_is_not_filled_without_padding() {
        let (frame, carried) = consecutive(&classic(), 0x11, &[1, 2, 3]);
        assert_eq!((frame.as_slice(), carried), (&[0x21, 1, 2, 3][..], 3));
        let padded = Config { padding: Some(0x00), ..classic() };
        assert_eq!(consecutive(&padded, 0, &[1]).0.as_slice(), [0x20, 1, 0, 0, 0, 0, 0, 0]);
        assert_eq!(consecutive(&classic(), 5, &[7; 20]).1, 7);
    }

    #[test]
    fn flow_control_carries_status_block_size_and_stmin() {
        let config = Config { block_size: 8, st_min: StMin(0xF5), padding: Some(0xCC), ..classic() };
        assert_eq!(flow_control(&config, FS_CONTINUE).as_slice(), [0x30, 0x08, 0xF5, 0xCC, 0xCC, 0xCC, 0xCC, 0xCC]);
        assert_eq!(flow_control(&classic(), FS_OVERFLOW).as_slice(), [0x32, 0x00, 0x00]);
    }

    #[test]
    fn every_frame_written_reads_back() {
        let payload: Vec<u8> = (0..=255).cycle().take(70_000).collect();
        for config in [classic(), fd(12), fd(64), Config { tx_address: Some(0x42), padding: Some(0xA5), ..fd(20) }] {
            let offset = config.tx_offset();
            let sf = single(&config, &payload[..max_single(&config)]);
            assert_eq!(
                parse(sf.as_slice(), offset).unwrap(),
                Parsed {
                    pci: Pci::Single { len: max_single(&config) },
                    data_at: offset + if config.tx_dl > 8 { 2 } else { 1 }
                }
            );
            for total in [4095, 70_000] {
                let (ff, carried) = first(&config, total, &payload);
                let parsed = parse(ff.as_slice(), offset).unwrap();
                assert_eq!(parsed.pci, Pci::First { len: total, escape: total > 4095 });
                assert_eq!(&ff.as_slice()[parsed.data_at..parsed.data_at + carried], &payload[..carried]);
            }
            let (cf, _) = consecutive(&config, 9, &payload);
            assert_eq!(parse(cf.as_slice(), offset).unwrap().pci, Pci::Consecutive { sn: 9 });
        }
    }

    #[test]
    fn frames_that_are_not_iso_tp_say_why() {
        assert_eq!(parse(&[], 0), Err(PciError::Short { len: 0 }));
        assert_eq!(parse(&[0x42], 1), Err(PciError::Short { len: 1 }));
        assert_eq!(parse(&[0x45, 0], 0), Err(PciError::UnknownType(4)));
        assert_eq!(parse(&[0x00, 0x00], 0), Err(PciError::EmptySingle));
        assert_eq!(parse(&[0x05, 1, 2], 0), Err(PciError::SingleTooLong { announced: 5, holds: 2 }));
        assert_eq!(parse(&[0x10, 0x00, 0, 0, 0, 0, 1, 2], 0), Err(PciError::EmptyFirst));
        assert_eq!(parse(&[0x10, 0x00, 0, 0], 0), Err(PciError::Short { len: 4 }));
        assert_eq!(parse(&[0x30, 8], 0), Err(PciError::Short { len: 2 }));
    }
}
