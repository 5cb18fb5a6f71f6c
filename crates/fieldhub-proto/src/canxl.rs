//! CAN XL and raw frames: their constructors, accessors and checks.
//!
//! A CAN XL frame (`FrameKind::CanXl`, spec/protocol.md 4.1.2) is the data
//! frame of ISO 11898-1:2024 (CAN XL), with the fields of Linux's
//! `struct canxl_frame`: `id` holds the 11-bit priority in bits 0..=10 and
//! the VCID in bits 16..=23 (`canxl_frame.prio`), `len8_dlc` the SDU type
//! (SDT), the flags `XL_SEC` and `XL_RRS`, then the 32-bit acceptance field
//! and 1..=2048 data bytes. A raw frame (`FrameKind::Raw`, 4.1.3) is a u32 id
//! and 0..=2048 opaque bytes.
//!
//! Both carry their payload in a shared buffer (`payload.rs`): building
//! one allocates once, cloning it does not.

use crate::frame::{Frame, FrameError, FrameFlags, FrameKind};
use crate::limits::MAX_RECORD_DATA;
use crate::payload::Payload;

/// Largest CAN XL payload (SocketCAN `CANXL_MAX_DLEN`).
pub const MAX_CANXL_DATA: usize = 2048;
/// Largest raw payload.
pub const MAX_RAW_DATA: usize = MAX_RECORD_DATA;
/// The priority identifier's bits in a CAN XL frame's id (`CANXL_PRIO_MASK`).
pub const CANXL_PRIO_MASK: u32 = 0x7FF;
/// Where the VCID sits in a CAN XL frame's id (`CANXL_VCID_OFFSET`).
pub const CANXL_VCID_OFFSET: u32 = 16;
/// The VCID's bits in a CAN XL frame's id (`CANXL_VCID_MASK`).
pub const CANXL_VCID_MASK: u32 = 0xFF << CANXL_VCID_OFFSET;

/// A CAN XL id sets no bit outside the priority and the VCID.
pub(crate) fn check_xl_id(id: u32) -> Result<(), FrameError> {
    if id & !(CANXL_PRIO_MASK | CANXL_VCID_MASK) != 0 {
        return Err(FrameError::XlIdBits { id });
    }
    Ok(())
}

/// A `canxl` record's validity (spec 4.3): flags ⊆ {SEC, RRS, ECHO}, id bits
/// in the priority and VCID, `len` 1..=2048 with as many data bytes. SDT and
/// AF take any value.
pub(crate) fn check_xl(flags: FrameFlags, id: u32, len: usize, data: &[u8]) -> Result<(), FrameError> {
    for (flag, name) in [(FrameFlags::BRS, "0x04"), (FrameFlags::ESI, "0x08")] {
        if flags.contains(flag) {
            return Err(FrameError::FlagNotAllowed { flag: name, kind: "CAN XL" });
        }
    }
    check_xl_id(id)?;
    if !(1..=MAX_CANXL_DATA).contains(&len) || data.len() != len {
        return Err(FrameError::XlLength { len });
    }
    Ok(())
}

/// A `raw` record's validity (spec 4.3): flags ⊆ {ECHO}, `len` 0..=2048 with
/// as many data bytes, `len8_dlc` 0; the id is the access rule's.
pub(crate) fn check_raw(flags: FrameFlags, len: usize, len8_dlc: u8, data: &[u8]) -> Result<(), FrameError> {
    crate::frame::only_echo(flags, "raw")?;
    if len > MAX_RAW_DATA || data.len() != len {
        return Err(FrameError::RawTooLong { len });
    }
    if len8_dlc != 0 {
        return Err(FrameError::RawLen8Dlc { dlc: len8_dlc });
    }
    Ok(())
}

