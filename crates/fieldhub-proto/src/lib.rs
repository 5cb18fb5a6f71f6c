//! The fieldhub protocol: frame model, wire codec and hard limits. No I/O.
//!
//! # Layout
//!
//! - [`frame`]: what travels on a bus — [`Frame`] (CAN classic, CAN FD, error
//!   frames in SocketCAN layout, LIN, CAN XL, raw) and the hub-assigned
//!   [`FrameMeta`] (channel, sender port, per-channel sequence number,
//!   timestamp); [`canxl`]: the CAN XL and raw frames' own constructors,
//!   accessors and checks; `payload`: a frame's payload, inline or shared.
//! - [`bits`]: a frame's exact on-wire bit length (stuffing, CRC) and duration.
//! - [`lin`]: LIN 2.x arithmetic — protected identifiers, classic and
//!   enhanced checksums, a LIN frame's exact bit length and duration.
//! - [`limits`]: every bound of the protocol (message size, frames per batch,
//!   ports per client, name lengths). The spec (`spec/protocol.md`) quotes them.
//! - [`wire`]: the TCP/unix-socket wire format — length-prefixed little-endian
//!   messages, the handshake, frame batches — as a decoder that borrows from
//!   the caller's buffer and an encoder that appends to a caller's `Vec`.
//! - [`auth`]: the handshake's challenge–response — the MAC a client sends
//!   in `AUTH` to prove it holds the token without sending it.
//! - [`fate`]: what the hub tells a sender about frames that will never be
//!   on the bus ([`fate::TxDropped`], why: [`fate::DropReason`]) and a
//!   receiver about its channel ([`fate::ChannelState`]).
//! - [`stats`]: the statistics document of `STATS`.
//! - [`stream`]: message framing over any `std::io::Read` the caller owns.
//! - [`text`]: the can-utils text forms: cansend's `123#DEADBEEF` and
//!   candump's log line `(1700000000.123456) can0 123#DEADBEEF`;
//!   [`error_text`]: an error frame in words, as `candump -e` prints it.
//!
//! # Invariants
//!
//! - Nothing here opens sockets or files, spawns threads or reads clocks
//!   ([`stream`] only reads from a reader the caller owns); the hub, the
//!   client and every language binding build on this crate.
//! - A [`Frame`] that exists is valid: constructors and the decoder check
//!   every field, so code holding a `Frame` never re-validates.
//! - The decoder never panics and never allocates on untrusted input; every
//!   rejection is a [`wire::DecodeError`] naming the problem. Reading a
//!   decoded batch allocates once per CAN XL or raw record (its shared
//!   payload) and never for the other kinds.
//! - Encoding a decoded message yields the same bytes (the test vectors in
//!   `spec/vectors/` pin this for every message type).

pub mod auth;
pub mod bits;
pub mod canxl;
pub mod error_text;
pub mod fate;
pub mod frame;
pub mod limits;
pub mod lin;
mod payload;
pub mod stats;
pub mod stream;
pub mod text;
pub mod text_xl;
pub mod wire;

pub use frame::{Frame, FrameError, FrameFlags, FrameKind, FrameMeta};
