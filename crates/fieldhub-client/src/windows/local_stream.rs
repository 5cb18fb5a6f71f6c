//! The local streams of `stream.rs` on Windows: not there. `unix:` sockets
//! and `serial:` devices are Linux-only; opening one fails with
//! `ErrorKind::Unsupported` (the client's error names the platform). The
//! types have no values, so their other methods are never called.

use std::io;
use std::net::Shutdown;
use std::path::Path;
use std::time::Duration;

/// A unix socket, which this platform's build never connects.
pub(crate) enum UnixStream {}
/// A serial device, which this platform's build never opens.
pub(crate) enum SerialStream {}

fn unsupported(what: &str) -> io::Error {
    io::Error::new(io::ErrorKind::Unsupported, format!("{what} is Linux-only; connect over tcp:// or tls://"))
}

/// Refuse `unix:`: Linux-only.
pub(crate) fn connect_unix(_path: &Path, _send_buffer: usize) -> io::Result<UnixStream> {
    Err(unsupported("a unix socket (unix:)"))
}

impl UnixStream {
    pub fn try_clone(&self) -> io::Result<Self> {
        match *self {}
    }
    pub fn shutdown(&self, _: Shutdown) -> io::Result<()> {
        match *self {}
    }
    pub fn set_read_timeout(&self, _: Option<Duration>) -> io::Result<()> {
        match *self {}
    }
}

impl SerialStream {
    pub fn open(_path: &Path) -> io::Result<Self> {
        Err(unsupported("a serial device (serial:)"))
    }
    pub fn try_clone(&self) -> io::Result<Self> {
        match *self {}
    }
    pub fn shutdown(&self) {
        match *self {}
    }
    pub fn set_read_timeout(&self, _: Option<Duration>) {
        match *self {}
    }
    pub fn read(&self, _: &mut [u8]) -> io::Result<usize> {
        match *self {}
    }
    pub fn write(&self, _: &[u8]) -> io::Result<usize> {
        match *self {}
    }
    pub fn flush(&self) -> io::Result<()> {
        match *self {}
    }
}

impl io::Read for UnixStream {
    fn read(&mut self, _: &mut [u8]) -> io::Result<usize> {
        match *self {}
    }
}

impl io::Write for UnixStream {
    fn write(&mut self, _: &[u8]) -> io::Result<usize> {
        match *self {}
    }
    fn flush(&mut self) -> io::Result<()> {
        match *self {}
    }
}
