//! `fieldhub bench` on Windows: `echo` and `ping`, round trips through a
//! running hub (`bench_remote.rs`); the other benchmarks start hubs and
//! measure shared memory, futexes and /proc, and are Linux-only
//! (`linux_only.rs`).

use std::ffi::OsString;

pub use fieldhub_bench::Launcher;

use crate::bench_remote;
use crate::linux_only::LinuxOnly;

#[derive(clap::Args)]
pub struct BenchArgs {
    #[command(subcommand)]
    kind: Kind,
}

#[derive(clap::Subcommand)]
enum Kind {
    Echo(bench_remote::EchoArgs),
    Ping(bench_remote::PingArgs),
    /// Any other benchmark, with its arguments: Linux-only.
    #[command(external_subcommand)]
    LinuxOnly(Vec<OsString>),
}

pub fn run(args: BenchArgs, _this_command: &Launcher) -> anyhow::Result<()> {
    match args.kind {
        Kind::Echo(args) => bench_remote::echo(args),
        Kind::Ping(args) => bench_remote::ping(args),
        Kind::LinuxOnly(args) => {
            let name = args.first().map_or_else(String::new, |name| name.to_string_lossy().into_owned());
            Err(LinuxOnly { command: format!("bench {name}") }.into())
        }
    }
}
