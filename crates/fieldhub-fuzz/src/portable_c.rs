//! The portable C client (`c/portable/`, compiled in by `build.rs`) as a
//! fuzz target: hostile hub bytes must give it an error code, never a crash,
//! and its decoder must agree with the reference decoder.
// The C code is reached through FFI; this module is the crate's only unsafe code.
#![allow(unsafe_code)]

use std::cell::RefCell;
use std::ffi::{c_char, c_int, CStr};

use fieldhub_proto::limits::MAX_MESSAGE_LEN;
use fieldhub_proto::wire::{check_length, decode, LENGTH_PREFIX};

extern "C" {
    fn fhp_fuzz_first_message(
        data: *const u8,
        len: usize,
        limit: u32,
        buf: *mut u8,
        cap: usize,
        enc: *mut u8,
        enc_cap: usize,
        consumed: *mut usize,
    ) -> c_int;
    fn fhp_fuzz_client(data: *const u8, len: usize) -> c_int;
    fn fhp_decode_error_name(error: c_int) -> *const c_char;
}

thread_local! {
    /// The decoder's buffer and the re-encoding's, each room for the largest message.
    static BUFFERS: RefCell<(Vec<u8>, Vec<u8>)> =
        RefCell::new((vec![0; MAX_MESSAGE_LEN as usize + 64], vec![0; MAX_MESSAGE_LEN as usize + 64]));
}

/// The C decoder's verdict on the first message of `data`, as a
/// `DecodeError::kind()` name, "ok", or "incomplete"; and the bytes it took.
fn c_first_message(data: &[u8]) -> (String, usize) {
    BUFFERS.with(|buffers| {
        let (buf, enc) = &mut *buffers.borrow_mut();
        let mut consumed = 0usize;
        // SAFETY: every pointer is valid for the length passed with it for the
        // whole call, `consumed` is a live usize, and the C side keeps none of them.
        let result = unsafe {
            fhp_fuzz_first_message(
                data.as_ptr(),
                data.len(),
                MAX_MESSAGE_LEN,
                buf.as_mut_ptr(),
                buf.len(),
                enc.as_mut_ptr(),
                enc.len(),
                &mut consumed,
            )
        };
        assert_ne!(result, -2, "the C codec re-encodes a message it decoded differently");
        let verdict = match result {
            0 => "ok".to_string(),
            -1 => "incomplete".to_string(),
            // SAFETY: fhp_decode_error_name returns a static NUL-terminated string for any value.
            error => unsafe { CStr::from_ptr(fhp_decode_error_name(error)) }.to_string_lossy().into_owned(),
        };
        (verdict, consumed)
    })
}

/// The portable C client on hostile input: its decoder accepts exactly what
/// `fieldhub_proto::wire` accepts and rejects the rest with the same error
/// kind, taking exactly the message's bytes; every message it accepts
/// re-encodes to its bytes; and its client, fed the input as a hub's bytes
/// after WELCOME, ends with a negative status.
pub fn portable_c(data: &[u8]) {
    let (verdict, consumed) = c_first_message(data);
    if let Some(prefix) = data.first_chunk::<LENGTH_PREFIX>() {
        match check_length(u32::from_le_bytes(*prefix), MAX_MESSAGE_LEN) {
            Err(e) => assert_eq!(verdict, e.kind(), "length prefix"),
            Ok(len) => {
                if let Some(body) = data.get(LENGTH_PREFIX..LENGTH_PREFIX + len) {
                    match decode(body) {
                        Ok(_) => {
                            assert_eq!(verdict, "ok", "the reference decoder accepts this message");
                            assert_eq!(consumed, LENGTH_PREFIX + len, "the C decoder took other bytes");
                        }
                        Err(e) => assert_eq!(verdict, e.kind(), "the reference decoder says {e}"),
                    }
                }
            }
        }
    }
    // SAFETY: `data` is valid for `data.len()` bytes during the call; the C side keeps nothing.
    let status = unsafe { fhp_fuzz_client(data.as_ptr(), data.len()) };
    assert!(status < 0, "the C client ended with {status} instead of an error code");
}
