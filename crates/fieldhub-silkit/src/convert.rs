//! Frames both ways between a fieldhub [`Frame`] and a `SilKit_CanFrame`.
//!
//! Identifier, XTD (IDE), RTR, FDF, BRS, ESI, the DLC and the payload map
//! one to one. What one side cannot carry is refused, never truncated:
//! error frames have no SIL Kit form, CAN XL frames and classic frames over
//! 8 bytes or FD frames of a length no DLC encodes have no fieldhub form.

use std::marker::PhantomData;

use fieldhub_proto::frame::{Frame, FrameError, FrameFlags};

use crate::ffi::{self, flag};

/// Why a frame does not cross.
#[derive(Debug, PartialEq, Eq, thiserror::Error)]
pub enum ConvertError {
    #[error("error frames have no SIL Kit form (SIL Kit's CAN carries no error frames)")]
    ErrorFrame,
    #[error("CAN XL frames (flag XLF) are not carried by fieldhub")]
    CanXl,
    #[error("a remote frame with the FDF flag is not a CAN frame")]
    RemoteFd,
    #[error("the frame is invalid: {0}")]
    Invalid(#[from] FrameError),
}

/// A `SilKit_CanFrame` that points into the [`Frame`] it was made from,
/// for the duration of a `SendFrame` call (SIL Kit copies the payload).
pub struct SilKitFrame<'a> {
    raw: ffi::CanFrame,
    _payload: PhantomData<&'a [u8]>,
}

impl SilKitFrame<'_> {
    /// The struct to hand to SIL Kit; it points into the borrowed frame.
    pub fn raw_mut(&mut self) -> &mut ffi::CanFrame {
        &mut self.raw
    }

    pub fn raw(&self) -> &ffi::CanFrame {
        &self.raw
    }
}

/// The SIL Kit form of `frame`.
pub fn to_silkit(frame: &Frame) -> Result<SilKitFrame<'_>, ConvertError> {
    if frame.is_error() {
        return Err(ConvertError::ErrorFrame);
    }
    let f = frame.flags();
    let mut flags = 0;
    for (ours, theirs) in [
        (FrameFlags::EXTENDED, flag::IDE),
        (FrameFlags::REMOTE, flag::RTR),
        (FrameFlags::BRS, flag::BRS),
        (FrameFlags::ESI, flag::ESI),
    ] {
        if f.contains(ours) {
            flags |= theirs;
        }
    }
    if frame.is_fd() {
        flags |= flag::FDF;
    }
    let data = frame.data();
    let raw = ffi::CanFrame {
        header: ffi::StructHeader { version: ffi::CAN_FRAME_VERSION, reserved: [0; 3] },
        id: frame.id(),
        flags,
        dlc: u16::from(frame.dlc()),
        sdt: 0,
        vcid: 0,
        af: 0,
        data: ffi::ByteVector { data: data.as_ptr(), size: data.len() },
    };
    Ok(SilKitFrame { raw, _payload: PhantomData })
}

