//! Vector SIL Kit for fieldhub: a hub channel joins a SIL Kit CAN network
//! as one participant, so SIL Kit's participants get fieldhub's bus —
//! arbitration, bit timing, error frames, fault injection — instead of
//! SIL Kit's simple CAN simulation.
//!
//! # Layout
//!
//! - [`ffi`]: the C API's structs, constants and function types, declared
//!   by hand from SIL Kit's public headers (tests pin every layout).
//! - [`library`]: finds and opens `libSilKit.so` at run time
//!   (`FIELDHUB_SILKIT_LIB`, then the system's loader path) and resolves
//!   every function up front.
//! - [`convert`]: [`Frame`](fieldhub_proto::frame::Frame) ⇄ `SilKit_CanFrame`.
//! - [`participant`]: one participant with one CAN controller — join, send,
//!   frames from the others to a sink.
//! - [`netsim_ffi`], [`simulator`]: SIL Kit's experimental network
//!   simulator — every controller's requests on a network to a sink, the
//!   events its controllers see produced from here.
//!
//! The hub's `transport::silkit` attaches a [`CanParticipant`] to a channel
//! as a port; this crate knows nothing of hubs or channels.
//!
//! # Invariants
//!
//! - fieldhub builds and runs without SIL Kit: the library is opened only
//!   when a participant is wanted, and its absence is an error value
//!   ([`LoadError`]) that says where it was looked for and how to fix it.
//! - SIL Kit's stable C API, and two experimental parts:
//!   `SilKit_Experimental_SystemController_*` for synchronised time (5.0's
//!   only way to name the required participants a coordinated lifecycle
//!   waits for) and `SilKit_Experimental_NetworkSimulator_*` for the
//!   simulator mode, whose absence only that mode reports.
//! - No echo: the frame handler is registered for the receive direction,
//!   so the controller's own transmissions never come back to the sink.
//! - Nothing unwinds across the C boundary: the handler SIL Kit calls
//!   catches panics; every `unsafe` says why it is sound.
//! - Frames cross unchanged or not at all ([`ConvertError`]).

pub mod convert;
pub mod ffi;
pub mod library;
pub mod netsim_ffi;
pub mod participant;
pub mod simulator;

pub use convert::ConvertError;
pub use library::{LoadError, SilKitLibrary, LIBRARY_ENV};
pub use participant::{CanParticipant, FrameSink, JoinOptions, SilKitError, StepSink, SyncOptions};
pub use simulator::{
    Direction, ErrorState, EventProducer, NetworkSimulator, SimulatorEvent, SimulatorOptions, SimulatorSink,
    TransmitStatus,
};
