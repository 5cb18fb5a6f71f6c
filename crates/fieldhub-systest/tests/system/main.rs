//! fieldhub's system tests: real `fieldhub hub` processes and real clients,
//! one module per topic — look for a behaviour under its topic:
//!
//! | module | what it proves |
//! | --- | --- |
//! | [`transports`] | how clients reach the hub: TCP and unix sockets, shared memory, ivshmem, TLS, the default hub |
//! | [`ordering`] | one total order per channel, no loss, no duplicates |
//! | [`bus_semantics`] | wiring, gateway routes, rate limits, CAN FD refusals, statistics |
//! | [`timing`] | `timed` channels: bit times and arbitration |
//! | [`arbiters`] | access rules: `tdma` slots, `token` rings and `master-slave` polling, on the wall clock and in virtual time |
//! | [`lin`] | LIN channels: the hub's schedule table (by hand or from an LDF), slaves' responses at exact times, no response, a frame from the wrong node refused |
//! | [`backpressure`] | a sender ahead of a busy bus is held back within a bound |
//! | [`lossless`] | a stalled lossless reader holds only its own channel |
//! | [`faults`] | fault rules, shorts, forced error states |
//! | [`hostile_input`] | bad or hostile clients, over streams and shared memory |
//! | [`client_api`] | client features that need a hub: the ready fd, filters, threads, timeouts |
//! | [`control_api`] | the HTTP control API and `fieldhub ctl` |
//! | [`recording_decode`] | the control API reading a recording the web monitor opens: each format, broken and oversized files, who may |
//! | [`access`] | who may do what: `[[access]]` grants, the monitor token, other local users |
//! | [`federation`] | federated hubs over Zenoh: order, gaps, standby, network namespaces |
//! | [`federation_fate`] | a frame's fate when a federation's owner dies: on every relay, or reported |
//! | [`rest_bus`] | rest-bus simulation from a DBC: cycles, counters, checksums, values set at run time |
//! | [`virtual_time`] | synchronised participants and deterministic runs |
//! | [`virtual_time_fate`] | observers in virtual time hold nothing back and lose nothing; who stalled, and why |
//! | [`chaos`] | seeded faults, shorts, bus-off, pulled cables and kills: every frame on every receiver or reported |
//! | [`capacity`] | thousands of sessions, slots given back |
//!
//! The SIL Kit tests are another target (`tests/silkit`, feature
//! `silkit-peers`); the `fieldhub` command's own tests are the CLI crate's.
//! The hubs run [`FIELDHUB`]; the support is `fieldhub-testkit`'s.

use fieldhub_testkit::Fieldhub;

/// The hub under test: the `fieldhub` command, as this package's
/// `fieldhub-under-test` binary (`src/bin/`).
pub const FIELDHUB: Fieldhub = Fieldhub::at(env!("CARGO_BIN_EXE_fieldhub-under-test"));

mod access;
mod arbiters;
mod backpressure;
mod bus_semantics;
mod capacity;
mod chaos;
mod client_api;
mod control_api;
mod faults;
mod federation;
mod federation_fate;
mod hostile_input;
mod lin;
mod lin_sleep;
mod lossless;
mod mixed_gateway;
mod ordering;
mod recording_decode;
mod rest_bus;
mod timing;
mod transports;
mod virtual_time;
mod virtual_time_ahead;
mod virtual_time_fate;
