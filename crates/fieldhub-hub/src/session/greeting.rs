//! The parts of the handshake (`spec/protocol.md` 5, 5.1) that need no
//! client slot: the `CHALLENGE` a hub with a token sends, what the client's
//! `AUTH` must be a MAC of, and the words of every refusal.
//!
//! Invariants: a nonce comes from the operating system's random source and
//! is never reused (a failure of that source refuses the client, it never
//! falls back to anything weaker); the transcript is built from the
//! `HELLO` as it was received and the `CHALLENGE` as it was sent.

use fieldhub_proto::auth;
use fieldhub_proto::limits::{NONCE_LEN, PROTOCOL_VERSION};
use fieldhub_proto::wire::{self, Challenge, ErrorCode, Hello, Message, SessionOptions};

use crate::session::credentials::Refused;

/// A client that was sent a `CHALLENGE` and owes its `AUTH`.
pub struct Challenged {
    nonce: [u8; NONCE_LEN],
    version: u16,
    name: String,
    options: SessionOptions,
}

impl Challenged {
    /// Challenge the client that sent `hello`: a fresh nonce, and the
    /// encoded `CHALLENGE` naming `hub_name`.
    pub fn new(hello: &Hello<'_>, hub_name: &str) -> Result<(Self, Vec<u8>), (ErrorCode, String)> {
        let mut nonce = [0u8; NONCE_LEN];
        getrandom::fill(&mut nonce)
            .map_err(|e| (ErrorCode::Internal, format!("the hub cannot read random bytes for its challenge: {e}")))?;
        let mut bytes = Vec::new();
        wire::encode(&mut bytes, &Message::Challenge(Challenge { nonce, hub_name }));
        let challenged = Self { nonce, version: hello.version, name: hello.name.to_owned(), options: hello.options };
        Ok((challenged, bytes))
    }

    /// The bytes the client's MAC covers (`fieldhub_proto::auth`).
    pub fn transcript(&self, hub_name: &str) -> Vec<u8> {
        let hello = Hello { version: self.version, name: &self.name, options: self.options };
        auth::transcript(&Challenge { nonce: self.nonce, hub_name }, &hello)
    }

    /// The `HELLO`'s name and session options, for the welcome.
    pub fn hello(&self) -> (&str, SessionOptions) {
        (&self.name, self.options)
    }
}

/// What a client of another protocol version is told. Version 1 sent its
/// token in clear: it is told so, and what to upgrade.
pub fn unsupported_version(version: u16) -> String {
    let refused = format!("protocol version {version} is not supported; this hub speaks version {PROTOCOL_VERSION}");
    match version {
        1 => format!(
            "{refused} (a version-1 client sends its token in clear): upgrade the client to this hub's release \
             (fieldhub tools, the Python package, libfieldhub, the portable C client)"
        ),
        _ => refused,
    }
}

/// What a client that is not admitted is told. The tools and libraries
/// read the token from the environment.
pub fn refusal(refused: Refused) -> String {
    match refused {
        Refused::TokenRequired => "this hub requires a token (set FIELDHUB_TOKEN, or FIELDHUB_TOKEN_FILE to a file \
                                   holding it, or pass it as the client's token)"
            .to_owned(),
        Refused::WrongToken => "wrong token (the one FIELDHUB_TOKEN or FIELDHUB_TOKEN_FILE gives, or the client was \
                                given, differs from the hub's)"
            .to_owned(),
        Refused::NotHubUser(who) => format!(
            "this hub admits without a token only processes of the user it runs as, and this is {who}: set \
             FIELDHUB_TOKEN, or FIELDHUB_TOKEN_FILE to a file holding the hub's token (see docs/security.md)"
        ),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_challenge_has_a_fresh_nonce_and_the_hubs_name() {
        let hello = Hello { version: PROTOCOL_VERSION, name: "ecu", options: SessionOptions::empty() };
        let (first, bytes) = Challenged::new(&hello, "rack1").unwrap();
        let (second, _) = Challenged::new(&hello, "rack1").unwrap();
        assert_ne!(first.nonce, second.nonce);
        let Ok(Message::Challenge(sent)) = wire::decode(&bytes[4..]) else { panic!("not a CHALLENGE") };
        assert_eq!((sent.nonce, sent.hub_name), (first.nonce, "rack1"));
        assert_eq!(first.transcript("rack1"), auth::transcript(&sent, &hello));
    }

    #[test]
    fn a_version_1_client_is_told_both_versions_and_to_upgrade() {
        let text = unsupported_version(1);
        assert!(text.starts_with("protocol version 1 is not supported; this hub speaks version 2"), "{text}");
        assert!(text.contains("token in clear") && text.contains("upgrade the client"), "{text}");
        assert_eq!(unsupported_version(3), "protocol version 3 is not supported; this hub speaks version 2");
    }
}
