//! Frame conversion between SocketCAN's `can_frame`/`canfd_frame` and the
//! hub's [`Frame`].
//!
//! Invariants: conversion is lossless for every frame either side can carry —
//! identifier width, RTR with its requested length, the raw DLC 9..=15 of a
//! classic 8-byte frame (`len8_dlc`), FD BRS/ESI, and error frames (class bits
//! in the id, eight detail bytes). A SocketCAN frame the hub cannot represent
//! (an invalid length, say) is refused with [`ConvertError`], never truncated.

use fieldhub_proto::{Frame, FrameFlags, FrameKind};
use libc::{can_frame, canfd_frame, CANFD_BRS, CANFD_ESI, CANFD_FDF, CAN_EFF_FLAG, CAN_EFF_MASK, CAN_ERR_FLAG};
use libc::{CAN_ERR_MASK, CAN_RTR_FLAG, CAN_SFF_MASK};
use socketcan::frame::{can_frame_default, canfd_frame_default, CanRawFrame};

/// A SocketCAN frame the hub's frame model refuses.
#[derive(Debug, thiserror::Error)]
#[error("SocketCAN frame with can_id {can_id:#010x} cannot be bridged: {source}")]
pub struct ConvertError {
    can_id: u32,
    #[source]
    source: fieldhub_proto::FrameError,
}

/// A frame as read from, or to be written to, a SocketCAN raw socket.
pub type RawFrame = CanRawFrame;

/// Convert a frame read from SocketCAN into a hub frame.
pub fn to_hub(raw: &RawFrame) -> Result<Frame, ConvertError> {
    let (can_id, payload) = match raw {
        CanRawFrame::Classic(f) => (f.can_id, &f.data[..usize::from(f.can_dlc).min(f.data.len())]),
        CanRawFrame::Fd(f) => (f.can_id, &f.data[..usize::from(f.len).min(f.data.len())]),
    };
    let fail = |source| ConvertError { can_id, source };
    if can_id & CAN_ERR_FLAG != 0 {
        let mut details = [0u8; fieldhub_proto::frame::ERROR_FRAME_LEN];
        let n = payload.len().min(details.len());
        details[..n].copy_from_slice(&payload[..n]);
        return Frame::error(can_id & CAN_ERR_MASK, details).map_err(fail);
    }
    let extended = can_id & CAN_EFF_FLAG != 0;
    let id = can_id & if extended { CAN_EFF_MASK } else { CAN_SFF_MASK };
    match raw {
        CanRawFrame::Fd(f) => {
            let mut flags = FrameFlags::empty();
            flags.set(FrameFlags::EXTENDED, extended);
            flags.set(FrameFlags::BRS, i32::from(f.flags) & CANFD_BRS != 0);
            flags.set(FrameFlags::ESI, i32::from(f.flags) & CANFD_ESI != 0);
            Frame::can_fd(id, flags, payload).map_err(fail)
        }
        CanRawFrame::Classic(f) => {
            let mut frame = if can_id & CAN_RTR_FLAG != 0 {
                Frame::remote(id, extended, usize::from(f.can_dlc)).map_err(fail)?
            } else {
                Frame::can(id, extended, payload).map_err(fail)?
            };
            if frame.len() == 8 && (9..=15).contains(&f.len8_dlc) {
                frame.set_len8_dlc(f.len8_dlc).map_err(fail)?;
            }
            Ok(frame)
        }
    }
}

