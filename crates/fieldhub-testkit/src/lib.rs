//! Test support for fieldhub's system tests (`crates/fieldhub-systest`) and
//! the CLI's own tests: real `fieldhub hub` child processes, hand-spoken
//! stream and shared-memory clients, sequence-numbered traffic, the control
//! API, and waits that end on an event or a deadline — never on a sleep
//! whose length is a test's assumption.
//!
//! A test binary names the `fieldhub` executable it runs once, as a
//! [`Fieldhub`] constant built from `env!("CARGO_BIN_EXE_…")`, and starts
//! its hubs from it: `FIELDHUB.start()`, `FIELDHUB.start_with(config, args)`.
//!
//! | module | what |
//! | --- | --- |
//! | [`hub`] | [`Fieldhub`] and [`HubProcess`], a hub child process found through its ready line |
//! | [`wait`] | [`PATIENCE`], [`wait_until`], [`wait_for`]: polling a condition up to a deadline |
//! | [`traffic`] | numbered frames, receiving exactly n, draining, order checks, [`occupy_bus`] |
//! | [`control`] | the HTTP control API: [`api`], [`ok`], [`api_via`] |
//! | [`raw`] | [`RawStream`] and [`RawShm`]: clients that say exactly what a test makes them say |
//! | [`federation`] | token files, free ports and order checks for federated hubs |
//! | [`netns`] | network namespaces joined by veth pairs (root) |
//! | [`silkit`] | the SIL Kit registry and peers of `make test-silkit` |
//! | [`certs`] | TLS certificates made in the process |
//! | [`alone`] | one test in a process of its own |

pub mod alone;
pub mod certs;
pub mod control;
pub mod federation;
pub mod hub;
pub mod netns;
pub mod raw;
pub mod silkit;
pub mod traffic;
pub mod wait;

pub use alone::in_own_process;
pub use certs::Certs;
pub use control::{api, api_via, base, ok, patient_agent};
pub use hub::{unique, Fieldhub, HubProcess};
pub use raw::{shm_words, RawMapping, RawShm, RawStream};
pub use traffic::{
    assert_nothing_pending, assert_ready_fd_follows_the_receive_queue, counters_from, drain_delivered,
    exchange_numbered, flush_all, lossless, number_of, numbered, occupy_bus, readable, receive_on_threads_at_once,
    recv_n,
};
pub use wait::{deadline, poll, thread_id, wait_for, wait_until, wait_until_asleep, PATIENCE};
