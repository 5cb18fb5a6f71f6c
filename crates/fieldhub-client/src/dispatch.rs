//! What the consumer does with each message from the hub, whatever the link
//! and whoever consumes ([`deliver`]): frames into the receive queue,
//! replies to the request waiting for them, overruns counted — and
//! [`Shared`], the state every thread of a client shares.
//!
//! Invariants: a frame for a port handle that is not open is never
//! delivered (only the consumer — one thread at a time, `receive.rs` —
//! writes `port_channels`); a frame for a lossless port is never dropped:
//! without room for it in the receive queue its message is held back
//! ([`Flow::Hold`]) and stays the next one; any other frame that finds the
//! queue full is dropped and counted, so replies never wait behind unread
//! frames; once the connection has ended every waiting request sees it.
//!
//! The receive queue is a `VecDeque` behind a mutex rather than a channel:
//! nothing blocks on it (waiting is the link's, `Link::wait`), it starts
//! small and grows with use up to [`RECEIVE_QUEUE`] (never per frame in the
//! steady state), and its length is mirrored in an atomic that wait
//! conditions read without the lock.

use std::collections::{HashMap, VecDeque};
use std::sync::atomic::{AtomicBool, AtomicU32, AtomicU64, AtomicU8, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, OnceLock};

use arc_swap::ArcSwapOption;
use fieldhub_proto::limits::MAX_PORTS_PER_CLIENT;
use fieldhub_proto::wire::{self, ChannelFlags, ErrorCode, FrameBatch, Message, PortOpened, PortOptions, TxDropped};
use fieldhub_proto::{Frame, FrameKind, FrameMeta};

use crate::fate::{ChannelCondition, ChannelEvent};
use crate::link::Flow;
use crate::ready::ReadySignal;
use crate::{filter, lock, ClientError, Filter, Received, RECEIVE_QUEUE};

/// `Shared::port_channels` value of a handle that is not open.
pub(crate) const CLOSED_PORT: u32 = u32::MAX;

/// Room the receive queue starts with; it grows (doubling) up to
/// [`RECEIVE_QUEUE`] as a slow reader lets frames pile up.
const QUEUE_START: usize = 1024;

/// What a request waits for.
#[derive(Clone, Copy, PartialEq, Eq, Hash)]
pub(crate) enum Waiting {
    Request(u32),
    Stats(u32),
    Pong(u64),
    PortClosed(u16),
}

/// The hub's answer to a request.
pub(crate) enum Reply {
    Opened(PortOpened),
    Done,
    Stats(String),
    Failed { code: u16, text: String },
}

/// Where the consumer leaves the answer to one request.
#[derive(Default)]
pub(crate) struct ReplySlot {
    reply: Mutex<Option<Reply>>,
    /// `reply` is filled; read in wait conditions without the lock.
    done: AtomicBool,
}

impl ReplySlot {
    pub fn is_done(&self) -> bool {
        // SYNC POINT with `fill`'s Release store (the reply itself is
        // behind the mutex; this only says "look").
        self.done.load(Ordering::Acquire)
    }

    pub fn take(&self) -> Option<Reply> {
        lock(&self.reply).take()
    }

    fn fill(&self, reply: Reply) {
        *lock(&self.reply) = Some(reply);
        self.done.store(true, Ordering::Release);
    }
}

