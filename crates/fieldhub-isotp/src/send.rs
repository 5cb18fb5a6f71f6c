//! The sending side of one ISO-TP transfer: a payload cut into a single
//! frame, or a first frame and consecutive frames paced by the receiver's
//! flow control.
//!
//! The caller loops on [`Sender::poll`] and sends each frame it gets, waits
//! when told, and hands every frame that comes in on the receive id to
//! [`Sender::on_frame`]. Invariants: consecutive frames go out only after a
//! flow control `CTS` and, within a block, no sooner than STmin after the
//! previous one; a block of BS frames is followed by a new wait for flow
//! control; N_Bs runs from the first frame (or the end of a block, or a
//! `WAIT`) until flow control comes.

use std::time::Duration;

use crate::pdu::{self, FrameData, Pci, FS_CONTINUE, FS_OVERFLOW, FS_WAIT};
use crate::Config;

/// The most a first frame's 32-bit length announces.
pub const MAX_PAYLOAD: usize = u32::MAX as usize;

/// What the caller does next.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SendStep {
    /// Send this frame now, then poll again.
    Frame(FrameData),
    /// Nothing before this time (STmin): poll again then.
    WaitUntil(Duration),
    /// Flow control is due by this time: hand incoming frames to
    /// [`Sender::on_frame`], poll again when one came or the time is up.
    AwaitFlowControl(Duration),
    /// Every byte is sent.
    Done,
}

/// Why a transfer failed.
#[derive(Clone, Debug, thiserror::Error, PartialEq, Eq)]
pub enum TxError {
    #[error("a payload of {0} bytes: ISO-TP carries 1 to 4,294,967,295 bytes")]
    Length(usize),
    #[error(
        "no flow control from the receiver within N_Bs ({} ms) after {sent} of {total} bytes: \
         is a receiver listening on the destination id, with the same addressing?",
        n_bs.as_millis()
    )]
    FlowControlTimeout { n_bs: Duration, sent: usize, total: usize },
    #[error("the receiver refused {0} bytes with flow control OVFLW: its buffer is smaller")]
    Overflow(usize),
    #[error("flow control with status {0}, which is none of 0 (continue), 1 (wait) or 2 (overflow)")]
    FlowStatus(u8),
    #[error("flow control not padded to 8 bytes with {expected:#04X}, as -p's RX asks: the transfer is dropped")]
    Padding { expected: u8 },
}

#[derive(Clone, Copy, Debug)]
enum State {
    Start,
    AwaitFc {
        deadline: Duration,
    },
    /// `block_left`: frames left in this block (`None`: no limit).
    Sending {
        next_at: Duration,
        block_left: Option<u8>,
        st_min: Duration,
    },
    Done,
}

/// One payload on its way out.
pub struct Sender {
    config: Config,
    payload: Vec<u8>,
    sent: usize,
    sn: u8,
    state: State,
}

impl Sender {
    /// A transfer of `payload` under `config`.
    pub fn new(config: Config, payload: Vec<u8>) -> Result<Self, TxError> {
        if payload.is_empty() || payload.len() > MAX_PAYLOAD {
            return Err(TxError::Length(payload.len()));
        }
        Ok(Self { config, payload, sent: 0, sn: 1, state: State::Start })
    }

    /// Bytes handed out in frames so far.
    pub fn sent(&self) -> usize {
        self.sent
    }

    /// The next thing to do at time `now`.
    pub fn poll(&mut self, now: Duration) -> Result<SendStep, TxError> {
        match self.state {
            State::Start if self.payload.len() <= pdu::max_single(&self.config) => {
                self.sent = self.payload.len();
                self.state = State::Done;
                Ok(SendStep::Frame(pdu::single(&self.config, &self.payload)))
            }
            State::Start => {
                let (frame, carried) = pdu::first(&self.config, self.payload.len(), &self.payload);
                self.sent = carried;
                self.state = State::AwaitFc { deadline: now + self.config.n_bs };
                Ok(SendStep::Frame(frame))
            }
            State::AwaitFc { deadline } if now >= deadline => {
                self.state = State::Done;
                Err(TxError::FlowControlTimeout { n_bs: self.config.n_bs, sent: self.sent, total: self.payload.len() })
            }
            State::AwaitFc { deadline } => Ok(SendStep::AwaitFlowControl(deadline)),
            State::Sending { next_at, .. } if now < next_at => Ok(SendStep::WaitUntil(next_at)),
            State::Sending { block_left, st_min, .. } => {
                let (frame, carried) = pdu::consecutive(&self.config, self.sn, &self.payload[self.sent..]);
                self.sent += carried;
                self.sn = (self.sn + 1) & 0x0F;
                let block_left = block_left.map(|n| n - 1);
                self.state = if self.sent == self.payload.len() {
                    State::Done
                } else if block_left == Some(0) {
                    State::AwaitFc { deadline: now + self.config.n_bs }
                } else {
                    State::Sending { next_at: now + st_min, block_left, st_min }
                };
                Ok(SendStep::Frame(frame))
            }
            State::Done => Ok(SendStep::Done),
        }
    }

