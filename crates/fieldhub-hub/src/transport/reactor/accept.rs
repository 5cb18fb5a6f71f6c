//! Accepting: the listeners the reactor watches (TCP, unix sockets,
//! `shm://` session sockets), and taking their waiting connections, each
//! a non-blocking [`Socket`] (TLS for a TLS hub's TCP) with who it is and
//! the phase it starts in — TCP sniffing, the others waiting for `HELLO`.
//!
//! Invariants: nothing here blocks (listeners and accepted sockets are
//! non-blocking); an accept that fails for want of descriptors or memory
//! (`EMFILE`, `ENFILE`, `ENOBUFS`) leaves the connection in the backlog and
//! is tried again after [`ACCEPT_BACK_OFF`], said once in the log and once
//! more when accepting works again; a connection that cannot be made ready
//! is dropped alone. Imports from the reactor only the connection's socket
//! and phase.

use std::io::ErrorKind;
#[cfg(target_os = "linux")]
use std::os::unix::net::UnixListener;
#[cfg(target_os = "linux")]
use std::path::PathBuf;
use std::sync::Arc;
use std::time::{Duration, Instant};

use mio::event::Source;
use mio::net::TcpListener;
use mio::{Interest, Registry, Token};
use tracing::{info, warn};

use super::conn::{Phase, Socket};
use crate::session::peer_key::PeerKey;
use crate::session::peer_user::PeerOrigin;
use crate::transport::tls::TlsSocket;

/// How long the reactor waits before it accepts again after an accept
/// failed for want of descriptors or memory.
const ACCEPT_BACK_OFF: Duration = Duration::from_millis(100);
/// The kernel's receive buffer for a stream session, set so the kernel does
/// not grow it: with the reactor's read-ahead limit, a sender the reactor
/// stops reading is held back after a few thousand frames.
const STREAM_RECEIVE_BUFFER: usize = 64 * 1024;
/// The TCP segment size a stream client may send. Linux advertises a
/// receive window in whole segments; on loopback (64 KiB segments) a window
/// that a stopped reader closed would reopen only once a whole segment fits,
/// and the sender would wait for its zero-window probes — stalls of seconds,
/// seen under load. Small segments let the window reopen as soon as the
/// reactor reads.
#[cfg(target_os = "linux")]
const STREAM_SEGMENT: u32 = 8 * 1024;

/// A bound listener the reactor accepts on: TCP as mio's own type (on
/// Windows mio can watch no other), unix and `shm://` session sockets
/// (Linux-only) by their descriptors.
pub enum Listening {
    Tcp(TcpListener),
    #[cfg(target_os = "linux")]
    Unix(UnixListener, PathBuf),
    /// An `shm://` session socket.
    #[cfg(target_os = "linux")]
    Shm(UnixListener, PathBuf),
}

/// A connection taken from a listener, ready to be admitted.
pub(super) struct Accepted {
    pub(super) socket: Socket,
    /// The transport, for the log.
    pub(super) via: &'static str,
    pub(super) peer: String,
    pub(super) origin: PeerOrigin,
    /// Whom it counts against (`session/peer_key.rs`).
    pub(super) key: PeerKey,
    pub(super) phase: Phase,
}

/// The listeners and the state of accepting on them.
pub(super) struct Acceptor {
    listeners: Vec<Listening>,
    /// `[hub] tls_cert`: every TCP connection speaks TLS with this.
    tls: Option<Arc<rustls::ServerConfig>>,
    /// When to try accepting again on listeners that ran out of descriptors
    /// or memory.
    retry: Option<Instant>,
    /// Accepting has failed since the last success: said once in the log.
    failing: bool,
}