/// `frame` (CAN XL or raw) with `len` data bytes: bytes beyond the old
/// length read as zero, bytes beyond the new one are cut.
pub(crate) fn with_shared_len(frame: Frame, len: usize) -> Result<Frame, FrameError> {
    let mut data = frame.data().to_vec();
    data.resize(len, 0);
    let af = frame.acceptance_field();
    Frame::from_parts(frame.kind, frame.flags, frame.id, len, frame.len8_dlc, af, &data)
}

impl Frame {
    /// A CAN XL data frame: `priority` the 11-bit priority identifier,
    /// `vcid` the virtual CAN network id, `sdt` the SDU type, `flags` ⊆
    /// {`XL_SEC`, `XL_RRS`}, `af` the acceptance field, 1..=2048 data bytes.
    pub fn can_xl(
        priority: u16,
        vcid: u8,
        sdt: u8,
        flags: FrameFlags,
        af: u32,
        data: &[u8],
    ) -> Result<Self, FrameError> {
        if flags.contains(FrameFlags::ECHO) {
            return Err(FrameError::FlagNotAllowed { flag: "echo", kind: "CAN XL" });
        }
        let id = u32::from(priority) | u32::from(vcid) << CANXL_VCID_OFFSET;
        Self::from_parts(FrameKind::CanXl, flags, id, data.len(), sdt, af, data)
    }

    /// A generic frame: `id` for the channel's access rule, 0..=2048 opaque
    /// data bytes.
    pub fn raw(id: u32, data: &[u8]) -> Result<Self, FrameError> {
        Self::from_parts(FrameKind::Raw, FrameFlags::empty(), id, data.len(), 0, 0, data)
    }

