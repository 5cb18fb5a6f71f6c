//! One connection as the reactor holds it: its socket (TCP, unix, TLS), its
//! client slot, the phase it is in, its input and its output — the state
//! every other job of the reactor works on.
//!
//! Invariants: a phase only moves forward (`Sniff` → `Hello` → `Stream` or
//! `Shm`; any of them → `Closing`); once `Closing`, nothing more is read or
//! queued, and the message queued last is the last written; a connection
//! that ends ends its shared-memory link (if it has one) and, through its
//! stream session's drop, its outbox. Imports from the reactor only the
//! input buffer and the stream session it holds.

use std::io::{Read, Write};
#[cfg(target_os = "linux")]
use std::os::unix::net::UnixStream;
#[cfg(target_os = "linux")]
use std::sync::Weak;

use mio::event::Source;
use mio::net::TcpStream;
use mio::{Interest, Registry, Token};

use fieldhub_proto::wire::{ErrorCode, Packer, LENGTH_PREFIX};

use super::forward::StreamSession;
use super::input::Input;
use crate::session::peer_key::PeerKey;
use crate::session::{ClientSlot, Violation};
#[cfg(target_os = "linux")]
use crate::transport::shm::ShmLink;
use crate::transport::tls::TlsSocket;

pub(super) enum Socket {
    Tcp(TcpStream),
    /// Unix sockets are Linux-only (`docs/windows.md`).
    #[cfg(target_os = "linux")]
    Unix(UnixStream),
    /// TCP on a hub with TLS; boxed, so plaintext connections stay small.
    Tls(Box<TlsSocket>),
}

/// The reactor watches a connection through its socket: mio's own TCP type
/// (on Windows mio can watch no other), a unix socket by its descriptor.
impl Source for Socket {
    fn register(&mut self, registry: &Registry, token: Token, interests: Interest) -> std::io::Result<()> {
        match self {
            Socket::Tcp(s) => s.register(registry, token, interests),
            #[cfg(target_os = "linux")]
            Socket::Unix(s) => {
                use std::os::fd::AsRawFd;
                mio::unix::SourceFd(&s.as_raw_fd()).register(registry, token, interests)
            }
            Socket::Tls(s) => s.tcp.register(registry, token, interests),
        }
    }

    fn reregister(&mut self, registry: &Registry, token: Token, interests: Interest) -> std::io::Result<()> {
        match self {
            Socket::Tcp(s) => s.reregister(registry, token, interests),
            #[cfg(target_os = "linux")]
            Socket::Unix(s) => {
                use std::os::fd::AsRawFd;
                mio::unix::SourceFd(&s.as_raw_fd()).reregister(registry, token, interests)
            }
            Socket::Tls(s) => s.tcp.reregister(registry, token, interests),
        }
    }

    fn deregister(&mut self, registry: &Registry) -> std::io::Result<()> {
        match self {
            Socket::Tcp(s) => s.deregister(registry),
            #[cfg(target_os = "linux")]
            Socket::Unix(s) => {
                use std::os::fd::AsRawFd;
                mio::unix::SourceFd(&s.as_raw_fd()).deregister(registry)
            }
            Socket::Tls(s) => s.tcp.deregister(registry),
        }
    }
}

/// A second handle on `tcp`'s connection, as the standard library's type:
/// the control server's (tokio's), or one to write a last answer on.
pub(super) fn duplicate(tcp: &TcpStream) -> std::io::Result<std::net::TcpStream> {
    socket2::SockRef::from(tcp).try_clone().map(std::net::TcpStream::from)
}

