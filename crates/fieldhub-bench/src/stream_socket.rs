//! A stream socket that is loopback TCP or a unix stream socket, read and
//! written alike: the stream baselines' peers (`raw.rs`) and the hostile
//! soak's attackers (`soak_hostile.rs`) use either transport through it.

use std::io::{Read, Write};
use std::net::{Shutdown, TcpStream};
use std::os::unix::net::UnixStream;
use std::time::Duration;

pub(crate) enum StreamSocket {
    Tcp(TcpStream),
    Unix(UnixStream),
}

impl StreamSocket {
    pub(crate) fn set_nonblocking(&self, on: bool) -> std::io::Result<()> {
        match self {
            Self::Tcp(s) => s.set_nonblocking(on),
            Self::Unix(s) => s.set_nonblocking(on),
        }
    }

    pub(crate) fn set_read_timeout(&self, patience: Option<Duration>) -> std::io::Result<()> {
        match self {
            Self::Tcp(s) => s.set_read_timeout(patience),
            Self::Unix(s) => s.set_read_timeout(patience),
        }
    }

    /// Reads and writes bounded by `patience`, blocking otherwise.
    pub(crate) fn bound(&self, patience: Duration) -> std::io::Result<()> {
        self.set_nonblocking(false)?;
        self.set_read_timeout(Some(patience))?;
        match self {
            Self::Tcp(s) => s.set_write_timeout(Some(patience)),
            Self::Unix(s) => s.set_write_timeout(Some(patience)),
        }
    }

    pub(crate) fn shutdown_write(&self) -> std::io::Result<()> {
        match self {
            Self::Tcp(s) => s.shutdown(Shutdown::Write),
            Self::Unix(s) => s.shutdown(Shutdown::Write),
        }
    }
}

impl Read for StreamSocket {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        match self {
            Self::Tcp(s) => s.read(buf),
            Self::Unix(s) => s.read(buf),
        }
    }
}

impl Write for StreamSocket {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        match self {
            Self::Tcp(s) => s.write(buf),
            Self::Unix(s) => s.write(buf),
        }
    }

    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}
