//! The local streams of `stream.rs` (Linux): unix sockets (`unix:PATH`)
//! and serial devices (`serial:PATH`, as a QEMU guest's virtio-serial port
//! bound to the hub's unix socket on the host). On Windows
//! `windows/local_stream.rs` stands in and refuses both.

use std::fs::File;
use std::io::{self, Read, Write};
pub(crate) use std::os::unix::net::UnixStream;
use std::path::Path;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// Connect to the hub's unix socket at `path`, its send buffer `send_buffer` bytes.
pub(crate) fn connect_unix(path: &Path, send_buffer: usize) -> io::Result<UnixStream> {
    let stream = UnixStream::connect(path)?;
    rustix::net::sockopt::set_socket_send_buffer_size(&stream, send_buffer)?;
    Ok(stream)
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
pub(crate) struct SerialStream {
    file: Arc<File>,
    shut: Arc<AtomicBool>,
    read_timeout_ns: Arc<AtomicU64>,
}

impl SerialStream {
    pub fn open(path: &Path) -> io::Result<Self> {
        let file = File::options().read(true).write(true).open(path)?;
        Ok(Self {
            file: Arc::new(file),
            shut: Arc::new(AtomicBool::new(false)),
            read_timeout_ns: Arc::new(AtomicU64::new(NO_TIMEOUT)),
        })
    }

    /// A second handle: clones share the file, the shutdown flag and the read timeout.
    pub fn try_clone(&self) -> io::Result<Self> {
        Ok(self.clone())
    }

    pub fn shutdown(&self) {
        self.shut.store(true, Ordering::Relaxed);
    }

    pub fn set_read_timeout(&self, timeout: Option<Duration>) {
        let ns = timeout.map_or(NO_TIMEOUT, |t| u64::try_from(t.as_nanos()).unwrap_or(NO_TIMEOUT - 1));
        self.read_timeout_ns.store(ns, Ordering::Relaxed);
    }

    pub fn read(&self, buf: &mut [u8]) -> io::Result<usize> {
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

    pub fn write(&self, buf: &[u8]) -> io::Result<usize> {
        (&*self.file).write(buf)
    }

    pub fn flush(&self) -> io::Result<()> {
        (&*self.file).flush()
    }
}
