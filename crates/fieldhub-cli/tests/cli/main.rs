//! Tests of the `fieldhub` command itself: its tools (`dump`, `send`,
//! `gen`, `ctl`, `rbs`, `stats`, `top` (also on a terminal, in tmux), `record`, `replay`, `convert`, `isotp`, `frame-bits`, `bench`,
//! `bridge`) and the `hub` command's flags, ready signal and messages —
//! against real hubs where a tool needs one. What the hub does is
//! `crates/fieldhub-systest`'s to test.

use fieldhub_testkit::Fieldhub;

/// The command under test.
pub const FIELDHUB: Fieldhub = Fieldhub::at(env!("CARGO_BIN_EXE_fieldhub"));

mod bench;
mod bench_report;
mod bridge;
mod candump_options;
mod check_config;
mod convert;
mod frame_bits;
mod gateway;
mod isotp;
mod rbs;
mod ready_signal;
mod record_replay;
mod rough_edges;
mod stats;
mod tools;
mod top;
mod top_tui;