impl Acceptor {
    /// Set `listeners` up and watch them in `registry`, each with its index
    /// as its token.
    pub(super) fn new(
        mut listeners: Vec<Listening>,
        registry: &Registry,
        tls: Option<Arc<rustls::ServerConfig>>,
    ) -> std::io::Result<Self> {
        for (index, listener) in listeners.iter_mut().enumerate() {
            match listener {
                Listening::Tcp(l) => {
                    // Inherited by accepted sockets; see both constants.
                    let socket = socket2::SockRef::from(&*l);
                    socket.set_recv_buffer_size(STREAM_RECEIVE_BUFFER)?;
                    #[cfg(target_os = "linux")]
                    socket.set_tcp_mss(STREAM_SEGMENT)?;
                    l.register(registry, Token(index), Interest::READABLE)?;
                }
                #[cfg(target_os = "linux")]
                Listening::Unix(l, _) | Listening::Shm(l, _) => {
                    use std::os::fd::AsRawFd;
                    l.set_nonblocking(true)?;
                    mio::unix::SourceFd(&l.as_raw_fd()).register(registry, Token(index), Interest::READABLE)?;
                }
            }
        }
        Ok(Self { listeners, tls, retry: None, failing: false })
    }

    /// How many listeners there are (their tokens are below this).
    pub(super) fn listeners(&self) -> usize {
        self.listeners.len()
    }

    /// The next connection waiting on listener `index`, ready to serve;
    /// `None` once none waits, or accepting failed (see [`Self::next_retry`]).
    pub(super) fn accept(&mut self, index: usize) -> Option<Accepted> {
        loop {
            let accepted = match &self.listeners[index] {
                Listening::Tcp(l) => l.accept().map(|(s, peer)| {
                    let _ = s.set_nodelay(true);
                    let origin = PeerOrigin::tcp(s.local_addr(), Ok(peer));
                    let via = if self.tls.is_some() { "TLS" } else { "TCP" };
                    let key = PeerKey::of(&origin);
                    Accepted { socket: Socket::Tcp(s), via, peer: peer.to_string(), origin, key, phase: Phase::Sniff }
                }),
                #[cfg(target_os = "linux")]
                Listening::Unix(l, path) => l.accept().map(|(s, _)| {
                    let origin = PeerOrigin::unix(&s);
                    Accepted {
                        key: PeerKey::of(&origin),
                        origin,
                        socket: Socket::Unix(s),
                        via: "a unix socket",
                        peer: format!("unix:{}", path.display()),
                        phase: Phase::Hello { shm: false },
                    }
                }),
                #[cfg(target_os = "linux")]
                Listening::Shm(l, _) => l.accept().map(|(s, _)| {
                    let origin = PeerOrigin::unix(&s);
                    Accepted {
                        key: PeerKey::of(&origin),
                        origin,
                        socket: Socket::Unix(s),
                        via: "shared memory",
                        peer: "shm".to_owned(),
                        phase: Phase::Hello { shm: true },
                    }
                }),
            };
            match accepted {
                Ok(accepted) => {
                    if let Some(ready) = self.ready(accepted) {
                        return Some(ready);
                    }
                }
                Err(e) if e.kind() == ErrorKind::WouldBlock => return None,
                Err(e) if e.kind() == ErrorKind::Interrupted => {}
                Err(e) => {
                    // Out of descriptors or memory: the connection waits in
                    // the backlog, and the listener (edge-triggered) says
                    // nothing more about it; try again a little later, and
                    // say so once, not once per attempt.
                    if !std::mem::replace(&mut self.failing, true) {
                        warn!(
                            "cannot accept connections: {e}; trying again every {} ms (too many clients, or raise \
                             the hub's descriptor limit: ulimit -n)",
                            ACCEPT_BACK_OFF.as_millis()
                        );
                    }
                    self.retry = Some(Instant::now() + ACCEPT_BACK_OFF);
                    return None;
                }
            }
        }
    }

    /// An accepted connection wrapped in TLS when the hub speaks it, and
    /// non-blocking; `None` (dropped) when either fails.
    fn ready(&self, accepted: Accepted) -> Option<Accepted> {
        let Accepted { socket, via, peer, origin, key, phase } = accepted;
        let socket = match (socket, &self.tls) {
            (Socket::Tcp(tcp), Some(config)) => match TlsSocket::new(tcp, config) {
                Ok(tls) => Socket::Tls(Box::new(tls)),
                Err(e) => {
                    warn!(peer, "cannot start TLS on a connection: {e}");
                    return None;
                }
            },
            (socket, _) => socket,
        };
        // mio's TCP sockets are accepted non-blocking.
        #[cfg(target_os = "linux")]
        if let Socket::Unix(s) = &socket {
            s.set_nonblocking(true).ok()?;
        }
        Some(Accepted { socket, via, peer, origin, key, phase })
    }

