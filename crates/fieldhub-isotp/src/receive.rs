//! The receiving side: payloads reassembled from single frames, or from a
//! first frame and its consecutive frames, answered with flow control.
//!
//! The caller hands every frame of the receive id to
//! [`Receiver::on_frame`], sends the flow control it gets back on the
//! transmit id, and calls [`Receiver::poll`] by the deadline it returns.
//! Invariants: a payload is handed out only whole and in order (sequence
//! numbers checked); one transfer at a time — a new single or first frame
//! ends an unfinished one, as ISO 15765-2 says, and says so; a payload
//! longer than [`Config::max_payload`] is refused with OVFLW before any
//! buffer for it exists, and the buffer grows with what arrives, never with
//! what a first frame announces.
//!
//! A receiver with block size 0 that drops its flow control frames is a
//! listener: the `dump` tool's reassembly of a conversation between others.

use std::time::Duration;

use crate::pdu::{self, FrameData, Pci, PciError, FS_CONTINUE, FS_OVERFLOW};
use crate::Config;

/// What a frame brought.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Event {
    /// A whole payload.
    Payload(Vec<u8>),
    /// Send this flow control frame now.
    FlowControl(FrameData),
}

/// What [`Receiver::on_frame`] did with a frame: an error to report (the
/// frame, or the transfer it ended, was not good) and what it brought.
/// Both can be there: a first frame that ends an unfinished transfer.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Outcome {
    pub error: Option<RxError>,
    pub event: Option<Event>,
}

/// Why a frame or a transfer was not taken.
#[derive(Clone, Debug, thiserror::Error, PartialEq, Eq)]
pub enum RxError {
    #[error("not an ISO-TP frame: {0}")]
    Malformed(#[from] PciError),
    #[error(
        "consecutive frame {got:X} where {expected:X} was due: the transfer ({received} of {total} bytes) is dropped"
    )]
    WrongSequence { expected: u8, got: u8, received: usize, total: usize },
    #[error(
        "no consecutive frame within N_Cr ({} ms): the transfer ({received} of {total} bytes) is dropped",
        n_cr.as_millis()
    )]
    Timeout { n_cr: Duration, received: usize, total: usize },
    #[error("a new transfer began before the last one ended ({received} of {total} bytes): that one is dropped")]
    Interrupted { received: usize, total: usize },
    #[error("a first frame announces {announced} bytes, more than the {max} this receiver takes: answered OVFLW")]
    TooLong { announced: usize, max: usize },
    #[error("a frame of {len} bytes where padding makes every frame at least 8: not taken")]
    PaddingLength { len: usize },
    #[error("a frame padded with other bytes than {expected:#04X}: not taken")]
    PaddingContent { expected: u8 },
}

#[derive(Debug)]
struct Transfer {
    buffer: Vec<u8>,
    total: usize,
    sn: u8,
    block_left: u8,
    deadline: Duration,
}

/// Reassembles payloads for one receive id.
pub struct Receiver {
    config: Config,
    transfer: Option<Transfer>,
}

/// Capacity reserved when a transfer starts: what a first frame announces,
/// up to this; the buffer grows with the data beyond it.
const INITIAL_BUFFER: usize = 64 << 10;

impl Receiver {
    pub fn new(config: Config) -> Self {
        Self { config, transfer: None }
    }

    /// Whether a transfer is under way.
    pub fn busy(&self) -> bool {
        self.transfer.is_some()
    }

