//! CAN XL frames in C (`spec/protocol.md` 4.1.2): `fh_canxl_frame` has the
//! layout of Linux `struct canxl_frame`, `fh_send_xl` sends one, and
//! `fh_recv_xl` receives the next frame of any kind into one, as a SocketCAN
//! program reads a CAN XL socket into `union cfu`: an XL frame sets
//! `FH_CANXL_XLF` in `flags`, whose byte is a classic or FD frame's `len` in
//! `fh_frame`'s layout — never above 64 there, so the bit tells the two apart
//! (the kernel's own trick, `include/uapi/linux/can.h`).

use std::ffi::c_int;

use fieldhub_client::{Frame, FrameFlags};
use fieldhub_proto::canxl::{CANXL_PRIO_MASK, CANXL_VCID_MASK, CANXL_VCID_OFFSET, MAX_CANXL_DATA};

use crate::frame::{fh_frame, fh_meta};
use crate::status::fh_status::FH_ERR_INVALID_FRAME;
use crate::{fh_client, fh_port, recv_into, send_built, Failure};

/// `fh_canxl_frame.flags`: this is a CAN XL frame (SocketCAN `CANXL_XLF`);
/// always set on one, and never in a classic or FD frame's `len`.
pub const FH_CANXL_XLF: u8 = 0x80;
/// `fh_canxl_frame.flags`: simple extended content (SocketCAN `CANXL_SEC`).
pub const FH_CANXL_SEC: u8 = 0x01;
/// `fh_canxl_frame.flags`: the RRS bit is recessive (SocketCAN `CANXL_RRS`).
pub const FH_CANXL_RRS: u8 = 0x02;
/// `fh_canxl_frame.prio`: the 11-bit priority (SocketCAN `CANXL_PRIO_MASK`).
pub const FH_CANXL_PRIO_MASK: u32 = 0x7FF;
/// `fh_canxl_frame.prio`: the VCID's bits (SocketCAN `CANXL_VCID_MASK`).
pub const FH_CANXL_VCID_MASK: u32 = 0x00FF_0000;
/// `fh_canxl_frame.prio`: where the VCID starts (SocketCAN `CANXL_VCID_OFFSET`).
pub const FH_CANXL_VCID_OFFSET: u32 = 16;
/// Smallest CAN XL payload (SocketCAN `CANXL_MIN_DLEN`).
pub const FH_CANXL_MIN_DLEN: usize = 1;
/// Largest CAN XL payload (SocketCAN `CANXL_MAX_DLEN`).
pub const FH_CANXL_MAX_DLEN: usize = 2048;

// Literals, so the C header has numbers; the same as the frame model's.
const _: () = assert!(FH_CANXL_PRIO_MASK == CANXL_PRIO_MASK && FH_CANXL_VCID_MASK == CANXL_VCID_MASK);
const _: () = assert!(FH_CANXL_VCID_OFFSET == CANXL_VCID_OFFSET && FH_CANXL_MAX_DLEN == MAX_CANXL_DATA);

/// A CAN XL frame, binary-compatible with Linux `struct canxl_frame`.
///
/// - `prio`: the 11-bit priority in bits 0..10, the VCID in bits 16..23.
/// - `flags`: `FH_CANXL_XLF` (always), `FH_CANXL_SEC`, `FH_CANXL_RRS`.
/// - `sdt`: the SDU type; `af`: the acceptance field.
/// - `len`: 1..=2048 data bytes; `data` past `len` is ignored on send.
#[repr(C)]
#[allow(non_camel_case_types)]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct fh_canxl_frame {
    pub prio: u32,
    pub flags: u8,
    pub sdt: u8,
    pub len: u16,
    pub af: u32,
    pub data: [u8; FH_CANXL_MAX_DLEN],
}

// `struct canxl_frame` is 12 bytes of header and the data (CANXL_MTU 2060).
const _: () = assert!(std::mem::size_of::<fh_canxl_frame>() == 12 + FH_CANXL_MAX_DLEN);
const _: () = assert!(std::mem::offset_of!(fh_canxl_frame, flags) == std::mem::offset_of!(fh_frame, len));

const XL_FLAGS: u8 = FH_CANXL_XLF | FH_CANXL_SEC | FH_CANXL_RRS;