/// State the consumer shares with the application's threads.
pub(crate) struct Shared {
    /// Why the connection ended, once it has.
    closed: Mutex<Option<String>>,
    /// `closed` is set; checked without the lock on the send path.
    is_closed: AtomicBool,
    /// The client is being dropped: consumers and waiters return.
    leaving: AtomicBool,
    /// Requests in flight and where their answers go.
    pub waiters: Mutex<HashMap<Waiting, Arc<ReplySlot>>>,
    /// Non-fatal errors the hub reported outside any request.
    pub errors: Mutex<Vec<(u16, String)>>,
    /// Per port handle: channel id, or `CLOSED_PORT`. Written by the
    /// consumer only, so frames for a closed handle are never delivered.
    port_channels: [AtomicU32; MAX_PORTS_PER_CLIENT],
    pub rx_dropped: [AtomicU64; MAX_PORTS_PER_CLIENT],
    /// Per port handle: frames the hub reported off the bus (`TX_DROPPED`).
    pub tx_dropped: [AtomicU64; MAX_PORTS_PER_CLIENT],
    /// `TX_DROPPED` reports not yet returned by a flush, oldest first.
    pub drops: Mutex<Vec<TxDropped>>,
    /// `CHANNEL_STATE` reports not yet taken by `channel_events`.
    pub channel_events: Mutex<Vec<ChannelEvent>>,
    /// Per port handle: opened with `block_on_overflow`. Written by the
    /// consumer when the port opens, from `opening`.
    lossless: [AtomicBool; MAX_PORTS_PER_CLIENT],
    /// Per port handle: what it may send ([`SendRules`]). Written by the
    /// consumer when the port opens or moves.
    send_rules: [AtomicU8; MAX_PORTS_PER_CLIENT],
    /// `OPEN_PORT` requests in flight: request id → the port's options.
    pub opening: Mutex<HashMap<u32, PortOptions>>,
    /// Per port handle: acceptance filters (`None`: accept everything).
    pub filters: [ArcSwapOption<Box<[Filter]>>; MAX_PORTS_PER_CLIENT],
    /// Created on the first `Client::fileno` call; until then nobody pays for it.
    pub ready: OnceLock<ReadySignal>,
    /// The receive queue: frames taken from the hub and not yet returned
    /// by `recv`, oldest first. Lock order: `queue`, then the ready fd's.
    queue: Mutex<VecDeque<Received>>,
    /// `queue.len()`, for wait conditions.
    queued: AtomicUsize,
    /// Frames the message the consumer holds back needs room for (0: none
    /// is held). A thread that takes a frame while it is set wakes the
    /// waiters, as the room may be enough now.
    held: AtomicUsize,
    /// A thread is the consumer (the token of `receive.rs`).
    pub consuming: AtomicBool,
    /// Virtual time: the bus time of the last `GRANT` ([`NOT_GRANTED`]
    /// before the first). Written by the consumer only.
    pub granted_ns: AtomicU64,
    /// Virtual time: more of this participant's frames waited in the hub
    /// than a real-time transmit queue holds at its last `GRANT` (the hub
    /// said so with `ERROR tx_queue_full` before it): a send that must not
    /// wait reports a full queue. Written by the consumer only.
    pub queue_full: AtomicBool,
    /// `ERROR tx_queue_full` came since the last `GRANT`.
    queue_full_next: AtomicBool,
}

/// `Shared::granted_ns` before the hub's first `GRANT`.
pub(crate) const NOT_GRANTED: u64 = u64::MAX;

/// What a port may send, packed in one byte so `send` checks it with one
/// relaxed load: the port's `FD` and `LISTEN_ONLY` options and whether its
/// channel carries CAN FD (`spec/protocol.md` 6.7). The hub refuses the
/// same frames; checking here reports them to the sender at once.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct SendRules(u8);

impl SendRules {
    const FD: u8 = 0x1;
    const LISTEN_ONLY: u8 = 0x2;
    const CHANNEL_FD: u8 = 0x4;

    fn new(options: PortOptions, channel: ChannelFlags) -> Self {
        let mut bits = 0;
        if options.contains(PortOptions::FD) {
            bits |= Self::FD;
        }
        if options.contains(PortOptions::LISTEN_ONLY) {
            bits |= Self::LISTEN_ONLY;
        }
        if channel.contains(ChannelFlags::CANFD) {
            bits |= Self::CHANNEL_FD;
        }
        Self(bits)
    }

    fn from_bits(bits: u8) -> Self {
        Self(bits)
    }

    fn bits(self) -> u8 {
        self.0
    }

    /// The port options these rules came from.
    fn options(self) -> PortOptions {
        let mut options = PortOptions::empty();
        if self.0 & Self::FD != 0 {
            options |= PortOptions::FD;
        }
        if self.0 & Self::LISTEN_ONLY != 0 {
            options |= PortOptions::LISTEN_ONLY;
        }
        options
    }

    /// Whether the port's channel carries CAN FD frames.
    pub fn channel_fd(self) -> bool {
        self.0 & Self::CHANNEL_FD != 0
    }

