//! The control plane: requests that inspect or change the bus while it
//! runs — wiring (plug, unplug, cut, repair), gateway routes, statistics.
//!
//! Requests arrive over HTTP ([`http`]) on the hub's own TCP listen address
//! (a connection that starts with an HTTP method is handed to the control
//! server) and travel to the bus thread as `fieldhub_bus::inbox::Inbound::Control`;
//! the bus thread applies them between two frames, so every change is atomic
//! with respect to traffic and the data path never takes a lock for them.

pub mod api;
pub mod dbc_store;
pub mod handlers;
pub mod http;
mod http_slots;
mod origin;
mod serve;
pub mod state;
mod tls_io;
pub mod trace;
mod ui;