impl fh_canxl_frame {
    /// The frame this struct describes, or why it describes none.
    pub fn to_frame(&self) -> Result<Frame, Failure> {
        let invalid = |why: String| Failure::new(FH_ERR_INVALID_FRAME, why);
        if self.flags & FH_CANXL_XLF == 0 {
            return Err(invalid(format!(
                "flags 0x{:02X} lacks FH_CANXL_XLF (0x80), which every XL frame has",
                self.flags
            )));
        }
        if self.flags & !XL_FLAGS != 0 {
            return Err(invalid(format!(
                "flags 0x{:02X} has bits other than FH_CANXL_XLF, FH_CANXL_SEC and FH_CANXL_RRS",
                self.flags
            )));
        }
        if self.prio & !(FH_CANXL_PRIO_MASK | FH_CANXL_VCID_MASK) != 0 {
            return Err(invalid(format!(
                "prio 0x{:X} has bits outside the priority (0x7FF) and the VCID (0xFF0000)",
                self.prio
            )));
        }
        let len = usize::from(self.len);
        if !(FH_CANXL_MIN_DLEN..=FH_CANXL_MAX_DLEN).contains(&len) {
            return Err(invalid(format!("CAN XL frames carry 1 to 2048 data bytes, got len {len}")));
        }
        let mut flags = FrameFlags::empty();
        if self.flags & FH_CANXL_SEC != 0 {
            flags |= FrameFlags::XL_SEC;
        }
        if self.flags & FH_CANXL_RRS != 0 {
            flags |= FrameFlags::XL_RRS;
        }
        let vcid = ((self.prio & FH_CANXL_VCID_MASK) >> FH_CANXL_VCID_OFFSET) as u8;
        let priority = (self.prio & FH_CANXL_PRIO_MASK) as u16;
        Frame::can_xl(priority, vcid, self.sdt, flags, self.af, &self.data[..len]).map_err(|e| invalid(e.to_string()))
    }

    /// Write a received frame into `out`: an XL frame in this layout, a
    /// classic, FD, error or LIN frame in `fh_frame`'s (its first 72 bytes),
    /// as SocketCAN writes either into `union cfu`. A raw frame has
    /// `fh_raw_frame` for its form: the error names it.
    pub fn write_frame(frame: &Frame, out: &mut Self) -> Result<(), Failure> {
        if frame.is_xl() {
            let mut flags = FH_CANXL_XLF;
            if frame.is_sec() {
                flags |= FH_CANXL_SEC;
            }
            if frame.is_rrs() {
                flags |= FH_CANXL_RRS;
            }
            let data = frame.data();
            out.prio = frame.id();
            out.flags = flags;
            out.sdt = frame.sdt();
            out.len = data.len() as u16;
            out.af = frame.acceptance_field();
            out.data[..data.len()].copy_from_slice(data);
            out.data[data.len()..].fill(0);
            return Ok(());
        }
        let classic = fh_frame::from_frame(frame).ok_or_else(|| {
            Failure::invalid_argument(format!("received {frame:?}, a raw frame: receive it with fh_recv_raw"))
        })?;
        // SAFETY: `out` is a live, writable fh_canxl_frame of 2060 bytes; the
        // 72 bytes of an fh_frame are copied byte by byte into its start, so
        // neither alignment nor padding is assumed.
        unsafe {
            std::ptr::copy_nonoverlapping(
                (&classic as *const fh_frame).cast::<u8>(),
                (out as *mut Self).cast::<u8>(),
                std::mem::size_of::<fh_frame>(),
            );
        }
        Ok(())
    }
}

/// Queue the CAN XL frame `*frame` for sending on `port`, as `fh_send` does
/// a CAN or CAN FD frame. The port must be open with `FH_PORT_FD` on a
/// `protocol = "canxl"` channel; the hub reports another channel's refusal
/// through `fh_flush` (`FH_ERR_INVALID_FRAME`).
///
/// Errors: `FH_ERR_INVALID_FRAME` (checked here: flags, prio bits, len; the
/// last error says what), and those of `fh_send`.
///
/// # Safety
/// `client` is a live handle; `frame` is NULL or points to an `fh_canxl_frame`.
#[no_mangle]
pub unsafe extern "C" fn fh_send_xl(
    client: *mut fh_client,
    port: fh_port,
    frame: *const fh_canxl_frame,
    timeout_ms: c_int,
) -> c_int {
    // SAFETY: NULL or a valid fh_canxl_frame by the caller's contract.
    unsafe { send_built(client, port, || frame.as_ref().map(fh_canxl_frame::to_frame), timeout_ms) }
}