impl Socket {
    pub(super) fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        match self {
            Socket::Tcp(s) => s.read(buf),
            #[cfg(target_os = "linux")]
            Socket::Unix(s) => s.read(buf),
            Socket::Tls(s) => s.read(buf),
        }
    }

    pub(super) fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        match self {
            Socket::Tcp(s) => s.write(buf),
            #[cfg(target_os = "linux")]
            Socket::Unix(s) => s.write(buf),
            Socket::Tls(s) => s.write(buf),
        }
    }

    /// Take a TLS connection's state out, leaving its own socket in its
    /// place, plain (to close, or to write plaintext on); the state leaves
    /// with a duplicate (for the control server, or to drop). `None` for a
    /// plain socket.
    pub(super) fn take_tls(&mut self) -> std::io::Result<Option<Box<TlsSocket>>> {
        let Socket::Tls(tls) = self else { return Ok(None) };
        // The connection keeps the socket the reactor registered, not the
        // duplicate: a refusal that would block is finished when the socket
        // says it is writable, and only a registered socket says so. On
        // Linux epoll watches the open file, which a duplicate shares; on
        // Windows mio watches the one handle, so a duplicate in its place
        // was never woken and the refusal could be lost.
        let duplicate = TcpStream::from_std(duplicate(&tls.tcp)?);
        let registered = std::mem::replace(&mut tls.tcp, duplicate);
        match std::mem::replace(self, Socket::Tcp(registered)) {
            Socket::Tls(tls) => Ok(Some(tls)),
            _ => Ok(None),
        }
    }

    /// Send what the socket's own layer still holds (TLS records); plain
    /// sockets hold nothing.
    pub(super) fn flush(&mut self) -> std::io::Result<()> {
        match self {
            Socket::Tls(s) => s.flush(),
            _ => Ok(()),
        }
    }
}

pub(super) enum Phase {
    /// TCP: looking at the first bytes for an HTTP request line.
    Sniff,
    /// Waiting for `HELLO`; `shm` for a shared-memory session socket.
    Hello {
        shm: bool,
    },
    Stream(StreamSession),
    /// A shared-memory session: the socket only signals its end. Only the
    /// bus holds the link: when it lets go of the client, the link's drop
    /// shuts the socket, which ends this session too. Linux-only.
    #[cfg(target_os = "linux")]
    Shm(Weak<ShmLink>),
    /// Writing a last message (a refusal, an error), then closing.
    Closing,
}

impl Phase {
    /// Whether the connection is still in its handshake (no `WELCOME` yet,
    /// no last message queued).
    pub(super) fn in_handshake(&self) -> bool {
        matches!(self, Phase::Sniff | Phase::Hello { .. })
    }
}

pub(super) struct Conn {
    pub(super) socket: Socket,
    pub(super) slot: ClientSlot,
    pub(super) phase: Phase,
    pub(super) input: Input,
    /// Bytes to write: `output.finish()[written..]`.
    pub(super) output: Packer,
    pub(super) written: usize,
    /// The last read stopped before the socket said it would block: readiness
    /// was not used up, so reading must resume without a new event.
    pub(super) unread: bool,
    /// The peer closed its side; what is buffered is still handled first.
    pub(super) at_end: bool,
    /// Which handshake deadline entry is this connection's.
    pub(super) serial: u64,
    /// The peer it is held for among the pending handshakes
    /// (`pending.rs`), until the reactor releases it.
    pub(super) held: Option<PeerKey>,
}

#[cfg(target_os = "linux")]
impl Drop for Conn {
    fn drop(&mut self) {
        if let Phase::Shm(link) = &self.phase {
            if let Some(link) = link.upgrade() {
                link.end();
            }
        }
    }
}

/// How processing a connection went.
pub(super) enum Flow {
    /// Go on (read more when the socket has more).
    Continue,
    /// Stop reading: no credit (resumed by a notice) or a partial message.
    Paused,
    /// Close the connection now (for the log: why).
    Close(String),
    /// TCP that speaks HTTP: give it to the control server.
    HandOver,
}

impl Conn {
    /// A connection just accepted, with nothing read or written yet; its
    /// readiness is not used up.
    pub(super) fn new(socket: Socket, slot: ClientSlot, phase: Phase, serial: u64) -> Self {
        Self {
            socket,
            slot,
            phase,
            input: Input::default(),
            output: Packer::new(),
            written: 0,
            unread: true,
            at_end: false,
            serial,
            held: None,
        }
    }

