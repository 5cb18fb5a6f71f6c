//! The byte stream under a client: TCP or a unix socket.

use std::io::{self, Read, Write};
use std::net::{Shutdown, TcpStream, ToSocketAddrs};
use std::os::unix::net::UnixStream;
use std::time::Duration;

use crate::url::HubUrl;

/// A connected stream to a hub.
pub enum Stream {
    Tcp(TcpStream),
    Unix(UnixStream),
}

impl Stream {
    /// Connect to `url`, giving up after `timeout`.
    pub fn connect(url: &HubUrl, timeout: Duration) -> io::Result<Self> {
        match url {
            HubUrl::Tcp { host, port } => {
                let mut last = io::Error::new(io::ErrorKind::NotFound, format!("'{host}' resolves to no address"));
                for addr in (host.as_str(), *port).to_socket_addrs()? {
                    match TcpStream::connect_timeout(&addr, timeout) {
                        Ok(stream) => {
                            // Frames are packed by the writer; Nagle would only add delay.
                            stream.set_nodelay(true)?;
                            return Ok(Self::Tcp(stream));
                        }
                        Err(e) => last = e,
                    }
                }
                Err(last)
            }
            HubUrl::Unix(path) => Ok(Self::Unix(UnixStream::connect(path)?)),
            HubUrl::Shm { .. } => Err(io::Error::new(io::ErrorKind::InvalidInput, "shm:// is not a stream transport")),
        }
    }

    /// A second handle to the same stream.
    pub fn try_clone(&self) -> io::Result<Self> {
        match self {
            Self::Tcp(s) => s.try_clone().map(Self::Tcp),
            Self::Unix(s) => s.try_clone().map(Self::Unix),
        }
    }

    /// Close both directions, waking a blocked reader.
    pub fn shutdown(&self) {
        let _ = match self {
            Self::Tcp(s) => s.shutdown(Shutdown::Both),
            Self::Unix(s) => s.shutdown(Shutdown::Both),
        };
    }

    /// Bound blocking reads (`None`: wait forever).
    pub fn set_read_timeout(&self, timeout: Option<Duration>) -> io::Result<()> {
        match self {
            Self::Tcp(s) => s.set_read_timeout(timeout),
            Self::Unix(s) => s.set_read_timeout(timeout),
        }
    }
}

impl Read for Stream {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        match self {
            Self::Tcp(s) => s.read(buf),
            Self::Unix(s) => s.read(buf),
        }
    }
}

impl Write for Stream {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        match self {
            Self::Tcp(s) => s.write(buf),
            Self::Unix(s) => s.write(buf),
        }
    }
    fn flush(&mut self) -> io::Result<()> {
        match self {
            Self::Tcp(s) => s.flush(),
            Self::Unix(s) => s.flush(),
        }
    }
}
