//! `shm://` on Windows: not there. Shared memory (memfd segments, futexes
//! between processes, `SCM_RIGHTS`) is Linux-only; connecting says so with
//! [`ClientError::Unsupported`]. `ShmLink` has no values, so the `Link`
//! methods are never called.

use std::path::Path;
use std::time::{Duration, Instant};

use fieldhub_proto::Frame;

use crate::handshake::Session;
use crate::link::{Flow, Link, SendFail, Took};
use crate::{ClientError, ClientOptions};

/// A shared-memory link, which this platform never has.
pub(crate) enum ShmLink {}

impl ShmLink {
    /// Refuse `shm://`: Linux-only.
    pub fn connect(
        url: &str,
        _name: &str,
        _dir: Option<&Path>,
        _busy_poll: bool,
        _options: &ClientOptions,
    ) -> Result<(Self, Session), ClientError> {
        Err(ClientError::Unsupported { url: url.into(), what: "shared memory (shm://)" })
    }
}

impl Link for ShmLink {
    fn send_frame(&self, _: u16, _: &Frame, _: u64, _: Option<Duration>) -> Result<(), SendFail> {
        match *self {}
    }
    fn send_message(&self, _: Vec<u8>, _: Option<Duration>) -> Result<(), SendFail> {
        match *self {}
    }
    fn direct(&self) -> bool {
        match *self {}
    }
    fn take(&self, _: Option<Instant>, _: &dyn Fn() -> bool, _: &mut dyn FnMut(&[u8]) -> Flow) -> Took {
        match *self {}
    }
    fn wait(&self, _: Option<Instant>, _: &dyn Fn() -> bool) -> bool {
        match *self {}
    }
    fn notify(&self) {
        match *self {}
    }
    fn tend(&self) -> Option<String> {
        match *self {}
    }
    fn close(&self) {
        match *self {}
    }
}