/// Convert a hub frame into the SocketCAN frame to write; `None` for CAN
/// XL and raw frames, which this bridge does not carry.
pub fn to_socketcan(frame: &Frame) -> Option<RawFrame> {
    Some(match frame.kind() {
        FrameKind::CanFd => {
            let mut raw: canfd_frame = canfd_frame_default();
            raw.can_id = frame.socketcan_id();
            raw.len = frame.len() as u8;
            let mut flags = CANFD_FDF;
            if frame.flags().contains(FrameFlags::BRS) {
                flags |= CANFD_BRS;
            }
            if frame.flags().contains(FrameFlags::ESI) {
                flags |= CANFD_ESI;
            }
            raw.flags = flags as u8;
            raw.data[..frame.len()].copy_from_slice(frame.data());
            CanRawFrame::Fd(raw)
        }
        FrameKind::Can | FrameKind::Error | FrameKind::Lin => {
            let mut raw: can_frame = can_frame_default();
            raw.can_id = frame.socketcan_id();
            raw.can_dlc = frame.len() as u8;
            // A LIN frame (which a CAN interface never carries) keeps its
            // checksum byte in the record's len8_dlc field.
            raw.len8_dlc = if frame.is_lin() { 0 } else { frame.len8_dlc() };
            let data = frame.data();
            raw.data[..data.len()].copy_from_slice(data);
            CanRawFrame::Classic(raw)
        }
        FrameKind::CanXl | FrameKind::Raw => return None,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn round_trip(frame: Frame) -> Frame {
        to_hub(&to_socketcan(&frame).expect("a CAN frame converts")).expect("a hub frame converts back")
    }

    #[test]
    fn classic_standard_frame_keeps_id_and_payload_both_ways() {
        let frame = Frame::can(0x123, false, &[1, 2, 3]).unwrap();
        let Some(CanRawFrame::Classic(raw)) = to_socketcan(&frame) else { panic!("classic expected") };
        assert_eq!((raw.can_id, raw.can_dlc, &raw.data[..3]), (0x123, 3, &[1u8, 2, 3][..]));
        assert_eq!(round_trip(frame.clone()), frame);
    }

    #[test]
    fn extended_id_sets_and_reads_the_eff_flag() {
        let frame = Frame::can(0x1ABC_DEF0, true, &[9; 8]).unwrap();
        let Some(CanRawFrame::Classic(raw)) = to_socketcan(&frame) else { panic!("classic expected") };
        assert_eq!(raw.can_id, 0x1ABC_DEF0 | CAN_EFF_FLAG);
        assert_eq!(round_trip(frame.clone()), frame);
    }

    #[test]
    fn remote_frame_keeps_its_requested_length_and_len8_dlc() {
        let frame = Frame::remote(0x7FF, false, 5).unwrap();
        let Some(CanRawFrame::Classic(raw)) = to_socketcan(&frame) else { panic!("classic expected") };
        assert_eq!((raw.can_id, raw.can_dlc), (0x7FF | CAN_RTR_FLAG, 5));
        assert_eq!(round_trip(frame.clone()), frame);
        let mut long = Frame::can(0x10, false, &[0; 8]).unwrap();
        long.set_len8_dlc(12).unwrap();
        assert_eq!(round_trip(long).len8_dlc(), 12);
    }

    #[test]
    fn fd_frame_keeps_brs_esi_and_its_64_bytes() {
        let data: Vec<u8> = (0..64).collect();
        let frame = Frame::can_fd(0x1234, FrameFlags::EXTENDED | FrameFlags::BRS | FrameFlags::ESI, &data).unwrap();
        let Some(CanRawFrame::Fd(raw)) = to_socketcan(&frame) else { panic!("FD expected") };
        assert_eq!(raw.can_id, 0x1234 | CAN_EFF_FLAG);
        assert_eq!(i32::from(raw.flags), CANFD_BRS | CANFD_ESI | CANFD_FDF);
        assert_eq!(round_trip(frame.clone()), frame);
        let plain = Frame::can_fd(0x5, FrameFlags::empty(), &[7; 12]).unwrap();
        assert_eq!(round_trip(plain.clone()), plain);
    }

    #[test]
    fn socketcan_error_frame_becomes_a_hub_error_frame() {
        let mut raw = can_frame_default();
        raw.can_id = CAN_ERR_FLAG | 0x0004; // CAN_ERR_CRTL
        raw.can_dlc = 8;
        raw.data = [0, 0x08, 0, 0, 0, 0, 0x80, 0x10];
        let frame = to_hub(&CanRawFrame::Classic(raw)).unwrap();
        assert!(frame.is_error());
        assert_eq!((frame.id(), frame.data()), (0x0004, &raw.data[..]));
        let Some(CanRawFrame::Classic(back)) = to_socketcan(&frame) else { panic!("classic expected") };
        assert_eq!((back.can_id, back.can_dlc, back.data), (raw.can_id, 8, raw.data));
    }

    #[test]
    fn invalid_fd_length_is_refused_not_truncated() {
        let mut raw = canfd_frame_default();
        raw.can_id = 0x10;
        raw.len = 13;
        let err = to_hub(&CanRawFrame::Fd(raw)).unwrap_err();
        assert!(err.to_string().contains("cannot be bridged"), "{err}");
    }
}
