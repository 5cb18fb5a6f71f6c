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
//!   an encoded message within a timeout, take the hub's messages, wait and
//!   wake waiters, the link's own thread, closing. `transport.rs`:
//!   `connect`, which picks the transport a URL names (the one module that
//!   imports the transports, so they and `link.rs` import one way).
//! - `handshake.rs`: `HELLO` and what the hub's first message means, once
//!   for all transports; a transport only moves the two messages.
//! - `hub_owner.rs`: before the handshake on a unix socket or loopback TCP,
//!   which user serves the hub; another user's hub hears nothing.
//! - `receive.rs`: who takes the hub's messages (one consumer at a time, a
//!   token) and how every other thread waits. On the shared-memory links
//!   the application's waiting thread takes from the ring itself; on
//!   streams, and once the ready fd exists, a reader thread does.
//! - `spin.rs`: how long a waiting thread spins before it sleeps.
//! - `dispatch.rs`: what the consumer does with each message from the hub,
//!   and the state it shares with the application's threads (the receive
//!   queue, reply slots, counters).
//! - `stream.rs`: TCP, unix socket and serial device (`serial:PATH`): a
//!   writer thread packs queued frames into `FRAMES` messages (many frames
//!   per write under load, one at once when idle).
//! - `shm.rs` (`shm://NAME`) and `ivshmem.rs` (`ivshmem://PATH`): rings in
//!   shared memory. `send` writes into the to-hub ring itself
//!   (`ring_sender.rs`) and the consumer takes from the to-client ring
//!   (`ring_receiver.rs`), both shared by the two links; they differ in how
//!   they wait (futex doorbells or polling) and how they notice the hub's end
//!   (the session socket or the region's beat words).
//! - `time.rs`: virtual time for a synchronised participant
//!   ([`ClientOptions::synchronized`]): [`Client::step`] and [`Client::now`],
//!   from the hub's `GRANT`s that the consumer records.
//! - [`url`]: the forms of hub URL, one table ([`url::SCHEMES`]) that the
//!   parser, the messages about a URL and the C library's text all take;
//!   [`tls`]: TLS settings and the TLS stream under `tls://`; [`filter`]:
//!   acceptance filters.
//! - [`ClientError`]: every failure, with the hub's own text where it gave one.
//!
//! # Invariants
//!
//! - Frames are received in the channel's order, each by exactly one
//!   `recv`. When the application does not read, frames are dropped and
//!   counted for this client's ports only (see [`Client::rx_dropped`]): by
//!   the hub when the connection (or the shared-memory ring) backs up, and
//!   by the consumer when the receive queue is full — like a CAN
//!   controller's receive overrun — so replies (`flush`, `stats`, port
//!   changes) never wait behind unread frames. A port opened with
//!   `block_on_overflow` is never dropped from: its frames wait in the
//!   ring or socket, and the hub holds the channel, until the application
//!   reads.
//! - On `shm://` and `ivshmem://` nobody reads while nobody waits: frames
//!   stay in the to-client ring (8,192 slots, 5,888 of them for frames)
//!   until `recv`, a request (`flush`, `stats`, …), `rx_dropped` or a `send`
//!   now and then takes them into the receive queue — as many as it must
//!   to reach what it waits for. The ready fd ([`Client::fileno`]) starts a
//!   reader thread that takes them as they come.
//! - Every blocking call has a timeout or ends when the connection does —
//!   also when another thread closes it ([`Client::close`]); a dead hub is
//!   an error, never a hang. A timeout is reported as one
//!   ([`ClientError::SendQueueFull`], [`ClientError::RequestQueueFull`],
//!   [`ClientError::Timeout`]), never as the connection's end.
//! - The same answer of a hub gives the same outcome over every transport:
//!   one handshake, one dispatcher.
//! - Once the session has ended (the hub said `GOODBYE`, reported a fatal
//!   `ERROR`, or the connection ended) the client sends nothing more, not
//!   even its own `GOODBYE` (`spec/protocol.md` section 5).

