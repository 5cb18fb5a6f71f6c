//! What the bus hands to one client, and where it puts it.
//!
//! [`Outbound`] is one item for one client: a frame, a reply, a report.
//! [`Outbox`] is where the bus queues a client's items. It is a trait object:
//! the bus knows nothing of transports, it only asks a client's outbox to take
//! an item, and each transport brings its own kind ([`QueueOutbox`] for
//! sessions served by a thread or the reactor, a shared-memory ring for
//! `shm://` and ivshmem clients).
//!
//! Invariants, for every kind:
//! - Never waits on the client. An outbox answers at once: taken,
//!   [`Refused::Full`] or [`Refused::Gone`] (a queue's lock is held for one
//!   push, or one take of a few dozen items, never across anything that waits). A client whose session has ended answers `Gone`
//!   even when its queue is full, so the bus stops waiting for it at once.
//! - One FIFO carries frames and replies alike, so a reply (a `PONG`) reaches
//!   the client after every frame queued before it. Frames may fill only a
//!   frame share; the rest is reserved for replies and reports.
//! - Items are plain values with frames inline: queueing a frame allocates
//!   nothing. Only control items carry owned strings.

use std::collections::VecDeque;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Condvar, Mutex, MutexGuard};

use fieldhub_proto::fate::{ChannelCondition, DropReason};
use fieldhub_proto::wire::{self, BatchEncoder, ChannelFlags, ErrorCode, ErrorReport, Message, Packer};
use fieldhub_proto::{Frame, FrameMeta};

use crate::inbox::Wake;

/// Frames one queue outbox holds: the depth of a stream client's receive
/// buffer in the hub before the receiving port's overflow policy applies.
pub const OUTBOX_FRAMES: usize = 16 * 1024;
/// Slots kept free of frames for replies and reports, so a client whose
/// frame queue is full still gets its `PONG`, `PORT_OPENED` and errors in order.
/// A client that lets this many replies pile up unread is disconnected.
pub const OUTBOX_CONTROL_RESERVE: usize = 1024;

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
    /// `TX_DROPPED`: frames the port sent that are off the bus, and why.
    TxDropped {
        port: u16,
        reason: DropReason,
        dropped: u32,
    },
    /// `CHANNEL_STATE`: the port's channel changed condition.
    ChannelState {
        port: u16,
        condition: ChannelCondition,
        missed: u32,
        text: String,
    },
    PortOpened {
        request: u32,
        port: u16,
        channel_id: u16,
        port_id: u32,
        channel_flags: ChannelFlags,
    },
    PortClosed {
        port: u16,
    },
    Pong {
        nonce: u64,
    },
    /// `GRANT`: virtual bus time reached `now_ns`; the participant steps on.
    Grant {
        now_ns: u64,
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

    /// This item as it goes on the wire: a frame record, or a message.
    pub fn wire(&self) -> Wire<'_> {
        let report = |code: ErrorCode, request, fatal, text| ErrorReport { code: code as u16, request, fatal, text };
        Wire::Message(match self {
            Outbound::Frame { port, frame, meta } => return Wire::Frame(*port, frame, meta),
            &Outbound::RxOverflow { port, dropped } => Message::RxOverflow(wire::RxOverflow { port, dropped }),
            &Outbound::TxDropped { port, reason, dropped } => {
                Message::TxDropped(wire::TxDropped { port, reason: reason as u16, dropped })
            }
            Outbound::ChannelState { port, condition, missed, text } => Message::ChannelState(wire::ChannelState {
                port: *port,
                condition: *condition as u8,
                missed: *missed,
                text,
            }),
            &Outbound::PortOpened { request, port, channel_id, port_id, channel_flags } => {
                Message::PortOpened(wire::PortOpened { request, port, channel_id, port_id, channel_flags })
            }
            &Outbound::PortClosed { port } => Message::PortClosed { port },
            &Outbound::Pong { nonce } => Message::Pong { nonce },
            &Outbound::Grant { now_ns } => Message::Grant { now_ns },
            Outbound::Stats { request, json } => Message::Stats { request: *request, json },
            Outbound::Error { code, request, fatal, text } => Message::Error(report(*code, *request, *fatal, text)),
            Outbound::Goodbye { code, text } => Message::Goodbye(report(*code, 0, true, text)),
        })
    }

    /// Append this item as one wire message (a frame as a one-record
    /// `FRAMES`). Allocates nothing once `out` has grown.
    pub fn encode(&self, out: &mut Vec<u8>) {
        match self.wire() {
            Wire::Frame(port, frame, meta) => {
                let mut batch = BatchEncoder::begin(out);
                batch.push(out, port, frame, meta);
                batch.finish(out);
            }
            Wire::Message(message) => wire::encode(out, &message),
        }
    }

    /// Append this item to a stream's packer (frames join the open batch).
    pub fn pack(&self, packer: &mut Packer) {
        match self.wire() {
            Wire::Frame(port, frame, meta) => packer.push_frame(port, frame, meta),
            Wire::Message(message) => packer.push_message(&message),
        }
    }
}

