//! The reader's side of a client, whatever the link: [`deliver`] acts on
//! each message from the hub — frames into the receive queue, replies to the
//! request waiting for them, overruns counted — and [`Shared`] is what it
//! shares with the application's threads.
//!
//! Invariants: a frame for a port handle that is not open is never
//! delivered (only this reader writes `port_channels`); a frame for a
//! lossless port waits for room in the receive queue, any other frame that
//! finds it full is dropped and counted, so replies never wait behind unread
//! frames; once the connection has ended every waiting request is woken.

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, AtomicU32, AtomicU64, Ordering};
use std::sync::{Mutex, OnceLock};

use arc_swap::ArcSwapOption;
use crossbeam_channel::{Sender, TrySendError};
use fieldhub_proto::limits::MAX_PORTS_PER_CLIENT;
use fieldhub_proto::wire::{self, Message, PortOpened};
use fieldhub_proto::FrameMeta;

use crate::link::Flow;
use crate::ready::ReadySignal;
use crate::{filter, lock, ClientError, Filter, Received};

/// `Shared::port_channels` value of a handle that is not open.
pub(crate) const CLOSED_PORT: u32 = u32::MAX;

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

/// State the reader thread shares with the application's threads.
pub(crate) struct Shared {
    /// Why the connection ended, once it has.
    closed: Mutex<Option<String>>,
    /// `closed` is set; checked without the lock on the send path.
    is_closed: AtomicBool,
    pub waiters: Mutex<HashMap<Waiting, Sender<Reply>>>,
    /// Non-fatal errors the hub reported outside any request.
    pub errors: Mutex<Vec<(u16, String)>>,
    /// Per port handle: channel id, or `CLOSED_PORT`. Written by the reader
    /// thread only, so frames for a closed handle are never delivered.
    port_channels: [AtomicU32; MAX_PORTS_PER_CLIENT],
    pub rx_dropped: [AtomicU64; MAX_PORTS_PER_CLIENT],
    /// Per port handle: opened with `block_on_overflow`. Written by the
    /// reader thread when the port opens, from `opening`.
    lossless: [AtomicBool; MAX_PORTS_PER_CLIENT],
    /// `OPEN_PORT` requests in flight: request id → `block_on_overflow`.
    pub opening: Mutex<HashMap<u32, bool>>,
    /// Per port handle: acceptance filters (`None`: accept everything).
    pub filters: [ArcSwapOption<Box<[Filter]>>; MAX_PORTS_PER_CLIENT],
    /// Created on the first `Client::fileno` call; until then nobody pays for it.
    pub ready: OnceLock<ReadySignal>,
}

impl Shared {
    pub fn new() -> Self {
        Self {
            closed: Mutex::new(None),
            is_closed: AtomicBool::new(false),
            waiters: Mutex::new(HashMap::new()),
            errors: Mutex::new(Vec::new()),
            port_channels: std::array::from_fn(|_| AtomicU32::new(CLOSED_PORT)),
            rx_dropped: std::array::from_fn(|_| AtomicU64::new(0)),
            lossless: std::array::from_fn(|_| AtomicBool::new(false)),
            opening: Mutex::new(HashMap::new()),
            filters: std::array::from_fn(|_| ArcSwapOption::empty()),
            ready: OnceLock::new(),
        }
    }

    /// The connection has ended for `reason` (the first reason given wins):
    /// wake everyone who waits on it.
    pub fn close(&self, reason: String) {
        let mut closed = lock(&self.closed);
        if closed.is_none() {
            *closed = Some(reason);
        }
        self.is_closed.store(true, Ordering::Release);
        drop(closed);
        // Dropping the reply senders wakes every waiter.
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

    /// Hand `reply` to whoever waits for `key`; false when nobody does.
    fn reply(&self, key: Waiting, reply: Reply) -> bool {
        match lock(&self.waiters).remove(&key) {
            Some(tx) => {
                let _ = tx.send(reply);
                true
            }
            None => false,
        }
    }
}

/// Decode one message body from the hub and act on it.
pub(crate) fn deliver(body: &[u8], shared: &Shared, received: &Sender<Received>) -> Flow {
    match wire::decode(body) {
        Ok(message) => dispatch(message, shared, received),
        Err(e) => Flow::Close(format!("the hub sent an invalid message: {e}")),
    }
}

/// Act on one message from the hub: queue frames for `recv`, answer
/// waiting requests, count overruns.
fn dispatch(message: Message<'_>, shared: &Shared, received: &Sender<Received>) -> Flow {
    match message {
        Message::Frames(batch) => {
            for record in batch.iter() {
                let Some(slot) = shared.port_channels.get(record.port as usize) else {
                    continue;
                };
                let channel = slot.load(Ordering::Relaxed);
                if channel == CLOSED_PORT {
                    continue;
                }
                let filters = shared.filters[record.port as usize].load();
                if !filter::passes(filters.as_deref().map(|f| &f[..]), &record.frame) {
                    continue;
                }
                let meta = FrameMeta { channel: channel as u16, ..record.meta };
                let item = Received { port: record.port, frame: record.frame, meta };
                if shared.lossless[record.port as usize].load(Ordering::Relaxed) {
                    if received.send(item).is_err() {
                        return Flow::Leave;
                    }
                } else {
                    match received.try_send(item) {
                        Ok(()) => {}
                        Err(TrySendError::Full(_)) => {
                            shared.rx_dropped[record.port as usize].fetch_add(1, Ordering::Relaxed);
                            continue;
                        }
                        Err(TrySendError::Disconnected(_)) => return Flow::Leave,
                    }
                }
                if let Some(ready) = shared.ready.get() {
                    ready.settle(|| !received.is_empty() || shared.is_closed());
                }
            }
        }
        Message::PortOpened(opened) => {
            if let Some(slot) = shared.port_channels.get(opened.port as usize) {
                slot.store(u32::from(opened.channel_id), Ordering::Relaxed);
                // Request 0 is the hub's news that an open port moved to
                // another channel; the port keeps its counters and filters.
                if opened.request != 0 {
                    let lossless = lock(&shared.opening).get(&opened.request).copied().unwrap_or(false);
                    shared.lossless[opened.port as usize].store(lossless, Ordering::Relaxed);
                    shared.rx_dropped[opened.port as usize].store(0, Ordering::Relaxed);
                    shared.filters[opened.port as usize].store(None);
                }
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
        Message::Stats { request, json } => {
            shared.reply(Waiting::Stats(request), Reply::Stats(json.to_owned()));
        }
        Message::RxOverflow(overflow) => {
            if let Some(counter) = shared.rx_dropped.get(overflow.port as usize) {
                counter.fetch_add(u64::from(overflow.dropped), Ordering::Relaxed);
            }
        }
        Message::Error(report) if report.fatal => {
            return Flow::Close(format!("the hub disconnected this client: {}", report.text));
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
