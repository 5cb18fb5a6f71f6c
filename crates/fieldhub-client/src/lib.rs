//! Blocking client for a fieldhub hub.
//!
//! ```no_run
//! use fieldhub_client::{Client, Frame};
//! let client = Client::connect("tcp://127.0.0.1:29536")?;
//! let port = client.open_port("can0")?;
//! client.send(&port, &Frame::can(0x123, false, &[0xDE, 0xAD])?)?;
//! if let Some(rx) = client.recv(Some(std::time::Duration::from_secs(1)))? {
//!     println!("{:?} seq {}", rx.frame, rx.meta.seq);
//! }
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```
//!
//! # Layout
//!
//! - [`Client`] (this file): one connection — ports, requests and their
//!   replies, the receive queue, the ready fd. It holds one `Arc<dyn Link>`
//!   and never asks which transport that is; every transport gives the same
//!   API and the same errors.
//! - `link.rs`: the `Link` trait each transport implements — send a frame or
//!   an encoded message within a timeout, the reader's loop, the link's own
//!   thread, waiting for a delivery, closing — and `connect`, which picks
//!   the transport a URL names.
//! - `handshake.rs`: `HELLO` and what the hub's first message means, once
//!   for all transports; a transport only moves the two messages.
//! - `dispatch.rs`: what the reader thread does with each message from the
//!   hub, and the state it shares with the application's threads.
//! - `stream.rs`: TCP, unix socket and serial device (`serial:PATH`): a
//!   writer thread packs queued frames into `FRAMES` messages (many frames
//!   per write under load, one at once when idle).
//! - `shm.rs` (`shm://NAME`) and `ivshmem.rs` (`ivshmem://PATH`): rings in
//!   shared memory. `send` writes into the to-hub ring itself
//!   (`ring_sender.rs`) and the reader takes from the to-client ring
//!   (`ring_receiver.rs`), both shared by the two links; they differ in how
//!   they wait (futex doorbells or polling) and how they notice the hub's end
//!   (the session socket or the region's beat words).
//! - [`url`]: `tcp://HOST:PORT`, `unix:PATH`, `serial:PATH`, `shm://NAME`
//!   and `ivshmem://PATH`; [`filter`]: acceptance filters.
//! - [`ClientError`]: every failure, with the hub's own text where it gave one.
//!
//! # Invariants
//!
//! - Frames are received in the channel's order. When the application does
//!   not read, frames are dropped and counted for this client's ports only
//!   (see [`Client::rx_dropped`]): by the hub when the connection backs up,
//!   and by the reader thread when the receive queue is full — like a CAN
//!   controller's receive overrun — so replies (`flush`, `stats`, port
//!   changes) never wait behind unread frames. A port opened with
//!   `block_on_overflow` is never dropped from: the reader waits for room,
//!   and the hub holds the channel, until the application reads.
//! - Every blocking call has a timeout or ends when the connection does; a
//!   dead hub is an error, never a hang.
//! - The same answer of a hub gives the same outcome over every transport:
//!   one handshake, one dispatcher.
//! - Once the session has ended (the hub said `GOODBYE`, reported a fatal
//!   `ERROR`, or the connection ended) the client sends nothing more, not
//!   even its own `GOODBYE` (`spec/protocol.md` section 5).

mod dispatch;
mod error;
pub mod filter;
mod handshake;
mod ivshmem;
mod link;
mod ready;
mod ring_receiver;
mod ring_sender;
mod shm;
mod stream;
pub mod url;

use std::os::fd::RawFd;
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use crossbeam_channel::{Receiver, RecvTimeoutError, Sender};
use dispatch::{Reply, Shared, Waiting};
pub use error::ClientError;
pub use fieldhub_proto::stats::{ChannelStats, HubStats, IdStats, PortStats, RouteStats};
pub use fieldhub_proto::wire::ErrorCode;
use fieldhub_proto::wire::{self, ErrorReport, Message, OpenPort, PortOptions};
pub use fieldhub_proto::{Frame, FrameFlags, FrameKind, FrameMeta};
pub use filter::Filter;
use link::{Link, SendFail};
use ready::ReadySignal;
pub use url::{default_hub_url, HubUrl};

/// Frames the receive queue holds before the client stops reading its socket.
pub const RECEIVE_QUEUE: usize = 64 * 1024;
/// Frames the send queue of a stream connection holds before `send` blocks
/// (or fails, with a timeout). With the kernel's send buffer
/// (16 KiB) and the hub's transmit credit it bounds how far a
/// sender runs ahead of a busy bus (`spec/protocol.md` 6.5a).
pub const SEND_QUEUE: usize = 1024;
/// Default bound for connecting and for each request to the hub.
pub const DEFAULT_TIMEOUT: Duration = Duration::from_secs(5);
/// How long dropping a client waits for its pending frames and goodbye to
/// be written.
const GOODBYE_GRACE: Duration = Duration::from_secs(1);

