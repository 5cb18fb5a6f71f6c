//! The challenge–response of the handshake (`spec/protocol.md` 5.1): how a
//! client proves it holds a token without sending it.
//!
//! The hub answers `HELLO` with a `CHALLENGE` (a fresh 32-byte nonce and its
//! name); the client answers `AUTH` with HMAC-SHA256 under its token of the
//! [transcript]: a fixed context string, the nonce, the hub's
//! name, and the `HELLO`'s version, name and options as they travelled. A
//! listener that is not the hub learns nothing it could replay: an `AUTH`
//! answers one nonce only, and binds the session's name and options.
//!
//! Invariants: the transcript has one encoding (every variable field is
//! length-prefixed); a MAC is compared in constant time ([`verify`]).

use hmac::{Hmac, Mac};
use sha2::Sha256;

use crate::limits::{MAC_LEN, MAX_NAME_LEN};
use crate::wire::{truncate_utf8, Challenge, Hello};

/// The first bytes of every transcript: names what the MAC is for, so a
/// MAC made for anything else never passes.
pub const CONTEXT: &[u8; 16] = b"fieldhub-auth-v2";

/// The bytes the MAC covers (`spec/protocol.md` 5.1): `CONTEXT`, the nonce,
/// `str8` hub name, `u16` version, `str8` client name, `u32` options (0
/// when the `HELLO` has none). Names are taken as the wire carries them
/// (cut to [`MAX_NAME_LEN`] at a character boundary).
pub fn transcript(challenge: &Challenge<'_>, hello: &Hello<'_>) -> Vec<u8> {
    let hub = truncate_utf8(challenge.hub_name, MAX_NAME_LEN);
    let name = truncate_utf8(hello.name, MAX_NAME_LEN);
    let mut bytes = Vec::with_capacity(CONTEXT.len() + challenge.nonce.len() + hub.len() + name.len() + 9);
    bytes.extend_from_slice(CONTEXT);
    bytes.extend_from_slice(&challenge.nonce);
    bytes.push(hub.len() as u8);
    bytes.extend_from_slice(hub);
    bytes.extend_from_slice(&hello.version.to_le_bytes());
    bytes.push(name.len() as u8);
    bytes.extend_from_slice(name);
    bytes.extend_from_slice(&hello.options.bits().to_le_bytes());
    bytes
}

fn keyed(token: &[u8], transcript: &[u8]) -> Hmac<Sha256> {
    // HMAC takes a key of any length (longer ones are hashed first).
    let mut mac = Hmac::<Sha256>::new_from_slice(token).expect("HMAC accepts any key length");
    mac.update(transcript);
    mac
}

/// The `AUTH` MAC a holder of `token` sends for this handshake.
pub fn auth_mac(token: &[u8], challenge: &Challenge<'_>, hello: &Hello<'_>) -> [u8; MAC_LEN] {
    keyed(token, &transcript(challenge, hello)).finalize().into_bytes().into()
}

/// Whether `mac` is what a holder of `token` sends for `transcript`
/// (from [`transcript`]); takes the same time wherever the bytes differ.
pub fn verify(token: &[u8], transcript: &[u8], mac: &[u8; MAC_LEN]) -> bool {
    keyed(token, transcript).verify_slice(mac).is_ok()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::limits::{NONCE_LEN, PROTOCOL_VERSION};
    use crate::wire::SessionOptions;

    fn hello(name: &str, options: SessionOptions) -> Hello<'_> {
        Hello { version: PROTOCOL_VERSION, name, options }
    }

    #[test]
    fn the_mac_is_hmac_sha256_of_the_transcript_under_the_token() {
        // RFC 4231 test case 2: key "Jefe", "what do ya want for nothing?".
        let mac = keyed(b"Jefe", b"what do ya want for nothing?").finalize().into_bytes();
        assert_eq!(hex::encode(mac), "5bdcc146bf60754e6a042426089575c75a003f089d2739839dec58b964ec3843");
    }

    #[test]
    fn the_mac_binds_the_nonce_the_hub_and_every_field_of_the_hello() {
        let challenge = Challenge { nonce: [1; NONCE_LEN], hub_name: "rack1" };
        let base = auth_mac(b"sesame", &challenge, &hello("ecu", SessionOptions::empty()));
        let transcript = transcript(&challenge, &hello("ecu", SessionOptions::empty()));
        assert!(verify(b"sesame", &transcript, &base));
        assert!(!verify(b"sesam", &transcript, &base), "another token");
        let other_nonce = Challenge { nonce: [2; NONCE_LEN], ..challenge };
        assert_ne!(base, auth_mac(b"sesame", &other_nonce, &hello("ecu", SessionOptions::empty())));
        let other_hub = Challenge { hub_name: "rack2", ..challenge };
        assert_ne!(base, auth_mac(b"sesame", &other_hub, &hello("ecu", SessionOptions::empty())));
        assert_ne!(base, auth_mac(b"sesame", &challenge, &hello("ecv", SessionOptions::empty())));
        assert_ne!(base, auth_mac(b"sesame", &challenge, &hello("ecu", SessionOptions::SYNCHRONIZED)));
    }

    #[test]
    fn the_transcript_is_laid_out_as_the_spec_says() {
        let challenge = Challenge { nonce: [0xAB; NONCE_LEN], hub_name: "hub" };
        let bytes = transcript(&challenge, &hello("ecu", SessionOptions::SYNCHRONIZED));
        let mut expected = b"fieldhub-auth-v2".to_vec();
        expected.extend_from_slice(&[0xAB; NONCE_LEN]);
        expected.extend_from_slice(b"\x03hub\x02\x00\x03ecu\x01\x00\x00\x00");
        assert_eq!(bytes, expected);
    }
}
