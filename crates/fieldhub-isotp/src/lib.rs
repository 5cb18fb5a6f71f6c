//! ISO-TP, the transport protocol of ISO 15765-2:2016, without I/O: the
//! `fieldhub isotp` tools drive it over a hub's channel, as quinn drives
//! quinn-proto. Nothing here opens a socket, reads a clock or sleeps: frames'
//! data bytes and the time (`now`, a [`Duration`] since any fixed instant the
//! caller picks) go in; frames to send, deadlines and payloads come out.
//!
//! Layout:
//! - [`pdu`]: one frame's protocol control information (N_PCI) — single,
//!   first, consecutive and flow control frames, with the 2016 escapes (a
//!   single frame longer than 7 bytes on CAN FD, a first frame's 32-bit
//!   length for payloads over 4,095 bytes) — written and read, and the
//!   frame lengths a link takes (padding, CAN FD's lengths).
//! - [`send`]: a [`Sender`] segments one payload and follows the receiver's
//!   flow control (block size, STmin, WAIT, OVFLW) within N_Bs.
//! - [`receive`]: a [`Receiver`] reassembles payloads, answers first frames
//!   and blocks with flow control, and gives up after N_Cr.
//!
//! The addressing of the CAN identifiers (which id carries which direction)
//! is the caller's: this crate sees data bytes, with the extended
//! addressing's first byte ([`Config::tx_address`], [`Config::rx_address`]).
//!
//! Why its own crate: the ISO-TP crates on crates.io at the time of writing
//! are tied to an async runtime or an embedded-hal CAN trait, or stop at
//! 4,095 bytes; none is sans-IO with the 2016 escape sequence.

use std::time::Duration;

pub mod pdu;
pub mod receive;
pub mod send;

pub use receive::{Event, Outcome, Receiver, RxError};
pub use send::{SendStep, Sender, TxError};

/// A classic CAN frame's data length: ISO-TP's TX_DL without CAN FD.
pub const CLASSIC_DL: usize = 8;

/// The longest payload a 12-bit first frame length announces; longer
/// payloads use the 2016 escape (FF_DL 0, then 32 bits).
pub const MAX_12BIT_LENGTH: usize = 4095;

/// N_Bs and N_Cr as ISO 15765-2 and Linux's isotp take them by default.
pub const DEFAULT_TIMEOUT: Duration = Duration::from_millis(1000);

/// The longest payload a [`Receiver`] accepts unless told otherwise: the
/// buffer a hostile first frame could make it allocate (FF_DL is up to
/// 4 GiB); longer ones get flow control OVFLW.
pub const DEFAULT_MAX_PAYLOAD: usize = 16 << 20;

/// STmin, the separation time a receiver asks between consecutive frames,
/// as its byte in flow control: `0x00`–`0x7F` milliseconds, `0xF1`–`0xF9`
/// 100–900 µs.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct StMin(pub u8);

impl StMin {
    /// The time it asks for. A reserved value (`0x80`–`0xF0`, `0xFA`–`0xFF`)
    /// counts as 127 ms, as the standard tells a sender to take it.
    pub fn duration(self) -> Duration {
        match self.0 {
            ms @ 0x00..=0x7F => Duration::from_millis(u64::from(ms)),
            code @ 0xF1..=0xF9 => Duration::from_micros(u64::from(code & 0x0F) * 100),
            _ => Duration::from_millis(0x7F),
        }
    }

    /// Whether the byte is one the standard defines.
    pub fn is_defined(self) -> bool {
        matches!(self.0, 0x00..=0x7F | 0xF1..=0xF9)
    }
}

/// The frame layout and flow control one end of an ISO-TP connection uses.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Config {
    /// TX_DL: the longest frame data this end sends, 8 for classic CAN or
    /// a CAN FD length (8, 12, 16, 20, 24, 32, 48, 64).
    pub tx_dl: usize,
    /// Fill every frame up to its full length (8, or the CAN FD length)
    /// with this byte; `None`: frames as short as their content (a CAN FD
    /// frame over 8 bytes still rounds up to a CAN FD length, with 0xCC).
    pub padding: Option<u8>,
    /// Frames received must be padded with this byte (to 8 bytes, or their
    /// CAN FD length); one that is not is reported and not taken.
    pub rx_padding: Option<u8>,
    /// Extended addressing: the first data byte of every frame this end sends.
    pub tx_address: Option<u8>,
    /// Extended addressing: the first data byte of every frame this end
    /// takes; frames with another one are not for it.
    pub rx_address: Option<u8>,
    /// The block size this end's flow control asks for (0: no further flow control).
    pub block_size: u8,
    /// The STmin this end's flow control asks for.
    pub st_min: StMin,
    /// N_Bs: how long a sender waits for flow control.
    pub n_bs: Duration,
    /// N_Cr: how long a receiver waits for the next consecutive frame.
    pub n_cr: Duration,
    /// The longest payload a receiver takes (longer: flow control OVFLW).
    pub max_payload: usize,
}

impl Default for Config {
    fn default() -> Self {
        Self {
            tx_dl: CLASSIC_DL,
            padding: None,
            rx_padding: None,
            tx_address: None,
            rx_address: None,
            block_size: 0,
            st_min: StMin(0),
            n_bs: DEFAULT_TIMEOUT,
            n_cr: DEFAULT_TIMEOUT,
            max_payload: DEFAULT_MAX_PAYLOAD,
        }
    }
}

/// A configuration that cannot work.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum ConfigError {
    #[error(
        "TX_DL {0} is not a frame length ISO-TP uses: 8 for classic CAN, or 12, 16, 20, 24, 32, 48 or 64 for CAN FD"
    )]
    TxDl(usize),
}

impl Config {
    /// Check the settings that could make frames no link carries.
    pub fn check(&self) -> Result<(), ConfigError> {
        match self.tx_dl {
            8 | 12 | 16 | 20 | 24 | 32 | 48 | 64 => Ok(()),
            other => Err(ConfigError::TxDl(other)),
        }
    }

    /// Bytes before the N_PCI: the extended address, when there is one.
    pub(crate) fn tx_offset(&self) -> usize {
        usize::from(self.tx_address.is_some())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stmin_bytes_are_milliseconds_or_hundreds_of_microseconds() {
        assert_eq!(StMin(0).duration(), Duration::ZERO);
        assert_eq!(StMin(0x7F).duration(), Duration::from_millis(127));
        assert_eq!(StMin(0xF1).duration(), Duration::from_micros(100));
        assert_eq!(StMin(0xF9).duration(), Duration::from_micros(900));
        for reserved in [0x80, 0xF0, 0xFA, 0xFF] {
            assert_eq!(StMin(reserved).duration(), Duration::from_millis(127), "{reserved:#x}");
            assert!(!StMin(reserved).is_defined());
        }
    }

    #[test]
    fn only_iso_tp_frame_lengths_are_a_tx_dl() {
        for ok in [8, 12, 64] {
            assert_eq!(Config { tx_dl: ok, ..Config::default() }.check(), Ok(()));
        }
        for bad in [0, 7, 9, 63, 65] {
            assert_eq!(Config { tx_dl: bad, ..Config::default() }.check(), Err(ConfigError::TxDl(bad)));
        }
    }
}