/// How to introduce this client to the hub.
#[derive(Clone, Debug)]
pub struct ClientOptions {
    /// Name shown in the hub's logs and used for unnamed ports.
    pub name: String,
    /// Token, if the hub requires one.
    pub token: Option<String>,
    /// Bound for connecting and for each request.
    pub timeout: Duration,
}

impl Default for ClientOptions {
    fn default() -> Self {
        Self { name: "client".into(), token: None, timeout: DEFAULT_TIMEOUT }
    }
}

/// How to open a port.
#[derive(Clone, Debug, Default)]
pub struct PortConfig {
    /// Hub-wide port name; `None` lets the hub name it `<client>.<id>`.
    pub name: Option<String>,
    /// Receive this port's own frames back, flagged as echo, once they are on
    /// the bus (SocketCAN `recv_own_msgs`).
    pub receive_own: bool,
    /// When this port's receive queue in the hub is full, hold the channel
    /// instead of dropping frames for this port.
    pub block_on_overflow: bool,
}

/// An open port. Frames received on it carry its [`Port::handle`].
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Port {
    /// Client-local handle.
    pub handle: u16,
    /// Channel name.
    pub channel: String,
    /// Hub-wide channel id (as in [`FrameMeta::channel`]).
    pub channel_id: u16,
    /// Hub-wide port id (as in [`FrameMeta::sender`]).
    pub port_id: u32,
}

/// A frame received on one of the client's ports.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Received {
    /// Handle of the receiving port.
    pub port: u16,
    pub frame: Frame,
    pub meta: FrameMeta,
}

/// A lock whose holder panicked leaves plain data behind; keep going.
pub(crate) fn lock<T>(mutex: &Mutex<T>) -> MutexGuard<'_, T> {
    mutex.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
}

/// One connection to a hub.
pub struct Client {
    shared: Arc<Shared>,
    link: Arc<dyn Link>,
    received: Receiver<Received>,
    client_id: u32,
    hub_name: String,
    timeout: Duration,
    next_request: AtomicU32,
    ports: Mutex<Vec<Port>>,
    threads: Vec<JoinHandle<()>>,
}

impl Client {
    /// Connect with default options.
    pub fn connect(url: &str) -> Result<Self, ClientError> {
        Self::connect_with(url, &ClientOptions::default())
    }

    /// Connect and perform the handshake.
    pub fn connect_with(url: &str, options: &ClientOptions) -> Result<Self, ClientError> {
        let (link, session) = link::connect(url, options)?;
        let shared = Arc::new(Shared::new());
        let (received_tx, received) = crossbeam_channel::bounded(RECEIVE_QUEUE);
        let threads = start_threads(&link, &shared, received_tx).inspect_err(|_| link.close())?;
        Ok(Self {
            shared,
            link,
            received,
            client_id: session.client_id,
            hub_name: session.hub_name,
            timeout: options.timeout,
            next_request: AtomicU32::new(1),
            ports: Mutex::new(Vec::new()),
            threads,
        })
    }

    /// The id the hub gave this client.
    pub fn client_id(&self) -> u32 {
        self.client_id
    }

    /// The hub's name.
    pub fn hub_name(&self) -> &str {
        &self.hub_name
    }

    /// Open a port on `channel` with default settings.
    pub fn open_port(&self, channel: &str) -> Result<Port, ClientError> {
        self.open_port_with(channel, &PortConfig::default())
    }

    /// Open a port on `channel`.
    pub fn open_port_with(&self, channel: &str, config: &PortConfig) -> Result<Port, ClientError> {
        let request = self.next_request.fetch_add(1, Ordering::Relaxed);
        let mut options = PortOptions::empty();
        if config.receive_own {
            options = options.union(PortOptions::RECEIVE_OWN);
        }
        if config.block_on_overflow {
            options = options.union(PortOptions::BLOCK_ON_OVERFLOW);
        }
        let mut bytes = Vec::new();
        let port_name = config.name.as_deref().unwrap_or("");
        wire::encode(&mut bytes, &Message::OpenPort(OpenPort { request, options, channel, port_name }));
        lock(&self.shared.opening).insert(request, config.block_on_overflow);
        let reply = self.request(Waiting::Request(request), bytes);
        lock(&self.shared.opening).remove(&request);
        match reply? {
            Reply::Opened(opened) => {
                let port = Port {
                    handle: opened.port,
                    channel: channel.to_owned(),
                    channel_id: opened.channel_id,
                    port_id: opened.port_id,
                };
                lock(&self.ports).push(port.clone());
                Ok(port)
            }
            Reply::Failed { code, text } => Err(ClientError::Rejected { code, text }),
            Reply::Done | Reply::Stats(_) => Err(ClientError::Protocol("unexpected reply to OPEN_PORT".into())),
        }
    }

