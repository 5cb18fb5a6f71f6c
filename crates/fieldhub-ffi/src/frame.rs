//! The C frame types and their conversion to and from [`Frame`].
//!
//! `fh_frame` has the layout of Linux `struct canfd_frame` (and its first 16
//! bytes that of `struct can_frame`), so SocketCAN code keeps its frame
//! handling. Conversion is strict where SocketCAN would send something
//! else than asked (a classic frame longer than 8 bytes is an error, not a
//! truncation) and lenient where the kernel is (a `len8_dlc` that does not
//! apply is ignored, as the kernel ignores it).

use fieldhub_client::{Frame, FrameFlags, FrameKind, FrameMeta};
use fieldhub_proto::frame::{CAN_EFF_FLAG, CAN_ERR_FLAG, CAN_RTR_FLAG, ERROR_FRAME_LEN, MAX_EXTENDED_ID};

use crate::status::fh_status::FH_ERR_INVALID_FRAME;
use crate::status::Failure;

/// `can_id` flag: the identifier is 29 bits (SocketCAN `CAN_EFF_FLAG`).
pub const FH_CAN_EFF_FLAG: u32 = CAN_EFF_FLAG;
/// `can_id` flag: remote transmission request (SocketCAN `CAN_RTR_FLAG`).
pub const FH_CAN_RTR_FLAG: u32 = CAN_RTR_FLAG;
/// `can_id` flag: error frame (SocketCAN `CAN_ERR_FLAG`).
pub const FH_CAN_ERR_FLAG: u32 = CAN_ERR_FLAG;
/// Mask of an 11-bit identifier (SocketCAN `CAN_SFF_MASK`).
pub const FH_CAN_SFF_MASK: u32 = 0x7FF;
/// Mask of a 29-bit identifier (SocketCAN `CAN_EFF_MASK`).
pub const FH_CAN_EFF_MASK: u32 = MAX_EXTENDED_ID;
/// `fh_frame.flags`: bit rate switch (SocketCAN `CANFD_BRS`). Implies CAN FD.
pub const FH_CANFD_BRS: u8 = 0x01;
/// `fh_frame.flags`: error state indicator (SocketCAN `CANFD_ESI`). Implies CAN FD.
pub const FH_CANFD_ESI: u8 = 0x02;
/// `fh_frame.flags`: this is a CAN FD frame (SocketCAN `CANFD_FDF`).
pub const FH_CANFD_FDF: u8 = 0x04;
/// Largest payload of a classic CAN frame.
pub const FH_CAN_MAX_DLEN: usize = 8;
/// Largest payload of a CAN FD frame.
pub const FH_CANFD_MAX_DLEN: usize = 64;
/// `fh_meta.flags`: the frame is this port's own, confirmed as sent on the
/// bus (ports opened with `FH_PORT_RECEIVE_OWN`; SocketCAN `MSG_CONFIRM`).
pub const FH_META_ECHO: u32 = 0x01;

const FD_FLAGS: u8 = FH_CANFD_BRS | FH_CANFD_ESI | FH_CANFD_FDF;

/// A CAN or CAN FD frame, binary-compatible with Linux `struct canfd_frame`;
/// its first 16 bytes match `struct can_frame`.
///
/// - `can_id`: identifier plus `FH_CAN_EFF_FLAG` (29-bit), `FH_CAN_RTR_FLAG`
///   (remote) or `FH_CAN_ERR_FLAG` (error frame: the low 29 bits are the
///   `CAN_ERR_*` class, `data[0..8]` the details).
/// - `len`: payload length; for a remote frame the requested length.
/// - `flags`: 0 for classic CAN. A CAN FD frame has `FH_CANFD_FDF` set (frames
///   received always do; when sending, `FH_CANFD_BRS` or `FH_CANFD_ESI` also
///   mark it FD), plus `FH_CANFD_BRS` / `FH_CANFD_ESI`.
/// - `__res0`: ignored on send, 0 on receive.
/// - `len8_dlc`: raw DLC 9..15 of a classic frame with `len` 8 (as in
///   `struct can_frame`); other values are ignored on send. 0 on receive
///   unless the sender set one.
/// - `data`: payload; bytes past `len` are ignored on send, 0 on receive.
#[repr(C, align(8))]
#[allow(non_camel_case_types)]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct fh_frame {
    pub can_id: u32,
    pub len: u8,
    pub flags: u8,
    pub __res0: u8,
    pub len8_dlc: u8,
    pub data: [u8; FH_CANFD_MAX_DLEN],
}

const _: () = assert!(std::mem::size_of::<fh_frame>() == 72);
const _: () = assert!(std::mem::align_of::<fh_frame>() == 8);
const _: () = assert!(std::mem::offset_of!(fh_frame, data) == 8);

