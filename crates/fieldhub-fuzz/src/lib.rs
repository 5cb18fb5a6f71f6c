//! Every decoder and parser that reads untrusted input, as a fuzz target.
//!
//! A target takes arbitrary bytes and feeds them to one reader the way the
//! hub or a tool does; it must never panic, and where the reader promises
//! more (a decoded message re-encodes to its bytes, a recording path stays
//! inside its directory) it asserts that too. The targets are plain
//! functions ([`TARGETS`]), run two ways:
//!
//! - in the test command (`tests/corpus.rs`): each target replays its
//!   committed corpus (`corpus/<target>/`) and thousands of inputs
//!   [`mutate`]d from it with a fixed seed — quick, deterministic, on stable
//!   Rust;
//! - with libFuzzer for as long as you like (`fuzz/`, `cargo +nightly fuzz
//!   run <target>`), coverage-guided, its finds added to the corpus.
//!
//! Invariant: this crate only reads; the readers it calls are the real
//! ones, never copies of them.

pub mod mutate;
mod portable_c;
mod targets;

pub use portable_c::portable_c;
pub use targets::*;

/// A fuzz target: its name (its corpus directory) and its function.
pub type Target = (&'static str, fn(&[u8]));

/// Every target.
pub const TARGETS: &[Target] = &[
    ("wire", wire),
    ("shm_ring", shm_ring),
    ("shm_headers", shm_headers),
    ("config", config),
    ("fault_rule", fault_rule),
    ("http_bodies", http_bodies),
    ("recording_path", recording_path),
    ("candump", candump),
    ("asc", asc),
    ("blf", blf),
    ("mdf4", mdf4),
    ("cansend", cansend),
    ("dbc", dbc),
    ("rbs", rbs),
    ("ldf", ldf),
    ("cannelloni", cannelloni),
    ("socketcand", socketcand),
    ("portable_c", portable_c),
];
