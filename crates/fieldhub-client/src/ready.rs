//! A file descriptor that is readable while received frames are waiting (or
//! the connection has ended), for `poll`/`select`/asyncio integration.
//!
//! A nonblocking socket pair: the reader thread *raises* it (writes a byte)
//! when it puts a frame into an empty queue; the application *lowers* it
//! (drains the bytes) when it takes the last frame, then re-checks the
//! queue and raises again if a frame slipped in meanwhile. Raising on the
//! empty-to-one transition (queue length 1 after the push) and re-checking
//! after every lower leaves no state where frames wait with the fd quiet.

use std::io::{ErrorKind, Read, Write};
use std::os::fd::{AsRawFd, RawFd};
use std::os::unix::net::UnixStream;

pub struct ReadySignal {
    readable: UnixStream,
    writable: UnixStream,
}

impl ReadySignal {
    pub fn new() -> std::io::Result<Self> {
        let (readable, writable) = UnixStream::pair()?;
        readable.set_nonblocking(true)?;
        writable.set_nonblocking(true)?;
        Ok(Self { readable, writable })
    }

    /// Make the fd readable. A full socket buffer means it already is.
    pub fn raise(&self) {
        let _ = (&self.writable).write(&[1]);
    }

    /// Make the fd quiet.
    pub fn lower(&self) {
        let mut sink = [0u8; 64];
        loop {
            match (&self.readable).read(&mut sink) {
                Ok(0) => return,
                Ok(_) => {}
                Err(e) if e.kind() == ErrorKind::Interrupted => {}
                Err(_) => return,
            }
        }
    }

    pub fn fd(&self) -> RawFd {
        self.readable.as_raw_fd()
    }
}
