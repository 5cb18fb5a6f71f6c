//! Waking the hub's own listener threads when the hub stops. A thread that
//! has nothing to do sleeps in the kernel — a [`SocketPoll`] on its socket
//! and a [`StopBell`], without a timeout — instead of looking every so
//! often whether the hub stops; `Hub::shutdown` rings every bell right
//! after it set `stopping`, and the woken thread reads `stopping` and ends.
//!
//! Invariants:
//! - A bell is registered on its poll before the thread that waits on it
//!   starts, so a stop that comes at any time after is heard.
//! - Ringing never blocks and may happen any number of times.
//! - Whoever rings keeps a bell until its thread ended: the last clone's
//!   drop closes the waker, and a ring not yet taken is lost with it.
//! - The poll is edge-triggered: after a wake the thread takes everything
//!   waiting on its socket (until `WouldBlock`) before it waits again.
//! - On Windows mio watches only its own socket types, whose reads re-arm
//!   the watch; the thread reads the standard library's socket, so the poll
//!   watches a duplicate handle of it and re-arms it before every wait (a
//!   socket already readable then wakes the wait at once).

use std::io;
use std::sync::Arc;
use std::time::Duration;

use mio::{Events, Interest, Poll, Token, Waker};
use tracing::warn;

const SOCKET: Token = Token(0);
const STOP: Token = Token(1);

/// Wakes one thread's [`SocketPoll`] when the hub stops; cheap to clone.
#[derive(Clone)]
pub struct StopBell(Arc<Waker>);

impl StopBell {
    /// Wake the thread: the hub is stopping.
    pub fn ring(&self) {
        if let Err(e) = self.0.wake() {
            // Only an eventfd at its limit fails, and that wakes the poll too.
            warn!(error = %e, "cannot wake a listener thread of the stopping hub");
        }
    }
}

/// One socket's readiness and its thread's [`StopBell`].
pub struct SocketPoll {
    poll: Poll,
    events: Events,
    /// The duplicate handle watched (Windows): re-armed before each wait.
    #[cfg(windows)]
    watched: Box<dyn mio::event::Source + Send>,
}

/// A socket a [`SocketPoll`] can watch: a listener or a datagram socket.
pub trait Watchable {
    /// A handle mio watches: the descriptor itself on unix; on Windows a
    /// duplicate of the socket as mio's own type.
    #[cfg(unix)]
    fn watched(&self) -> io::Result<std::os::fd::RawFd>;
    #[cfg(windows)]
    fn watched(&self) -> io::Result<Box<dyn mio::event::Source + Send>>;
}

impl Watchable for std::net::TcpListener {
    #[cfg(unix)]
    fn watched(&self) -> io::Result<std::os::fd::RawFd> {
        Ok(std::os::fd::AsRawFd::as_raw_fd(self))
    }
    #[cfg(windows)]
    fn watched(&self) -> io::Result<Box<dyn mio::event::Source + Send>> {
        Ok(Box::new(mio::net::TcpListener::from_std(self.try_clone()?)))
    }
}

impl Watchable for std::net::UdpSocket {
    #[cfg(unix)]
    fn watched(&self) -> io::Result<std::os::fd::RawFd> {
        Ok(std::os::fd::AsRawFd::as_raw_fd(self))
    }
    #[cfg(windows)]
    fn watched(&self) -> io::Result<Box<dyn mio::event::Source + Send>> {
        Ok(Box::new(mio::net::UdpSocket::from_std(self.try_clone()?)))
    }
}

impl SocketPoll {
    /// A poll on `socket` (a listener, or a datagram socket; it may stay
    /// blocking if its reader takes with `MSG_DONTWAIT`), and its bell.
    pub fn new(socket: &impl Watchable) -> io::Result<(Self, StopBell)> {
        let poll = Poll::new()?;
        let bell = StopBell(Arc::new(Waker::new(poll.registry(), STOP)?));
        #[cfg(unix)]
        {
            let fd = socket.watched()?;
            poll.registry().register(&mut mio::unix::SourceFd(&fd), SOCKET, Interest::READABLE)?;
            Ok((Self { poll, events: Events::with_capacity(4) }, bell))
        }
        #[cfg(windows)]
        {
            let mut watched = socket.watched()?;
            poll.registry().register(&mut watched, SOCKET, Interest::READABLE)?;
            Ok((Self { poll, events: Events::with_capacity(4), watched }, bell))
        }
    }

    /// Sleep until the socket is readable, the bell rings or `timeout`
    /// passes (`None`: no limit). An interrupted wait returns as a wake.
    pub fn wait(&mut self, timeout: Option<Duration>) -> io::Result<()> {
        #[cfg(windows)]
        self.poll.registry().reregister(&mut self.watched, SOCKET, Interest::READABLE)?;
        match self.poll.poll(&mut self.events, timeout) {
            Err(e) if e.kind() != io::ErrorKind::Interrupted => Err(e),
            _ => Ok(()),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::net::UdpSocket;

    #[test]
    fn a_poll_without_a_timeout_wakes_for_the_bell_and_for_a_datagram() {
        let socket = UdpSocket::bind("127.0.0.1:0").unwrap();
        let (mut poll, bell) = SocketPoll::new(&socket).unwrap();
        // The bell outlives the ring: a dropped waker closes its eventfd.
        let ringer = {
            let bell = bell.clone();
            std::thread::spawn(move || bell.ring())
        };
        poll.wait(None).unwrap();
        assert!(poll.events.iter().any(|e| e.token() == STOP));
        ringer.join().unwrap();
        let sender = UdpSocket::bind("127.0.0.1:0").unwrap();
        sender.send_to(b"x", socket.local_addr().unwrap()).unwrap();
        poll.wait(None).unwrap();
        assert!(poll.events.iter().any(|e| e.token() == SOCKET));
    }
}
