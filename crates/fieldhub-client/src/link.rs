//! What a [`Client`](crate::Client) needs from its transport: the [`Link`]
//! trait, and [`connect`], which picks the transport a URL names.
//!
//! A link moves messages; it knows nothing of ports, requests or the
//! receive queue. Each transport implements the trait once: `stream.rs`
//! (TCP, unix socket, serial device), `shm.rs` (`shm://`) and `ivshmem.rs`
//! (`ivshmem://`). Every one of them greets the hub through the one
//! [`handshake`](crate::handshake::handshake), and its reader hands raw message
//! bodies to the one dispatcher (`dispatch.rs`).
//!
//! Invariants every link keeps:
//!
//! - Messages leave in the order they were sent and arrive in the order the
//!   hub sent them.
//! - No call waits on a hub that is gone: once the link ends (the hub's end
//!   noticed, or [`Link::close`]), sends fail with [`SendFail::Closed`] and
//!   the reader returns after the messages published before the end.
//! - Sending a frame allocates nothing.

use std::sync::Arc;
use std::time::{Duration, Instant};

use fieldhub_proto::Frame;

use crate::handshake::Session;
use crate::url::HubUrl;
use crate::{ivshmem, shm, stream, ClientError, ClientOptions};

/// Why a message could not be sent.
pub(crate) enum SendFail {
    /// No room within the timeout.
    Timeout,
    /// The link has ended.
    Closed,
}

/// What the reader does after handing over one message.
pub(crate) enum Flow {
    Continue,
    /// End the link with this reason.
    Close(String),
    /// Stop reading without ending the link (nobody receives any more).
    Leave,
}

/// One transport under a client, after a successful handshake.
///
/// The client runs two threads per link: the reader ([`Link::receive`]) and
/// the link's own ([`Link::tend`]). Any other thread may send.
pub(crate) trait Link: Send + Sync {
    /// Send one frame on the port with handle `port`, waiting at most
    /// `timeout` (`None`: no limit) for room.
    fn send_frame(&self, port: u16, frame: &Frame, timeout: Option<Duration>) -> Result<(), SendFail>;

    /// Send one encoded message (a request, `GOODBYE`), waiting at most
    /// `timeout` (`None`: no limit) for room.
    fn send_message(&self, message: Vec<u8>, timeout: Option<Duration>) -> Result<(), SendFail>;

    /// The reader thread: hand each message body from the hub, in order, to
    /// `deliver` until it says stop or the link ends. Returns why the link
    /// ended; `None` when `deliver` said [`Flow::Leave`].
    fn receive(&self, deliver: &mut dyn FnMut(&[u8]) -> Flow) -> Option<String>;

    /// The link's own thread, for what it does besides reading: the stream's
    /// writer, the shared-memory links' watch for the hub's end. Runs until
    /// the link ends; returns why, if this thread is the one that noticed.
    fn tend(&self) -> Option<String>;

    /// Wait until the hub delivers a message, `ready()` holds, the link ends
    /// or `deadline` passes — where the link can be woken by the hub
    /// directly, which spares the application thread a second wake-up by the
    /// reader. Links without such a wake-up return at once.
    fn wait_for_delivery(&self, _deadline: Option<Instant>, _ready: &dyn Fn() -> bool) {}

    /// End the link: let what is queued reach the hub (bounded by
    /// [`GOODBYE_GRACE`](crate::GOODBYE_GRACE)), then release the hub and
    /// wake both of the link's threads so they return.
    fn close(&self);
}

/// Connect to the hub at `url` over the transport it names and perform the
/// handshake.
pub(crate) fn connect(url: &str, options: &ClientOptions) -> Result<(Arc<dyn Link>, Session), ClientError> {
    let parsed = HubUrl::parse(url).map_err(|why| ClientError::InvalidUrl { url: url.into(), why })?;
    Ok(match &parsed {
        HubUrl::Shm { name, busy_poll } => {
            let (link, session) = shm::ShmLink::connect(url, name, *busy_poll, options)?;
            (Arc::new(link), session)
        }
        HubUrl::Ivshmem(path) => {
            let (link, session) = ivshmem::IvshmemLink::connect(url, path, options)?;
            (Arc::new(link), session)
        }
        HubUrl::Tcp { .. } | HubUrl::Unix(_) | HubUrl::Serial(_) => {
            let (link, session) = stream::StreamLink::connect(url, &parsed, options)?;
            (Arc::new(link), session)
        }
    })
}
