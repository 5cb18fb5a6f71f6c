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
//! - [`Client`]: one connection. Over a stream (TCP, unix socket) a writer
//!   thread packs queued frames into `FRAMES` messages (many frames per
//!   write under load, one at once when idle). Over shared memory
//!   (`shm://NAME`) `send` writes straight into the to-hub ring and a watch
//!   thread notices a dead hub at once. Either way a reader thread fills a
//!   bounded receive queue and answers requests. All are private to the
//!   client; the API is the same for every transport.
//! - [`url`]: `tcp://HOST:PORT`, `unix:PATH` and `shm://NAME`.
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

mod error;
pub mod filter;
mod ivshmem;
mod ready;
mod ring_sender;
mod shm;
mod stream;
pub mod url;

use std::collections::HashMap;
use std::io::{BufReader, Write};
use std::os::fd::RawFd;
use std::sync::atomic::{AtomicBool, AtomicU32, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, OnceLock};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use arc_swap::ArcSwapOption;
use crossbeam_channel::{Receiver, RecvTimeoutError, SendTimeoutError, Sender, TrySendError};
pub use error::ClientError;
use fieldhub_proto::limits::{MAX_HELLO_LEN, MAX_MESSAGE_LEN, MAX_PORTS_PER_CLIENT, PROTOCOL_VERSION};
pub use fieldhub_proto::stats::{ChannelStats, HubStats, IdStats, PortStats, RouteStats};
use fieldhub_proto::stream::{MessageReader, ReadError};
pub use fieldhub_proto::wire::ErrorCode;
use fieldhub_proto::wire::{self, ErrorReport, Hello, Message, OpenPort, Packer, PortOptions};
pub use fieldhub_proto::{Frame, FrameFlags, FrameKind, FrameMeta};
pub use filter::Filter;
use ivshmem::IvshmemLink;
use ready::ReadySignal;
use ring_sender::SendFail;
use shm::{Flow, ShmLink};
use stream::Stream;
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
/// The writer stops packing and writes once this many bytes are pending.
const WRITE_CHUNK: usize = 64 * 1024;

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

enum WriteItem {
    Frame {
        port: u16,
        frame: Frame,
    },
    /// A pre-encoded control message (control plane; allocation is fine).
    Control(Vec<u8>),
}

#[derive(Clone, Copy, PartialEq, Eq, Hash)]
enum Waiting {
    Request(u32),
    Stats(u32),
    Pong(u64),
    PortClosed(u16),
}

enum Reply {
    Opened(wire::PortOpened),
    Done,
    Stats(String),
    Failed { code: u16, text: String },
}

const CLOSED_PORT: u32 = u32::MAX;

struct Shared {
    /// Why the connection ended, once it has.
    closed: Mutex<Option<String>>,
    /// `closed` is set; checked without the lock on the send path.
    is_closed: AtomicBool,
    waiters: Mutex<HashMap<Waiting, Sender<Reply>>>,
    /// Non-fatal errors the hub reported outside any request.
    errors: Mutex<Vec<(u16, String)>>,
    /// Per port handle: channel id, or `CLOSED_PORT`. Written by the reader
    /// thread only, so frames for a closed handle are never delivered.
    port_channels: [AtomicU32; MAX_PORTS_PER_CLIENT],
    rx_dropped: [AtomicU64; MAX_PORTS_PER_CLIENT],
    /// Per port handle: opened with `block_on_overflow`. Written by the
    /// reader thread when the port opens, from `opening`.
    lossless: [AtomicBool; MAX_PORTS_PER_CLIENT],
    /// `OPEN_PORT` requests in flight: request id → `block_on_overflow`.
    opening: Mutex<HashMap<u32, bool>>,
    /// Per port handle: acceptance filters (`None`: accept everything).
    filters: [ArcSwapOption<Box<[Filter]>>; MAX_PORTS_PER_CLIENT],
    /// Created on the first `Client::fileno` call; until then nobody pays for it.
    ready: OnceLock<ReadySignal>,
}

