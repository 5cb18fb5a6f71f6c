//! The fieldhub bus: a deterministic state machine of channels, ports and
//! their rules — bytes and time in, frames and deadlines out — like
//! quinn-proto under quinn. The hub is its runtime: it runs the bus thread's
//! loop, its transports feed the [`inbox`] and drain each client's
//! [`outbox`], and it supplies the clock, the wake-up and the recorder.
//!
//! # Layout, top to bottom
//!
//! - [`bus`]: the [`Bus`]: one sequencer for a group of channels; owns
//!   clients, ports, channels, gateway routes and CAN↔LIN gateways
//!   ([`lin_gateway`]); control requests
//!   ([`request`]) applied between two frames; virtual time.
//! - [`channel`]: one channel's arbitration, schedule (ideal or timed),
//!   fault rules and fan-out.
//! - The port model: [`member`] (a port on a channel), [`tx_queue`] (its
//!   transmit FIFO and rate limit), [`confinement`] (CAN error states),
//!   [`credit`] (how many frames a client may have in the bus), [`port_id`].
//! - What crosses the boundary: [`inbox`] (requests in, and the [`inbox::Wake`]
//!   the runtime provides), [`outbox`] (items out, each transport's sink),
//!   [`clock`], [`recording`] and [`monitor`] taps, [`federation`] link types,
//!   [`access`] rights, [`config`] tables.
//! - Figures: [`bus_load`], [`id_counter`], [`slots`], [`deadline_lateness`]
//!   (how late the runtime served the bus's deadlines in real time).
//! - [`cyclic`]: cyclic jobs on bus time (rest-bus messages, BCM transmit jobs).
//!
//! # Invariants
//!
//! - **No sockets, threads or OS time.** The bus reads bus time only through
//!   the [`clock::Clock`] it is given and wall time only through its
//!   [`clock::WallClock`]; it never opens a file or socket, spawns a thread or
//!   sleeps. `cargo tree -p fieldhub-bus` shows no I/O crate.
//! - **One sequencer per channel**: every frame of a channel passes
//!   `Channel::transmit`; sequence numbers are 1, 2, 3… without gaps and
//!   timestamps never decrease.
//! - **A frame's fate** (`spec/protocol.md` 6.9, `docs/frame-fate.md`):
//!   every frame a port hands over leaves its transmit FIFO in exactly one of
//!   two ways — sent (`Channel::transmit`, its sender confirmed by its echo
//!   and the `PONG` of a later `PING`), or dropped for a
//!   [`fieldhub_proto::fate::DropReason`] through [`member::Member::dropped`],
//!   which counts it by reason and reports it to its sender (`TX_DROPPED`)
//!   before any later `PONG`. A `PONG` waits while a frame sent before its
//!   `PING` is queued, on the wire or held by a delay rule.
//! - **The bus never waits on a client**: outboxes answer at once (taken,
//!   full or gone); a lossless receiver without room holds its own channel
//!   only.
//! - **Bounded everything**, and no allocation per frame on the data path.

pub mod access;
pub mod auth_refusals;
pub mod bus;
pub mod bus_load;
pub mod channel;
pub mod clock;
pub mod config;
pub mod confinement;
pub mod credit;
pub mod cyclic;
pub mod deadline_lateness;
pub mod departed;
pub mod fault;
pub mod federation;
pub mod id_counter;
pub mod inbox;
pub mod lin_gateway;
pub mod member;
pub mod monitor;
pub mod names;
pub mod outbox;
pub mod port_id;
pub mod recording;
pub mod request;
pub mod slots;
pub mod testing;
pub mod tx_queue;
pub mod wake;

pub use bus::{Bus, Input};

/// The log target of the per-client lines (connected, port opened,
/// disconnected): `fieldhub hub --quiet` or `FIELDHUB_LOG=info,fieldhub::clients=warn`
/// hides them on a hub with many short-lived clients.
pub const CLIENT_LOG: &str = "fieldhub::clients";
