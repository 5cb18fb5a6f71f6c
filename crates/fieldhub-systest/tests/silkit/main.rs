//! The SIL Kit tests: a hub with the real `sil-kit-registry` and real SIL
//! Kit participants (`tests/silkit/*.c` at the repository's root). Built
//! only with the `silkit-peers` feature:
//!
//! ```text
//! cargo test --locked -p fieldhub-systest --features silkit-peers --test silkit
//! ```
//!
//! with `FIELDHUB_SILKIT_LIB`, `FIELDHUB_SILKIT_REGISTRY` and the peers'
//! `FIELDHUB_SILKIT_PEER`, `FIELDHUB_SILKIT_SYNC_PEER` and
//! `FIELDHUB_SILKIT_NETSIM_PEER` set, as `make test-silkit` does after
//! fetching SIL Kit and building the peers. A missing one fails the test.

use fieldhub_testkit::Fieldhub;

/// The hub under test (see `tests/system/main.rs`).
pub const FIELDHUB: Fieldhub = Fieldhub::at(env!("CARGO_BIN_EXE_fieldhub-under-test"));

mod bridge;
mod fate;
mod missing_library;
mod simulator;
mod time;