    /// Why `frame` may not be sent, if it may not.
    pub fn refusal(self, frame: &Frame) -> Option<&'static str> {
        if self.0 & Self::LISTEN_ONLY != 0 {
            return Some("the port is listen-only and never transmits");
        }
        if frame.kind() != FrameKind::CanFd {
            return None;
        }
        if self.0 & Self::FD == 0 {
            Some("the port was opened without FD, so it cannot send CAN FD frames (open it with FD, as CAN_RAW_FD_FRAMES)")
        } else if self.0 & Self::CHANNEL_FD == 0 {
            Some("its channel is classic CAN and cannot carry CAN FD frames (configure the channel with protocol = \"canfd\")")
        } else {
            None
        }
    }
}

impl Shared {
    /// What port `handle` may send.
    pub fn send_rules(&self, handle: u16) -> SendRules {
        self.send_rules.get(handle as usize).map_or(SendRules(0), |r| SendRules(r.load(Ordering::Relaxed)))
    }

    pub fn new() -> Self {
        Self {
            closed: Mutex::new(None),
            is_closed: AtomicBool::new(false),
            leaving: AtomicBool::new(false),
            waiters: Mutex::new(HashMap::new()),
            errors: Mutex::new(Vec::new()),
            port_channels: std::array::from_fn(|_| AtomicU32::new(CLOSED_PORT)),
            rx_dropped: std::array::from_fn(|_| AtomicU64::new(0)),
            tx_dropped: std::array::from_fn(|_| AtomicU64::new(0)),
            drops: Mutex::new(Vec::new()),
            channel_events: Mutex::new(Vec::new()),
            lossless: std::array::from_fn(|_| AtomicBool::new(false)),
            send_rules: std::array::from_fn(|_| AtomicU8::new(0)),
            opening: Mutex::new(HashMap::new()),
            filters: std::array::from_fn(|_| ArcSwapOption::empty()),
            ready: OnceLock::new(),
            queue: Mutex::new(VecDeque::with_capacity(QUEUE_START)),
            queued: AtomicUsize::new(0),
            held: AtomicUsize::new(0),
            consuming: AtomicBool::new(false),
            granted_ns: AtomicU64::new(NOT_GRANTED),
            queue_full: AtomicBool::new(false),
            queue_full_next: AtomicBool::new(false),
        }
    }

    /// The connection has ended for `reason` (the first reason given wins).
    /// Waiters see it in their conditions; the caller wakes them
    /// (`Link::notify`).
    pub fn close(&self, reason: String) {
        let mut closed = lock(&self.closed);
        if closed.is_none() {
            *closed = Some(reason);
        }
        self.is_closed.store(true, Ordering::Release);
        drop(closed);
        lock(&self.waiters).clear();
        if let Some(ready) = self.ready.get() {
            ready.settle(|| true);
        }
    }

    /// Whether the connection has ended.
    pub fn is_closed(&self) -> bool {
        // SYNC POINT with `close`'s Release store: a dead connection fails
        // a send at once instead of queueing into the void.
        self.is_closed.load(Ordering::Acquire)
    }

    pub fn closed_error(&self) -> ClientError {
        let reason = lock(&self.closed).clone().unwrap_or_else(|| "the connection ended".into());
        ClientError::Closed { reason }
    }

    /// The client is being dropped: whoever consumes or waits returns.
    pub fn leave(&self) {
        self.leaving.store(true, Ordering::Release);
    }

    pub fn is_leaving(&self) -> bool {
        // SYNC POINT with `leave`'s Release store.
        self.leaving.load(Ordering::Acquire)
    }

    /// Whether frames wait in the receive queue.
    pub fn has_frames(&self) -> bool {
        // Acquire: pairs with the Release stores under the queue lock; the
        // frame itself is then taken under the lock.
        self.queued.load(Ordering::Acquire) > 0
    }

    /// Whether the message the consumer held back would fit now (or none
    /// is held).
    pub fn has_room_for_held(&self) -> bool {
        self.queued.load(Ordering::Acquire) + self.held.load(Ordering::Acquire) <= RECEIVE_QUEUE
    }

