//! The bounded in-process queues between transports and the bus thread.
//!
//! - [`Inbound`]: everything a stream transport hands to the bus, on one
//!   queue per bus thread ([`Inbox`]). Frames and control requests of one
//!   client travel on the same queue, so the bus sees them in the order the
//!   client sent them. Every send rings the hub's doorbell — the one
//!   shared-memory clients ring too — so the bus thread has a single wait
//!   point for all its input.
//! - [`Outbound`]: everything the bus hands to one client, through that
//!   client's [`Outbox`]: a bounded queue drained by the client's writer
//!   thread (stream clients), or the client's shared-memory ring, written by
//!   the bus thread itself. Either way, when the frame share is full the bus
//!   applies the receiving port's overflow policy (drop and count, or wait).
//!
//! Items are plain values with frames inline: passing a frame allocates
//! nothing. Only control items carry owned strings.

use std::sync::Arc;

use crossbeam_channel::{Receiver, Sender, TryRecvError, TrySendError};
use fieldhub_proto::wire::{self, BatchEncoder, ErrorCode, ErrorReport, Message, PortOptions};
use fieldhub_proto::{Frame, FrameMeta};
use fieldhub_shm::BellSegment;

use crate::control::{ControlRequest, ControlResult};
use crate::credit::TxCredit;
use crate::transport::shm::ShmLink;
use tokio::sync::oneshot;

/// Hub-wide client id, as sent in `WELCOME`.
pub type ClientId = u32;

/// Capacity of the bus thread's inbound queue, in items.
pub const INBOX_CAPACITY: usize = 64 * 1024;
/// Frames one client's outbound queue holds: the depth of its receive
/// buffer before the overflow policy applies.
pub const OUTBOX_FRAMES: usize = 16 * 1024;
/// Slots kept free of frames for replies and reports, so a client whose
/// frame queue is full still gets its `PONG`, `PORT_OPENED` and errors in order.
/// A client that lets this many replies pile up unread is disconnected.
pub const OUTBOX_CONTROL_RESERVE: usize = 1024;

/// Closes one client's connection from the bus side.
pub type HangUp = Box<dyn Fn() + Send>;

/// A transport's request to the bus.
pub enum Inbound {
    /// A client finished its handshake. `hang_up` closes its connection at
    /// once, for when even an error report cannot be queued to it.
    /// `credit` bounds the frames it may have waiting in the bus.
    Attach { client: ClientId, name: String, outbox: Outbox, hang_up: HangUp, credit: Arc<TxCredit> },
    /// `OPEN_PORT`.
    OpenPort { client: ClientId, request: u32, options: PortOptions, channel: String, port_name: String },
    /// `CLOSE_PORT`.
    ClosePort { client: ClientId, port: u16 },
    /// One frame record of a `FRAMES` message.
    Frame { client: ClientId, port: u16, frame: Frame },
    /// `PING`: answered once everything the client sent before it is on the bus.
    Ping { client: ClientId, nonce: u64 },
    /// `STATS_REQUEST`.
    Stats { client: ClientId, request: u32 },
    /// A control-plane request (HTTP API); applied between two frames.
    Control { request: ControlRequest, reply: oneshot::Sender<ControlResult> },
    /// The client's connection ended; `reason` is for the log.
    Detach { client: ClientId, reason: String },
    /// Stop the bus: say goodbye to every client and return.
    Shutdown,
}

/// The bus's message to one client.
#[derive(Debug)]
pub enum Outbound {
    Frame {
        port: u16,
        frame: Frame,
        meta: FrameMeta,
    },
    RxOverflow {
        port: u16,
        dropped: u32,
    },
    PortOpened {
        request: u32,
        port: u16,
        channel_id: u16,
        port_id: u32,
    },
    PortClosed {
        port: u16,
    },
    Pong {
        nonce: u64,
    },
    /// `STATS`: the statistics document.
    Stats {
        request: u32,
        json: String,
    },
    /// An error report; `fatal` ones make the transport close the connection
    /// after writing it.
    Error {
        code: ErrorCode,
        request: u32,
        fatal: bool,
        text: String,
    },
    /// The hub is going away; the transport writes it and closes.
    Goodbye {
        code: ErrorCode,
        text: String,
    },
}