/// What the hub attached to a received frame.
#[repr(C)]
#[allow(non_camel_case_types)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct fh_meta {
    /// When the hub put the frame on the channel: ns since the Unix epoch;
    /// never decreases within a channel.
    pub timestamp_ns: u64,
    /// Position in the channel's total order: 1, 2, 3… without gaps (frames
    /// your filters or an overrun removed leave gaps you can see).
    pub seq: u64,
    /// Hub-wide id of the sending port (`fh_port_status.port_id` of that
    /// port); 0 for frames the hub made itself.
    pub sender: u32,
    /// `FH_META_*` bits.
    pub flags: u32,
    /// Hub-wide id of the channel (`fh_port_status.channel_id`).
    pub channel_id: u16,
    /// Handle of the receiving port, as `fh_port_open` returned it.
    pub port: u16,
    /// Always 0; room for later fields without changing the size.
    pub reserved: u32,
}

/// One acceptance filter, binary-compatible with SocketCAN `struct
/// can_filter`: a frame passes when `frame.can_id & can_mask == can_id &
/// can_mask`, comparing the id together with its EFF and RTR flag bits —
/// or, with `CAN_INV_FILTER` (0x20000000) set in `can_id`, when it does not.
#[repr(C)]
#[allow(non_camel_case_types)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct fh_filter {
    pub can_id: u32,
    pub can_mask: u32,
}

impl fh_frame {
    /// An all-zero frame (classic, id 0, no data).
    pub const fn zeroed() -> Self {
        Self { can_id: 0, len: 0, flags: 0, __res0: 0, len8_dlc: 0, data: [0; FH_CANFD_MAX_DLEN] }
    }

    /// The frame this struct describes, or why it describes none.
    pub fn to_frame(&self) -> Result<Frame, Failure> {
        let invalid = |why: String| Failure::new(FH_ERR_INVALID_FRAME, why);
        let len = usize::from(self.len);
        if self.can_id & FH_CAN_ERR_FLAG != 0 {
            if len != ERROR_FRAME_LEN {
                return Err(invalid(format!("error frames carry exactly 8 data bytes, got len {len}")));
            }
            let mut details = [0u8; ERROR_FRAME_LEN];
            details.copy_from_slice(&self.data[..ERROR_FRAME_LEN]);
            return Frame::error(self.can_id & FH_CAN_EFF_MASK, details).map_err(|e| invalid(e.to_string()));
        }
        let extended = self.can_id & FH_CAN_EFF_FLAG != 0;
        let id = self.can_id & FH_CAN_EFF_MASK;
        let remote = self.can_id & FH_CAN_RTR_FLAG != 0;
        if self.flags & !FD_FLAGS != 0 {
            return Err(invalid(format!(
                "flags 0x{:02X} has bits other than FH_CANFD_BRS, FH_CANFD_ESI and FH_CANFD_FDF",
                self.flags
            )));
        }
        if self.flags & FD_FLAGS != 0 {
            if remote {
                return Err(invalid("CAN FD frames have no remote form; clear FH_CAN_RTR_FLAG".into()));
            }
            if len > FH_CANFD_MAX_DLEN {
                return Err(invalid(format!("CAN FD frames carry at most 64 data bytes, got len {len}")));
            }
            let mut flags = FrameFlags::empty();
            if extended {
                flags = flags.union(FrameFlags::EXTENDED);
            }
            if self.flags & FH_CANFD_BRS != 0 {
                flags = flags.union(FrameFlags::BRS);
            }
            if self.flags & FH_CANFD_ESI != 0 {
                flags = flags.union(FrameFlags::ESI);
            }
            return Frame::can_fd(id, flags, &self.data[..len]).map_err(|e| invalid(e.to_string()));
        }
        if len > FH_CAN_MAX_DLEN {
            return Err(invalid(format!(
                "classic CAN frames carry at most 8 data bytes, got len {len} (set FH_CANFD_FDF in flags to send CAN FD)"
            )));
        }
        let mut frame =
            if remote { Frame::remote(id, extended, len) } else { Frame::can(id, extended, &self.data[..len]) }
                .map_err(|e| invalid(with_eff_hint(e.to_string(), extended, id)))?;
        if len == FH_CAN_MAX_DLEN && (9..=15).contains(&self.len8_dlc) {
            frame.set_len8_dlc(self.len8_dlc).map_err(|e| invalid(e.to_string()))?;
        }
        Ok(frame)
    }

