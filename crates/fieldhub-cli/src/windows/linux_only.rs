//! What the Windows build of `fieldhub` says for the commands it does not
//! have: the SocketCAN bridge and the benchmarks that start hubs (shared
//! memory, futexes, /proc) are Linux-only (docs/windows.md). The commands still parse any
//! arguments, so the answer is always this error, never a usage message.

use std::ffi::OsString;

/// A command this platform's build does not have.
#[derive(Debug, thiserror::Error)]
#[error(
    "fieldhub {command} is Linux-only; this build for {} has the hub (over TCP and TLS) and the client tools \
     (dump, send, gen, ctl, stats, record, replay, frame-bits, bench ping/echo)",
    std::env::consts::OS
)]
pub struct LinuxOnly {
    pub command: String,
}

/// The arguments of a Linux-only command, taken as they come.
#[derive(clap::Args)]
pub struct AnyArgs {
    #[arg(trailing_var_arg = true, allow_hyphen_values = true, hide = true)]
    _args: Vec<OsString>,
}

impl AnyArgs {
    /// Refuse the command named `command`.
    pub fn refuse(self, command: &'static str) -> anyhow::Result<()> {
        Err(LinuxOnly { command: command.into() }.into())
    }
}
