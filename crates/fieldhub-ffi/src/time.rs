//! Virtual time for a synchronised participant (`FH_CONNECT_SYNCHRONIZED`,
//! `spec/protocol.md` 6.8): `fh_now` and `fh_step`; and for one that steps
//! ahead (`FH_CONNECT_AHEAD`, 3.11a): `fh_send_at` and `fh_step_ahead`, or
//! its halves `fh_step_ahead_begin` and `fh_step_ahead_await`, for a caller
//! that must be able to stop waiting (the step itself runs on at the hub).

use std::ffi::c_int;

use fieldhub_client::{ClientError, CAN_INV_FILTER};
use fieldhub_proto::limits::MAX_WAKE_FILTERS;
use fieldhub_proto::wire::WakeFilter;

use crate::frame::{fh_filter, fh_frame};
use crate::status::fh_status::{FH_ERR_INVALID_ARGUMENT, FH_ERR_TIMEOUT};
use crate::{fh_client, fh_port, timeout, with_client, Failure};

/// Most wake filters one `fh_step_ahead` takes.
pub const FH_MAX_WAKE_FILTERS: usize = 32;
const _: () = assert!(FH_MAX_WAKE_FILTERS == MAX_WAKE_FILTERS);

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

/// Send `frame` on `port` for bus time `at_ns` of a later step of this
/// participant (connected with `FH_CONNECT_AHEAD`): the hub holds it and
/// queues it when bus time reaches `at_ns` (at or before the current bus
/// time: at once, as `fh_send`). It must fall within the step that the next
/// `fh_step` or `fh_step_ahead` ends; a later one is refused then, reported
/// by `fh_flush` as `FH_ERR_INVALID_FRAME`. Never waits for the hub.
///
/// Errors: `FH_ERR_INVALID_ARGUMENT` (not connected with `FH_CONNECT_AHEAD`,
/// NULL `frame`), `FH_ERR_INVALID_FRAME`, `FH_ERR_TIMEOUT` (the participant
/// has the most frames the hub holds for it waiting), `FH_ERR_PORT_NOT_OPEN`,
/// `FH_ERR_CLOSED`, `FH_ERR_NOT_CONNECTED`.
///
/// # Safety
/// `client` is a live handle; `frame` is NULL or points to an `fh_frame`.
#[no_mangle]
pub unsafe extern "C" fn fh_send_at(
    client: *mut fh_client,
    port: fh_port,
    frame: *const fh_frame,
    at_ns: u64,
) -> c_int {
    // SAFETY: forwarded caller contract.
    unsafe {
        with_client(client, |c| {
            // SAFETY: NULL or a valid fh_frame by the caller's contract.
            let frame = frame.as_ref().ok_or_else(|| Failure::invalid_argument("frame is NULL"))?;
            let frame = frame.to_frame()?;
            c.send_on(port, |client, open| client.send_at(open, &frame, at_ns))
        })
    }
}

/// End this participant's step as done up to `until_ns` in steps of
/// `period_ns`, none of which needs input unless a frame matching one of
/// `filters` (SocketCAN form, `CAN_INV_FILTER` not allowed; `count` 0: any
/// frame) is delivered to one of its ports: then bus time stops at the
/// first of its step boundaries at or after that frame. Blocks until then
/// and stores the bus time granted in `*now_ns` (NULL: not stored) —
/// `until_ns`, or the boundary a frame woke it at, with the frames up to it
/// waiting for `fh_recv`. One round trip for many steps. The same as
/// `fh_step_ahead_begin` then `fh_step_ahead_await` with no timeout; a
/// caller that must stop waiting (a signal, a user's cancel) uses those.
///
/// Errors: `FH_ERR_INVALID_ARGUMENT` (not connected with `FH_CONNECT_AHEAD`,
/// `until_ns` not later than `fh_now`, more than `FH_MAX_WAKE_FILTERS`
/// filters, NULL `filters` with `count` > 0, an inverted filter, a step
/// ahead begun and not yet awaited), `FH_ERR_REJECTED` (the hub refused
/// the step: period 0, a step that does not end on a period boundary, or
/// this participant was dropped), `FH_ERR_CLOSED`, `FH_ERR_NOT_CONNECTED`.
///
/// # Safety
/// `client` is a live handle; `filters` points to `count` filters (may be
/// NULL when `count` is 0); `now_ns` is NULL or points to a `uint64_t`.
#[no_mangle]
pub unsafe extern "C" fn fh_step_ahead(
    client: *mut fh_client,
    until_ns: u64,
    period_ns: u64,
    filters: *const fh_filter,
    count: usize,
    now_ns: *mut u64,
) -> c_int {
    // SAFETY: forwarded caller contract.
    unsafe {
        with_client(client, |c| {
            let wake = wake_filters(filters, count)?;
            let now = c.connected()?.step_ahead(until_ns, period_ns, &wake.0[..wake.1])?;
            // SAFETY: the caller guarantees NULL or a writable uint64_t.
            if let Some(out) = now_ns.as_mut() {
                *out = now;
            }
            Ok(())
        })
    }
}