    /// The struct for a received frame; `None` for a CAN XL or raw frame,
    /// which `fh_frame` cannot hold.
    pub fn from_frame(frame: &Frame) -> Option<Self> {
        let mut out = Self::zeroed();
        out.can_id = frame.socketcan_id();
        out.len = frame.len() as u8;
        match frame.kind() {
            FrameKind::CanFd => {
                out.flags = FH_CANFD_FDF;
                if frame.flags().contains(FrameFlags::BRS) {
                    out.flags |= FH_CANFD_BRS;
                }
                if frame.flags().contains(FrameFlags::ESI) {
                    out.flags |= FH_CANFD_ESI;
                }
            }
            FrameKind::Can => out.len8_dlc = frame.len8_dlc(),
            FrameKind::Error | FrameKind::Lin => {}
            FrameKind::CanXl | FrameKind::Raw => return None,
        }
        let data = frame.data();
        out.data[..data.len()].copy_from_slice(data);
        Some(out)
    }
}

fn with_eff_hint(message: String, extended: bool, id: u32) -> String {
    if !extended && id > FH_CAN_SFF_MASK {
        format!("{message} (as in SocketCAN, set FH_CAN_EFF_FLAG in can_id)")
    } else {
        message
    }
}

impl fh_meta {
    /// The metadata of a frame received on `port`.
    pub fn new(port: u16, frame: &Frame, meta: &FrameMeta) -> Self {
        Self {
            timestamp_ns: meta.timestamp_ns,
            seq: meta.seq,
            sender: meta.sender,
            flags: if frame.is_echo() { FH_META_ECHO } else { 0 },
            channel_id: meta.channel,
            port,
            reserved: 0,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::status::fh_status;

    fn classic(can_id: u32, data: &[u8]) -> fh_frame {
        let mut f = fh_frame::zeroed();
        f.can_id = can_id;
        f.len = data.len() as u8;
        f.data[..data.len()].copy_from_slice(data);
        f
    }

    #[test]
    fn classic_extended_remote_and_fd_frames_round_trip() {
        let mut fd = classic(FH_CAN_EFF_FLAG | 0x1234567, &[7; 48]);
        fd.flags = FH_CANFD_FDF | FH_CANFD_BRS | FH_CANFD_ESI;
        let mut remote = classic(FH_CAN_RTR_FLAG | 0x123, &[]);
        remote.len = 4;
        let mut dlc = classic(0x7FF, &[1, 2, 3, 4, 5, 6, 7, 8]);
        dlc.len8_dlc = 12;
        let mut error = classic(FH_CAN_ERR_FLAG | 0x4, &[0, 1, 2, 3, 4, 5, 6, 7]);
        error.len = 8;
        for sent in [classic(0x123, &[0xDE, 0xAD]), classic(FH_CAN_EFF_FLAG | 0x1FFF_FFFF, &[]), fd, remote, dlc, error]
        {
            let frame = sent.to_frame().unwrap();
            assert_eq!(fh_frame::from_frame(&frame), Some(sent), "{frame:?}");
        }
    }

    #[test]
    fn brs_alone_marks_a_frame_fd() {
        let mut f = classic(0x10, &[0; 12]);
        f.flags = FH_CANFD_BRS;
        let frame = f.to_frame().unwrap();
        assert!(frame.is_fd());
        assert_eq!(fh_frame::from_frame(&frame).map(|f| f.flags), Some(FH_CANFD_FDF | FH_CANFD_BRS));
    }

    #[test]
    fn oversize_and_misflagged_frames_are_refused_with_reasons() {
        let refuse = |f: fh_frame| {
            let failure = f.to_frame().unwrap_err();
            assert_eq!(failure.status, fh_status::FH_ERR_INVALID_FRAME);
            failure.detail.unwrap()
        };
        let mut nine = classic(0x10, &[0; 8]);
        nine.len = 9;
        assert!(refuse(nine).contains("FH_CANFD_FDF"));
        let mut thirteen = classic(0x10, &[0; 13]);
        thirteen.flags = FH_CANFD_FDF;
        assert!(refuse(thirteen).contains("13 is not a valid CAN FD length"));
        let mut too_long = classic(0x10, &[]);
        too_long.len = 65;
        too_long.flags = FH_CANFD_FDF;
        assert!(refuse(too_long).contains("at most 64"));
        assert!(refuse(classic(0x800, &[])).contains("FH_CAN_EFF_FLAG"));
        let mut fd_remote = classic(FH_CAN_RTR_FLAG | 1, &[]);
        fd_remote.flags = FH_CANFD_FDF;
        assert!(refuse(fd_remote).contains("remote"));
        let mut unknown_flag = classic(1, &[]);
        unknown_flag.flags = 0x80;
        assert!(refuse(unknown_flag).contains("0x80"));
        assert!(refuse(classic(FH_CAN_ERR_FLAG | 1, &[0; 4])).contains("exactly 8"));
    }

    #[test]
    fn len8_dlc_that_does_not_apply_is_ignored_like_the_kernel_does() {
        let mut f = classic(0x10, &[1, 2]);
        f.len8_dlc = 12;
        assert_eq!(f.to_frame().unwrap().len8_dlc(), 0);
    }
}