impl Outbound {
    /// Whether the transport closes the connection after this item.
    pub fn ends_connection(&self) -> bool {
        matches!(self, Outbound::Error { fatal: true, .. } | Outbound::Goodbye { .. })
    }

    /// Append this item as one wire message (a frame as a one-record
    /// `FRAMES`). Allocates nothing once `out` has grown.
    pub fn encode(&self, out: &mut Vec<u8>) {
        let report = |code: ErrorCode, request, fatal, text| ErrorReport { code: code as u16, request, fatal, text };
        match self {
            Outbound::Frame { port, frame, meta } => {
                let mut batch = BatchEncoder::begin(out);
                batch.push(out, *port, frame, meta);
                batch.finish(out);
            }
            &Outbound::RxOverflow { port, dropped } => {
                wire::encode(out, &Message::RxOverflow(wire::RxOverflow { port, dropped }))
            }
            &Outbound::PortOpened { request, port, channel_id, port_id } => {
                wire::encode(out, &Message::PortOpened(wire::PortOpened { request, port, channel_id, port_id }))
            }
            &Outbound::PortClosed { port } => wire::encode(out, &Message::PortClosed { port }),
            &Outbound::Pong { nonce } => wire::encode(out, &Message::Pong { nonce }),
            Outbound::Stats { request, json } => wire::encode(out, &Message::Stats { request: *request, json }),
            Outbound::Error { code, request, fatal, text } => {
                wire::encode(out, &Message::Error(report(*code, *request, *fatal, text)))
            }
            Outbound::Goodbye { code, text } => wire::encode(out, &Message::Goodbye(report(*code, 0, true, text))),
        }
    }
}

/// The bus thread's input: the inbound queue of stream transports and the
/// hub's doorbell, which stream senders and shared-memory clients ring.
pub struct Inbox {
    queue: Receiver<Inbound>,
    bell: Arc<BellSegment>,
}

impl Inbox {
    /// The next waiting request; `Err(Disconnected)` once every sender is gone.
    pub fn try_recv(&self) -> Result<Inbound, TryRecvError> {
        self.queue.try_recv()
    }

    /// Whether a request waits.
    pub fn has_waiting(&self) -> bool {
        !self.queue.is_empty()
    }

    /// The hub's doorbell segment: the bus thread sleeps on its bell.
    pub fn bell(&self) -> &BellSegment {
        &self.bell
    }
}

/// The sending half of the inbound queue: every send rings the doorbell.
#[derive(Clone)]
pub struct InboxSender {
    queue: Sender<Inbound>,
    bell: Arc<BellSegment>,
}

/// A request was not queued: the bus thread has stopped (or, for
/// [`InboxSender::send_timeout`], did not make room in time).
#[derive(Debug, PartialEq, Eq)]
pub struct NotQueued;

impl InboxSender {
    /// Queue a request, waiting while the queue is full.
    pub fn send(&self, request: Inbound) -> Result<(), NotQueued> {
        self.queue.send(request).map_err(|_| NotQueued)?;
        self.bell.bell().ring();
        Ok(())
    }

    /// Queue a request, waiting at most `timeout` while the queue is full.
    pub fn send_timeout(&self, request: Inbound, timeout: std::time::Duration) -> Result<(), NotQueued> {
        self.queue.send_timeout(request, timeout).map_err(|_| NotQueued)?;
        self.bell.bell().ring();
        Ok(())
    }
}

/// A fresh inbound queue for one bus thread, ringing `bell`.
pub fn inbox(bell: Arc<BellSegment>) -> (InboxSender, Inbox) {
    let (queue, receiver) = crossbeam_channel::bounded(INBOX_CAPACITY);
    (InboxSender { queue, bell: Arc::clone(&bell) }, Inbox { queue: receiver, bell })
}