    /// A frame received on the receive id at `now`: flow control while
    /// one is awaited moves the transfer on; anything else is not for the
    /// sender and is ignored, as the standard says.
    pub fn on_frame(&mut self, data: &[u8], now: Duration) -> Result<(), TxError> {
        let State::AwaitFc { .. } = self.state else {
            return Ok(());
        };
        if self.config.rx_address.is_some_and(|address| data.first() != Some(&address)) {
            return Ok(());
        }
        let offset = usize::from(self.config.rx_address.is_some());
        let Ok(pdu::Parsed { pci: Pci::FlowControl { status, block_size, st_min }, data_at }) =
            pdu::parse(data, offset)
        else {
            return Ok(());
        };
        if let Some(expected) = self.config.rx_padding {
            if data.len() < 8 || data[data_at..].iter().any(|&b| b != expected) {
                self.state = State::Done;
                return Err(TxError::Padding { expected });
            }
        }
        match status {
            FS_CONTINUE => {
                let block_left = (block_size != 0).then_some(block_size);
                self.state = State::Sending { next_at: now, block_left, st_min: st_min.duration() };
                Ok(())
            }
            FS_WAIT => {
                self.state = State::AwaitFc { deadline: now + self.config.n_bs };
                Ok(())
            }
            FS_OVERFLOW => {
                self.state = State::Done;
                Err(TxError::Overflow(self.payload.len()))
            }
            other => {
                self.state = State::Done;
                Err(TxError::FlowStatus(other))
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const MS: Duration = Duration::from_millis(1);

    fn frame(step: Result<SendStep, TxError>) -> Vec<u8> {
        match step {
            Ok(SendStep::Frame(frame)) => frame.as_slice().to_vec(),
            other => panic!("expected a frame, got {other:?}"),
        }
    }

    #[test]
    fn a_payload_that_fits_is_one_single_frame() {
        let mut sender = Sender::new(Config::default(), vec![0x22, 0xF1, 0x90]).unwrap();
        assert_eq!(frame(sender.poll(Duration::ZERO)), [0x03, 0x22, 0xF1, 0x90]);
        assert_eq!(sender.poll(Duration::ZERO), Ok(SendStep::Done));
    }

    /// ISO 15765-2's example exchange: FF, FC(BS 2, STmin 10 ms), two CFs
    /// 10 ms apart, FC again, the last CF.
    #[test]
    fn consecutive_frames_follow_block_size_and_stmin() {
        let payload: Vec<u8> = (1..=26).collect();
        let mut sender = Sender::new(Config::default(), payload).unwrap();
        let t0 = Duration::from_secs(1);
        assert_eq!(frame(sender.poll(t0)), [0x10, 26, 1, 2, 3, 4, 5, 6]);
        assert_eq!(sender.poll(t0 + MS), Ok(SendStep::AwaitFlowControl(t0 + 1000 * MS)));
        // Not flow control, or the wrong frame type: ignored.
        sender.on_frame(&[0x21, 1, 2], t0 + 2 * MS).unwrap();
        assert_eq!(sender.poll(t0 + 2 * MS), Ok(SendStep::AwaitFlowControl(t0 + 1000 * MS)));
        sender.on_frame(&[0x30, 2, 10], t0 + 5 * MS).unwrap();
        assert_eq!(frame(sender.poll(t0 + 5 * MS)), [0x21, 7, 8, 9, 10, 11, 12, 13]);
        assert_eq!(sender.poll(t0 + 6 * MS), Ok(SendStep::WaitUntil(t0 + 15 * MS)));
        assert_eq!(frame(sender.poll(t0 + 15 * MS)), [0x22, 14, 15, 16, 17, 18, 19, 20]);
        // The block is done: flow control again, N_Bs from now.
        assert_eq!(sender.poll(t0 + 15 * MS), Ok(SendStep::AwaitFlowControl(t0 + 1015 * MS)));
        sender.on_frame(&[0x30, 2, 10], t0 + 20 * MS).unwrap();
        assert_eq!(frame(sender.poll(t0 + 20 * MS)), [0x23, 21, 22, 23, 24, 25, 26]);
        assert_eq!(sender.poll(t0 + 20 * MS), Ok(SendStep::Done));
        assert_eq!(sender.sent(), 26);
    }

    #[test]
    fn sequence_numbers_wrap_after_15_and_block_size_0_sends_the_rest_at_once() {
        let mut sender = Sender::new(Config::default(), vec![7; 6 + 7 * 17]).unwrap();
        frame(sender.poll(Duration::ZERO));
        sender.on_frame(&[0x30, 0, 0], Duration::ZERO).unwrap();
        let sns: Vec<u8> = (0..17).map(|_| frame(sender.poll(Duration::ZERO))[0]).collect();
        assert_eq!(sns[..3], [0x21, 0x22, 0x23]);
        assert_eq!(sns[14..], [0x2F, 0x20, 0x21]);
        assert_eq!(sender.poll(Duration::ZERO), Ok(SendStep::Done));
    }

    #[test]
    fn microsecond_stmin_codes_and_wait_frames_are_followed() {
        let mut sender = Sender::new(Config::default(), vec![1; 20]).unwrap();
        frame(sender.poll(Duration::ZERO));
        // WAIT restarts N_Bs.
        sender.on_frame(&[0x31, 0, 0], 900 * MS).unwrap();
        assert_eq!(sender.poll(1000 * MS), Ok(SendStep::AwaitFlowControl(1900 * MS)));
        sender.on_frame(&[0x30, 0, 0xF5], 1000 * MS).unwrap();
        frame(sender.poll(1000 * MS));
        assert_eq!(sender.poll(1000 * MS), Ok(SendStep::WaitUntil(1000 * MS + Duration::from_micros(500))));
    }

    #[test]
    fn no_flow_control_within_n_bs_fails_the_transfer() {
        let mut sender = Sender::new(Config::default(), vec![1; 4095]).unwrap();
        frame(sender.poll(Duration::ZERO));
        let err = sender.poll(1000 * MS).unwrap_err();
        assert_eq!(err, TxError::FlowControlTimeout { n_bs: 1000 * MS, sent: 6, total: 4095 });
        assert!(err.to_string().contains("within N_Bs (1000 ms) after 6 of 4095 bytes"), "{err}");
        assert_eq!(sender.poll(2000 * MS), Ok(SendStep::Done));
    }

    #[test]
    fn overflow_and_undefined_flow_status_end_the_transfer() {
        let mut sender = Sender::new(Config::default(), vec![1; 60_000]).unwrap();
        assert_eq!(frame(sender.poll(Duration::ZERO))[..6], [0x10, 0, 0, 0, 0xEA, 0x60]);
        assert_eq!(sender.on_frame(&[0x32, 0, 0], MS), Err(TxError::Overflow(60_000)));
        let mut sender = Sender::new(Config::default(), vec![1; 100]).unwrap();
        frame(sender.poll(Duration::ZERO));
        assert_eq!(sender.on_frame(&[0x37, 0, 0], MS), Err(TxError::FlowStatus(7)));
    }

    #[test]
    fn extended_addressing_puts_the_address_first_and_takes_only_flow_control_for_its_own() {
        let config = Config { tx_address: Some(0xF1), rx_address: Some(0x10), ..Config::default() };
        let mut sender = Sender::new(config, (1..=12).collect()).unwrap();
        assert_eq!(frame(sender.poll(Duration::ZERO)), [0xF1, 0x10, 12, 1, 2, 3, 4, 5]);
        sender.on_frame(&[0x11, 0x30, 0, 0], MS).unwrap();
        assert!(matches!(sender.poll(MS), Ok(SendStep::AwaitFlowControl(_))));
        sender.on_frame(&[0x10, 0x30, 0, 0], MS).unwrap();
        assert_eq!(frame(sender.poll(MS)), [0xF1, 0x21, 6, 7, 8, 9, 10, 11]);
        assert_eq!(frame(sender.poll(MS)), [0xF1, 0x22, 12]);
    }

    #[test]
    fn flow_control_without_the_padding_asked_for_ends_the_transfer() {
        let config = Config { rx_padding: Some(0x55), ..Config::default() };
        let mut sender = Sender::new(config.clone(), vec![1; 20]).unwrap();
        frame(sender.poll(Duration::ZERO));
        assert_eq!(sender.on_frame(&[0x30, 0, 0], MS), Err(TxError::Padding { expected: 0x55 }));
        let mut sender = Sender::new(config, vec![1; 20]).unwrap();
        frame(sender.poll(Duration::ZERO));
        sender.on_frame(&[0x30, 0, 0, 0x55, 0x55, 0x55, 0x55, 0x55], MS).unwrap();
        assert_eq!(frame(sender.poll(MS))[0], 0x21);
    }

    #[test]
    fn empty_payloads_are_refused() {
        assert_eq!(Sender::new(Config::default(), Vec::new()).err(), Some(TxError::Length(0)));
    }
}
