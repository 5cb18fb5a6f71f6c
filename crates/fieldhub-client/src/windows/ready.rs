//! The ready fd on Windows: not there (it is a unix socket pair on Linux);
//! [`crate::Client::fileno`] says so. Receiving with a timeout works as
//! everywhere.

use std::io;

/// What `fileno` would return. Never made here; an `int` as on Linux, so
/// the C API (`fh_fileno`) is the same on every platform.
pub type RawFd = std::ffi::c_int;

/// Never made: [`ReadySignal::new`] fails, so the other methods are never called.
pub enum ReadySignal {}

impl ReadySignal {
    pub fn new() -> io::Result<Self> {
        Err(io::Error::new(io::ErrorKind::Unsupported, "the ready fd is Linux-only; use recv with a timeout"))
    }

    pub fn settle(&self, _waiting: impl FnOnce() -> bool) {
        match *self {}
    }

    pub fn fd(&self) -> RawFd {
        match *self {}
    }
}