/// Where the bus queues one client's outbound items.
///
/// One FIFO carries frames and replies alike, so a reply (a `PONG`) is
/// written after every frame queued before it. Frames may fill it only up to
/// a frame share ([`OUTBOX_FRAMES`] items of a stream client's queue, or
/// [`FRAME_SHARE_SLOTS`](crate::transport::shm::FRAME_SHARE_SLOTS) slots of
/// a shared-memory client's ring); the rest is reserved for replies.
#[derive(Clone, Debug)]
pub struct Outbox(Route);

#[derive(Clone, Debug)]
enum Route {
    /// A queue drained by the client's writer thread.
    Stream(Sender<Outbound>),
    /// The client's shared-memory ring, written by the bus thread.
    Shm(Arc<ShmLink>),
}

/// Why an item was not queued.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Refused {
    /// No room (for frames: the frame share is used up).
    Full,
    /// The client's transport has gone.
    Gone,
}

impl Outbox {
    /// An outbox writing into a shared-memory client's ring.
    pub fn shm(link: Arc<ShmLink>) -> Self {
        Self(Route::Shm(link))
    }

    /// The shared-memory link behind this outbox, if it is one.
    pub fn shm_link(&self) -> Option<&Arc<ShmLink>> {
        match &self.0 {
            Route::Shm(link) => Some(link),
            Route::Stream(_) => None,
        }
    }

    /// Whether the frame share has room. Only the bus thread queues frames
    /// and the consumer only takes items out, so the answer stays true until
    /// the bus queues something (give or take the session's single fatal
    /// error report, which ends the connection anyway).
    pub fn has_frame_room(&self) -> bool {
        match &self.0 {
            Route::Stream(queue) => queue.len() < OUTBOX_FRAMES,
            Route::Shm(link) => link.has_frame_room(),
        }
    }

    /// Queue a frame if the frame share has room.
    pub fn try_frame(&self, item: Outbound) -> Result<(), Refused> {
        match &self.0 {
            Route::Stream(_) if !self.has_frame_room() => Err(Refused::Full),
            Route::Stream(_) => self.try_control(item),
            Route::Shm(link) => link.try_frame(&item),
        }
    }

    /// Queue a reply or report, using the reserve if need be.
    pub fn try_control(&self, item: Outbound) -> Result<(), Refused> {
        match &self.0 {
            Route::Stream(queue) => queue.try_send(item).map_err(|e| match e {
                TrySendError::Full(_) => Refused::Full,
                TrySendError::Disconnected(_) => Refused::Gone,
            }),
            Route::Shm(link) => link.try_control(&item),
        }
    }
}

/// A fresh outbound queue for one stream client.
pub fn outbox() -> (Outbox, Receiver<Outbound>) {
    let (tx, rx) = crossbeam_channel::bounded(OUTBOX_FRAMES + OUTBOX_CONTROL_RESERVE);
    (Outbox(Route::Stream(tx)), rx)
}

impl std::fmt::Debug for Inbound {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Inbound::Attach { client, name, .. } => write!(f, "Attach({client}, {name})"),
            Inbound::OpenPort { client, channel, .. } => write!(f, "OpenPort({client}, {channel})"),
            Inbound::ClosePort { client, port } => write!(f, "ClosePort({client}, {port})"),
            Inbound::Frame { client, port, frame } => write!(f, "Frame({client}, {port}, {frame:?})"),
            Inbound::Ping { client, nonce } => write!(f, "Ping({client}, {nonce})"),
            Inbound::Stats { client, request } => write!(f, "Stats({client}, {request})"),
            Inbound::Control { request, .. } => write!(f, "Control({request:?})"),
            Inbound::Detach { client, reason } => write!(f, "Detach({client}, {reason})"),
            Inbound::Shutdown => write!(f, "Shutdown"),
        }
    }
}