    /// Take a frame received at `now`.
    pub fn on_frame(&mut self, data: &[u8], now: Duration) -> Outcome {
        if self.config.rx_address.is_some_and(|address| data.first() != Some(&address)) {
            return Outcome::default();
        }
        let offset = usize::from(self.config.rx_address.is_some());
        let parsed = match pdu::parse(data, offset) {
            Ok(parsed) => parsed,
            Err(e) => return Outcome { error: Some(e.into()), event: None },
        };
        let payload = &data[parsed.data_at..];
        match parsed.pci {
            Pci::Single { len } => {
                if let Err(e) = self.check_padding(data, parsed.data_at + len) {
                    return Outcome { error: Some(e), event: None };
                }
                Outcome { error: self.interrupt(), event: Some(Event::Payload(payload[..len].to_vec())) }
            }
            Pci::First { .. } if self.check_padding(data, data.len()).is_err() => {
                Outcome { error: Some(RxError::PaddingLength { len: data.len() }), event: None }
            }
            Pci::First { len, .. } => {
                let error = self.interrupt();
                if len > self.config.max_payload {
                    // Told in place of an interrupted transfer's end: the refusal is the news.
                    return Outcome {
                        error: Some(RxError::TooLong { announced: len, max: self.config.max_payload }),
                        event: Some(Event::FlowControl(pdu::flow_control(&self.config, FS_OVERFLOW))),
                    };
                }
                let mut buffer = Vec::with_capacity(len.min(INITIAL_BUFFER));
                buffer.extend_from_slice(&payload[..payload.len().min(len)]);
                self.transfer = Some(Transfer {
                    buffer,
                    total: len,
                    sn: 1,
                    block_left: self.config.block_size,
                    deadline: now + self.config.n_cr,
                });
                Outcome { error, event: Some(Event::FlowControl(pdu::flow_control(&self.config, FS_CONTINUE))) }
            }
            Pci::Consecutive { sn } => {
                if let Some(t) = &self.transfer {
                    let wanted = t.total - t.buffer.len();
                    if let Err(e) = self.check_padding(data, parsed.data_at + payload.len().min(wanted)) {
                        return Outcome { error: Some(e), event: None };
                    }
                }
                self.consecutive(sn, payload, now)
            }
            // The other direction's: for the sender on this id.
            Pci::FlowControl { .. } => Outcome::default(),
        }
    }

    fn consecutive(&mut self, sn: u8, payload: &[u8], now: Duration) -> Outcome {
        // None under way: a frame of a transfer begun before we listened, ignored.
        let Some(transfer) = self.transfer.as_mut() else {
            return Outcome::default();
        };
        if sn != transfer.sn {
            let error = RxError::WrongSequence {
                expected: transfer.sn,
                got: sn,
                received: transfer.buffer.len(),
                total: transfer.total,
            };
            self.transfer = None;
            return Outcome { error: Some(error), event: None };
        }
        let wanted = transfer.total - transfer.buffer.len();
        transfer.buffer.extend_from_slice(&payload[..payload.len().min(wanted)]);
        transfer.sn = (transfer.sn + 1) & 0x0F;
        transfer.deadline = now + self.config.n_cr;
        if transfer.buffer.len() == transfer.total {
            let done = self.transfer.take().map(|t| t.buffer).unwrap_or_default();
            return Outcome { error: None, event: Some(Event::Payload(done)) };
        }
        if self.config.block_size != 0 {
            transfer.block_left -= 1;
            if transfer.block_left == 0 {
                transfer.block_left = self.config.block_size;
                let fc = pdu::flow_control(&self.config, FS_CONTINUE);
                return Outcome { error: None, event: Some(Event::FlowControl(fc)) };
            }
        }
        Outcome::default()
    }

    /// With [`Config::rx_padding`]: whether a frame whose content ends at
    /// `used` is padded as it must be.
    fn check_padding(&self, data: &[u8], used: usize) -> Result<(), RxError> {
        let Some(expected) = self.config.rx_padding else {
            return Ok(());
        };
        if data.len() < 8 {
            return Err(RxError::PaddingLength { len: data.len() });
        }
        match data[used..].iter().all(|&b| b == expected) {
            true => Ok(()),
            false => Err(RxError::PaddingContent { expected }),
        }
    }

    /// End the transfer under way, if any, saying so.
    fn interrupt(&mut self) -> Option<RxError> {
        self.transfer.take().map(|t| RxError::Interrupted { received: t.buffer.len(), total: t.total })
    }

