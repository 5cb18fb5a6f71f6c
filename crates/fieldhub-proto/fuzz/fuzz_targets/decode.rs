//! Fuzz the wire decoder: `cargo +nightly fuzz run decode` from
//! `crates/fieldhub-proto`. Seed the corpus from the test vectors with
//! `spec/README.md`'s recipe for a faster start.
//!
//! The input is read two ways: as one message body, and as a byte stream of
//! length-prefixed messages (the first limited to `MAX_HELLO_LEN`, as a hub
//! reads a new connection). Decoding must never panic, a decoded batch must
//! iterate exactly its record count, and every accepted message must
//! re-encode to exactly the bytes it came from.

#![no_main]

use fieldhub_proto::limits::{MAX_HELLO_LEN, MAX_MESSAGE_LEN};
use fieldhub_proto::wire::{check_length, decode, encode, Message, LENGTH_PREFIX};
use libfuzzer_sys::fuzz_target;

/// Decode one body; if accepted, its encoding must be `wire` (prefix + body).
fn round_trip(body: &[u8], out: &mut Vec<u8>) {
    let Ok(message) = decode(body) else { return };
    if let Message::Frames(batch) = &message {
        assert_eq!(batch.iter().count(), batch.len());
        for record in batch.iter() {
            assert!(record.frame.data().len() <= record.frame.len());
        }
    }
    out.clear();
    encode(out, &message);
    assert_eq!(&out[..LENGTH_PREFIX], &(body.len() as u32).to_le_bytes());
    assert_eq!(&out[LENGTH_PREFIX..], body, "{message:?} re-encodes differently");
}

fuzz_target!(|data: &[u8]| {
    let mut out = Vec::new();
    round_trip(data, &mut out);

    let mut rest = data;
    let mut max = MAX_HELLO_LEN;
    while rest.len() >= LENGTH_PREFIX {
        let len = u32::from_le_bytes([rest[0], rest[1], rest[2], rest[3]]);
        let Ok(len) = check_length(len, max) else { return };
        assert!(len <= max as usize);
        let Some(body) = rest.get(LENGTH_PREFIX..LENGTH_PREFIX + len) else { return };
        round_trip(body, &mut out);
        rest = &rest[LENGTH_PREFIX + len..];
        max = MAX_MESSAGE_LEN;
    }
});
