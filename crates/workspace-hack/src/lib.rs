//! The workspace-hack, managed by `cargo hakari` (.config/hakari.toml): it
//! depends on every third-party crate the workspace uses, with the features
//! `cargo test --workspace` turns on, so that each build `make test` makes
//! (the tests, the fieldhub command, the wheel, the C library) resolves those
//! crates alike and compiles them once. It holds no code. After a change to
//! the workspace's dependencies: `cargo hakari generate && cargo hakari
//! manage-deps` (`make lint` checks that it is up to date).