    /// The oldest queued frame, and whether a consumer waits for the room
    /// its taking made (then the caller wakes the waiters).
    pub fn pop_frame(&self) -> Option<(Received, bool)> {
        let mut queue = lock(&self.queue);
        let frame = queue.pop_front()?;
        self.queued.store(queue.len(), Ordering::Release);
        self.settle_ready(&queue);
        drop(queue);
        Some((frame, self.held.load(Ordering::Acquire) != 0))
    }

    /// Make the ready fd (if there is one) readable exactly while frames
    /// wait or the connection has ended.
    pub fn settle_ready_now(&self) {
        let queue = lock(&self.queue);
        self.settle_ready(&queue);
    }

    /// Under the queue lock, so the last change to the queue decides
    /// (`ready.rs`).
    fn settle_ready(&self, queue: &VecDeque<Received>) {
        if let Some(ready) = self.ready.get() {
            ready.settle(|| !queue.is_empty() || self.is_closed());
        }
    }

    /// Hand `reply` to whoever waits for `key`; false when nobody does.
    fn reply(&self, key: Waiting, reply: Reply) -> bool {
        let slot = lock(&self.waiters).remove(&key);
        match slot {
            Some(slot) => {
                slot.fill(reply);
                true
            }
            None => false,
        }
    }

    /// Queue the frames of `batch` for `recv`: filtered, frames for closed
    /// ports skipped, non-lossless frames that find the queue full dropped
    /// and counted. A batch with a frame for a lossless port that does not
    /// fit whole is not taken at all: [`Flow::Hold`].
    fn queue_frames(&self, batch: &FrameBatch<'_>) -> Flow {
        let mut queue = lock(&self.queue);
        let open_lossless = |port: u16| {
            let port = port as usize;
            port < MAX_PORTS_PER_CLIENT
                && self.lossless[port].load(Ordering::Relaxed)
                && self.port_channels[port].load(Ordering::Relaxed) != CLOSED_PORT
        };
        if queue.len() + batch.len() > RECEIVE_QUEUE && batch.iter().any(|r| open_lossless(r.port)) {
            self.held.store(batch.len(), Ordering::Release);
            return Flow::Hold;
        }
        if self.held.load(Ordering::Relaxed) != 0 {
            // Only the consumer writes it, under the queue lock.
            self.held.store(0, Ordering::Relaxed);
        }
        let before = queue.len();
        for record in batch.iter() {
            let Some(slot) = self.port_channels.get(record.port as usize) else {
                continue;
            };
            let channel = slot.load(Ordering::Relaxed);
            if channel == CLOSED_PORT {
                continue;
            }
            let filters = self.filters[record.port as usize].load();
            if !filter::passes(filters.as_deref().map(|f| &f[..]), &record.frame) {
                continue;
            }
            if queue.len() >= RECEIVE_QUEUE && !self.lossless[record.port as usize].load(Ordering::Relaxed) {
                self.rx_dropped[record.port as usize].fetch_add(1, Ordering::Relaxed);
                continue;
            }
            let meta = FrameMeta { channel: channel as u16, ..record.meta };
            queue.push_back(Received { port: record.port, frame: record.frame, meta });
        }
        if queue.len() != before {
            self.queued.store(queue.len(), Ordering::Release);
            self.settle_ready(&queue);
        }
        Flow::Continue
    }
}

/// Decode one message body from the hub and act on it.
pub(crate) fn deliver(body: &[u8], shared: &Shared) -> Flow {
    match wire::decode(body) {
        Ok(message) => dispatch(message, shared),
        Err(e) => Flow::Close(format!("the hub sent an invalid message: {e}")),
    }
}

