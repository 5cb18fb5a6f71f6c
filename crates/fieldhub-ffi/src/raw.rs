//! Raw frames in C (`spec/protocol.md` 4.1.3): the frames of a
//! `protocol = "raw"` channel, a bus the hub has no model of — a 32-bit
//! identifier the channel's access rules read and 0..=2048 opaque bytes.
//! `fh_raw_frame` holds one, `fh_send_raw` sends one and `fh_recv_raw`
//! receives the next frame into one. SocketCAN has no such frame, so the
//! struct is fieldhub's own; a raw frame never reaches `fh_recv` or
//! `fh_recv_xl` (they name it as the error), nor a CAN frame `fh_recv_raw`.

use std::ffi::c_int;

use fieldhub_client::Frame;
use fieldhub_proto::canxl::MAX_RAW_DATA;

use crate::frame::fh_meta;
use crate::status::fh_status::FH_ERR_INVALID_FRAME;
use crate::{fh_client, fh_port, recv_into, send_built, Failure};

/// Largest raw payload.
pub const FH_RAW_MAX_DLEN: usize = 2048;

// A literal, so the C header has a number; the frame model's limit.
const _: () = assert!(FH_RAW_MAX_DLEN == MAX_RAW_DATA);

/// A raw frame.
///
/// - `id`: the 32-bit identifier (all 32 bits: there are no flag bits).
/// - `len`: 0..=2048 data bytes.
/// - `__res0`: ignored on send, 0 on receive.
/// - `data`: the payload; bytes past `len` are ignored on send, 0 on receive.
#[repr(C)]
#[allow(non_camel_case_types)]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct fh_raw_frame {
    pub id: u32,
    pub len: u16,
    pub __res0: u16,
    pub data: [u8; FH_RAW_MAX_DLEN],
}

const _: () = assert!(std::mem::size_of::<fh_raw_frame>() == 8 + FH_RAW_MAX_DLEN);

impl fh_raw_frame {
    /// The frame this struct describes, or why it describes none.
    pub fn to_frame(&self) -> Result<Frame, Failure> {
        let len = usize::from(self.len);
        if len > FH_RAW_MAX_DLEN {
            return Err(Failure::new(
                FH_ERR_INVALID_FRAME,
                format!("raw frames carry 0 to 2048 data bytes, got len {len}"),
            ));
        }
        Frame::raw(self.id, &self.data[..len]).map_err(|e| Failure::new(FH_ERR_INVALID_FRAME, e.to_string()))
    }

    /// Write a received frame into `out`: a raw frame; any other kind has
    /// `fh_frame` or `fh_canxl_frame` for its form, and the error names it.
    pub fn write_frame(frame: &Frame, out: &mut Self) -> Result<(), Failure> {
        if !frame.is_raw() {
            return Err(Failure::invalid_argument(format!(
                "received {frame:?}, which is not a raw frame: receive CAN and CAN FD frames with fh_recv, CAN XL \
                 frames with fh_recv_xl"
            )));
        }
        let data = frame.data();
        out.id = frame.id();
        out.len = data.len() as u16;
        out.__res0 = 0;
        out.data[..data.len()].copy_from_slice(data);
        out.data[data.len()..].fill(0);
        Ok(())
    }
}

/// Queue the raw frame `*frame` for sending on `port`, as `fh_send` does a
/// CAN frame. The port's channel must be a `protocol = "raw"` one; the hub
/// reports another channel's refusal through `fh_flush`
/// (`FH_ERR_INVALID_FRAME`).
///
/// Errors: `FH_ERR_INVALID_FRAME` (checked here: len; the last error says
/// what), and those of `fh_send`.
///
/// # Safety
/// `client` is a live handle; `frame` is NULL or points to an `fh_raw_frame`.
#[no_mangle]
pub unsafe extern "C" fn fh_send_raw(
    client: *mut fh_client,
    port: fh_port,
    frame: *const fh_raw_frame,
    timeout_ms: c_int,
) -> c_int {
    // SAFETY: NULL or a valid fh_raw_frame by the caller's contract.
    unsafe { send_built(client, port, || frame.as_ref().map(fh_raw_frame::to_frame), timeout_ms) }
}

/// Receive the next frame on any of the client's ports into `*frame`, as
/// `fh_recv` does, when it is a raw frame.
///
/// Returns `FH_OK` with a frame, `FH_ERR_TIMEOUT` when none came in time,
/// `FH_ERR_CLOSED` once the connection has ended and every frame is taken,
/// `FH_ERR_INVALID_ARGUMENT` when the next frame is of another kind (taken,
/// and named in the last error): give a client that receives raw frames
/// ports on raw channels only.
///
/// # Safety
/// `client` is a live handle; `frame` points to a writable `fh_raw_frame`;
/// `meta` is NULL or points to a writable `fh_meta`.
#[no_mangle]
pub unsafe extern "C" fn fh_recv_raw(
    client: *mut fh_client,
    frame: *mut fh_raw_frame,
    meta: *mut fh_meta,
    timeout_ms: c_int,
) -> c_int {
    // SAFETY: forwarded caller contract: `frame` NULL or writable.
    unsafe {
        recv_into(client, frame.is_null(), meta, timeout_ms, |received| {
            // SAFETY: checked non-NULL; writable by the caller's contract.
            fh_raw_frame::write_frame(received, &mut *frame)
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::status::fh_status;

    fn raw(id: u32, data: &[u8]) -> fh_raw_frame {
        let mut f = fh_raw_frame { id, len: data.len() as u16, __res0: 0, data: [0; FH_RAW_MAX_DLEN] };
        f.data[..data.len()].copy_from_slice(data);
        f
    }

    #[test]
    fn a_raw_frame_of_2048_bytes_and_an_empty_one_round_trip_with_their_32_bit_ids() {
        for sent in [raw(0xDEAD_BEEF, &[0x5A; 2048]), raw(0, &[])] {
            let frame = sent.to_frame().unwrap();
            assert!(frame.is_raw());
            let mut back = raw(1, &[0xFF; 2048]);
            fh_raw_frame::write_frame(&frame, &mut back).unwrap();
            assert_eq!(back, sent);
        }
    }

    #[test]
    fn an_oversize_raw_frame_is_refused_and_another_kind_is_not_received_as_raw() {
        let mut long = raw(1, &[1]);
        long.len = 2049;
        let failure = long.to_frame().unwrap_err();
        assert_eq!(failure.status, fh_status::FH_ERR_INVALID_FRAME);
        assert!(failure.detail.unwrap().contains("got len 2049"));
        let can = Frame::can(0x123, false, &[1]).unwrap();
        let failure = fh_raw_frame::write_frame(&can, &mut raw(0, &[])).unwrap_err();
        assert_eq!(failure.status, fh_status::FH_ERR_INVALID_ARGUMENT);
        assert!(failure.detail.unwrap().contains("not a raw frame"));
    }
}
