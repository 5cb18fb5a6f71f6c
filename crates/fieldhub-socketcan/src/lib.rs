//! Linux SocketCAN on the bus: frame conversion ([`convert`]), an open
//! interface ([`Interface`]), and the client-side [`Bridge`] that joins an
//! interface to a hub channel (feature `bridge`, on by default; the hub
//! uses this crate without it, for its own `[[port]] socketcan` ports).
//!
//! Invariants:
//! - Conversion is lossless both ways for every frame either side carries,
//!   error frames included; what the hub cannot represent is refused, never
//!   truncated.
//! - No echo loops: an [`Interface`] does not receive the frames it writes
//!   (SocketCAN's `recv_own_msgs` stays off), and whoever joins it to a hub
//!   channel opens its port without `receive_own`, so a frame crosses at
//!   most once.
//! - Linux only. Without AF_CAN in the kernel, [`Interface::open`] fails
//!   with [`InterfaceError::NoSocketCan`], which says what to do.

#[cfg(feature = "bridge")]
mod bridge;
pub mod convert;
mod interface;

#[cfg(feature = "bridge")]
pub use bridge::{Bridge, BridgeConfig, BridgeCounters};
pub use interface::{Interface, InterfaceError, READ_TIMEOUT};
