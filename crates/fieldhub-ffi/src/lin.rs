//! The LIN node API (`spec/protocol.md` 4.1.1): a slave on a
//! `protocol = "lin"` channel, whose master is the hub running the
//! channel's schedule table. `fh_lin_publish` queues a one-shot response
//! (it answers the next header of its identifier, once);
//! `fh_lin_stand` sets the port's standing response (it answers every
//! unconditional header of its identifier, from the next one on, until
//! replaced by another `fh_lin_stand` or withdrawn by `fh_lin_withdraw`).
//! Each is a `lin` frame record sent like `fh_send`'s frames: checked here
//! (identifier, length, flags), the hub's refusals (an identifier the
//! schedule never sends, another port standing for it) reported through
//! `fh_flush`. `fh_lin_wake_up` sends a wake-up pulse on a sleeping
//! channel (docs/buses.md, Sleep and wake-up).

use std::ffi::c_int;
use std::slice;

use fieldhub_proto::lin::Checksum;
use fieldhub_proto::Frame;

use crate::status::fh_status::FH_ERR_INVALID_FRAME;
use crate::{fh_client, fh_port, timeout, with_client, Failure};

/// `fh_lin_publish`/`fh_lin_stand` flag: the classic checksum (data bytes
/// only: diagnostic frames, LIN 1.x nodes); without it the enhanced one.
pub const FH_LIN_CLASSIC: u32 = 0x1;

/// The checksum model `flags` names and the `len` bytes at `data`, or why
/// not. Borrowed, not copied: the data path does not allocate.
///
/// # Safety
/// `data` is NULL (with `len` 0) or points to `len` bytes readable for `'a`.
unsafe fn response<'a>(data: *const u8, len: usize, flags: u32) -> Result<(Checksum, &'a [u8]), Failure> {
    if flags & !FH_LIN_CLASSIC != 0 {
        return Err(Failure::invalid_argument(format!("flags 0x{flags:X} has bits other than FH_LIN_CLASSIC (0x1)")));
    }
    let bytes = match (data.is_null(), len) {
        (_, 0) => &[][..],
        (true, _) => return Err(Failure::invalid_argument("data is NULL with len > 0")),
        // SAFETY: the caller guarantees `len` readable bytes at `data`.
        (false, _) => unsafe { slice::from_raw_parts(data, len) },
    };
    let model = if flags & FH_LIN_CLASSIC != 0 { Checksum::Classic } else { Checksum::Enhanced };
    Ok((model, bytes))
}

/// Send the LIN record `frame` (made, or refused, by `make`) on `port`.
///
/// # Safety
/// `client` is NULL or a live handle.
unsafe fn send_lin(
    client: *mut fh_client,
    port: fh_port,
    timeout_ms: c_int,
    make: impl FnOnce() -> Result<Frame, Failure>,
) -> c_int {
    // SAFETY: forwarded caller contract.
    unsafe {
        with_client(client, |c| {
            let frame = make()?;
            c.send_on(port, |client, open| client.send_timeout(open, &frame, timeout(timeout_ms)))
        })
    }
}

/// Send the response `make` builds of `(id, data, len, flags)` on `port`.
///
/// # Safety
/// `client` is NULL or a live handle; `data` as for [`response`].
unsafe fn send_response(
    client: *mut fh_client,
    port: fh_port,
    (id, data, len, flags): (u8, *const u8, usize, u32),
    timeout_ms: c_int,
    make: fn(u8, Checksum, &[u8]) -> Result<Frame, fieldhub_proto::FrameError>,
) -> c_int {
    // SAFETY: forwarded caller contract.
    unsafe {
        send_lin(client, port, timeout_ms, || {
            // SAFETY: forwarded caller contract.
            let (model, bytes) = response(data, len, flags)?;
            make(id, model, bytes).map_err(invalid)
        })
    }
}

fn invalid(e: fieldhub_proto::FrameError) -> Failure {
    Failure::new(FH_ERR_INVALID_FRAME, e.to_string())
}

/// Queue a one-shot LIN response for identifier `id` (0..0x3F): `len`
/// (1..8) bytes at `data`, its checksum made under the model `flags` names
/// (`FH_LIN_CLASSIC`, else enhanced). It answers the next header of `id`
/// the hub's schedule sends, once. `timeout_ms` as for `fh_send`.
///
/// Errors: `FH_ERR_INVALID_FRAME` (id over 0x3F, len not 1..8; the last
/// error says what), `FH_ERR_INVALID_ARGUMENT` (NULL `data` with len, unknown
/// flags), `FH_ERR_TIMEOUT`, `FH_ERR_PORT_NOT_OPEN`, `FH_ERR_CLOSED`,
/// `FH_ERR_NOT_CONNECTED`.
///
/// # Safety
/// `client` is a live handle; `data` is NULL (with `len` 0) or points to
/// `len` readable bytes.
#[no_mangle]
pub unsafe extern "C" fn fh_lin_publish(
    client: *mut fh_client,
    port: fh_port,
    id: u8,
    data: *const u8,
    len: usize,
    flags: u32,
    timeout_ms: c_int,
) -> c_int {
    // SAFETY: forwarded caller contract.
    unsafe { send_response(client, port, (id, data, len, flags), timeout_ms, Frame::lin) }
}

/// Set this port's standing LIN response for identifier `id`: from the
/// next header of `id` on, every unconditional header of it is answered
/// with these bytes until `fh_lin_stand` replaces them or `fh_lin_withdraw`
/// withdraws them (or the port closes). A one-shot response the port has
/// queued for `id` answers first. Arguments and errors as for
/// `fh_lin_publish`; the hub refuses (through `fh_flush`) an identifier no
/// unconditional slot sends and one another port stands for.
///
/// # Safety
/// As for `fh_lin_publish`.
#[no_mangle]
pub unsafe extern "C" fn fh_lin_stand(
    client: *mut fh_client,
    port: fh_port,
    id: u8,
    data: *const u8,
    len: usize,
    flags: u32,
    timeout_ms: c_int,
) -> c_int {
    // SAFETY: forwarded caller contract.
    unsafe { send_response(client, port, (id, data, len, flags), timeout_ms, Frame::lin_standing) }
}

/// Withdraw this port's standing LIN response for identifier `id`: from
/// the next header of `id` on it answers no more. The hub refuses (through
/// `fh_flush`) the withdrawal of a response the port does not have.
///
/// Errors: `FH_ERR_INVALID_FRAME` (id over 0x3F), and those of `fh_send`.
///
/// # Safety
/// `client` is a live handle.
#[no_mangle]
pub unsafe extern "C" fn fh_lin_withdraw(client: *mut fh_client, port: fh_port, id: u8, timeout_ms: c_int) -> c_int {
    // SAFETY: forwarded caller contract.
    unsafe { send_lin(client, port, timeout_ms, || Frame::lin_withdraw(id).map_err(invalid)) }
}

/// Send a wake-up pulse from this port: it wakes the sleeping LIN channel
/// (after a go-to-sleep command or its bus-idle timeout); the hub's master
/// resumes its schedule after the channel's wake-up delay and repeats the
/// pulse for this port while no header comes. The hub refuses (through
/// `fh_flush`) a pulse on an awake channel.
///
/// Errors: those of `fh_send`.
///
/// # Safety
/// `client` is a live handle.
#[no_mangle]
pub unsafe extern "C" fn fh_lin_wake_up(client: *mut fh_client, port: fh_port, timeout_ms: c_int) -> c_int {
    // SAFETY: forwarded caller contract.
    unsafe { send_lin(client, port, timeout_ms, || Ok(Frame::lin_wake_up())) }
}
