//! A file descriptor that is readable while received frames are waiting (or
//! the connection has ended), for `poll`/`select`/asyncio integration.
//!
//! A nonblocking socket pair, readable while a byte waits in it. Whether it
//! should be readable is decided under one small lock, by whoever changed
//! the receive queue last: the consumer after it queued a frame
//! ([`ReadySignal::settle`] raises if frames wait), the application after
//! it took one (lowers if none waits). Each looks at the queue inside the
//! lock, while it still holds the queue's, so the last look decides, and
//! the fd is readable exactly while frames wait — never quiet with frames
//! waiting, never readable with none (a consumer's raise that lost the race
//! to the application's take would otherwise leave it readable over an
//! empty queue). An ended connection keeps it readable for good. On the
//! shared-memory links frames reach the queue without anyone waiting only
//! through a reader thread, which `Client::fileno` starts.

use std::io::{ErrorKind, Read, Write};
use std::os::fd::AsRawFd;
pub use std::os::fd::RawFd;
use std::os::unix::net::UnixStream;
use std::sync::Mutex;

pub struct ReadySignal {
    readable: UnixStream,
    writable: UnixStream,
    /// Whether a byte waits in the pair (the fd is readable).
    raised: Mutex<bool>,
}

impl ReadySignal {
    pub fn new() -> std::io::Result<Self> {
        let (readable, writable) = UnixStream::pair()?;
        readable.set_nonblocking(true)?;
        writable.set_nonblocking(true)?;
        Ok(Self { readable, writable, raised: Mutex::new(false) })
    }

    /// Make the fd readable exactly when `waiting()` says something waits
    /// (frames, or the end of the connection).
    pub fn settle(&self, waiting: impl FnOnce() -> bool) {
        let mut raised = self.raised.lock().unwrap_or_else(|poisoned| poisoned.into_inner());
        match (waiting(), *raised) {
            (true, false) => {
                // A full socket buffer means it is readable already.
                let _ = (&self.writable).write(&[1]);
                *raised = true;
            }
            (false, true) => {
                self.drain();
                *raised = false;
            }
            _ => {}
        }
    }

    fn drain(&self) {
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
