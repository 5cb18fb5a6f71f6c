//! Stream transports: TCP and unix sockets speaking `spec/protocol.md`.
//!
//! Each connection gets a reader thread ([`session`]) that performs the
//! handshake and turns messages into [`Inbound`](crate::queues::Inbound)
//! requests, and a writer thread that drains the client's outbound queue,
//! packing every frame that is waiting into one `FRAMES` message per write.
//! Nothing here knows about channels or ordering; the bus thread does.
//! [`shm`] serves local clients over shared memory: its session threads
//! only set clients up and watch for their end, while the bus thread reads
//! and writes their rings itself. [`ivshmem`] serves QEMU guests through a
//! region file: a poller thread does the handshake through the rings and
//! wakes the bus thread for them. [`socketcan`] attaches the SocketCAN
//! interfaces the configuration names as ports of the hub's own.

pub mod ivshmem;
pub mod listener;
pub mod session;
pub mod shm;
pub mod socketcan;

use std::io::{Read, Write};
use std::net::{Shutdown, TcpStream};
use std::os::unix::net::UnixStream;
use std::time::Duration;

/// A bidirectional byte stream the transports can serve.
pub trait Connection: Read + Write + Send + Sized + 'static {
    /// A second handle to the same stream, for the writer thread.
    fn try_clone(&self) -> std::io::Result<Self>;
    /// Close both directions, waking any thread blocked on the stream.
    fn shutdown(&self);
    /// Bound a blocking read (used for the handshake only).
    fn set_read_timeout(&self, timeout: Option<Duration>) -> std::io::Result<()>;
}

impl Connection for TcpStream {
    fn try_clone(&self) -> std::io::Result<Self> {
        TcpStream::try_clone(self)
    }
    fn shutdown(&self) {
        let _ = TcpStream::shutdown(self, Shutdown::Both);
    }
    fn set_read_timeout(&self, timeout: Option<Duration>) -> std::io::Result<()> {
        TcpStream::set_read_timeout(self, timeout)
    }
}

impl Connection for UnixStream {
    fn try_clone(&self) -> std::io::Result<Self> {
        UnixStream::try_clone(self)
    }
    fn shutdown(&self) {
        let _ = UnixStream::shutdown(self, Shutdown::Both);
    }
    fn set_read_timeout(&self, timeout: Option<Duration>) -> std::io::Result<()> {
        UnixStream::set_read_timeout(self, timeout)
    }
}
