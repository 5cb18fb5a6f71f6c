//! The control API's handlers: one bus request each ([`requests`]), DBC
//! files per channel ([`dbc`]), the monitor's WebSocket ([`monitor_ws`]) and
//! the recordings' files and the send box ([`workbench`]), a recording
//! opened in the page read into frames ([`recording_decode`]), the cannelloni
//! endpoints' counters ([`cannelloni`]), the rest-bus simulations ([`rbs`]).

pub mod cannelloni;
pub mod dbc;
pub mod monitor_ws;
pub mod rbs;
pub mod recording_decode;
pub mod requests;
pub mod signals;
pub mod workbench;