/// Act on one message from the hub: queue frames for `recv`, answer
/// waiting requests, count overruns.
fn dispatch(message: Message<'_>, shared: &Shared) -> Flow {
    match message {
        Message::Frames(batch) => return shared.queue_frames(&batch),
        Message::PortOpened(opened) => {
            if let Some(slot) = shared.port_channels.get(opened.port as usize) {
                slot.store(u32::from(opened.channel_id), Ordering::Relaxed);
                let handle = opened.port as usize;
                // Request 0 is the hub's news that an open port moved to
                // another channel; the port keeps its options, counters and
                // filters, and learns what the new channel carries.
                let options = if opened.request != 0 {
                    let options = lock(&shared.opening).get(&opened.request).copied().unwrap_or_default();
                    shared.lossless[handle].store(options.contains(PortOptions::BLOCK_ON_OVERFLOW), Ordering::Relaxed);
                    shared.rx_dropped[handle].store(0, Ordering::Relaxed);
                    shared.tx_dropped[handle].store(0, Ordering::Relaxed);
                    shared.filters[handle].store(None);
                    options
                } else {
                    SendRules::from_bits(shared.send_rules[handle].load(Ordering::Relaxed)).options()
                };
                let rules = SendRules::new(options, opened.channel_flags);
                shared.send_rules[handle].store(rules.bits(), Ordering::Relaxed);
            }
            shared.reply(Waiting::Request(opened.request), Reply::Opened(opened));
        }
        Message::PortClosed { port } => {
            if let Some(slot) = shared.port_channels.get(port as usize) {
                slot.store(CLOSED_PORT, Ordering::Relaxed);
            }
            shared.reply(Waiting::PortClosed(port), Reply::Done);
        }
        Message::Pong { nonce } => {
            shared.reply(Waiting::Pong(nonce), Reply::Done);
        }
        Message::Grant { now_ns } => {
            // The hub tells a full queue before the GRANT it holds for.
            // Relaxed: stored before `granted_ns`'s Release store below.
            let full = shared.queue_full_next.swap(false, Ordering::Relaxed);
            shared.queue_full.store(full, Ordering::Relaxed);
            // SYNC POINT with `Client::step`'s Acquire load: the frames
            // of the window were queued before this store.
            shared.granted_ns.store(now_ns, Ordering::Release);
        }
        Message::Stats { request, json } => {
            shared.reply(Waiting::Stats(request), Reply::Stats(json.to_owned()));
        }
        Message::RxOverflow(overflow) => {
            if let Some(counter) = shared.rx_dropped.get(overflow.port as usize) {
                counter.fetch_add(u64::from(overflow.dropped), Ordering::Relaxed);
            }
        }
        Message::TxDropped(dropped) => {
            if let Some(counter) = shared.tx_dropped.get(dropped.port as usize) {
                counter.fetch_add(u64::from(dropped.dropped), Ordering::Relaxed);
            }
            let reason = fieldhub_proto::fate::DropReason::from_wire(dropped.reason);
            tracing::warn!(
                port = dropped.port,
                dropped = dropped.dropped,
                reason = reason.map(|r| r.name()),
                "frames off the bus"
            );
            lock(&shared.drops).push(dropped);
        }
        Message::ChannelState(state) => {
            let event = ChannelEvent {
                port: state.port,
                condition: ChannelCondition::from_wire(state.condition),
                missed: state.missed,
                text: state.text.to_owned(),
            };
            tracing::warn!(port = state.port, "{}", state.text);
            lock(&shared.channel_events).push(event);
        }
        Message::Error(report) if report.fatal => {
            return Flow::Close(format!("the hub disconnected this client: {}", report.text));
        }
        Message::Error(report) if report.request == 0 && report.code == ErrorCode::TxQueueFull as u16 => {
            // Told at every step boundary it holds for: log when it begins.
            shared.queue_full_next.store(true, Ordering::Relaxed);
            if !shared.queue_full.load(Ordering::Relaxed) {
                tracing::warn!(
                    "the hub holds more of this participant's frames than a real-time queue: {}",
                    report.text
                );
            }
        }
        Message::Error(report) => {
            let failed = Reply::Failed { code: report.code, text: report.text.to_owned() };
            if report.request == 0 || !shared.reply(Waiting::Request(report.request), failed) {
                tracing::warn!(code = report.code, "hub reported: {}", report.text);
                lock(&shared.errors).push((report.code, report.text.to_owned()));
            }
        }
        Message::Goodbye(report) => return Flow::Close(format!("the hub said goodbye: {}", report.text)),
        Message::Ping { nonce } => tracing::debug!(nonce, "ignoring PING from the hub"),
        other => return Flow::Close(format!("the hub sent {} after the handshake", other.type_name())),
    }
    Flow::Continue
}