fn lock<T>(mutex: &Mutex<T>) -> MutexGuard<'_, T> {
    // A panic while holding these locks leaves plain data behind; keep going.
    mutex.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
}

impl Shared {
    fn close(&self, reason: String) {
        let mut closed = lock(&self.closed);
        if closed.is_none() {
            *closed = Some(reason);
        }
        self.is_closed.store(true, Ordering::Release);
        drop(closed);
        // Dropping the reply senders wakes every waiter.
        lock(&self.waiters).clear();
        if let Some(ready) = self.ready.get() {
            ready.raise();
        }
    }

    fn closed_error(&self) -> ClientError {
        let reason = lock(&self.closed).clone().unwrap_or_else(|| "the connection ended".into());
        ClientError::Closed { reason }
    }

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

/// One connection to a hub.
pub struct Client {
    shared: Arc<Shared>,
    link: Link,
    received: Receiver<Received>,
    client_id: u32,
    hub_name: String,
    timeout: Duration,
    next_request: AtomicU32,
    ports: Mutex<Vec<Port>>,
    threads: Vec<JoinHandle<()>>,
}

/// The transport under a client.
enum Link {
    /// TCP or a unix socket: the writer thread's queue and the stream.
    Stream { to_writer: Option<Sender<WriteItem>>, writer_done: Receiver<()>, stream: Stream },
    /// Shared memory: rings written and read directly.
    Shm(Arc<ShmLink>),
    /// An ivshmem region: the same rings, polled.
    Ivshmem(Arc<IvshmemLink>),
}

impl Client {
    /// Connect with default options.
    pub fn connect(url: &str) -> Result<Self, ClientError> {
        Self::connect_with(url, &ClientOptions::default())
    }

