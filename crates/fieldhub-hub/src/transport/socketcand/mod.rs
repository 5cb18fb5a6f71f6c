//! A socketcand server (`[hub] socketcand = "127.0.0.1:29537"`, `fieldhub
//! hub --socketcand ADDR`): the text protocol of linux-can/socketcand, so
//! python-can's `socketcand` interface, SavvyCAN and Kayak join a fieldhub
//! channel unchanged (`docs/socketcand.md`). A bus name in `< open NAME >`
//! is a channel.
//!
//! - [`protocol`]: the commands and the lines sent back, byte for byte.
//! - [`session`]: one connection's state machine and its writer.
//! - [`bcm`]: BCM mode's receive subscriptions and filters.
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
//! - The accept thread wakes at least every [`ACCEPT_LOOK`] to notice a
//!   stopping hub (and to send the beacon when it is due) and otherwise
//!   sleeps in the kernel.

pub mod bcm;
pub mod beacon;
pub mod protocol;
pub mod session;

use std::net::{SocketAddr, TcpListener};
use std::os::fd::AsRawFd;
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use mio::unix::SourceFd;
use mio::{Events, Interest, Poll, Token};
use tracing::{info, warn};

use self::beacon::{Beacon, BeaconError};
use crate::session::Sessions;

/// How often the accept thread looks whether the hub stops.
const ACCEPT_LOOK: Duration = Duration::from_millis(200);

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

    /// Accept connections until the hub stops.
    pub fn start(self, sessions: Arc<Sessions>) -> std::io::Result<JoinHandle<()>> {
        let mut poll = Poll::new()?;
        let fd = self.listener.as_raw_fd();
        poll.registry().register(&mut SourceFd(&fd), Token(0), Interest::READABLE)?;
        if let Ok(addr) = self.local_addr() {
            info!(addr = %addr, "socketcand server listening");
        }
        std::thread::Builder::new().name("fh-socketcand".into()).spawn(move || self.accept_loop(&mut poll, &sessions))
    }

    fn accept_loop(mut self, poll: &mut Poll, sessions: &Arc<Sessions>) {
        let mut events = Events::with_capacity(4);
        while !sessions.stopping() {
            let now = Instant::now();
            let wait = match &mut self.beacon {
                Some(beacon) => beacon.tick(now).saturating_duration_since(now).min(ACCEPT_LOOK),
                None => ACCEPT_LOOK,
            };
            if let Err(e) = poll.poll(&mut events, Some(wait)) {
                if e.kind() != std::io::ErrorKind::Interrupted {
                    warn!(error = %e, "the socketcand listener cannot wait; it stops");
                    return;
                }
            }
            loop {
                let stream = match self.listener.accept() {
                    Ok((stream, _)) => stream,
                    Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => break,
                    Err(e) => {
                        // Out of descriptors and the like: the connection
                        // waits in the backlog; try again at the next look.
                        warn!(error = %e, "socketcand accept failed");
                        std::thread::sleep(ACCEPT_LOOK);
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