    /// Read once from the socket into the input buffer.
    pub(super) fn read_some(&mut self) -> std::io::Result<usize> {
        let socket = &mut self.socket;
        self.input.read_from(|buf| socket.read(buf))
    }

    /// Queue a refusal and switch to closing.
    pub(super) fn refuse(&mut self, violation: &Violation) {
        self.slot.log_refusal(violation);
        self.output.push_encoded(&violation.refusal());
        self.phase = Phase::Closing;
    }

    /// Queue a fatal error for a client that broke the protocol, detach it
    /// and switch to closing.
    pub(super) fn reject(&mut self, violation: &Violation) {
        // The bus hears of the detach before the client hears of its
        // rejection: whatever the client does next reaches the bus after
        // its ports closed.
        self.slot.reject(violation);
        self.output.push_encoded(&violation.fatal_error());
        self.phase = Phase::Closing;
    }

    /// Why the connection's input ended, for the log (or a violation).
    pub(super) fn end_of_input(&mut self) -> String {
        let buffered = self.input.len();
        match &self.phase {
            Phase::Sniff | Phase::Closing => String::new(),
            Phase::Hello { .. } => {
                self.slot.log_refusal(&Violation::new(ErrorCode::Malformed, "during handshake: connection closed"));
                String::new()
            }
            Phase::Stream(_) if buffered > 0 => {
                let need = LENGTH_PREFIX + self.input.body_len().map_or(0, |len| len as usize);
                let violation = Violation::new(
                    ErrorCode::Malformed,
                    format!("disconnected mid-message: got {buffered} of {need} bytes"),
                );
                self.slot.reject(&violation);
                violation.text
            }
            _ => "connection closed".into(),
        }
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use rustls::server::{ClientHello, ResolvesServerCert};
    use rustls::sign::CertifiedKey;
    use rustls::ServerConfig;

    use super::*;

    /// No certificate: the session is only taken apart, never handshaken.
    #[derive(Debug)]
    struct NoCertificate;

    impl ResolvesServerCert for NoCertificate {
        fn resolve(&self, _: ClientHello<'_>) -> Option<Arc<CertifiedKey>> {
            None
        }
    }

    #[test]
    fn a_tls_connection_answered_in_plaintext_keeps_the_socket_the_reactor_watches() {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let mut peer = std::net::TcpStream::connect(listener.local_addr().unwrap()).unwrap();
        let (accepted, _) = listener.accept().unwrap();
        accepted.set_nonblocking(true).unwrap();
        let config = ServerConfig::builder_with_provider(Arc::new(rustls::crypto::ring::default_provider()))
            .with_safe_default_protocol_versions()
            .unwrap()
            .with_no_client_auth()
            .with_cert_resolver(Arc::new(NoCertificate));
        let tls = TlsSocket::new(TcpStream::from_std(accepted), &Arc::new(config)).unwrap();
        let mut socket = Socket::Tls(Box::new(tls));
        let mut poll = mio::Poll::new().unwrap();
        let interests = Interest::READABLE | Interest::WRITABLE;
        poll.registry().register(&mut socket, Token(7), interests).unwrap();

        // The plaintext refusal's way: the TLS state goes (with its socket).
        drop(socket.take_tls().unwrap().expect("a TLS socket has TLS state"));
        assert!(matches!(socket, Socket::Tcp(_)));
        // The socket left is the registered one: watching it on works (a
        // duplicate was never registered, and its events never came).
        socket.reregister(poll.registry(), Token(7), interests).expect("the registered socket stays in place");
        peer.write_all(b"more").unwrap();
        let mut events = mio::Events::with_capacity(4);
        let readable = |events: &mio::Events| events.iter().any(|e| e.token() == Token(7) && e.is_readable());
        while !readable(&events) {
            // A hang guard, not a measure.
            poll.poll(&mut events, Some(std::time::Duration::from_secs(10))).unwrap();
            assert!(!events.is_empty(), "no event for the socket left in place");
        }
    }
}