    /// Whether this is a CAN XL frame.
    pub fn is_xl(&self) -> bool {
        self.kind == FrameKind::CanXl
    }
    /// Whether this is a raw (generic) frame.
    pub fn is_raw(&self) -> bool {
        self.kind == FrameKind::Raw
    }
    /// A CAN XL frame's 11-bit priority identifier (`id` bits 0..=10).
    pub fn priority(&self) -> u16 {
        (self.id & CANXL_PRIO_MASK) as u16
    }
    /// A CAN XL frame's virtual CAN network id (`id` bits 16..=23); 0 on
    /// other kinds.
    pub fn vcid(&self) -> u8 {
        if self.is_xl() {
            ((self.id & CANXL_VCID_MASK) >> CANXL_VCID_OFFSET) as u8
        } else {
            0
        }
    }
    /// A CAN XL frame's SDU type; 0 on other kinds.
    pub fn sdt(&self) -> u8 {
        if self.is_xl() {
            self.len8_dlc
        } else {
            0
        }
    }
    /// Whether a CAN XL frame has the SEC bit (simple extended content).
    pub fn is_sec(&self) -> bool {
        self.is_xl() && self.flags.contains(FrameFlags::XL_SEC)
    }
    /// Whether a CAN XL frame has the RRS bit recessive.
    pub fn is_rrs(&self) -> bool {
        self.is_xl() && self.flags.contains(FrameFlags::XL_RRS)
    }
    /// A CAN XL frame's 32-bit acceptance field; 0 on other kinds.
    pub fn acceptance_field(&self) -> u32 {
        match &self.payload {
            Payload::Shared { af, .. } => *af,
            Payload::Inline(_) => 0,
        }
    }
    /// A CAN XL frame's 11-bit DLC as it appears on the wire (`len` − 1);
    /// 0 on other kinds.
    pub fn xl_dlc(&self) -> u16 {
        if self.is_xl() {
            (self.len() - 1) as u16
        } else {
            0
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_xl_frame_carries_priority_vcid_sdt_flags_and_acceptance_field() {
        let frame = Frame::can_xl(0x123, 0xAB, 0x03, FrameFlags::XL_SEC, 0x1234_5678, &[1, 2, 3]).unwrap();
        assert_eq!(frame.id(), 0x00AB_0123);
        assert_eq!((frame.priority(), frame.vcid(), frame.sdt()), (0x123, 0xAB, 0x03));
        assert!(frame.is_sec() && !frame.is_rrs() && !frame.is_extended() && !frame.is_remote());
        assert_eq!(frame.acceptance_field(), 0x1234_5678);
        assert_eq!((frame.len(), frame.xl_dlc(), frame.data()), (3, 2, &[1, 2, 3][..]));
    }

    #[test]
    fn an_xl_frame_with_rrs_still_carries_its_data() {
        let frame = Frame::can_xl(0x1, 0, 0, FrameFlags::XL_RRS, 0, &[9; 100]).unwrap();
        assert!(frame.is_rrs() && !frame.is_remote());
        assert_eq!(frame.data(), &[9; 100][..]);
    }

    #[test]
    fn xl_lengths_are_one_to_2048_and_raw_zero_to_2048() {
        assert_eq!(Frame::can_xl(1, 0, 0, FrameFlags::empty(), 0, &[]), Err(FrameError::XlLength { len: 0 }));
        assert!(Frame::can_xl(1, 0, 0, FrameFlags::empty(), 0, &[0; 2048]).is_ok());
        assert_eq!(Frame::can_xl(1, 0, 0, FrameFlags::empty(), 0, &[0; 2049]), Err(FrameError::XlLength { len: 2049 }));
        assert!(Frame::raw(0xFFFF_FFFF, &[]).is_ok());
        assert!(Frame::raw(0, &[0; 2048]).is_ok());
        assert_eq!(Frame::raw(0, &[0; 2049]), Err(FrameError::RawTooLong { len: 2049 }));
    }

    #[test]
    fn an_xl_priority_has_eleven_bits_and_an_id_no_bits_outside_priority_and_vcid() {
        assert_eq!(Frame::can_xl(0x800, 0, 0, FrameFlags::empty(), 0, &[1]), Err(FrameError::XlIdBits { id: 0x800 }));
        let frame = Frame::can_xl(0x7FF, 0xFF, 0, FrameFlags::empty(), 0, &[1]).unwrap();
        assert_eq!(frame.clone().with_id(0x0100_0000), Err(FrameError::XlIdBits { id: 0x0100_0000 }));
        assert_eq!(frame.with_id(0x0042_0001).unwrap().vcid(), 0x42);
    }

    #[test]
    fn fd_flags_are_refused_on_xl_and_every_flag_but_echo_on_raw() {
        assert!(Frame::can_xl(1, 0, 0, FrameFlags::BRS, 0, &[1]).is_err());
        assert!(Frame::from_parts(FrameKind::Raw, FrameFlags::EXTENDED, 1, 0, 0, 0, &[]).is_err());
        assert!(Frame::from_parts(FrameKind::Raw, FrameFlags::ECHO, 1, 0, 0, 0, &[]).is_ok());
        assert_eq!(
            Frame::from_parts(FrameKind::Raw, FrameFlags::empty(), 1, 0, 1, 0, &[]),
            Err(FrameError::RawLen8Dlc { dlc: 1 })
        );
    }

    #[test]
    fn a_clone_shares_the_payload_and_a_write_copies_it_first() {
        let frame = Frame::raw(7, &[1; 1000]).unwrap();
        let mut copy = frame.clone();
        assert!(std::ptr::eq(frame.data().as_ptr(), copy.data().as_ptr()), "a clone shares the buffer");
        copy.data_mut()[0] = 2;
        assert_eq!((frame.data()[0], copy.data()[0]), (1, 2));
    }

    #[test]
    fn with_len_zero_extends_and_cuts_a_shared_payload() {
        let frame = Frame::can_xl(1, 2, 3, FrameFlags::empty(), 4, &[7; 10]).unwrap();
        let longer = frame.clone().with_len(12).unwrap();
        assert_eq!(longer.data(), &[7, 7, 7, 7, 7, 7, 7, 7, 7, 7, 0, 0][..]);
        assert_eq!((longer.vcid(), longer.sdt(), longer.acceptance_field()), (2, 3, 4));
        assert_eq!(frame.with_len(0), Err(FrameError::XlLength { len: 0 }));
    }
}
