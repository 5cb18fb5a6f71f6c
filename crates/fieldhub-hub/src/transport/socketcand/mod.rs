//! A socketcand server (`[hub] socketcand = "127.0.0.1:29537"`, `fieldhub
//! hub --socketcand ADDR`): the text protocol of linux-can/socketcand, so
//! python-can's `socketcand` interface, SavvyCAN and Kayak join a fieldhub
//! channel unchanged (`docs/socketcand.md`). A bus name in `< open NAME >`
//! is a channel.
//!
//! - [`protocol`]: the commands and the lines sent back, byte for byte.
//! - [`session`]: one connection's state machine.
//! - [`writer`]: what a session's two threads share, and its writer thread.
//! - [`bcm`]: BCM mode's receive subscriptions and filters.
//! - [`bcm_tx`]: BCM mode's cyclic transmission jobs (`add`, `update`,
//!   `delete`), run by the bus on bus time.
//! - [`configure`]: NO_BUS mode's bit timing (the channel's bitrate, with
//!   control access) and controller mode (the session's port options).
//! - [`statistics`]: CONTROL mode's `< stat … >` ticker.
//! - [`beacon`]: the discovery beacon (`[hub] socketcand_beacon`), sent by
//!   the accept thread.
//!
//! One accept thread serves the listener; each connection has a thread
//! that reads its commands and a writer thread, as the hub's SocketCAN
//! ports do, and is a client of the session layer like any other.
//!
//! Invariants:
//! - socketcand has no authentication: a listener beyond loopback starts
//!   only with `[hub] socketcand_allow_unauthenticated = true`, and then
//!   says so in the log; otherwise a connection is admitted by the same
//!   rules as a native client without a token.
//! - Idle, nothing runs: the accept thread sleeps in the kernel until a
//!   connection comes, the hub stops (its [`StopBell`] rings) or the beacon
//!   is due; a session's reader sleeps in `read`, its writer on its outbox.

pub mod bcm;
pub mod bcm_tx;
pub mod beacon;
pub mod configure;
pub mod protocol;
pub mod session;
pub mod statistics;
pub mod writer;

use std::net::{SocketAddr, TcpListener};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use tracing::{info, warn};

use self::beacon::{Beacon, BeaconError};
use crate::session::Sessions;
use crate::transport::stop_bell::{SocketPoll, StopBell};

/// How soon the accept thread tries again after `accept` failed (out of
/// descriptors): the waiting connection may bring no new readiness.
const ACCEPT_RETRY: Duration = Duration::from_millis(200);

/// Why the socketcand listener cannot start.
#[derive(Debug, thiserror::Error)]
pub enum SocketcandError {
    #[error("[hub] socketcand = \"{addr}\": {source}")]
    Bind {
        addr: String,
        #[source]
        source: std::io::Error,
    },
    #[error(
        "[hub] socketcand = \"{addr}\" is reachable from other machines, and socketcand clients cannot present a \
         token: listen on 127.0.0.1, or set [hub] socketcand_allow_unauthenticated = true to let anyone who \
         reaches it use the hub's channels"
    )]
    Unauthenticated { addr: String },
    #[error(transparent)]
    Beacon(#[from] BeaconError),
}

/// The bound listener, not serving yet.
pub struct SocketcandServer {
    listener: TcpListener,
    allow_unauthenticated: bool,
    beacon: Option<Beacon>,
}

/// What the beacon announces and where it goes.
pub struct BeaconConfig<'a> {
    /// `[hub] socketcand_beacon`: `IP` or `IP:PORT`.
    pub target: &'a str,
    pub hub_name: &'a str,
    pub channels: &'a [String],
}

impl SocketcandServer {
    /// Bind `addr` (`HOST:PORT`; port 0 picks one).
    pub fn bind(
        addr: &str,
        allow_unauthenticated: bool,
        beacon: Option<BeaconConfig<'_>>,
    ) -> Result<Self, SocketcandError> {
        let bind_error = |source| SocketcandError::Bind { addr: addr.to_owned(), source };
        let listener = TcpListener::bind(addr).map_err(bind_error)?;
        let local = listener.local_addr().map_err(bind_error)?;
        if !local.ip().is_loopback() {
            if !allow_unauthenticated {
                return Err(SocketcandError::Unauthenticated { addr: addr.to_owned() });
            }
            warn!(
                addr = %local,
                "the socketcand listener admits every client that reaches it, without a token \
                 (socketcand_allow_unauthenticated)"
            );
        }
        listener.set_nonblocking(true).map_err(bind_error)?;
        let beacon = beacon.map(|b| Beacon::new(b.target, local, b.hub_name, b.channels)).transpose()?;
        Ok(Self { listener, allow_unauthenticated, beacon })
    }

    /// The address it listens on (port 0 resolved).
    pub fn local_addr(&self) -> std::io::Result<SocketAddr> {
        self.listener.local_addr()
    }

    /// Accept connections until the hub stops and rings the bell returned
    /// with the thread.
    pub fn start(self, sessions: Arc<Sessions>) -> std::io::Result<(JoinHandle<()>, StopBell)> {
        let (mut poll, bell) = SocketPoll::new(&self.listener)?;
        if let Ok(addr) = self.local_addr() {
            info!(addr = %addr, "socketcand server listening");
        }
        let thread = std::thread::Builder::new()
            .name("fh-socketcand".into())
            .spawn(move || self.accept_loop(&mut poll, &sessions))?;
        Ok((thread, bell))
    }

    fn accept_loop(mut self, poll: &mut SocketPoll, sessions: &Arc<Sessions>) {
        let mut retry = false;
        while !sessions.stopping() {
            let now = Instant::now();
            let beacon_due = self.beacon.as_mut().map(|beacon| beacon.tick(now).saturating_duration_since(now));
            let wait = match (beacon_due, retry) {
                (due, true) => Some(due.map_or(ACCEPT_RETRY, |due| due.min(ACCEPT_RETRY))),
                (due, false) => due,
            };
            if let Err(e) = poll.wait(wait) {
                warn!(error = %e, "the socketcand listener cannot wait; it stops");
                return;
            }
            retry = false;
            loop {
                let stream = match self.listener.accept() {
                    Ok((stream, _)) => stream,
                    Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => break,
                    Err(e) => {
                        // Out of descriptors and the like: the connection
                        // waits in the backlog, and may bring no new
                        // readiness; try again shortly.
                        warn!(error = %e, "socketcand accept failed");
                        retry = true;
                        break;
                    }
                };
                let _ = stream.set_nonblocking(false);
                let (sessions, allow) = (Arc::clone(sessions), self.allow_unauthenticated);
                let spawned = std::thread::Builder::new()
                    .name("fh-scd".into())
                    .spawn(move || session::serve(stream, sessions, allow));
                if let Err(e) = spawned {
                    warn!(error = %e, "cannot start a socketcand session thread; the connection is closed");
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_listener_beyond_loopback_starts_only_when_unauthenticated_clients_are_allowed() {
        let refused = SocketcandServer::bind("0.0.0.0:0", false, None).err().expect("refused without the setting");
        assert!(matches!(refused, SocketcandError::Unauthenticated { .. }), "{refused}");
        assert!(refused.to_string().contains("socketcand_allow_unauthenticated = true"), "{refused}");
        assert!(SocketcandServer::bind("0.0.0.0:0", true, None).is_ok());
        assert!(SocketcandServer::bind("127.0.0.1:0", false, None).is_ok(), "loopback needs no setting");
    }
}
