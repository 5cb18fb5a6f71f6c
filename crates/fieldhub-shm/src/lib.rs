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
//! - `round_lock`: the lock of the hub's side of a to-client ring, which
//!   the bus thread keeps for a round instead of taking it per frame (not
//!   under `cfg(loom)`).
//! - `segment`: memfd segments and their mappings (not under `cfg(loom)`).
//! - `region`: ivshmem regions — a client segment inside a file a QEMU
//!   guest maps as a PCI BAR, with polling and beat words instead of
//!   futexes and sockets (not under `cfg(loom)`).
//! - `socket`: the per-user private socket directory and passing file
//!   descriptors with `SCM_RIGHTS` (not under `cfg(loom)`).
//! - `waker_sched`: a waiter's timer slack and `SCHED_FIFO`, for the hub's
//!   bus thread, which sleeps on its doorbell between deadlines.
//!
//! `segment`, `region`, `socket`, `peer` and `waker_sched` are Linux-only (memfd, futexes
//! shared between processes, `SCM_RIGHTS`, `sock_diag`). Elsewhere (the
//! Windows client) the crate is the layout, the rings and the doorbells,
//! which then sleep on `WaitOnAddress` and ring only inside one process.
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
#[cfg(all(not(loom), target_os = "linux"))]
pub mod peer;
#[cfg(all(not(loom), target_os = "linux"))]
pub mod region;
pub mod ring;
#[cfg(not(loom))]
pub mod round_lock;
#[cfg(all(not(loom), target_os = "linux"))]
pub mod segment;
#[cfg(all(not(loom), target_os = "linux"))]
pub mod socket;
mod sync;
#[cfg(all(not(loom), target_os = "linux"))]
pub mod waker_sched;

pub use bell::{AdaptiveSpin, Bell, WaitPolicy};

/// The hub's bus thread's `SCHED_FIFO` priority under `[hub] realtime`
/// (`waker_sched::run_fifo`): above every normal thread, below the kernel's
/// threaded interrupt handlers (50), which the bus depends on (network,
/// timers). Here, on every platform, for the hub's messages and for threads
/// that measure the machine as the bus thread would see it.
pub const BUS_THREAD_PRIORITY: i32 = 10;

/// The bus thread's timer slack (`waker_sched::set_timer_slack_ns`): the
/// default 50 µs would let its deadlines fire that much late.
pub const BUS_THREAD_SLACK_NS: u64 = 1;

/// The name the hub gives its bus thread: what tools that measure a running
/// hub from outside (`fieldhub bench`'s sleep counts, `bench/*.sh`) find
/// it by in `/proc/PID/task/*/comm`.
pub const BUS_THREAD_NAME: &str = "fh-bus";
pub use layout::{HeaderError, RegionHeader, SegmentHeader};
#[cfg(all(not(loom), target_os = "linux"))]
pub use region::{Backoff, Region};
pub use ring::{Consumer, Producer, RingError, RingRef};
#[cfg(not(loom))]
pub use round_lock::RoundLock;
#[cfg(all(not(loom), target_os = "linux"))]
pub use segment::{BellSegment, ClientSegment, OpenError};