/// Receive the next frame of any kind on any of the client's ports into
/// `*frame`, as `fh_recv` does: a CAN XL frame in `fh_canxl_frame`'s layout,
/// with `FH_CANXL_XLF` in `flags`; a CAN, CAN FD or error frame in
/// `fh_frame`'s layout over the first 72 bytes (read it through a union of
/// the two, as SocketCAN programs do), whose `len` never has that bit.
///
/// Returns `FH_OK` with a frame, `FH_ERR_TIMEOUT` when none came in time,
/// `FH_ERR_CLOSED` once the connection has ended and every frame is taken,
/// `FH_ERR_INVALID_ARGUMENT` for a raw frame (taken, and named in the last
/// error), which `fh_recv_raw` receives.
///
/// # Safety
/// `client` is a live handle; `frame` points to a writable `fh_canxl_frame`;
/// `meta` is NULL or points to a writable `fh_meta`.
#[no_mangle]
pub unsafe extern "C" fn fh_recv_xl(
    client: *mut fh_client,
    frame: *mut fh_canxl_frame,
    meta: *mut fh_meta,
    timeout_ms: c_int,
) -> c_int {
    // SAFETY: forwarded caller contract: `frame` NULL or writable.
    unsafe {
        recv_into(client, frame.is_null(), meta, timeout_ms, |received| {
            // SAFETY: checked non-NULL; writable by the caller's contract.
            fh_canxl_frame::write_frame(received, &mut *frame)
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::status::fh_status;

    fn xl(prio: u32, flags: u8, data: &[u8]) -> fh_canxl_frame {
        let mut f = fh_canxl_frame { prio, flags, sdt: 3, len: data.len() as u16, af: 0x1234_5678, data: [0; 2048] };
        f.data[..data.len()].copy_from_slice(data);
        f
    }

    #[test]
    fn an_xl_frame_of_2048_bytes_round_trips_with_its_header() {
        let sent = xl(0x0042_0123, FH_CANXL_XLF | FH_CANXL_SEC | FH_CANXL_RRS, &[0xA5; 2048]);
        let frame = sent.to_frame().unwrap();
        assert_eq!((frame.priority(), frame.vcid(), frame.sdt(), frame.len()), (0x123, 0x42, 3, 2048));
        assert!(frame.is_sec() && frame.is_rrs());
        let mut back = xl(0, 0, &[0xFF; 2048]);
        fh_canxl_frame::write_frame(&frame, &mut back).unwrap();
        assert_eq!(back, sent);
    }

    #[test]
    fn a_classic_or_fd_frame_lands_in_fh_frames_layout_without_the_xlf_bit() {
        let frame = Frame::can_fd(0x10, FrameFlags::BRS, &[7; 64]).unwrap();
        let mut out = xl(0, 0, &[0xEE; 2048]);
        fh_canxl_frame::write_frame(&frame, &mut out).unwrap();
        assert_eq!(out.flags & FH_CANXL_XLF, 0, "the len byte (64) is not an XL frame");
        // SAFETY: the first 72 bytes now hold an fh_frame; read unaligned.
        let fd: fh_frame = unsafe { std::ptr::read_unaligned((&out as *const fh_canxl_frame).cast()) };
        assert_eq!(Some(fd), fh_frame::from_frame(&frame));
        let raw = Frame::raw(1, &[1]).unwrap();
        assert_eq!(fh_canxl_frame::write_frame(&raw, &mut out).unwrap_err().status, fh_status::FH_ERR_INVALID_ARGUMENT);
    }

    #[test]
    fn misformed_xl_frames_are_refused_with_reasons() {
        let refuse = |f: fh_canxl_frame| {
            let failure = f.to_frame().unwrap_err();
            assert_eq!(failure.status, fh_status::FH_ERR_INVALID_FRAME);
            failure.detail.unwrap()
        };
        assert!(refuse(xl(0x123, 0, &[1])).contains("lacks FH_CANXL_XLF"));
        assert!(refuse(xl(0x123, FH_CANXL_XLF | 0x10, &[1])).contains("0x90"));
        assert!(refuse(xl(0x800, FH_CANXL_XLF, &[1])).contains("outside the priority"));
        assert!(refuse(xl(0x123, FH_CANXL_XLF, &[])).contains("got len 0"));
        let mut long = xl(0x123, FH_CANXL_XLF, &[1]);
        long.len = 2049;
        assert!(refuse(long).contains("got len 2049"));
    }
}