/// The first half of `fh_step_ahead`: announce the step (same arguments
/// and checks) and return at once; `fh_step_ahead_await` waits for its
/// grant. The hub runs the step whether or not anyone waits — a step is
/// never cancelled — so until its grant is awaited, `fh_step` and another
/// `fh_step_ahead_begin` are refused (`FH_ERR_INVALID_ARGUMENT`).
///
/// Errors: as `fh_step_ahead`, those of announcing the step.
///
/// # Safety
/// `client` is a live handle; `filters` points to `count` filters (may be
/// NULL when `count` is 0).
#[no_mangle]
pub unsafe extern "C" fn fh_step_ahead_begin(
    client: *mut fh_client,
    until_ns: u64,
    period_ns: u64,
    filters: *const fh_filter,
    count: usize,
) -> c_int {
    // SAFETY: forwarded caller contract.
    unsafe {
        with_client(client, |c| {
            let wake = wake_filters(filters, count)?;
            Ok(c.connected()?.begin_step_ahead(until_ns, period_ns, &wake.0[..wake.1])?)
        })
    }
}

/// The second half of `fh_step_ahead`: wait at most `timeout_ms` (0: only
/// look; negative: as long as it takes) for the grant of the step
/// `fh_step_ahead_begin` announced, and store the bus time granted in
/// `*now_ns` (NULL: not stored). `FH_ERR_TIMEOUT` when it has not come yet:
/// the step still runs at the hub; call again (after handling whatever made
/// the caller stop waiting).
///
/// Errors: `FH_ERR_TIMEOUT` (not granted yet), `FH_ERR_INVALID_ARGUMENT`
/// (no step ahead begun since the last one was awaited), `FH_ERR_REJECTED`
/// (the hub refused the step), `FH_ERR_CLOSED`, `FH_ERR_NOT_CONNECTED`.
///
/// # Safety
/// `client` is a live handle; `now_ns` is NULL or points to a `uint64_t`.
#[no_mangle]
pub unsafe extern "C" fn fh_step_ahead_await(client: *mut fh_client, timeout_ms: c_int, now_ns: *mut u64) -> c_int {
    // SAFETY: forwarded caller contract.
    unsafe {
        with_client(client, |c| {
            let now = c.connected()?.await_step_ahead(timeout(timeout_ms))?.ok_or(Failure::bare(FH_ERR_TIMEOUT))?;
            // SAFETY: the caller guarantees NULL or a writable uint64_t.
            if let Some(out) = now_ns.as_mut() {
                *out = now;
            }
            Ok(())
        })
    }
}

/// The caller's wake filters, checked: at most [`FH_MAX_WAKE_FILTERS`],
/// none inverted; the array and how many of it are used.
///
/// # Safety
/// `filters` points to `count` filters, or is NULL.
unsafe fn wake_filters(
    filters: *const fh_filter,
    count: usize,
) -> Result<([WakeFilter; FH_MAX_WAKE_FILTERS], usize), Failure> {
    let given: &[fh_filter] = match count {
        0 => &[],
        _ if filters.is_null() => return Err(Failure::invalid_argument("filters is NULL but count is not 0")),
        // SAFETY: non-NULL, and `count` elements by the caller's contract.
        _ => unsafe { std::slice::from_raw_parts(filters, count) },
    };
    let mut wake = [WakeFilter::default(); FH_MAX_WAKE_FILTERS];
    if given.len() > wake.len() {
        return Err(ClientError::TooManyWakeFilters { given: given.len(), max: wake.len() }.into());
    }
    for (to, from) in wake.iter_mut().zip(given) {
        if from.can_id & CAN_INV_FILTER != 0 {
            return Err(Failure::invalid_argument(
                "a wake filter cannot be inverted (CAN_INV_FILTER): list the ids that wake instead",
            ));
        }
        *to = WakeFilter { can_id: from.can_id, mask: from.can_mask };
    }
    Ok((wake, given.len()))
}

fn not_synchronized() -> Failure {
    Failure::new(FH_ERR_INVALID_ARGUMENT, fieldhub_client::ClientError::NotSynchronized.to_string())
}
