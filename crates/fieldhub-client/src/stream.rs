//! The byte stream under a client: TCP, a unix socket, or a serial device
//! (`serial:PATH`, as a QEMU guest's virtio-serial port bound to the hub's
//! unix socket on the host).

use std::fs::File;
use std::io::{self, Read, Write};
use std::net::{Shutdown, TcpStream, ToSocketAddrs};
use std::os::unix::net::UnixStream;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use crate::url::HubUrl;

/// The kernel send buffer of a stream connection. Set, so the kernel does not
/// grow it to megabytes: frames waiting there are frames the sender is ahead
/// of the bus by (`spec/protocol.md` 6.5a).
pub const SEND_BUFFER: usize = 16 * 1024;

/// A connected stream to a hub.
pub enum Stream {
    Tcp(TcpStream),
    Unix(UnixStream),
    Serial(SerialStream),
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
                            rustix::net::sockopt::set_socket_send_buffer_size(&stream, SEND_BUFFER)?;
                            return Ok(Self::Tcp(stream));
                        }
                        Err(e) => last = e,
                    }
                }
                Err(last)
            }
            HubUrl::Unix(path) => {
                let stream = UnixStream::connect(path)?;
                rustix::net::sockopt::set_socket_send_buffer_size(&stream, SEND_BUFFER)?;
                Ok(Self::Unix(stream))
            }
            HubUrl::Serial(path) => SerialStream::open(path).map(Self::Serial),
            HubUrl::Shm { .. } | HubUrl::Ivshmem(_) => {
                Err(io::Error::new(io::ErrorKind::InvalidInput, "shared memory is not a stream transport"))
            }
        }
    }

    /// A second handle to the same stream.
    pub fn try_clone(&self) -> io::Result<Self> {
        match self {
            Self::Tcp(s) => s.try_clone().map(Self::Tcp),
            Self::Unix(s) => s.try_clone().map(Self::Unix),
            Self::Serial(s) => Ok(Self::Serial(s.clone())),
        }
    }

    /// Close both directions, waking a blocked reader.
    pub fn shutdown(&self) {
        let _ = match self {
            Self::Tcp(s) => s.shutdown(Shutdown::Both),
            Self::Unix(s) => s.shutdown(Shutdown::Both),
            Self::Serial(s) => {
                s.shutdown();
                Ok(())
            }
        };
    }

    /// Bound blocking reads (`None`: wait forever).
    pub fn set_read_timeout(&self, timeout: Option<Duration>) -> io::Result<()> {
        match self {
            Self::Tcp(s) => s.set_read_timeout(timeout),
            Self::Unix(s) => s.set_read_timeout(timeout),
            Self::Serial(s) => {
                s.set_read_timeout(timeout);
                Ok(())
            }
        }
    }
}

impl Read for Stream {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        match self {
            Self::Tcp(s) => s.read(buf),
            Self::Unix(s) => s.read(buf),
            Self::Serial(s) => s.read(buf),
        }
    }
}

impl Write for Stream {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        match self {
            Self::Tcp(s) => s.write(buf),
            Self::Unix(s) => s.write(buf),
            Self::Serial(s) => (&*s.file).write(buf),
        }
    }
    fn flush(&mut self) -> io::Result<()> {
        match self {
            Self::Tcp(s) => s.flush(),
            Self::Unix(s) => s.flush(),
            Self::Serial(s) => (&*s.file).flush(),
        }
    }
}

/// How often a blocked serial read looks at the shutdown flag.
const SERIAL_POLL: Duration = Duration::from_millis(50);
/// `read_timeout` value meaning "wait forever".
const NO_TIMEOUT: u64 = u64::MAX;

/// A character device opened read+write. A file has no `shutdown` and no
/// read timeout, so reads wait in `poll` in short slices: clones share one
/// shutdown flag (set: reads end as at end of stream) and one read timeout,
/// as clones of a socket share the socket's.
#[derive(Clone)]
pub struct SerialStream {
    file: Arc<File>,
    shut: Arc<AtomicBool>,
    read_timeout_ns: Arc<AtomicU64>,
}

impl SerialStream {
    fn open(path: &std::path::Path) -> io::Result<Self> {
        let file = File::options().read(true).write(true).open(path)?;
        Ok(Self {
            file: Arc::new(file),
            shut: Arc::new(AtomicBool::new(false)),
            read_timeout_ns: Arc::new(AtomicU64::new(NO_TIMEOUT)),
        })
    }

    fn shutdown(&self) {
        self.shut.store(true, Ordering::Relaxed);
    }

    fn set_read_timeout(&self, timeout: Option<Duration>) {
        let ns = timeout.map_or(NO_TIMEOUT, |t| u64::try_from(t.as_nanos()).unwrap_or(NO_TIMEOUT - 1));
        self.read_timeout_ns.store(ns, Ordering::Relaxed);
    }

    fn read(&self, buf: &mut [u8]) -> io::Result<usize> {
        use rustix::event::{poll, PollFd, PollFlags};
        let timeout_ns = self.read_timeout_ns.load(Ordering::Relaxed);
        let deadline = (timeout_ns != NO_TIMEOUT).then(|| Instant::now() + Duration::from_nanos(timeout_ns));
        loop {
            if self.shut.load(Ordering::Relaxed) {
                return Ok(0);
            }
            let mut slice = SERIAL_POLL;
            if let Some(deadline) = deadline {
                let left = deadline.saturating_duration_since(Instant::now());
                if left.is_zero() {
                    return Err(io::Error::new(io::ErrorKind::TimedOut, "serial read timed out"));
                }
                slice = slice.min(left);
            }
            let wait = rustix::event::Timespec { tv_sec: 0, tv_nsec: slice.subsec_nanos().into() };
            let mut fds = [PollFd::new(&*self.file, PollFlags::IN)];
            match poll(&mut fds, Some(&wait)) {
                // Readable, hung up (read reports the end) or failed (read reports why).
                Ok(n) if n > 0 => return (&*self.file).read(buf),
                Ok(_) | Err(rustix::io::Errno::INTR) => continue,
                Err(e) => return Err(e.into()),
            }
        }
    }
}