mod default_hub;
mod dispatch;
mod error;
pub mod fate;
#[cfg_attr(windows, path = "windows/file_mode.rs")]
mod file_mode;
pub mod filter;
mod handshake;
#[cfg_attr(windows, path = "windows/hub_owner.rs")]
mod hub_owner;
#[cfg_attr(windows, path = "windows/ivshmem.rs")]
mod ivshmem;
mod link;
#[cfg_attr(windows, path = "windows/local_stream.rs")]
mod local_stream;
#[cfg_attr(windows, path = "windows/ready.rs")]
mod ready;
mod receive;
#[cfg(target_os = "linux")]
mod ring_receiver;
#[cfg(target_os = "linux")]
mod ring_sender;
#[cfg_attr(windows, path = "windows/shm.rs")]
mod shm;
mod spin;
mod stream;
mod time;
pub mod tls;
pub mod token;
mod transport;
pub mod url;
#[cfg(target_os = "linux")]
use fieldhub_shm::socket as shm_socket;
#[cfg(windows)]
#[path = "windows/shm_socket.rs"]
mod shm_socket;

use std::sync::atomic::{AtomicBool, AtomicU32, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

pub use default_hub::{connect_default, connect_default_url};
use dispatch::{Reply, ReplySlot, Shared, Waiting};
pub use error::ClientError;
pub use fate::{ChannelCondition, ChannelEvent, DropReason, DropTally};
pub use fieldhub_proto::stats::{
    ChannelStats, HubStats, IdStats, LateDeadline, PortStats, RouteStats, TimeStats, TimerStats,
};
use fieldhub_proto::wire::{self, ChannelFlags, ErrorReport, Message, OpenPort, PortOptions};
pub use fieldhub_proto::wire::{ErrorCode, WakeFilter};
pub use fieldhub_proto::{Frame, FrameFlags, FrameKind, FrameMeta};
pub use filter::{Filter, CAN_INV_FILTER};
pub use hub_owner::HUB_USER_VAR;
use link::{Link, SendFail};
use ready::{RawFd, ReadySignal};
use receive::Waited;
/// The longest a client's consumer spins before it sleeps (on a machine
/// with cores to spare), for benchmarks that wait as a client does.
pub use spin::MAX_SPIN as CONSUMER_MAX_SPIN;
pub use url::{default_hub_url, HubUrl};

/// Frames the receive queue holds before the client stops reading its
/// socket (or its shared-memory ring) for lossless ports and drops frames
/// for the others.
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
/// On a direct link, every this many sends the sending thread takes what
/// waits in the to-client ring if nobody else does (`receive::pump`): an
/// application that only sends still learns of the hub's errors and
/// overruns, and its unread replies never fill the ring's reserve.
const PUMP_EVERY: u32 = 64;

/// How to introduce this client to the hub.
#[derive(Clone, Debug)]
pub struct ClientOptions {
    /// Name shown in the hub's logs and used for unnamed ports.
    pub name: String,
    /// Token, if the hub requires one; `None`: the environment's
    /// (`FIELDHUB_TOKEN`, else the file `FIELDHUB_TOKEN_FILE` names; see [`token`]).
    pub token: Option<String>,
    /// Bound for connecting and for each request.
    pub timeout: Duration,
    /// Join the hub's virtual time as a synchronised participant: bus time
    /// advances only once this client has finished its step
    /// ([`Client::step`]). A hub in real time refuses the connection.
    pub synchronized: bool,
    /// With `synchronized`: this participant may step ahead — send frames
    /// stamped for later steps ([`Client::send_at`]) and declare several
    /// steps at once ([`Client::step_ahead`]). A hub that does not know
    /// the option refuses the connection, saying so.
    pub ahead: bool,
    /// TLS settings for `tls://` URLs; each one not set is taken from the
    /// environment (`FIELDHUB_TLS_CA`, ...; see [`tls`]).
    pub tls: tls::TlsOptions,
}

impl Default for ClientOptions {
    fn default() -> Self {
        Self {
            name: "client".into(),
            token: None,
            timeout: DEFAULT_TIMEOUT,
            synchronized: false,
            ahead: false,
            tls: tls::TlsOptions::default(),
        }
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
    /// Take CAN FD frames (SocketCAN `CAN_RAW_FD_FRAMES`): without it the
    /// port receives no CAN FD frame and may send none.
    pub fd: bool,
    /// Listen-only: the port receives but never transmits or acknowledges.
    pub listen_only: bool,
    /// Transmit-only: the port sends but receives nothing (with
    /// `receive_own`, only its own frames, as confirmations) and does not
    /// acknowledge — for a sender that never reads. Not with `listen_only`.
    pub transmit_only: bool,
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
    /// Whether the channel carried CAN FD when the port opened.
    pub channel_fd: bool,
}

/// A frame received on one of the client's ports.
#[derive(Clone, Debug, PartialEq, Eq)]
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
    client_id: u32,
    hub_name: String,
    timeout: Duration,
    next_request: AtomicU32,
    /// Sends since the last `pump` (direct links).
    sends: AtomicU32,
    ports: Mutex<Vec<Port>>,
    /// The link's own thread and, on a link that is not direct or once the
    /// ready fd exists, the reader thread.
    threads: Mutex<Vec<JoinHandle<()>>>,
    /// The reader thread has been started.
    reading: AtomicBool,
    /// [`Client::close`] has begun: it runs once.
    closing: AtomicBool,
    /// Connected with [`ClientOptions::ahead`].
    ahead: bool,
    /// The step ahead begun and not yet awaited (`time.rs`).
    step_ahead: Mutex<Option<time::PendingAhead>>,
}

impl Client {
    /// Connect with default options.
    pub fn connect(url: &str) -> Result<Self, ClientError> {
        Self::connect_with(url, &ClientOptions::default())
    }

    /// Connect and perform the handshake.
    pub fn connect_with(url: &str, options: &ClientOptions) -> Result<Self, ClientError> {
        let from_environment;
        let options = match &options.token {
            None => {
                from_environment = ClientOptions { token: token::token_from_environment()?, ..options.clone() };
                &from_environment
            }
            Some(_) => options,
        };
        let (link, session) = transport::connect(url, options)?;
        let shared = Arc::new(Shared::new());
        let own = spawn("fh-client-link", link_thread(&link, &shared)).inspect_err(|_| link.close())?;
        let client = Self {
            shared,
            link,
            client_id: session.client_id,
            hub_name: session.hub_name,
            timeout: options.timeout,
            next_request: AtomicU32::new(1),
            sends: AtomicU32::new(0),
            ports: Mutex::new(Vec::new()),
            threads: Mutex::new(vec![own]),
            reading: AtomicBool::new(false),
            closing: AtomicBool::new(false),
            ahead: options.synchronized && options.ahead,
            step_ahead: Mutex::new(None),
        };
        // A stream is read by a reader thread from the start; dropping the
        // client on failure ends the link thread.
        if !client.link.direct() {
            client.start_reader()?;
        }
        if options.synchronized {
            client.await_first_grant()?;
        }
        Ok(client)
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
        if config.fd {
            options = options.union(PortOptions::FD);
        }
        if config.listen_only {
            options = options.union(PortOptions::LISTEN_ONLY);
        }
        if config.transmit_only {
            options = options.union(PortOptions::TRANSMIT_ONLY);
        }
        let mut bytes = Vec::new();
        let port_name = config.name.as_deref().unwrap_or("");
        wire::encode(&mut bytes, &Message::OpenPort(OpenPort { request, options, channel, port_name }));
        lock(&self.shared.opening).insert(request, options);
        let reply = self.request(Waiting::Request(request), bytes);
        lock(&self.shared.opening).remove(&request);
        match reply? {
            Reply::Opened(opened) => {
                let port = Port {
                    handle: opened.port,
                    channel: channel.to_owned(),
                    channel_id: opened.channel_id,
                    port_id: opened.port_id,
                    channel_fd: opened.channel_flags.contains(ChannelFlags::CANFD),
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
        self.send_stamped(port, frame, 0, timeout)
    }

    /// Send a frame, stamped for bus time `at_ns` (0: none), waiting at
    /// most `timeout` for room.
    fn send_stamped(
        &self,
        port: &Port,
        frame: &Frame,
        at_ns: u64,
        timeout: Option<Duration>,
    ) -> Result<(), ClientError> {
        self.check_open(port)?;
        if self.shared.is_closed() {
            return Err(self.shared.closed_error());
        }
        if let Some(why) = self.shared.send_rules(port.handle).refusal(frame) {
            return Err(ClientError::FrameNotAllowed { port: port.handle, channel: port.channel.clone(), why });
        }
        // A participant in virtual time never waits for the hub (its send
        // is part of its step): the hub's word at the last GRANT is the
        // full queue a send that must not wait reports, as in real time.
        if timeout == Some(Duration::ZERO) && self.tx_queue_full() {
            return Err(ClientError::SendQueueFull(Duration::ZERO));
        }
        let frame = frame.clone().with_echo(false);
        let mut sent = if self.link.direct() {
            // Relaxed: a rough count, nothing is read through it.
            if self.sends.fetch_add(1, Ordering::Relaxed) % PUMP_EVERY == PUMP_EVERY - 1 {
                receive::pump(&*self.link, &self.shared);
            }
            // No room: the hub may be holding a lossless port's channel
            // until this client reads — perhaps its own frames, echoed. Take
            // what waits (if nobody else does) before waiting for room, so
            // an application that sends a burst before it reads stalls only
            // once its receive queue is full, as over a stream.
            match self.link.send_frame(port.handle, &frame, at_ns, Some(Duration::ZERO)) {
                Err(SendFail::Timeout) if timeout != Some(Duration::ZERO) => {
                    receive::pump(&*self.link, &self.shared);
                    self.link.send_frame(port.handle, &frame, at_ns, timeout)
                }
                other => other,
            }
        } else {
            self.link.send_frame(port.handle, &frame, at_ns, timeout)
        };
        if matches!(sent, Err(SendFail::Closed)) && !self.shared.is_closed() {
            // The link ended under the send: the reason is in the ring.
            receive::pump(&*self.link, &self.shared);
            sent = Err(SendFail::Closed);
        }
        match sent {
            Ok(()) => Ok(()),
            Err(SendFail::Timeout) => Err(ClientError::SendQueueFull(timeout.unwrap_or_default())),
            Err(SendFail::Closed) => Err(self.shared.closed_error()),
        }
    }

    /// Receive the next frame on any port: `None` when `timeout` passes
    /// first (`None` timeout: wait until a frame comes or the connection ends).
    ///
    /// On `shm://` and `ivshmem://` the calling thread takes the frame from
    /// the hub's ring itself (unless another thread is doing so for it):
    /// the hub's wake-up reaches this thread, and no other thread runs.
    pub fn recv(&self, timeout: Option<Duration>) -> Result<Option<Received>, ClientError> {
        // A frame already queued costs no clock read.
        if let Some(received) = self.take_queued() {
            return Ok(Some(received));
        }
        let deadline = timeout.map(|t| Instant::now() + t);
        loop {
            if let Some(received) = self.take_queued() {
                return Ok(Some(received));
            }
            match receive::wait_until(&*self.link, &self.shared, deadline, &|| self.shared.has_frames()) {
                Waited::Ready => {}
                Waited::TimedOut => return Ok(None),
                // Frames taken before the end are still received.
                Waited::Closed => return self.take_queued().map(Some).ok_or_else(|| self.shared.closed_error()),
            }
        }
    }

    /// The oldest frame in the receive queue.
    fn take_queued(&self) -> Option<Received> {
        let (received, held) = self.shared.pop_frame()?;
        if held {
            // The consumer waits for room for a lossless frame.
            self.link.notify();
        }
        Some(received)
    }

    /// A file descriptor that is readable while frames are waiting in
    /// [`Client::recv`]'s queue or the connection has ended: for `poll`,
    /// `select`, epoll or an asyncio reader. Never read it yourself; call
    /// `recv`/`try_recv` when it is readable.
    ///
    /// On `shm://` and `ivshmem://`, where frames otherwise wait in the
    /// hub's ring until a thread waits for them, the first call starts a
    /// reader thread that takes them into the receive queue as they come,
    /// so the fd becomes readable without anyone waiting; `recv` then takes
    /// from that queue.
    pub fn fileno(&self) -> Result<RawFd, ClientError> {
        let ready = match self.shared.ready.get() {
            Some(ready) => ready,
            None => {
                let signal =
                    ReadySignal::new().map_err(|e| ClientError::Protocol(format!("cannot create a ready fd: {e}")))?;
                let ready = self.shared.ready.get_or_init(|| signal);
                self.shared.settle_ready_now();
                ready
            }
        };
        self.start_reader()?;
        Ok(ready.fd())
    }

    /// Start the reader thread, once.
    fn start_reader(&self) -> Result<(), ClientError> {
        let mut threads = lock(&self.threads);
        if self.reading.load(Ordering::Relaxed) {
            return Ok(());
        }
        let (link, shared) = (Arc::clone(&self.link), Arc::clone(&self.shared));
        threads.push(spawn("fh-client-read", Box::new(move || receive::consume(&*link, &shared)))?);
        // Relaxed: written and read under the `threads` lock.
        self.reading.store(true, Ordering::Relaxed);
        Ok(())
    }

    /// Set the acceptance filters of `port`: `None` receives everything,
    /// `Some(&[])` nothing but error frames. Applies to frames not yet taken
    /// from the socket or the shared-memory ring; frames already in the
    /// receive queue are not re-filtered.
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
        drop(errors);
        // Every drop before the PING was reported before its PONG: each
        // flush returns the oldest report not returned yet.
        match self.take_dropped() {
            Some(dropped) => Err(dropped),
            None => Ok(elapsed),
        }
    }

    /// [`Client::flush`] until a flush comes back with no report of frames
    /// off the bus, adding every report to `dropped`: when it returns `Ok`,
    /// every frame sent before the call is on the bus or counted there.
    /// Any other error (a [`ClientError::Timeout`] on a channel that holds
    /// frames long) returns with the reports so far kept in `dropped`, so
    /// the caller can ask again.
    pub fn flush_all(&self, dropped: &mut DropTally) -> Result<Duration, ClientError> {
        loop {
            match self.flush() {
                Err(ClientError::Dropped { reason, dropped: n, .. }) => dropped.add(reason, n),
                done => return done,
            }
        }
    }

    /// The oldest report of frames off the bus (`TX_DROPPED`) that neither
    /// a flush nor this call has returned yet, as [`ClientError::Dropped`];
    /// `None` when there is none. Does not wait: a flush first makes the
    /// reports complete.
    pub fn take_dropped(&self) -> Option<ClientError> {
        receive::pump(&*self.link, &self.shared);
        let mut drops = lock(&self.shared.drops);
        (!drops.is_empty()).then(|| drops.remove(0)).map(|d| ClientError::Dropped {
            port: d.port,
            reason: d.reason,
            dropped: d.dropped,
        })
    }

    /// Frames sent on `port` that the hub reported off the bus
    /// (`TX_DROPPED`: bus-off, a fault rule, a lost federation owner, an
    /// unplugged port), since the port was opened. After a
    /// [`Client::flush`] the count is complete.
    pub fn tx_dropped(&self, port: &Port) -> u64 {
        receive::pump(&*self.link, &self.shared);
        self.shared.tx_dropped.get(port.handle as usize).map_or(0, |c| c.load(Ordering::Relaxed))
    }

    /// Changes of this client's ports' channels the hub reported since the
    /// last call (`CHANNEL_STATE`: a federation's owner gone or back, a gap
    /// in the sequence), oldest first.
    pub fn channel_events(&self) -> Vec<fate::ChannelEvent> {
        receive::pump(&*self.link, &self.shared);
        std::mem::take(&mut *lock(&self.shared.channel_events))
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
    /// queue), since the port was opened. The hub reports its drops once
    /// there is room again for this port's frames, and before it answers a
    /// [`Client::flush`]: after a flush the count is complete.
    pub fn rx_dropped(&self, port: &Port) -> u64 {
        // What waits in a shared-memory ring may carry a report.
        receive::pump(&*self.link, &self.shared);
        self.shared.rx_dropped.get(port.handle as usize).map_or(0, |c| c.load(Ordering::Relaxed))
    }

    /// End the session, from any thread and at any time — also while other
    /// threads are blocked in [`Client::recv`], [`Client::send`] or a
    /// request: what is queued reaches the hub (bounded by a grace period of
    /// a second), then every blocked call returns [`ClientError::Closed`]
    /// and every later call fails with it. Closing twice does nothing more;
    /// dropping the client closes it too.
    pub fn close(&self) {
        if self.closing.swap(true, Ordering::AcqRel) {
            return;
        }
        let ended = self.shared.is_closed();
        // First, so a concurrent send fails instead of queueing behind the
        // goodbye, and blocked calls wake with this reason, not a vaguer one.
        receive::end(&*self.link, &self.shared, "the client closed the connection".into());
        // Once the session has ended a goodbye reaches nobody — or worse, on
        // a serial port whose host end reconnects, the next hub, as the first
        // message of a stranger's session; on an ivshmem region, a session
        // the hub has since given to another client.
        if !ended {
            let mut goodbye = Vec::new();
            let report = ErrorReport { code: 0, request: 0, fatal: true, text: "client closed" };
            wire::encode(&mut goodbye, &Message::Goodbye(report));
            let _ = self.link.send_message(goodbye, Some(GOODBYE_GRACE));
        }
        // Before the link wakes them: a consumer or a reader waiting for
        // room returns instead of waiting for an application that is gone.
        self.shared.leave();
        self.link.close();
    }

    /// Whether `port`'s channel carries CAN FD frames now (the port may have
    /// been moved to another channel since it opened).
    pub fn channel_fd(&self, port: &Port) -> bool {
        self.shared.send_rules(port.handle).channel_fd()
    }

    fn check_open(&self, port: &Port) -> Result<(), ClientError> {
        if lock(&self.ports).iter().any(|p| p.handle == port.handle) {
            Ok(())
        } else {
            Err(ClientError::PortNotOpen(port.handle))
        }
    }

    /// Send a request and wait for its reply — on a direct link taking the
    /// hub's messages meanwhile, frames for `recv` included, so a reply
    /// behind unread frames is reached.
    fn request(&self, key: Waiting, bytes: Vec<u8>) -> Result<Reply, ClientError> {
        let slot = Arc::new(ReplySlot::default());
        lock(&self.shared.waiters).insert(key, Arc::clone(&slot));
        if self.shared.is_closed() {
            lock(&self.shared.waiters).remove(&key);
            return Err(self.shared.closed_error());
        }
        if let Err(fail) = self.link.send_message(bytes, Some(self.timeout)) {
            lock(&self.shared.waiters).remove(&key);
            // A full send queue is a timeout, not an end: the connection
            // stays open and the next send may well find room.
            return Err(match fail {
                SendFail::Timeout => ClientError::RequestQueueFull(self.timeout),
                SendFail::Closed => self.shared.closed_error(),
            });
        }
        let deadline = Instant::now() + self.timeout;
        let waited = receive::wait_until(&*self.link, &self.shared, Some(deadline), &|| slot.is_done());
        if let Some(reply) = slot.take() {
            return Ok(reply);
        }
        lock(&self.shared.waiters).remove(&key);
        // A reply filled between the look and the removal still counts.
        if let Some(reply) = slot.take() {
            return Ok(reply);
        }
        match waited {
            Waited::TimedOut => Err(ClientError::Timeout(self.timeout)),
            Waited::Ready | Waited::Closed => Err(self.shared.closed_error()),
        }
    }
}

impl Drop for Client {
    fn drop(&mut self) {
        self.close();
        for thread in lock(&self.threads).drain(..) {
            let _ = thread.join();
        }
    }
}

/// Start a client thread.
fn spawn(name: &str, body: Box<dyn FnOnce() + Send>) -> Result<JoinHandle<()>, ClientError> {
    std::thread::Builder::new()
        .name(name.into())
        .spawn(body)
        .map_err(|e| ClientError::Closed { reason: format!("cannot start a client thread: {e}") })
}

/// The link's own thread: [`Link::tend`]; then, on a direct link whose hub
/// ended the session, take what the hub published before the end, so its
/// reason is known and every waiter wakes even if nobody was waiting.
fn link_thread(link: &Arc<dyn Link>, shared: &Arc<Shared>) -> Box<dyn FnOnce() + Send> {
    let (link, shared) = (Arc::clone(link), Arc::clone(shared));
    Box::new(move || {
        if let Some(reason) = link.tend() {
            receive::end(&*link, &shared, reason);
        }
        if link.direct() {
            receive::consume(&*link, &shared);
        }
    })
}