    /// When accepting is to be tried again after it failed.
    pub(super) fn next_retry(&self) -> Option<Instant> {
        self.retry
    }

    /// Whether the back-off after a failed accept is over at `now`: then
    /// every listener is to be accepted on again, and [`Self::retried`]
    /// called after.
    pub(super) fn retry_due(&mut self, now: Instant) -> bool {
        if self.retry.is_none_or(|at| at > now) {
            return false;
        }
        self.retry = None;
        true
    }

    /// Every listener was accepted on again: say so if that worked.
    pub(super) fn retried(&mut self) {
        if self.retry.is_none() && std::mem::take(&mut self.failing) {
            info!("accepting connections again");
        }
    }

    /// Close the listeners; unix socket files are removed.
    pub(super) fn close(&mut self) {
        #[cfg(target_os = "linux")]
        for listener in &self.listeners {
            if let Listening::Unix(_, path) | Listening::Shm(_, path) = listener {
                let _ = std::fs::remove_file(path);
            }
        }
        self.listeners.clear();
    }
}

#[cfg(test)]
mod tests {
    use std::os::unix::net::UnixStream;

    use mio::Poll;

    use super::*;

    /// A fresh path for a socket of this test process.
    fn socket_path(name: &str) -> PathBuf {
        std::env::temp_dir().join(format!("fieldhub-reactor-{}-{name}.sock", std::process::id()))
    }

    #[test]
    fn each_listener_hands_out_its_waiting_connections_ready_and_in_their_first_phase() {
        let poll = Poll::new().expect("a poll");
        let (unix, shm) = (socket_path("unix"), socket_path("shm"));
        let listeners = vec![
            Listening::Unix(UnixListener::bind(&unix).expect("bound"), unix.clone()),
            Listening::Shm(UnixListener::bind(&shm).expect("bound"), shm.clone()),
        ];
        let mut acceptor = Acceptor::new(listeners, poll.registry(), None).expect("watched");
        let _clients = [UnixStream::connect(&unix).expect("connects"), UnixStream::connect(&shm).expect("connects")];

        let accepted = acceptor.accept(0).expect("a connection waits");
        assert!(matches!(accepted.phase, Phase::Hello { shm: false }));
        assert_eq!(accepted.via, "a unix socket");
        let Socket::Unix(socket) = &accepted.socket else { panic!("a unix socket") };
        let mut byte = [0u8];
        assert_eq!(std::io::Read::read(&mut &*socket, &mut byte).map_err(|e| e.kind()), Err(ErrorKind::WouldBlock));
        assert!(acceptor.accept(0).is_none(), "none waits any more");

        let accepted = acceptor.accept(1).expect("a connection waits");
        assert!(matches!(accepted.phase, Phase::Hello { shm: true }));
        assert_eq!(accepted.via, "shared memory");

        acceptor.close();
        assert!(!unix.exists() && !shm.exists(), "the socket files are gone");
    }

    #[test]
    fn after_a_failed_accept_accepting_is_retried_once_the_back_off_is_over() {
        let poll = Poll::new().expect("a poll");
        let mut acceptor = Acceptor::new(Vec::new(), poll.registry(), None).expect("no listeners");
        let failed = Instant::now();
        acceptor.retry = Some(failed + ACCEPT_BACK_OFF);
        acceptor.failing = true;
        assert_eq!(acceptor.next_retry(), Some(failed + ACCEPT_BACK_OFF), "the loop wakes for it");
        assert!(!acceptor.retry_due(failed + ACCEPT_BACK_OFF - Duration::from_millis(1)));
        assert!(acceptor.retry_due(failed + ACCEPT_BACK_OFF));
        acceptor.retried();
        assert!(!acceptor.failing && acceptor.next_retry().is_none(), "accepting works again");
        assert!(!acceptor.retry_due(failed + ACCEPT_BACK_OFF * 2), "nothing to retry");
    }
}
