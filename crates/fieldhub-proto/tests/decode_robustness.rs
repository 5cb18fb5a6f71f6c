//! Deterministic stand-in for the fuzz target (`fuzz/`): feeds pseudo-random
//! and mutated-vector bytes to the decoder. It must never panic, and every
//! body it accepts must re-encode to exactly the same bytes.

use std::path::Path;

use fieldhub_proto::limits::{MAX_HELLO_LEN, MAX_MESSAGE_LEN};
use fieldhub_proto::wire::{self, check_length, decode, Message};

/// xorshift64*: tiny, seeded, good enough to spread bytes.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_F491_4F6C_DD1D)
    }
    fn below(&mut self, n: usize) -> usize {
        (self.next() % n as u64) as usize
    }
    fn byte(&mut self) -> u8 {
        self.next() as u8
    }
}

/// Message bodies (without length prefix) of every vector, valid or not.
fn vector_bodies() -> Vec<Vec<u8>> {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../spec/vectors");
    let mut bodies = Vec::new();
    for entry in std::fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        if path.extension().and_then(|ext| ext.to_str()) != Some("json") {
            continue;
        }
        let root: serde_json::Value = serde_json::from_str(&std::fs::read_to_string(&path).unwrap()).unwrap();
        for vector in root["vectors"].as_array().unwrap() {
            let bytes = hex::decode(vector["hex"].as_str().unwrap()).unwrap();
            if bytes.len() > 4 && bytes.len() < 8192 {
                bodies.push(bytes[4..].to_vec());
            }
        }
    }
    assert!(!bodies.is_empty());
    bodies
}

/// Decode `body`; if it is accepted, it must re-encode to itself.
fn check(body: &[u8]) -> bool {
    match decode(body) {
        Ok(message) => {
            if let Message::Frames(batch) = &message {
                assert_eq!(batch.iter().count(), batch.len());
            }
            let mut out = Vec::with_capacity(body.len() + 4);
            wire::encode(&mut out, &message);
            assert_eq!(&out[4..], body, "{message:?} re-encodes differently");
            assert_eq!(u32::from_le_bytes([out[0], out[1], out[2], out[3]]) as usize, body.len());
            true
        }
        Err(_) => false,
    }
}

fn mutate(rng: &mut Rng, body: &mut Vec<u8>) {
    for _ in 0..1 + rng.below(4) {
        match rng.below(7) {
            0 if !body.is_empty() => {
                let i = rng.below(body.len());
                body[i] ^= 1 << rng.below(8);
            }
            1 if !body.is_empty() => {
                let i = rng.below(body.len());
                body[i] = rng.byte();
            }
            2 if !body.is_empty() => {
                // Interesting values where lengths, counts and flags live.
                let i = rng.below(body.len());
                body[i] =
                    [0x00, 0x01, 0x02, 0x08, 0x09, 0x0D, 0x0F, 0x10, 0x20, 0x40, 0x41, 0x7F, 0x80, 0xFF][rng.below(14)];
            }
            3 => {
                let i = rng.below(body.len() + 1);
                body.insert(i, rng.byte());
            }
            4 if !body.is_empty() => {
                let i = rng.below(body.len());
                body.remove(i);
            }
            5 => {
                let cut = rng.below(body.len() + 1);
                body.truncate(cut);
            }
            _ => {
                // Duplicate a slice (repeats records in batches).
                if body.len() > 1 {
                    let a = rng.below(body.len());
                    let b = a + rng.below(body.len() - a).min(64);
                    let chunk = body[a..b].to_vec();
                    let at = rng.below(body.len() + 1);
                    body.splice(at..at, chunk);
                }
            }
        }
    }
}

#[test]
fn decoder_never_panics_on_random_input_and_accepted_bodies_reencode_identically() {
    let mut rng = Rng(0x9E37_79B9_7F4A_7C15);
    let types = [0x01, 0x02, 0x03, 0x10, 0x11, 0x12, 0x13, 0x20, 0x21, 0x30, 0x40, 0x41, 0x50];
    let mut accepted = 0;
    let mut body = Vec::new();
    for _ in 0..200_000 {
        body.clear();
        let len = rng.below(72);
        body.extend((0..len).map(|_| rng.byte()));
        if !body.is_empty() && rng.below(4) != 0 {
            body[0] = types[rng.below(types.len())];
        }
        if check(&body) {
            accepted += 1;
        }
        let prefix = rng.next() as u32;
        // check_length never panics and bounds what a reader would buffer.
        if let Ok(n) = check_length(prefix, MAX_HELLO_LEN) {
            assert!(n > 0 && n <= MAX_HELLO_LEN as usize);
        }
        if let Ok(n) = check_length(prefix >> rng.below(32), MAX_MESSAGE_LEN) {
            assert!(n > 0 && n <= MAX_MESSAGE_LEN as usize);
        }
    }
    assert!(accepted > 0, "random bodies never hit a valid message");
}

#[test]
fn decoder_never_panics_on_mutated_vectors_and_accepted_bodies_reencode_identically() {
    let seeds = vector_bodies();
    let mut rng = Rng(0xD1B5_4A32_D192_ED03);
    let mut accepted = 0;
    let mut body = Vec::new();
    for _ in 0..150_000 {
        body.clear();
        body.extend_from_slice(&seeds[rng.below(seeds.len())]);
        mutate(&mut rng, &mut body);
        if check(&body) {
            accepted += 1;
        }
    }
    assert!(accepted > 1000, "only {accepted} mutated bodies decoded");
}