/// An [`Outbound`] item as it goes on the wire.
pub enum Wire<'a> {
    /// A frame record for the client's port.
    Frame(u16, &'a Frame, &'a FrameMeta),
    Message(Message<'a>),
}

/// Why an item was not queued.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Refused {
    /// No room (for frames: the frame share is used up).
    Full,
    /// The client's session has ended.
    Gone,
}

/// One client's outbox, as the bus sees it. Implemented per transport.
pub trait OutboxSink: Send + Sync + std::fmt::Debug {
    /// Whether the frame share has room. Only the bus queues, so the answer
    /// stays true until the bus queues something.
    fn has_frame_room(&self) -> bool;
    /// Whether the client's session has ended.
    fn is_gone(&self) -> bool;
    /// Queue a frame for the client's port `port` if the frame share has room.
    fn try_frame(&self, port: u16, frame: &Frame, meta: &FrameMeta) -> Result<(), Refused>;
    /// Queue a reply or report, using the reserve if need be.
    fn try_control(&self, item: Outbound) -> Result<(), Refused>;
    /// The bus waits for room (a lossless port is full): tell it when the
    /// client takes items, if this kind of outbox can. Outboxes that cannot
    /// are re-checked by the bus on a short deadline.
    fn want_room(&self) {}
    /// The bus finished a round: wake the consumer if items wait for it
    /// (once per round, not per item). The bus calls it for every client at
    /// the end of every round, so a sink may keep what it took for the
    /// round's writes until then (the shared-memory link keeps its lock).
    fn flush(&self) {}
}

/// A client's outbox, cheap to clone.
#[derive(Clone, Debug)]
pub struct Outbox(Arc<dyn OutboxSink>);

impl Outbox {
    pub fn new(sink: Arc<dyn OutboxSink>) -> Self {
        Self(sink)
    }

    pub fn has_frame_room(&self) -> bool {
        self.0.has_frame_room()
    }

    pub fn is_gone(&self) -> bool {
        self.0.is_gone()
    }

    pub fn try_frame(&self, port: u16, frame: &Frame, meta: &FrameMeta) -> Result<(), Refused> {
        self.0.try_frame(port, frame, meta)
    }

    pub fn try_control(&self, item: Outbound) -> Result<(), Refused> {
        self.0.try_control(item)
    }

    pub fn want_room(&self) {
        self.0.want_room()
    }

    pub fn flush(&self) {
        self.0.flush()
    }
}

/// How a [`QueueOutbox`] wakes its consumer when items arrive; `None` for a
/// consumer thread that blocks on the queue itself.
pub type Notify = Option<Box<dyn Fn() + Send + Sync>>;

/// A bounded queue drained by the client's transport (the reactor, or a
/// writer thread). Its memory follows its use: an idle client's queue holds
/// nothing, and what a burst made it grow is given back once it drains.
pub struct QueueOutbox {
    /// Taken by the bus to queue and by the consumer to take, one item at a
    /// time: never held across anything that waits.
    items: Mutex<VecDeque<Outbound>>,
    /// Wakes a consumer thread waiting in [`QueueOutbox::take_timeout`].
    arrived: Condvar,
    /// Set by the consumer when it stops taking items: the session ended.
    gone: AtomicBool,
    /// Items were queued since the consumer was last woken.
    unnotified: AtomicBool,
    notify: Notify,
    /// The bus waits for this client to take frames.
    room_wanted: AtomicBool,
    bus: Arc<dyn Wake>,
}

/// Items a drained queue keeps room for; beyond, it gives memory back.
const KEPT_CAPACITY: usize = 256;

impl std::fmt::Debug for QueueOutbox {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("QueueOutbox").field("len", &self.items().len()).finish_non_exhaustive()
    }
}

impl QueueOutbox {
    /// A fresh outbox whose consumer is woken through `notify` (`None`: a
    /// consumer thread that waits in [`QueueOutbox::take_timeout`]).
    pub fn new(notify: Notify, bus: Arc<dyn Wake>) -> Arc<Self> {
        Arc::new(Self {
            items: Mutex::new(VecDeque::new()),
            arrived: Condvar::new(),
            gone: AtomicBool::new(false),
            unnotified: AtomicBool::new(false),
            notify,
            room_wanted: AtomicBool::new(false),
            bus,
        })
    }

    fn items(&self) -> MutexGuard<'_, VecDeque<Outbound>> {
        self.items.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    /// Consumer: the next item, if one waits.
    pub fn take(&self) -> Option<Outbound> {
        let mut items = self.items();
        let item = items.pop_front();
        if items.is_empty() && items.capacity() > KEPT_CAPACITY {
            items.shrink_to(KEPT_CAPACITY);
        }
        item
    }

    /// Consumer: move up to `max` waiting items to `into`, in order, under
    /// one lock.
    pub fn take_into(&self, into: &mut Vec<Outbound>, max: usize) {
        let mut items = self.items();
        let n = items.len().min(max);
        into.extend(items.drain(..n));
        if items.is_empty() && items.capacity() > KEPT_CAPACITY {
            items.shrink_to(KEPT_CAPACITY);
        }
    }

