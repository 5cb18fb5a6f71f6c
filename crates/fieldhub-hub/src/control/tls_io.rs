//! An HTTP connection over TLS for the control server: the rustls session
//! the reactor completed the handshake of, driven over a tokio socket as an
//! `AsyncRead + AsyncWrite` hyper can serve (and upgrade to a WebSocket).
//!
//! The reactor read the request's first bytes already (to tell HTTP from
//! the protocol); they are handed over as `read_ahead` and read first.
//!
//! Invariants: no call blocks (a socket that is not ready parks the task
//! through tokio's readiness, never a thread); a rustls error becomes an
//! `io::Error` that ends this connection only.

use std::io::{self, ErrorKind, Read, Write};
use std::pin::Pin;
use std::task::{Context, Poll};

use rustls::ServerConnection;
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::net::TcpStream;

/// A TLS session over a tokio TCP socket.
pub struct TlsIo {
    tcp: TcpStream,
    session: Box<ServerConnection>,
    read_ahead: Vec<u8>,
    /// How much of `read_ahead` was read.
    taken: usize,
}

impl TlsIo {
    pub fn new(tcp: TcpStream, session: Box<ServerConnection>, read_ahead: Vec<u8>) -> Self {
        Self { tcp, session, read_ahead, taken: 0 }
    }

    /// Send the records rustls holds; `Pending` until the socket took them.
    fn poll_send(&mut self, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        while self.session.wants_write() {
            match self.session.write_tls(&mut Socket { tcp: &self.tcp, cx }) {
                Ok(_) => {}
                Err(e) if e.kind() == ErrorKind::WouldBlock => return Poll::Pending,
                Err(e) => return Poll::Ready(Err(e)),
            }
        }
        Poll::Ready(Ok(()))
    }
}

/// The tokio socket as `std::io` for rustls: not ready is `WouldBlock`,
/// with the task's waker registered to be woken when it is.
struct Socket<'a, 'b> {
    tcp: &'a TcpStream,
    cx: &'a mut Context<'b>,
}

impl Read for Socket<'_, '_> {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        loop {
            match self.tcp.poll_read_ready(self.cx) {
                Poll::Pending => return Err(ErrorKind::WouldBlock.into()),
                Poll::Ready(Err(e)) => return Err(e),
                Poll::Ready(Ok(())) => match self.tcp.try_read(buf) {
                    // Readiness was stale: the next poll registers the waker.
                    Err(e) if e.kind() == ErrorKind::WouldBlock => continue,
                    other => return other,
                },
            }
        }
    }
}

impl Write for Socket<'_, '_> {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        loop {
            match self.tcp.poll_write_ready(self.cx) {
                Poll::Pending => return Err(ErrorKind::WouldBlock.into()),
                Poll::Ready(Err(e)) => return Err(e),
                Poll::Ready(Ok(())) => match self.tcp.try_write(buf) {
                    Err(e) if e.kind() == ErrorKind::WouldBlock => continue,
                    other => return other,
                },
            }
        }
    }
    fn flush(&mut self) -> io::Result<()> {
        Ok(())
    }
}

impl AsyncRead for TlsIo {
    fn poll_read(self: Pin<&mut Self>, cx: &mut Context<'_>, buf: &mut ReadBuf<'_>) -> Poll<io::Result<()>> {
        let this = self.get_mut();
        if this.taken < this.read_ahead.len() {
            let ahead = &this.read_ahead[this.taken..];
            let n = ahead.len().min(buf.remaining());
            buf.put_slice(&ahead[..n]);
            this.taken += n;
            if this.taken == this.read_ahead.len() {
                this.read_ahead = Vec::new();
                this.taken = 0;
            }
            return Poll::Ready(Ok(()));
        }
        loop {
            match this.session.reader().read(buf.initialize_unfilled()) {
                Ok(n) => {
                    buf.advance(n);
                    return Poll::Ready(Ok(()));
                }
                Err(e) if e.kind() == ErrorKind::WouldBlock => {}
                // An end without close_notify: HTTP's framing tells a cut request.
                Err(e) if e.kind() == ErrorKind::UnexpectedEof => return Poll::Ready(Ok(())),
                Err(e) => return Poll::Ready(Err(e)),
            }
            match this.session.read_tls(&mut Socket { tcp: &this.tcp, cx }) {
                Ok(_) => {}
                Err(e) if e.kind() == ErrorKind::WouldBlock => return Poll::Pending,
                Err(e) => return Poll::Ready(Err(e)),
            }
            if let Err(e) = this.session.process_new_packets() {
                let _ = this.poll_send(cx);
                return Poll::Ready(Err(io::Error::new(ErrorKind::InvalidData, e)));
            }
            // Whatever reading made rustls answer goes out; a full socket
            // leaves it for the next write or flush.
            if let Poll::Ready(Err(e)) = this.poll_send(cx) {
                return Poll::Ready(Err(e));
            }
        }
    }
}

impl AsyncWrite for TlsIo {
    fn poll_write(self: Pin<&mut Self>, cx: &mut Context<'_>, buf: &[u8]) -> Poll<io::Result<usize>> {
        let this = self.get_mut();
        // Records already made go first: rustls holds at most one write's worth.
        match this.poll_send(cx) {
            Poll::Ready(Ok(())) => {}
            other => return other.map(|r| r.map(|()| 0)),
        }
        let taken = this.session.writer().write(buf)?;
        match this.poll_send(cx) {
            Poll::Ready(Err(e)) => Poll::Ready(Err(e)),
            _ => Poll::Ready(Ok(taken)),
        }
    }

    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        self.get_mut().poll_send(cx)
    }

    fn poll_shutdown(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        let this = self.get_mut();
        this.session.send_close_notify();
        match this.poll_send(cx) {
            Poll::Ready(Ok(())) => Pin::new(&mut this.tcp).poll_shutdown(cx),
            other => other,
        }
    }
}
