//! The bounded in-process queues between transports and the bus thread.
//!
//! - [`Inbound`]: everything a transport hands to the bus, on one queue per
//!   bus thread — the bus thread's single wake-up point. Frames and control
//!   requests of one client travel on the same queue, so the bus sees them in
//!   the order the client sent them.
//! - [`Outbound`]: everything the bus hands to one client's transport, on one
//!   bounded queue per client. When it is full the bus applies the receiving
//!   port's overflow policy (drop and count, or wait).
//!
//! Items are plain values with frames inline: passing a frame allocates
//! nothing. Only control items carry owned strings.

use std::sync::Arc;

use crossbeam_channel::{Receiver, Sender, TrySendError};
use fieldhub_proto::wire::{ErrorCode, PortOptions};
use fieldhub_proto::{Frame, FrameMeta};

use crate::control::{ControlRequest, ControlResult};
use crate::credit::TxCredit;
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
}

/// A fresh inbound queue for one bus thread: transports hold [`InboxSender`]s.
pub fn inbox() -> (Sender<Inbound>, Receiver<Inbound>) {
    crossbeam_channel::bounded(INBOX_CAPACITY)
}

/// The sending side of one client's outbound queue.
///
/// One FIFO carries frames and replies alike, so a reply (a `PONG`) is
/// written after every frame queued before it. Frames may fill it only up to
/// [`OUTBOX_FRAMES`]; the rest is reserved for replies.
#[derive(Clone, Debug)]
pub struct Outbox(Sender<Outbound>);

/// Why an item was not queued.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Refused {
    /// No room (for frames: the frame share is used up).
    Full,
    /// The client's transport has gone.
    Gone,
}

impl Outbox {
    /// Whether the frame share has room. Only the bus thread queues frames
    /// and the writer only takes items out, so the answer stays true until
    /// the bus queues something (give or take the session's single fatal
    /// error report, which ends the connection anyway).
    pub fn has_frame_room(&self) -> bool {
        self.0.len() < OUTBOX_FRAMES
    }

    /// Queue a frame if the frame share has room.
    pub fn try_frame(&self, item: Outbound) -> Result<(), Refused> {
        if !self.has_frame_room() {
            return Err(Refused::Full);
        }
        self.try_control(item)
    }

    /// Queue a reply or report, using the reserve if need be.
    pub fn try_control(&self, item: Outbound) -> Result<(), Refused> {
        self.0.try_send(item).map_err(|e| match e {
            TrySendError::Full(_) => Refused::Full,
            TrySendError::Disconnected(_) => Refused::Gone,
        })
    }
}

/// A fresh outbound queue for one client.
pub fn outbox() -> (Outbox, Receiver<Outbound>) {
    let (tx, rx) = crossbeam_channel::bounded(OUTBOX_FRAMES + OUTBOX_CONTROL_RESERVE);
    (Outbox(tx), rx)
}

/// Sending half of the inbound queue.
pub type InboxSender = Sender<Inbound>;

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
