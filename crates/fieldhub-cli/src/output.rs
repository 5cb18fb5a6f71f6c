//! Standard output of the tools. A reader that closes the pipe early
//! (`fieldhub gen -v can0 | head -2`, `fieldhub ctl ports | true`) ends the
//! command quietly with the status a shell shows for a writer SIGPIPE ended
//! (141, as `yes | head` gives), not with a panic or an error message.
//!
//! Invariant: every line a tool prints to stdout goes through [`line`],
//! [`text`] or [`closed_pipe`], so a closed pipe surfaces as [`StdoutClosed`],
//! which [`crate::run`] turns into that status. The tools do not take SIGPIPE's
//! default action instead: their client sockets (`unix:`, shm://'s session
//! socket) would then end them silently too when a hub goes away, where they
//! must say so.

use std::io::Write;

/// Standard output was closed by its reader: the command ends, quietly.
#[derive(Debug, thiserror::Error)]
#[error("standard output was closed by its reader")]
pub struct StdoutClosed;

/// A shell's status for a command ended by SIGPIPE: 128 + 13.
pub const CLOSED_PIPE_STATUS: u8 = 128 + 13;

/// A failed write to stdout as an error: [`StdoutClosed`] for a closed pipe.
pub fn closed_pipe(error: std::io::Error) -> anyhow::Error {
    if error.kind() == std::io::ErrorKind::BrokenPipe {
        StdoutClosed.into()
    } else {
        anyhow::Error::new(error).context("cannot write to standard output")
    }
}

/// Print `text` to stdout as it is.
pub fn text(text: &str) -> anyhow::Result<()> {
    let mut out = std::io::stdout().lock();
    out.write_all(text.as_bytes()).and_then(|()| out.flush()).map_err(closed_pipe)
}

/// Print one line to stdout (`println!` that reports a closed pipe).
pub fn line(line: std::fmt::Arguments<'_>) -> anyhow::Result<()> {
    let mut out = std::io::stdout().lock();
    writeln!(out, "{line}").and_then(|()| out.flush()).map_err(closed_pipe)
}

/// `outln!("{x}")?`: [`line`] with `println!`'s arguments.
macro_rules! outln {
    ($($arg:tt)*) => {
        $crate::output::line(format_args!($($arg)*))
    };
}
pub(crate) use outln;