    /// Consumer thread: the next item, waiting at most `timeout` for it.
    pub fn take_timeout(&self, timeout: std::time::Duration) -> Option<Outbound> {
        let items = self.items();
        let (mut items, _) = self
            .arrived
            .wait_timeout_while(items, timeout, |items| items.is_empty())
            .unwrap_or_else(|poisoned| poisoned.into_inner());
        items.pop_front()
    }

    /// Consumer thread: the next item, sleeping until one comes, the outbox
    /// is closed ([`QueueOutbox::close`] wakes it) or `timeout` passes
    /// (`None`: no limit). An idle consumer waits here without waking.
    pub fn take_blocking(&self, timeout: Option<std::time::Duration>) -> Option<Outbound> {
        let items = self.items();
        let waiting = |items: &mut VecDeque<Outbound>| items.is_empty() && !self.is_gone();
        let mut items = match timeout {
            Some(timeout) => {
                self.arrived
                    .wait_timeout_while(items, timeout, waiting)
                    .unwrap_or_else(|poisoned| poisoned.into_inner())
                    .0
            }
            None => self.arrived.wait_while(items, waiting).unwrap_or_else(|poisoned| poisoned.into_inner()),
        };
        items.pop_front()
    }

    /// Consumer: it took items; wake the bus if it waits for room.
    pub fn took(&self) {
        // SYNC POINT with `want_room`'s SeqCst store: the bus sets the flag,
        // then re-checks the room; the consumer takes, then checks the flag.
        if self.room_wanted.load(Ordering::SeqCst) && self.room_wanted.swap(false, Ordering::SeqCst) {
            self.bus.poke();
        }
    }

    /// Consumer: it takes nothing more (the session ended). The bus hears
    /// `Gone` from now on and stops waiting for this client.
    pub fn close(&self) {
        // SYNC POINT with `is_gone`'s Acquire load.
        self.gone.store(true, Ordering::Release);
        *self.items() = VecDeque::new();
        self.arrived.notify_all();
        self.bus.poke();
    }

    /// Consumer: it was woken; later items wake it again.
    pub fn rearm(&self) {
        // SYNC POINT with `flush`'s swap: an item queued after this store
        // makes the next flush notify.
        self.unnotified.store(false, Ordering::SeqCst);
    }

    /// Queue `item` if fewer than `limit` items wait.
    fn push(&self, item: Outbound, limit: usize) -> Result<(), Refused> {
        if self.is_gone() {
            return Err(Refused::Gone);
        }
        let mut items = self.items();
        if items.len() >= limit {
            return Err(Refused::Full);
        }
        items.push_back(item);
        drop(items);
        self.unnotified.store(true, Ordering::Relaxed);
        if self.notify.is_none() {
            self.arrived.notify_one();
        }
        Ok(())
    }
}

impl OutboxSink for QueueOutbox {
    fn has_frame_room(&self) -> bool {
        self.items().len() < OUTBOX_FRAMES
    }

    fn is_gone(&self) -> bool {
        self.gone.load(Ordering::Acquire)
    }

    fn try_frame(&self, port: u16, frame: &Frame, meta: &FrameMeta) -> Result<(), Refused> {
        self.push(Outbound::Frame { port, frame: frame.clone(), meta: *meta }, OUTBOX_FRAMES)
    }

    fn try_control(&self, item: Outbound) -> Result<(), Refused> {
        self.push(item, OUTBOX_FRAMES + OUTBOX_CONTROL_RESERVE)
    }

    fn want_room(&self) {
        self.room_wanted.store(true, Ordering::SeqCst);
    }

    fn flush(&self) {
        if let Some(notify) = &self.notify {
            // SYNC POINT with `rearm`.
            if self.unnotified.load(Ordering::Relaxed) && self.unnotified.swap(false, Ordering::SeqCst) {
                notify();
            }
        }
    }
}

/// An outbox nobody drains, and its consumer side to read it in tests that
/// step the bus themselves.
pub fn test_outbox() -> (Outbox, Arc<QueueOutbox>) {
    let queue = QueueOutbox::new(None, Arc::new(crate::testing::SteppedByHand));
    (Outbox::new(queue.clone()), queue)
}

impl QueueOutbox {
    /// Every item waiting, taken.
    pub fn drain(&self) -> Vec<Outbound> {
        std::iter::from_fn(|| self.take()).collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_blocked_consumer_wakes_for_an_item_and_for_the_close() {
        let (outbox, queue) = test_outbox();
        let waiter = {
            let queue = Arc::clone(&queue);
            std::thread::spawn(move || (queue.take_blocking(None).is_some(), queue.take_blocking(None).is_none()))
        };
        outbox.try_control(Outbound::Pong { nonce: 7 }).unwrap();
        while !queue.items().is_empty() {
            std::thread::yield_now();
        }
        queue.close();
        assert_eq!(waiter.join().unwrap(), (true, true), "the item, then None for the close");
        assert!(queue.take_blocking(None).is_none(), "a closed outbox does not wait");
    }
}
