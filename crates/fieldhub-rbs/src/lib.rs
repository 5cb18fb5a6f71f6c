//! Rest-bus simulation from a DBC (issue 41, `docs/rest-bus.md`):
//! the simulated nodes' messages, sent on bus time by
//! `fieldhub_bus::cyclic` jobs, one hub-internal port per node.
//!
//! What is here so far, each without I/O and without a clock of its own:
//! - [`bits`]: a signal's raw value into a payload, in DBC bit numbering
//!   (the inverse of `fieldhub_dbc::bits::extract`).
//! - [`encode`]: a message's frame from physical signal values (the web
//!   monitor's send by signals), through [`bits`].
//! - [`load`]: a DBC file's bytes parsed, or an error naming the line (too
//!   large, not DBC, multiplexing no message can carry: [`multiplex`]).
//! - [`plan`]: which messages the selected nodes send, with cycle time,
//!   start delay and first payload (start values, multiplexing).
//! - [`protect`]: alive counters and checksums per rule (XOR, SAE J1850
//!   CRC-8, CRC-8H2F as AUTOSAR E2E profile 2 uses, a user polynomial),
//!   with the faults a test injects: a stuck counter, a wrong checksum.
//! - [`signal`]: one running signal — the value set or ramped, the value
//!   last sent — shared by the control plane and the bus through atomics.
//! - [`engine`]: the running simulation: one [`fieldhub_bus::cyclic`] job
//!   per message and the state the control plane changes while it runs.
//!
//! Depends on `fieldhub-dbc`/`can-dbc`, `crc`, and `fieldhub-bus` for its
//! job trait; **never** on the hub.

pub mod bits;
pub mod encode;
pub mod engine;
pub mod load;
pub mod multiplex;
pub mod plan;
pub mod protect;
pub mod signal;
