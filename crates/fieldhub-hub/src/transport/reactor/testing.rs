//! What the reactor's tests share: a session layer whose inbox the test
//! reads, and the client's side of the wire as bytes.
//!
//! Invariants: nothing here opens a socket or starts a thread; the only
//! thing it imports from the reactor is the input buffer it feeds.

use std::ops::Range;
use std::sync::atomic::AtomicBool;
use std::sync::Arc;

use fieldhub_bus::inbox::{self, Inbox};
use fieldhub_bus::testing::SteppedByHand;
use fieldhub_proto::limits::PROTOCOL_VERSION;
use fieldhub_proto::wire::{self, Hello, Message, Packer, SessionOptions, LENGTH_PREFIX};
use fieldhub_proto::{Frame, FrameMeta};

use super::input::Input;
use crate::session::credentials::Credentials;
use crate::session::peer_user::PeerOrigin;
use crate::session::{ClientSlot, Sessions};

/// Sessions of a hub without a token, and the inbox the bus would read.
pub(super) fn sessions() -> (Arc<Sessions>, Inbox) {
    sessions_with(None)
}

/// Sessions of a hub with `token` (`None`: without one), and the inbox.
pub(super) fn sessions_with(token: Option<&str>) -> (Arc<Sessions>, Inbox) {
    let (sender, inbox) = inbox::inbox(Arc::new(SteppedByHand));
    let credentials = Credentials::new(token.map(str::to_owned), None, false);
    let sessions = Sessions::new(sender, "test-hub".into(), credentials, false, Arc::new(AtomicBool::new(false)));
    (Arc::new(sessions), inbox)
}

/// A counted client of the hub's own user (admitted without a token).
pub(super) fn slot(sessions: &Arc<Sessions>) -> ClientSlot {
    sessions.admit("a test", "test-peer", PeerOrigin::Operator).expect("room for a client")
}

/// Read `bytes` into `input` as a socket would hand them over.
pub(super) fn feed(input: &mut Input, bytes: &[u8]) {
    for chunk in bytes.chunks(super::input::READ_CHUNK) {
        let read = input.read_from(|buf| {
            buf[..chunk.len()].copy_from_slice(chunk);
            Ok(chunk.len())
        });
        assert_eq!(read.expect("reads"), chunk.len());
    }
}

/// `message`, encoded with its length prefix.
pub(super) fn encoded(message: &Message<'_>) -> Vec<u8> {
    let mut bytes = Vec::new();
    wire::encode(&mut bytes, message);
    bytes
}

/// The `HELLO` of the tests' client.
pub(super) const HELLO: Hello<'static> =
    Hello { version: PROTOCOL_VERSION, name: "tester", options: SessionOptions::empty() };

/// A client's `HELLO`.
pub(super) fn hello() -> Vec<u8> {
    encoded(&Message::Hello(HELLO))
}

/// A client's `FRAMES` message on port 1: one CAN frame per id in `ids`.
pub(super) fn frames_message(ids: Range<u32>) -> Vec<u8> {
    let mut packer = Packer::new();
    for id in ids {
        let frame = Frame::can(id, true, &id.to_le_bytes()).expect("a frame");
        packer.push_frame(1, &frame, &FrameMeta::default());
    }
    packer.finish().to_vec()
}

/// The ids of the frames of a `FRAMES` body.
pub(super) fn frame_ids(body: &[u8]) -> Vec<u32> {
    match wire::decode(body) {
        Ok(Message::Frames(batch)) => batch.iter().map(|record| record.frame.id()).collect(),
        other => panic!("expected FRAMES, got {other:?}"),
    }
}

/// The bodies of the whole messages in `bytes`, in order.
pub(super) fn bodies(mut bytes: &[u8]) -> Vec<Vec<u8>> {
    let mut bodies = Vec::new();
    while let Some(prefix) = bytes.get(..LENGTH_PREFIX) {
        let len = u32::from_le_bytes(prefix.try_into().expect("four bytes")) as usize;
        bodies.push(bytes[LENGTH_PREFIX..LENGTH_PREFIX + len].to_vec());
        bytes = &bytes[LENGTH_PREFIX + len..];
    }
    bodies
}
