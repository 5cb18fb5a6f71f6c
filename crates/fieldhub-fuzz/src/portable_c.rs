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
/// `fieldhub_proto::wire` accepts of a peer without LIN, CAN XL, raw frames or AHEAD (`without_kinds`, `without_ahead`)
/// and rejects the rest with the same error kind, taking exactly the message's bytes; every message it accepts
/// re-encodes to its bytes; and its client, fed the input as a hub's bytes
/// after WELCOME, ends with a negative status.
pub fn portable_c(data: &[u8]) {
    let (verdict, consumed) = c_first_message(data);
    if let Some(prefix) = data.first_chunk::<LENGTH_PREFIX>() {
        match check_length(u32::from_le_bytes(*prefix), MAX_MESSAGE_LEN) {
            Err(e) => assert_eq!(verdict, e.kind(), "length prefix"),
            Ok(len) => {
                if let Some(body) = data.get(LENGTH_PREFIX..LENGTH_PREFIX + len) {
                    match decode(&without_ahead(&without_kinds(body))) {
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

/// A message type the wire leaves reserved (`spec/protocol.md` 3).
const RESERVED_TYPE: u8 = 0xFF;

/// `body` as a peer without steps granted ahead reads it (`spec/protocol.md`
/// 3.1, 3.11a): `STEP_AHEAD` is a type it does not know, and `AHEAD` a
/// reserved bit of a `HELLO`'s options — so the reference decoder gets a
/// reserved type, or a reserved bit besides, and names the same error.
fn without_ahead(body: &[u8]) -> std::borrow::Cow<'_, [u8]> {
    const STEP_AHEAD: u8 = 0x72;
    const HELLO: u8 = 0x01;
    const AHEAD: u32 = 0x2;
    match body.first() {
        Some(&STEP_AHEAD) => {
            let mut changed = body.to_vec();
            changed[0] = RESERVED_TYPE;
            changed.into()
        }
        // type, magic, version, name length: the options follow the name.
        Some(&HELLO) if body.len() >= 8 => {
            let at = 8 + usize::from(body[7]);
            let Some(options) = body.get(at..at + 4) else { return body.into() };
            let bits = u32::from_le_bytes([options[0], options[1], options[2], options[3]]);
            if bits & AHEAD == 0 {
                return body.into();
            }
            let mut changed = body.to_vec();
            changed[at..at + 4].copy_from_slice(&(bits | 0x8000_0000).to_le_bytes());
            changed.into()
        }
        _ => body.into(),
    }
}

/// A kind the wire leaves reserved (`spec/protocol.md` 4.1).
const RESERVED_KIND: u8 = 0xFF;

/// `body` as a peer without LIN, CAN XL and raw frames reads it: the
/// portable client carries no `lin`, `canxl` or `raw` records (kinds 3, 4
/// and 5, optional in `spec/protocol.md` 4.1) and rejects them as
/// `unknown_frame_kind`, so the first such record the reference decoder
/// would reach in a `FRAMES` body becomes a reserved kind. Records
/// are walked as the decoder reads them and the walk stops wherever
/// reading would stop; a record that is only invalid is walked over, since
/// the decoder's verdict is decided there whatever comes after it.
fn without_kinds(body: &[u8]) -> std::borrow::Cow<'_, [u8]> {
    const RECORD_HEADER: usize = 32;
    const OPTIONAL_KINDS: std::ops::RangeInclusive<u8> = 3..=5;
    if body.len() < 4 || body[0] != 0x20 || body[3] != 0 {
        return body.into();
    }
    let count = usize::from(u16::from_le_bytes([body[1], body[2]]));
    let mut at = 4;
    for _ in 0..count.min(fieldhub_proto::limits::MAX_FRAMES_PER_BATCH) {
        let Some(header) = body.get(at..at + RECORD_HEADER) else { break };
        let len = usize::from(u16::from_le_bytes([header[28], header[29]]));
        let (kind, flags) = (header[2], header[3]);
        if len > fieldhub_proto::limits::MAX_RECORD_DATA || kind > *OPTIONAL_KINDS.end() {
            break;
        }
        if OPTIONAL_KINDS.contains(&kind) {
            let mut changed = body.to_vec();
            changed[at + 2] = RESERVED_KIND;
            return changed.into();
        }
        // Any of 0xE0 is reserved on the kinds left (0x20 is LIN's alone).
        if flags & 0xE0 != 0 || header[31] != 0 {
            break;
        }
        let data_len = if flags & fieldhub_proto::FrameFlags::REMOTE.bits() != 0 { 0 } else { len };
        at += RECORD_HEADER + data_len;
    }
    body.into()
}