    /// At `now`: the deadline of the next consecutive frame (`None`: no
    /// transfer under way), or the transfer's end when it has passed.
    pub fn poll(&mut self, now: Duration) -> Result<Option<Duration>, RxError> {
        match &self.transfer {
            Some(t) if now >= t.deadline => {
                let error = RxError::Timeout { n_cr: self.config.n_cr, received: t.buffer.len(), total: t.total };
                self.transfer = None;
                Err(error)
            }
            Some(t) => Ok(Some(t.deadline)),
            None => Ok(None),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::send::{SendStep, Sender};
    use crate::StMin;

    const MS: Duration = Duration::from_millis(1);

    fn payload(event: Option<Event>) -> Vec<u8> {
        match event {
            Some(Event::Payload(p)) => p,
            other => panic!("expected a payload, got {other:?}"),
        }
    }

    fn flow_control(event: Option<Event>) -> Vec<u8> {
        match event {
            Some(Event::FlowControl(f)) => f.as_slice().to_vec(),
            other => panic!("expected flow control, got {other:?}"),
        }
    }

    #[test]
    fn a_single_frame_is_a_payload() {
        let mut receiver = Receiver::new(Config::default());
        assert_eq!(payload(receiver.on_frame(&[0x03, 0x62, 0xF1, 0x90, 0xAA], MS).event), [0x62, 0xF1, 0x90]);
        assert!(!receiver.busy());
    }

    /// The standard's exchange from the receiving side: FF, FC(BS 2,
    /// STmin 10), CF 1, CF 2, FC, CF 3.
    #[test]
    fn a_first_frame_is_answered_and_every_block_gets_flow_control() {
        let config = Config { block_size: 2, st_min: StMin(10), ..Config::default() };
        let mut receiver = Receiver::new(config);
        let outcome = receiver.on_frame(&[0x10, 26, 1, 2, 3, 4, 5, 6], Duration::ZERO);
        assert_eq!(outcome.error, None);
        assert_eq!(flow_control(outcome.event), [0x30, 2, 10]);
        assert_eq!(receiver.poll(MS), Ok(Some(1000 * MS)));
        assert_eq!(receiver.on_frame(&[0x21, 7, 8, 9, 10, 11, 12, 13], 10 * MS), Outcome::default());
        assert_eq!(flow_control(receiver.on_frame(&[0x22, 14, 15, 16, 17, 18, 19, 20], 20 * MS).event), [0x30, 2, 10]);
        let done = payload(receiver.on_frame(&[0x23, 21, 22, 23, 24, 25, 26, 0xCC], 30 * MS).event);
        assert_eq!(done, (1..=26).collect::<Vec<u8>>());
        assert_eq!(receiver.poll(2000 * MS), Ok(None));
    }

    #[test]
    fn a_wrong_sequence_number_drops_the_transfer() {
        let mut receiver = Receiver::new(Config::default());
        receiver.on_frame(&[0x10, 20, 1, 2, 3, 4, 5, 6], Duration::ZERO);
        let outcome = receiver.on_frame(&[0x22, 7, 8, 9, 10, 11, 12, 13], MS);
        assert_eq!(outcome.error, Some(RxError::WrongSequence { expected: 1, got: 2, received: 6, total: 20 }));
        assert!(!receiver.busy());
        // Consecutive frames of no transfer are ignored.
        assert_eq!(receiver.on_frame(&[0x21, 7], MS), Outcome::default());
    }

    #[test]
    fn no_consecutive_frame_within_n_cr_drops_the_transfer() {
        let mut receiver = Receiver::new(Config::default());
        receiver.on_frame(&[0x10, 20, 1, 2, 3, 4, 5, 6], Duration::ZERO);
        receiver.on_frame(&[0x21, 7, 8, 9, 10, 11, 12, 13], 500 * MS);
        assert_eq!(receiver.poll(1499 * MS), Ok(Some(1500 * MS)));
        let err = receiver.poll(1500 * MS).unwrap_err();
        assert_eq!(err, RxError::Timeout { n_cr: 1000 * MS, received: 13, total: 20 });
        assert!(err.to_string().contains("within N_Cr (1000 ms)"), "{err}");
        assert!(!receiver.busy());
    }

    #[test]
    fn a_new_first_frame_ends_the_transfer_under_way_and_says_so() {
        let mut receiver = Receiver::new(Config::default());
        receiver.on_frame(&[0x10, 20, 1, 2, 3, 4, 5, 6], Duration::ZERO);
        let outcome = receiver.on_frame(&[0x10, 9, 1, 2, 3, 4, 5, 6], MS);
        assert_eq!(outcome.error, Some(RxError::Interrupted { received: 6, total: 20 }));
        assert_eq!(flow_control(outcome.event), [0x30, 0, 0]);
        assert_eq!(payload(receiver.on_frame(&[0x21, 7, 8, 9], MS).event), [1, 2, 3, 4, 5, 6, 7, 8, 9]);
    }

    #[test]
    fn a_payload_over_the_limit_is_answered_with_overflow_and_nothing_is_allocated() {
        let mut receiver = Receiver::new(Config { max_payload: 4095, ..Config::default() });
        let outcome = receiver.on_frame(&[0x10, 0, 0xFF, 0xFF, 0xFF, 0xFF, 1, 2], Duration::ZERO);
        assert_eq!(outcome.error, Some(RxError::TooLong { announced: u32::MAX as usize, max: 4095 }));
        assert_eq!(flow_control(outcome.event), [0x32, 0, 0]);
        assert!(!receiver.busy());
    }

    #[test]
    fn frames_for_another_extended_address_are_not_taken() {
        let config = Config { rx_address: Some(0xF1), tx_address: Some(0x10), ..Config::default() };
        let mut receiver = Receiver::new(config);
        assert_eq!(receiver.on_frame(&[0xF2, 0x01, 0x3E], MS), Outcome::default());
        assert_eq!(payload(receiver.on_frame(&[0xF1, 0x01, 0x3E], MS).event), [0x3E]);
        let outcome = receiver.on_frame(&[0xF1, 0x10, 10, 1, 2, 3, 4, 5], MS);
        assert_eq!(flow_control(outcome.event), [0x10, 0x30, 0, 0]);
    }

    #[test]
    fn malformed_frames_are_reported_and_leave_the_transfer_as_it_was() {
        let mut receiver = Receiver::new(Config::default());
        receiver.on_frame(&[0x10, 20, 1, 2, 3, 4, 5, 6], Duration::ZERO);
        let outcome = receiver.on_frame(&[0x45], MS);
        assert_eq!(outcome.error, Some(RxError::Malformed(PciError::UnknownType(4))));
        assert!(receiver.busy());
    }

    #[test]
    fn frames_without_the_padding_asked_for_are_not_taken() {
        let mut receiver = Receiver::new(Config { rx_padding: Some(0xAA), ..Config::default() });
        let short = receiver.on_frame(&[0x02, 1, 2], MS);
        assert_eq!(short, Outcome { error: Some(RxError::PaddingLength { len: 3 }), event: None });
        let other = receiver.on_frame(&[0x02, 1, 2, 0xAA, 0xAA, 0x00, 0xAA, 0xAA], MS);
        assert_eq!(other, Outcome { error: Some(RxError::PaddingContent { expected: 0xAA }), event: None });
        assert_eq!(payload(receiver.on_frame(&[0x02, 1, 2, 0xAA, 0xAA, 0xAA, 0xAA, 0xAA], MS).event), [1, 2]);
        receiver.on_frame(&[0x10, 9, 1, 2, 3, 4, 5, 6], MS);
        let last = receiver.on_frame(&[0x21, 7, 8, 9, 0xAA, 0xAA, 0xAA, 0xAA], MS);
        assert_eq!(payload(last.event), [1, 2, 3, 4, 5, 6, 7, 8, 9]);
    }

    /// A sender and a receiver on a manual clock, handing each other their
    /// frames: payloads of every size class arrive whole, classic and CAN FD,
    /// with and without extended addressing and padding.
    #[test]
    fn a_sender_and_a_receiver_carry_4095_and_60000_bytes() {
        let links = [
            (Config::default(), Config::default()),
            (Config { tx_dl: 64, ..Config::default() }, Config { tx_dl: 64, ..Config::default() }),
            (
                Config { tx_address: Some(0xA1), rx_address: Some(0xB2), padding: Some(0x55), ..Config::default() },
                Config { tx_address: Some(0xB2), rx_address: Some(0xA1), rx_padding: Some(0x55), ..Config::default() },
            ),
        ];
        for (tx, rx) in links {
            for size in [1, 7, 62, 63, 4095, 4096, 60_000] {
                let data: Vec<u8> = (0..size).map(|i| (i * 7 + 3) as u8).collect();
                let rx = Config { block_size: 8, st_min: StMin(0xF1), ..rx.clone() };
                assert_eq!(exchange(tx.clone(), rx, data.clone()), data, "{size} bytes, {tx:?}");
            }
        }
    }

    fn exchange(tx: Config, rx: Config, data: Vec<u8>) -> Vec<u8> {
        let mut sender = Sender::new(tx.clone(), data).unwrap();
        let mut receiver = Receiver::new(rx);
        let mut now = Duration::ZERO;
        loop {
            match sender.poll(now).unwrap() {
                SendStep::Frame(frame) => {
                    assert!(frame.as_slice().len() <= tx.tx_dl);
                    let outcome = receiver.on_frame(frame.as_slice(), now);
                    assert_eq!(outcome.error, None);
                    match outcome.event {
                        Some(Event::Payload(p)) => return p,
                        Some(Event::FlowControl(fc)) => sender.on_frame(fc.as_slice(), now).unwrap(),
                        None => {}
                    }
                }
                SendStep::WaitUntil(t) => now = t,
                other => panic!("{other:?}"),
            }
        }
    }
}
