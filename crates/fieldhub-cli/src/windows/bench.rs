//! `fieldhub bench` on Windows: Linux-only (`linux_only.rs`); the
//! benchmarks start hubs and measure shared memory, futexes and /proc.

pub use crate::linux_only::AnyArgs as BenchArgs;

/// How the benchmarks would start this command again; here only a name
/// for `run`'s signature, which is the same on every platform.
pub struct Launcher;

impl Launcher {
    /// Always found: nothing here starts the command again.
    pub fn current() -> Result<Self, std::convert::Infallible> {
        Ok(Self)
    }
}

pub fn run(args: BenchArgs, _this_command: &Launcher) -> anyhow::Result<()> {
    args.refuse("bench")
}