    /// Close a port; frames still in flight for it are discarded.
    pub fn close_port(&self, port: &Port) -> Result<(), ClientError> {
        self.check_open(port)?;
        let mut bytes = Vec::new();
        wire::encode(&mut bytes, &Message::ClosePort { port: port.handle });
        let reply = self.request(Waiting::PortClosed(port.handle), bytes)?;
        lock(&self.ports).retain(|p| p.handle != port.handle);
        match reply {
            Reply::Failed { code, text } => Err(ClientError::Rejected { code, text }),
            _ => Ok(()),
        }
    }

    /// The ports this client has open.
    pub fn ports(&self) -> Vec<Port> {
        lock(&self.ports).clone()
    }

    /// Queue a frame for sending, waiting while the send queue is full.
    pub fn send(&self, port: &Port, frame: &Frame) -> Result<(), ClientError> {
        self.send_timeout(port, frame, None)
    }

    /// Queue a frame, waiting at most `timeout` (`None`: no limit) for room.
    pub fn send_timeout(&self, port: &Port, frame: &Frame, timeout: Option<Duration>) -> Result<(), ClientError> {
        self.check_open(port)?;
        if self.shared.is_closed() {
            return Err(self.shared.closed_error());
        }
        match self.link.send_frame(port.handle, &frame.with_echo(false), timeout) {
            Ok(()) => Ok(()),
            Err(SendFail::Timeout) => Err(ClientError::SendQueueFull(timeout.unwrap_or_default())),
            Err(SendFail::Closed) => Err(self.shared.closed_error()),
        }
    }

    /// Receive the next frame on any port: `None` when `timeout` passes
    /// first (`None` timeout: wait until a frame comes or the connection ends).
    pub fn recv(&self, timeout: Option<Duration>) -> Result<Option<Received>, ClientError> {
        let deadline = timeout.map(|t| Instant::now() + t);
        if self.received.is_empty() {
            self.link.wait_for_delivery(deadline, &|| !self.received.is_empty());
        }
        let result = match deadline {
            None => self.received.recv().map_err(|_| RecvTimeoutError::Disconnected),
            Some(at) => self.received.recv_deadline(at),
        };
        match result {
            Ok(received) => {
                self.settle_ready();
                Ok(Some(received))
            }
            Err(RecvTimeoutError::Timeout) => Ok(None),
            Err(RecvTimeoutError::Disconnected) => Err(self.shared.closed_error()),
        }
    }

    /// A file descriptor that is readable while frames are waiting in
    /// [`Client::recv`]'s queue or the connection has ended: for `poll`,
    /// `select`, epoll or an asyncio reader. Never read it yourself; call
    /// `recv`/`try_recv` when it is readable.
    pub fn fileno(&self) -> Result<RawFd, ClientError> {
        if let Some(ready) = self.shared.ready.get() {
            return Ok(ready.fd());
        }
        let signal = ReadySignal::new().map_err(|e| ClientError::Protocol(format!("cannot create a ready fd: {e}")))?;
        let ready = self.shared.ready.get_or_init(|| signal);
        self.settle_ready();
        Ok(ready.fd())
    }

    /// Keep the ready fd readable exactly while there is something to take.
    fn settle_ready(&self) {
        if let Some(ready) = self.shared.ready.get() {
            ready.settle(|| !self.received.is_empty() || self.shared.is_closed());
        }
    }

    /// Set the acceptance filters of `port`: `None` receives everything,
    /// `Some(&[])` nothing but error frames. Applies to frames not yet taken
    /// from the socket; frames already queued are not re-filtered.
    pub fn set_filters(&self, port: &Port, filters: Option<&[Filter]>) -> Result<(), ClientError> {
        self.check_open(port)?;
        let slot = &self.shared.filters[port.handle as usize];
        slot.store(filters.map(|f| Arc::new(f.to_vec().into_boxed_slice())));
        Ok(())
    }

    /// Receive without waiting.
    pub fn try_recv(&self) -> Result<Option<Received>, ClientError> {
        self.recv(Some(Duration::ZERO))
    }

    /// Wait until every frame sent so far is on the bus (sequenced and
    /// fanned out), and report the first error the hub raised meanwhile.
    /// Returns the round-trip time.
    pub fn flush(&self) -> Result<Duration, ClientError> {
        let nonce = u64::from(self.next_request.fetch_add(1, Ordering::Relaxed));
        let mut bytes = Vec::new();
        wire::encode(&mut bytes, &Message::Ping { nonce });
        let started = Instant::now();
        self.request(Waiting::Pong(nonce), bytes)?;
        let elapsed = started.elapsed();
        let mut errors = lock(&self.shared.errors);
        if !errors.is_empty() {
            let (code, text) = errors.remove(0);
            return Err(ClientError::Rejected { code, text });
        }
        Ok(elapsed)
    }

