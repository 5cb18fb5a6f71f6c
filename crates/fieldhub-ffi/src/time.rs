//! Virtual time for a synchronised participant (`FH_CONNECT_SYNCHRONIZED`,
//! `spec/protocol.md` 6.8): `fh_now` and `fh_step`.

use std::ffi::c_int;

use crate::status::fh_status::FH_ERR_INVALID_ARGUMENT;
use crate::{fh_client, with_client, Failure};

/// Store the bus time this participant stands at (nanoseconds since the run
/// began: the hub's last grant) in `*now_ns`.
///
/// Errors: `FH_ERR_INVALID_ARGUMENT` (NULL `now_ns`, or a client not
/// connected with `FH_CONNECT_SYNCHRONIZED`), `FH_ERR_NOT_CONNECTED`.
///
/// # Safety
/// `client` is a live handle; `now_ns` is NULL or points to a `uint64_t`.
#[no_mangle]
pub unsafe extern "C" fn fh_now(client: *mut fh_client, now_ns: *mut u64) -> c_int {
    // SAFETY: forwarded caller contract.
    unsafe {
        with_client(client, |c| {
            let now = c.connected()?.now().ok_or_else(not_synchronized)?;
            // SAFETY: the caller guarantees NULL or a writable uint64_t.
            let out = now_ns.as_mut().ok_or_else(|| Failure::invalid_argument("now_ns is NULL"))?;
            *out = now;
            Ok(())
        })
    }
}

/// End this participant's step: it is done up to bus time `until_ns`.
/// Blocks until every participant is done and bus time has reached
/// `until_ns` — the frames of the window are then waiting for `fh_recv` —
/// and stores the new bus time in `*now_ns` (NULL: not stored). No timeout:
/// the hub reports a participant that holds time back; `fh_close` from
/// another thread ends the wait with `FH_ERR_CLOSED`.
///
/// Errors: `FH_ERR_INVALID_ARGUMENT` (not a synchronised participant, or
/// `until_ns` not later than `fh_now`), `FH_ERR_REJECTED` (the hub refused
/// the step: this participant was dropped after stalling), `FH_ERR_CLOSED`,
/// `FH_ERR_NOT_CONNECTED`.
///
/// # Safety
/// `client` is a live handle; `now_ns` is NULL or points to a `uint64_t`.
#[no_mangle]
pub unsafe extern "C" fn fh_step(client: *mut fh_client, until_ns: u64, now_ns: *mut u64) -> c_int {
    // SAFETY: forwarded caller contract.
    unsafe {
        with_client(client, |c| {
            let now = c.connected()?.step(until_ns)?;
            // SAFETY: the caller guarantees NULL or a writable uint64_t.
            if let Some(out) = now_ns.as_mut() {
                *out = now;
            }
            Ok(())
        })
    }
}

fn not_synchronized() -> Failure {
    Failure::new(FH_ERR_INVALID_ARGUMENT, fieldhub_client::ClientError::NotSynchronized.to_string())
}
