//! Federated hubs (issue 20): hubs sharing a channel over Zenoh, on
//! loopback, against a hand-played owner, with a standby taking over, and
//! across network namespaces.

mod gaps;
mod loopback;
mod netns;
mod standby;
mod zenoh_link;
