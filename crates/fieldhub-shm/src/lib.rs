//! The shared-memory transport of fieldhub (`spec/shm.md`): the segment
//! layout, the single-producer/single-consumer rings, the futex doorbells and
//! the setup of a segment over a unix socket.
//!
//! This crate is the only place with `unsafe` shared-memory code. The hub and
//! the client use its safe types and never touch a raw pointer.
//!
//! # Layout
//!
//! - [`layout`]: header fields, offsets and sizes; encoding and validation
//!   of the header (pinned by `spec/vectors/shm/header.json`).
//! - [`ring`]: the SPSC ring of fixed-size slots carrying complete wire
//!   messages of `spec/protocol.md` (a message spans consecutive slots).
//! - [`bell`]: the doorbell — a futex word with notification suppression —
//!   and the adaptive wait (spin briefly, then sleep).
//! - `segment`: memfd segments and their mappings (not under `cfg(loom)`).
//! - `region`: ivshmem regions — a client segment inside a file a QEMU
//!   guest maps as a PCI BAR, with polling and beat words instead of
//!   futexes and sockets (not under `cfg(loom)`).
//! - `socket`: the per-user private socket directory and passing file
//!   descriptors with `SCM_RIGHTS` (not under `cfg(loom)`).
//!
//! # Invariants
//!
//! - A ring slot is read only after the producer published it (Release store
//!   of `head` after the bytes, Acquire load before reading them) and written
//!   only after the consumer released it (the same pair on `tail`).
//! - Nothing read from shared memory is trusted: indices and lengths are
//!   checked against the locally kept sizes before any copy, and messages are
//!   copied into private memory before they are decoded. A peer that writes
//!   garbage gets a [`ring::RingError`], never an out-of-bounds access.
//! - A side pays for a wake-up system call only when the other side has
//!   announced that it is going to sleep ([`bell::Bell`]).
//! - Segments are owner-only memfds sealed against shrinking, so a peer
//!   cannot make the other side fault on a truncated mapping.

pub mod bell;
pub mod layout;
#[cfg(not(loom))]
pub mod peer;
#[cfg(not(loom))]
pub mod region;
pub mod ring;
#[cfg(not(loom))]
pub mod segment;
#[cfg(not(loom))]
pub mod socket;
mod sync;

pub use bell::{AdaptiveSpin, Bell, WaitPolicy};
pub use layout::{HeaderError, RegionHeader, SegmentHeader};
#[cfg(not(loom))]
pub use region::{Backoff, Region};
pub use ring::{Consumer, Producer, RingError, RingRef};
#[cfg(not(loom))]
pub use segment::{BellSegment, ClientSegment, OpenError};