    /// Connect and perform the handshake.
    pub fn connect_with(url: &str, options: &ClientOptions) -> Result<Self, ClientError> {
        let parsed = HubUrl::parse(url).map_err(|why| ClientError::InvalidUrl { url: url.into(), why })?;
        let mut hello = Vec::new();
        let token = options.token.as_deref().unwrap_or("");
        wire::encode(&mut hello, &Message::Hello(Hello { version: PROTOCOL_VERSION, name: &options.name, token }));
        let shared = Arc::new(Shared {
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
        });
        let (received_tx, received) = crossbeam_channel::bounded(RECEIVE_QUEUE);
        let spawn_error = |e| ClientError::Closed { reason: format!("cannot start a client thread: {e}") };
        let spawn = |name: &str, body: Box<dyn FnOnce() + Send>| {
            std::thread::Builder::new().name(name.into()).spawn(body).map_err(spawn_error)
        };
        let mut threads = Vec::new();
        let (link, client_id, hub_name) = match &parsed {
            HubUrl::Shm { name, busy_poll } => {
                let welcomed = ShmLink::connect(url, name, *busy_poll, &hello, options.timeout)?;
                let link = Arc::new(welcomed.link);
                threads.extend(start_ring_threads(&link, &shared, received_tx, &spawn)?);
                (Link::Shm(link), welcomed.client_id, welcomed.hub_name)
            }
            HubUrl::Ivshmem(path) => {
                let welcomed = IvshmemLink::connect(url, path, &hello, options.timeout)?;
                let link = Arc::new(welcomed.link);
                threads.extend(start_ring_threads(&link, &shared, received_tx, &spawn)?);
                (Link::Ivshmem(link), welcomed.client_id, welcomed.hub_name)
            }
            _ => {
                let StreamWelcome { stream, reader, client_id, hub_name } =
                    connect_stream(url, &parsed, &hello, options.timeout)?;
                let connect_error = |source| ClientError::Connect { url: url.into(), source };
                let (to_writer, writer_rx) = crossbeam_channel::bounded(SEND_QUEUE);
                let writer_stream = stream.try_clone().map_err(connect_error)?;
                let (done_tx, writer_done) = crossbeam_channel::bounded(0);
                let reader_shared = Arc::clone(&shared);
                threads
                    .push(spawn("fh-client-read", Box::new(move || read_loop(reader, &reader_shared, &received_tx)))?);
                let writer_shared = Arc::clone(&shared);
                threads.push(spawn(
                    "fh-client-write",
                    Box::new(move || write_loop(writer_stream, &writer_rx, &writer_shared, done_tx)),
                )?);
                (Link::Stream { to_writer: Some(to_writer), writer_done, stream }, client_id, hub_name)
            }
        };
        Ok(Self {
            shared,
            link,
            received,
            client_id,
            hub_name,
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
        // SYNC POINT with `Shared::close`'s Release store: a dead connection
        // fails the send at once instead of queueing into the void.
        if self.shared.is_closed.load(Ordering::Acquire) {
            return Err(self.shared.closed_error());
        }
        let frame = frame.with_echo(false);
        let writer = match &self.link {
            Link::Stream { to_writer, .. } => to_writer.as_ref().ok_or_else(|| self.shared.closed_error())?,
            Link::Shm(_) | Link::Ivshmem(_) => {
                let meta = FrameMeta::default();
                let encode = |out: &mut Vec<u8>| {
                    let mut batch = wire::BatchEncoder::begin(out);
                    batch.push(out, port.handle, &frame, &meta);
                    batch.finish(out);
                };
                let sent = match &self.link {
                    Link::Ivshmem(link) => link.send(encode, timeout),
                    Link::Shm(link) => link.send(encode, timeout),
                    Link::Stream { .. } => unreachable!("matched above"),
                };
                return match sent {
                    Ok(()) => Ok(()),
                    Err(SendFail::Timeout) => Err(ClientError::SendQueueFull(timeout.unwrap_or_default())),
                    Err(SendFail::Closed) => Err(self.shared.closed_error()),
                };
            }
        };
        let item = WriteItem::Frame { port: port.handle, frame };
        let sent = match timeout {
            None => writer.send(item).map_err(|_| SendTimeoutError::Disconnected(())),
            Some(t) => writer.send_timeout(item, t).map_err(|e| match e {
                SendTimeoutError::Timeout(_) => SendTimeoutError::Timeout(()),
                SendTimeoutError::Disconnected(_) => SendTimeoutError::Disconnected(()),
            }),
        };
        match sent {
            Ok(()) => Ok(()),
            Err(SendTimeoutError::Timeout(())) => Err(ClientError::SendQueueFull(timeout.unwrap_or_default())),
            Err(SendTimeoutError::Disconnected(())) => Err(self.shared.closed_error()),
        }
    }

    /// Receive the next frame on any port: `None` when `timeout` passes
    /// first (`None` timeout: wait until a frame comes or the connection ends).
    pub fn recv(&self, timeout: Option<Duration>) -> Result<Option<Received>, ClientError> {
        let deadline = timeout.map(|t| Instant::now() + t);
        if let Link::Shm(link) = &self.link {
            if self.received.is_empty() {
                link.wait_for_delivery(deadline, || !self.received.is_empty());
            }
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
        ready.raise();
        self.settle_ready();
        Ok(ready.fd())
    }

    /// Keep the ready fd readable exactly while there is something to take.
    fn settle_ready(&self) {
        if let Some(ready) = self.shared.ready.get() {
            if self.received.is_empty() {
                ready.lower();
                if !self.received.is_empty() || lock(&self.shared.closed).is_some() {
                    ready.raise();
                }
            }
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
        if lock(&self.shared.closed).is_some() {
            lock(&self.shared.waiters).remove(&key);
            return Err(self.shared.closed_error());
        }
        let sent = match &self.link {
            Link::Stream { to_writer, .. } => {
                to_writer.as_ref().is_some_and(|w| w.send_timeout(WriteItem::Control(bytes), self.timeout).is_ok())
            }
            Link::Shm(link) => link.send(|out| out.extend_from_slice(&bytes), Some(self.timeout)).is_ok(),
            Link::Ivshmem(link) => link.send(|out| out.extend_from_slice(&bytes), Some(self.timeout)).is_ok(),
        };
        if !sent {
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
        let mut goodbye = Vec::new();
        let report = ErrorReport { code: 0, request: 0, fatal: true, text: "client closed" };
        wire::encode(&mut goodbye, &Message::Goodbye(report));
        match &mut self.link {
            Link::Stream { to_writer, writer_done, stream } => {
                // Once the connection has ended, a goodbye reaches nobody —
                // or worse, on a serial port whose host end reconnects, the
                // next hub, as the first message of a stranger's session.
                let ended = self.shared.is_closed.load(Ordering::Acquire);
                if let Some(writer) = to_writer.take().filter(|_| !ended) {
                    let _ = writer.send_timeout(WriteItem::Control(goodbye), GOODBYE_GRACE);
                }
                // The writer exits once its queue is drained and closed. A hub
                // that stopped reading must not hang the drop, so the wait is
                // bounded.
                let _ = writer_done.recv_timeout(GOODBYE_GRACE);
                stream.shutdown();
            }
            Link::Shm(link) => {
                // Everything sent is already in the ring; the hub takes it,
                // then the goodbye, before it lets go of this client.
                let _ = link.send(|out| out.extend_from_slice(&goodbye), Some(GOODBYE_GRACE));
                link.shutdown();
            }
            Link::Ivshmem(link) => {
                // As for shm: the hub's poller sees the goodbye in the ring.
                let _ = link.send(|out| out.extend_from_slice(&goodbye), Some(GOODBYE_GRACE));
                link.end();
            }
        }
        // Replacing the receive queue drops its receiver, releasing a reader
        // thread blocked on a full queue.
        self.received = crossbeam_channel::never();
        for thread in self.threads.drain(..) {
            let _ = thread.join();
        }
    }
}

/// What a stream handshake established.
struct StreamWelcome {
    stream: Stream,
    reader: MessageReader<BufReader<Stream>>,
    client_id: u32,
    hub_name: String,
}

/// Connect a stream transport and perform the handshake.
fn connect_stream(url: &str, parsed: &HubUrl, hello: &[u8], timeout: Duration) -> Result<StreamWelcome, ClientError> {
    let connect_error = |source| ClientError::Connect { url: url.into(), source };
    let mut stream = Stream::connect(parsed, timeout).map_err(connect_error)?;
    stream.write_all(hello).map_err(connect_error)?;
    stream.set_read_timeout(Some(timeout)).map_err(connect_error)?;
    let mut reader =
        MessageReader::new(BufReader::with_capacity(WRITE_CHUNK, stream.try_clone().map_err(connect_error)?));
    let (client_id, hub_name) = {
        let body = reader.read(MAX_HELLO_LEN.max(MAX_MESSAGE_LEN)).map_err(|e| match e {
            ReadError::Io(e) if matches!(e.kind(), std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut) => {
                ClientError::Timeout(timeout)
            }
            ReadError::Closed => {
                ClientError::Closed { reason: "the hub closed the connection during the handshake".into() }
            }
            other => ClientError::Protocol(other.to_string()),
        })?;
        match wire::decode(body).map_err(|e| ClientError::Protocol(e.to_string()))? {
            Message::Welcome(w) => (w.client_id, w.hub_name.to_owned()),
            Message::Refuse(r) => {
                return Err(ClientError::Refused { url: url.into(), code: r.code, text: r.text.into() })
            }
            Message::Error(report) => {
                return Err(ClientError::Protocol(format!("expected WELCOME, got ERROR: {}", report.text)))
            }
            other => return Err(ClientError::Protocol(format!("expected WELCOME, got {}", other.type_name()))),
        }
    };
    stream.set_read_timeout(None).map_err(connect_error)?;
    Ok(StreamWelcome { stream, reader, client_id, hub_name })
}

fn read_loop(mut reader: MessageReader<BufReader<Stream>>, shared: &Shared, received: &Sender<Received>) {
    let reason = loop {
        let body = match reader.read(MAX_MESSAGE_LEN) {
            Ok(body) => body,
            Err(ReadError::Closed) => break "the hub closed the connection".to_owned(),
            Err(e) => break format!("connection to the hub lost: {e}"),
        };
        let message = match wire::decode(body) {
            Ok(message) => message,
            Err(e) => break format!("the hub sent an invalid message: {e}"),
        };
        match dispatch(message, shared, received) {
            Flow::Continue => {}
            Flow::Close(reason) => break reason,
            Flow::Leave => return,
        }
    };
    shared.close(reason);
}

/// A link over shared rings (`shm://`, `ivshmem://`): a reader thread takes
/// messages from its to-client ring; a watch thread notices the hub's end.
trait RingLink: Send + Sync + 'static {
    fn read_loop(&self, dispatch: impl FnMut(Message<'_>) -> Flow) -> Option<String>;
    fn watch(&self);
}

impl RingLink for ShmLink {
    fn read_loop(&self, dispatch: impl FnMut(Message<'_>) -> Flow) -> Option<String> {
        ShmLink::read_loop(self, dispatch)
    }
    fn watch(&self) {
        ShmLink::watch(self)
    }
}

impl RingLink for IvshmemLink {
    fn read_loop(&self, dispatch: impl FnMut(Message<'_>) -> Flow) -> Option<String> {
        IvshmemLink::read_loop(self, dispatch)
    }
    fn watch(&self) {
        IvshmemLink::watch(self)
    }
}

/// Starts a named client thread.
type Spawn<'a> = &'a dyn Fn(&str, Box<dyn FnOnce() + Send>) -> Result<JoinHandle<()>, ClientError>;

/// Start a ring link's reader and watch threads.
fn start_ring_threads<L: RingLink>(
    link: &Arc<L>,
    shared: &Arc<Shared>,
    received_tx: Sender<Received>,
    spawn: Spawn<'_>,
) -> Result<[JoinHandle<()>; 2], ClientError> {
    let (reader_link, reader_shared) = (Arc::clone(link), Arc::clone(shared));
    let reader = spawn(
        "fh-client-read",
        Box::new(move || {
            let ended = reader_link.read_loop(|message| dispatch(message, &reader_shared, &received_tx));
            if let Some(reason) = ended {
                reader_shared.close(reason);
            }
        }),
    )?;
    let watch_link = Arc::clone(link);
    let watcher = spawn("fh-client-watch", Box::new(move || watch_link.watch()))?;
    Ok([reader, watcher])
}

/// Act on one message from the hub, whatever the transport: queue frames
/// for `recv`, answer waiting requests, count overruns.
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
                if received.len() == 1 {
                    if let Some(ready) = shared.ready.get() {
                        ready.raise();
                    }
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

/// Runs until the send queue is closed and drained; `_done` is dropped on
/// return, which tells `Client::drop` the goodbye has been written.
fn write_loop(mut stream: Stream, queue: &Receiver<WriteItem>, shared: &Shared, _done: Sender<()>) {
    let mut packer = Packer::new();
    let meta = FrameMeta::default();
    while let Ok(first) = queue.recv() {
        let mut item = Some(first);
        while let Some(next) = item.take() {
            match next {
                WriteItem::Frame { port, frame } => packer.push_frame(port, &frame, &meta),
                WriteItem::Control(bytes) => packer.push_encoded(&bytes),
            }
            if packer.len() < WRITE_CHUNK {
                item = queue.try_recv().ok();
            }
        }
        if !packer.is_empty() {
            if let Err(e) = stream.write_all(packer.finish()) {
                return shared.close(format!("cannot write to the hub: {e}"));
            }
            packer.clear();
        }
    }
}