/// The fieldhub frame for a SIL Kit frame's fields and its payload bytes
/// (`raw.data` read by the caller, who knows how long they live).
pub fn from_silkit(raw: &ffi::CanFrame, payload: &[u8]) -> Result<Frame, ConvertError> {
    let has = |bit: u32| raw.flags & bit != 0;
    if has(flag::XLF) {
        return Err(ConvertError::CanXl);
    }
    let extended = has(flag::IDE);
    if has(flag::FDF) {
        if has(flag::RTR) {
            return Err(ConvertError::RemoteFd);
        }
        let mut flags = FrameFlags::empty();
        flags.set(FrameFlags::EXTENDED, extended);
        flags.set(FrameFlags::BRS, has(flag::BRS));
        flags.set(FrameFlags::ESI, has(flag::ESI));
        return Ok(Frame::can_fd(raw.id, flags, payload)?);
    }
    if has(flag::RTR) {
        // A remote frame carries no data; its DLC is the length it asks for
        // (9..=15 mean 8, as on the wire).
        return Ok(Frame::remote(raw.id, extended, usize::from(raw.dlc.min(8)))?);
    }
    let mut frame = Frame::can(raw.id, extended, payload)?;
    if payload.len() == 8 && (9..=15).contains(&raw.dlc) {
        frame.set_len8_dlc(raw.dlc as u8)?;
    }
    Ok(frame)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn round_trip(frame: Frame) -> Frame {
        let silkit = to_silkit(&frame).unwrap();
        let raw = *silkit.raw();
        // SAFETY: the pointer and size were taken from `frame.data()`,
        // which outlives this read.
        let payload = unsafe { std::slice::from_raw_parts(raw.data.data, raw.data.size) };
        from_silkit(&raw, payload).unwrap()
    }

    #[test]
    fn every_kind_of_frame_crosses_unchanged() {
        let fd = FrameFlags::EXTENDED | FrameFlags::BRS | FrameFlags::ESI;
        let mut len8 = Frame::can(0x123, false, &[1; 8]).unwrap();
        len8.set_len8_dlc(13).unwrap();
        let frames = [
            Frame::can(0x7FF, false, &[1, 2, 3]).unwrap(),
            Frame::can(0x1FFF_FFFF, true, &[]).unwrap(),
            Frame::remote(0x10, false, 4).unwrap(),
            Frame::remote(0x10, true, 0).unwrap(),
            Frame::can_fd(0x1234, fd, &[7; 64]).unwrap(),
            Frame::can_fd(0x12, FrameFlags::BRS, &[7; 12]).unwrap(),
            Frame::can_fd(0x12, FrameFlags::empty(), &[]).unwrap(),
            len8,
        ];
        for frame in frames {
            assert!(round_trip(frame.clone()) == frame, "{frame:?}");
        }
    }

    #[test]
    fn flags_and_dlc_are_the_silkit_ones() {
        let frame = Frame::can_fd(0x1234, FrameFlags::EXTENDED | FrameFlags::BRS, &[0; 48]).unwrap();
        let silkit = to_silkit(&frame).unwrap();
        let raw = silkit.raw();
        assert_eq!((raw.flags, raw.dlc, raw.data.size), (flag::IDE | flag::FDF | flag::BRS, 14, 48));
        assert_eq!(raw.header.version, ffi::CAN_FRAME_VERSION);
        let remote = Frame::remote(0x10, false, 3).unwrap();
        let silkit = to_silkit(&remote).unwrap();
        assert_eq!((silkit.raw().flags, silkit.raw().dlc, silkit.raw().data.size), (flag::RTR, 3, 0));
    }

    #[test]
    fn what_one_side_cannot_carry_is_refused() {
        let error = Frame::error(0x4, [0; 8]).unwrap();
        assert_eq!(to_silkit(&error).err(), Some(ConvertError::ErrorFrame));
        let raw = |flags: u32, dlc: u16| ffi::CanFrame {
            header: ffi::StructHeader::default(),
            id: 0x100,
            flags,
            dlc,
            sdt: 0,
            vcid: 0,
            af: 0,
            data: ffi::ByteVector { data: std::ptr::null(), size: 0 },
        };
        assert_eq!(from_silkit(&raw(flag::XLF, 0), &[]), Err(ConvertError::CanXl));
        assert_eq!(from_silkit(&raw(flag::FDF | flag::RTR, 0), &[]), Err(ConvertError::RemoteFd));
        assert!(matches!(from_silkit(&raw(0, 9), &[0; 9]), Err(ConvertError::Invalid(_))));
        assert!(matches!(from_silkit(&raw(flag::FDF, 10), &[0; 10]), Err(ConvertError::Invalid(_))));
        assert!(matches!(from_silkit(&raw(0, 0), &[]), Ok(f) if f.id() == 0x100 && f.is_empty()));
    }
}
