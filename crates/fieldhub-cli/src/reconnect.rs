//! `--reconnect` of `dump` and `gen`: when the hub goes away (restarted,
//! stopped for a while), wait for it and go on, as a `candump` on an
//! interface that went down and up again does; without it the exit message
//! says the option exists.
//!
//! Invariant: only a hub that is gone (the session closed, nothing
//! listening) is waited for; every other error (an unknown channel, a
//! refused token, a closed stdout) ends the tool as before.

use std::time::Duration;

use fieldhub_client::ClientError;

/// How often to try again while the hub is away: quick enough to miss
/// little of a restarted hub's traffic, slow enough to cost nothing.
const RETRY_EVERY: Duration = Duration::from_millis(200);

/// `--reconnect`.
#[derive(clap::Args, Clone, Copy)]
pub struct Reconnect {
    /// When the hub goes away (restarted, or not there yet), wait for it and go on
    /// on the same channels, instead of exiting.
    #[arg(long)]
    pub reconnect: bool,
}

/// Whether `error` says the hub is gone: the session closed, or nobody
/// listens at its address.
pub fn hub_gone(error: &anyhow::Error) -> bool {
    error.chain().any(|cause| {
        matches!(cause.downcast_ref::<ClientError>(), Some(ClientError::Closed { .. } | ClientError::Connect { .. }))
    })
}

impl Reconnect {
    /// `attempt` (connect, open the ports) until it works; with
    /// `--reconnect` a hub that is gone is waited for (said once on stderr).
    pub fn until_connected<T>(self, tool: &str, mut attempt: impl FnMut() -> anyhow::Result<T>) -> anyhow::Result<T> {
        let mut said = false;
        loop {
            match attempt() {
                Ok(value) => return Ok(value),
                Err(e) if self.reconnect && hub_gone(&e) => {
                    if !said {
                        eprintln!("{tool}: waiting for the hub (--reconnect): {}", crate::error_text(&e));
                        said = true;
                    }
                    std::thread::sleep(RETRY_EVERY);
                }
                Err(e) => return Err(e),
            }
        }
    }

    /// What to do with `error` from a running session: `Ok` (after saying
    /// so on stderr) when `--reconnect` should take over, else the error,
    /// naming `--reconnect` when the hub went away.
    pub fn after(self, tool: &str, error: anyhow::Error) -> anyhow::Result<()> {
        if !hub_gone(&error) {
            return Err(error);
        }
        if self.reconnect {
            eprintln!("{tool}: the hub went away; reconnecting (--reconnect): {}", crate::error_text(&error));
            return Ok(());
        }
        anyhow::bail!("{}; `fieldhub {tool} --reconnect` waits for the hub to come back", crate::error_text(&error))
    }
}
