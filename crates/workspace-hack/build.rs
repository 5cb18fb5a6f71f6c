// A build script makes cargo count the crate's build-dependencies, which the
// build scripts and proc macros of the workspace share through it.
fn main() {}