    /// The hub's statistics: channels (frames, per-id counts and rates),
    /// ports (TX/RX counts, drops, queued frames) and gateway routes.
    pub fn stats(&self) -> Result<HubStats, ClientError> {
        let request = self.next_request.fetch_add(1, Ordering::Relaxed);
        let mut bytes = Vec::new();
        wire::encode(&mut bytes, &Message::StatsRequest { request });
        match self.request(Waiting::Stats(request), bytes)? {
            Reply::Stats(json) => serde_json::from_str(&json)
                .map_err(|e| ClientError::Protocol(format!("the hub sent statistics this client cannot read: {e}"))),
            Reply::Failed { code, text } => Err(ClientError::Rejected { code, text }),
            _ => Err(ClientError::Protocol("unexpected reply to STATS_REQUEST".into())),
        }
    }

    /// Frames dropped for `port` because this client did not read fast
    /// enough (receive overrun, counted by the hub and by the receive
    /// queue), since the port was opened.
    pub fn rx_dropped(&self, port: &Port) -> u64 {
        self.shared.rx_dropped.get(port.handle as usize).map_or(0, |c| c.load(Ordering::Relaxed))
    }

    fn check_open(&self, port: &Port) -> Result<(), ClientError> {
        if lock(&self.ports).iter().any(|p| p.handle == port.handle) {
            Ok(())
        } else {
            Err(ClientError::PortNotOpen(port.handle))
        }
    }

    fn request(&self, key: Waiting, bytes: Vec<u8>) -> Result<Reply, ClientError> {
        let (tx, rx) = crossbeam_channel::bounded(1);
        lock(&self.shared.waiters).insert(key, tx);
        if self.shared.is_closed() {
            lock(&self.shared.waiters).remove(&key);
            return Err(self.shared.closed_error());
        }
        if self.link.send_message(bytes, Some(self.timeout)).is_err() {
            lock(&self.shared.waiters).remove(&key);
            return Err(self.shared.closed_error());
        }
        match rx.recv_timeout(self.timeout) {
            Ok(reply) => Ok(reply),
            Err(RecvTimeoutError::Timeout) => {
                lock(&self.shared.waiters).remove(&key);
                Err(ClientError::Timeout(self.timeout))
            }
            Err(RecvTimeoutError::Disconnected) => Err(self.shared.closed_error()),
        }
    }
}

impl Drop for Client {
    fn drop(&mut self) {
        // Once the session has ended a goodbye reaches nobody — or worse, on
        // a serial port whose host end reconnects, the next hub, as the first
        // message of a stranger's session; on an ivshmem region, a session
        // the hub has since given to another client.
        if !self.shared.is_closed() {
            let mut goodbye = Vec::new();
            let report = ErrorReport { code: 0, request: 0, fatal: true, text: "client closed" };
            wire::encode(&mut goodbye, &Message::Goodbye(report));
            let _ = self.link.send_message(goodbye, Some(GOODBYE_GRACE));
        }
        self.link.close();
        // Replacing the receive queue drops its receiver, releasing a reader
        // thread blocked on a full queue.
        self.received = crossbeam_channel::never();
        for thread in self.threads.drain(..) {
            let _ = thread.join();
        }
    }
}

/// Start a link's two threads: the reader, which hands every message to the
/// dispatcher, and the link's own.
fn start_threads(
    link: &Arc<dyn Link>,
    shared: &Arc<Shared>,
    received: Sender<Received>,
) -> Result<Vec<JoinHandle<()>>, ClientError> {
    let spawn = |name: &str, body: Box<dyn FnOnce() + Send>| {
        std::thread::Builder::new()
            .name(name.into())
            .spawn(body)
            .map_err(|e| ClientError::Closed { reason: format!("cannot start a client thread: {e}") })
    };
    let (reader_link, reader_shared) = (Arc::clone(link), Arc::clone(shared));
    let reader = spawn(
        "fh-client-read",
        Box::new(move || {
            let mut deliver = |body: &[u8]| dispatch::deliver(body, &reader_shared, &received);
            if let Some(reason) = reader_link.receive(&mut deliver) {
                reader_shared.close(reason);
            }
        }),
    )?;
    let (own_link, own_shared) = (Arc::clone(link), Arc::clone(shared));
    let own = spawn(
        "fh-client-link",
        Box::new(move || {
            if let Some(reason) = own_link.tend() {
                own_shared.close(reason);
            }
        }),
    )?;
    Ok(vec![reader, own])
}
