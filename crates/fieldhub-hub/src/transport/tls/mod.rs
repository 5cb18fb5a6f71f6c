//! A TLS connection in the reactor: rustls's sans-IO [`ServerConnection`]
//! over a non-blocking TCP socket, read and written like the plain socket
//! it stands in for.
//!
//! - **Reading** hands out decrypted bytes; when rustls has none it reads
//!   ciphertext from the socket (at most what the socket has: `WouldBlock`
//!   ends the call, as for a plain socket), processes it, and sends what
//!   the handshake answers at once. An end without `close_notify` is an end
//!   like any other: the protocol's own framing tells a cut message.
//! - **Writing** first sends the records rustls still holds; only when
//!   they are out does it take more plaintext, so at most one write's worth
//!   waits inside rustls and [`TlsSocket::flush`] (the reactor calls it
//!   when its own buffer is empty) finishes it when the socket drains.
//! - **Opening**: before any byte goes to rustls, the first bytes are
//!   peeked: a peer that does not start with a TLS handshake record is a
//!   plaintext client on a TLS port, refused in words it understands.
//!
//! Invariants: nothing here blocks; a rustls error is returned, never
//! panicked on, and the alert rustls queued for it is sent if the socket
//! takes it; only TLS connections carry this state (plaintext sessions pay
//! nothing for it).

pub mod config;

use std::io::{self, ErrorKind, Read, Write};
use std::sync::Arc;

// mio's own type: on Windows the reactor can watch no other, and its reads
// and writes re-arm the watch when they would block.
use mio::net::TcpStream;

use rustls::{ServerConfig, ServerConnection};

/// A TLS record of type handshake (22), protocol major version 3: the
/// first two bytes of every TLS client's first message. A fieldhub `HELLO`
/// starts with its length (at most 512, so a second byte of 0 to 2) and an
/// HTTP request with a method's letters: neither can look like this.
const TLS_HANDSHAKE_START: [u8; 2] = [0x16, 0x03];

/// What a connection's first bytes say about its peer.
pub enum Opening {
    /// It speaks TLS.
    Tls,
    /// It speaks plaintext: its first four bytes (the protocol, or HTTP).
    Plain([u8; 4]),
    /// Not enough bytes yet.
    Wait,
    /// The peer closed (or the socket failed) before saying anything.
    Closed,
}

/// One TLS connection: the socket and the session's state.
pub struct TlsSocket {
    pub tcp: TcpStream,
    session: ServerConnection,
    /// The first bytes were seen to be TLS.
    opened: bool,
}

/// A failed TLS session, as the `io::Error` reading returns carries it.
#[derive(Debug, thiserror::Error)]
#[error("TLS: {0}")]
pub struct TlsFailure(#[from] pub rustls::Error);

impl TlsSocket {
    pub fn new(tcp: TcpStream, config: &Arc<ServerConfig>) -> Result<Self, rustls::Error> {
        Ok(Self { tcp, session: ServerConnection::new(Arc::clone(config))?, opened: false })
    }

    /// Whether the first bytes were seen to be TLS already.
    pub fn opened(&self) -> bool {
        self.opened
    }

    /// Look at the first bytes without taking them.
    pub fn opening(&mut self) -> Opening {
        let mut first = [0u8; 4];
        match self.tcp.peek(&mut first) {
            Ok(0) => Opening::Closed,
            Ok(n) if n >= 2 && first[..2] == TLS_HANDSHAKE_START => {
                self.opened = true;
                Opening::Tls
            }
            Ok(n) if n < first.len() => Opening::Wait,
            Ok(_) => Opening::Plain(first),
            Err(e) if e.kind() == ErrorKind::WouldBlock || e.kind() == ErrorKind::Interrupted => Opening::Wait,
            Err(_) => Opening::Closed,
        }
    }

    /// Whether the peer presented a certificate the hub verified: only
    /// possible with `tls_client_ca`, whose verifier ends the handshake of
    /// any peer whose certificate it does not accept.
    pub fn certified(&self) -> bool {
        !self.session.is_handshaking() && self.session.peer_certificates().is_some_and(|c| !c.is_empty())
    }

    /// The socket and the session, to serve on elsewhere (the control API).
    pub fn into_parts(self) -> (TcpStream, ServerConnection) {
        (self.tcp, self.session)
    }

    /// Decrypted bytes into `buf`; `Ok(0)` at the end.
    pub fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        loop {
            match self.session.reader().read(buf) {
                Ok(n) => return Ok(n),
                Err(e) if e.kind() == ErrorKind::WouldBlock => {}
                Err(e) if e.kind() == ErrorKind::UnexpectedEof => return Ok(0),
                Err(e) => return Err(e),
            }
            // No plaintext waits: read ciphertext (`WouldBlock` ends here).
            self.session.read_tls(&mut self.tcp)?;
            if let Err(e) = self.session.process_new_packets() {
                // The alert that tells the peer why, if the socket takes it.
                let _ = self.session.write_tls(&mut self.tcp);
                return Err(io::Error::new(ErrorKind::InvalidData, TlsFailure(e)));
            }
            // The handshake's answers go out now; what the socket does not
            // take waits for `flush`.
            match self.flush() {
                Ok(()) => {}
                Err(e) if e.kind() == ErrorKind::WouldBlock => {}
                Err(e) => return Err(e),
            }
        }
    }

    /// Take plaintext to send once the records rustls holds are out.
    pub fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        self.flush()?;
        let taken = self.session.writer().write(buf)?;
        match self.flush() {
            Ok(()) => Ok(taken),
            Err(e) if e.kind() == ErrorKind::WouldBlock => Ok(taken),
            Err(e) => Err(e),
        }
    }

    /// Send the records rustls holds; `WouldBlock` while the socket is full.
    pub fn flush(&mut self) -> io::Result<()> {
        while self.session.wants_write() {
            self.session.write_tls(&mut self.tcp)?;
        }
        Ok(())
    }
}
