//! The fieldhub hub: one process that is the bus.
//!
//! # Layout
//!
//! The data path reads top to bottom:
//!
//! - [`transport`]: stream transports (TCP, unix sockets). A reader thread per
//!   connection turns messages into [`queues::Inbound`] requests; a writer
//!   thread per connection drains that client's [`queues::Outbound`] queue.
//!   Shared-memory clients (`transport::shm`) have only a session thread
//!   that sets them up and watches for their end; the bus thread reads and
//!   writes their rings itself.
//! - [`queues`]: the bounded queues between transports and the bus thread.
//! - [`bus`]: the bus thread — one sequencer for its channels; it owns all
//!   bus state (clients, ports, channels).
//! - [`channel`]: one channel's sequence counter, clock and fan-out.
//! - [`config`]: the TOML configuration and the built-in default.
//!
//! # Invariants
//!
//! - Every frame of a channel passes through that channel's sequencer on the
//!   bus thread; receivers see one total order with sequence numbers 1, 2, 3…
//! - The bus thread shares no lock with anything: it is reached only through
//!   its inbound queue and the shared-memory rings, and waits on one
//!   doorbell for both. Transports know nothing of channels.
//! - Every queue is bounded. A full receiver queue drops frames for that
//!   receiver only, and counts and reports them — unless the port asked to
//!   hold the bus instead.
//! - A misbehaving client is disconnected alone; the bus never stops for it.

pub mod bus;
pub mod bus_load;
pub mod channel;
pub mod clock;
pub mod config;
pub mod confinement;
pub mod control;
pub mod credit;
pub mod fault;
pub mod id_counter;
pub mod member;
pub mod queues;
pub mod recording;
pub mod transport;
pub mod tx_queue;

use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, AtomicU32, AtomicUsize, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;

pub use config::{ConfigError, HubConfig, ListenAddr};
use control::http::ControlServer;
use queues::{Inbound, InboxSender};
use transport::ivshmem::{IvshmemRegions, RegionError};
use transport::listener::{self, Bound};
use transport::session::SessionContext;
use transport::shm::ShmListener;
use transport::socketcan::{SocketCanPort, SocketCanPortError};

/// How long shutdown waits for sessions to deliver their `GOODBYE`.
const GOODBYE_GRACE: std::time::Duration = std::time::Duration::from_secs(2);

/// Why a hub could not start.
#[derive(Debug, thiserror::Error)]
pub enum StartError {
    #[error(transparent)]
    Config(#[from] ConfigError),
    #[error("cannot listen on {addr}: {source}")]
    Listen { addr: ListenAddr, source: std::io::Error },
    #[error("cannot start the {what} thread: {source}")]
    Thread { what: &'static str, source: std::io::Error },
    // `error`, not `source`: the text already carries it, and an error
    // chain printed by the caller would repeat it.
    #[error("cannot serve shared memory as shm://{name}: {error}")]
    Shm { name: String, error: std::io::Error },
    #[error(transparent)]
    Ivshmem(#[from] RegionError),
    #[error(transparent)]
    SocketCan(#[from] SocketCanPortError),
}

/// A running hub. Dropping it shuts it down.
pub struct Hub {
    inbox: InboxSender,
    stopping: Arc<AtomicBool>,
    addrs: Vec<ListenAddr>,
    /// The session socket when serving shared memory.
    shm_socket: Option<PathBuf>,
    sessions: Arc<SessionContext>,
    bus_thread: Option<JoinHandle<()>>,
    accept_threads: Vec<JoinHandle<()>>,
    control: Option<Arc<ControlServer>>,
}

impl Hub {
    /// Bind every listen address and start serving.
    pub fn start(config: HubConfig) -> Result<Self, StartError> {
        let stopping = Arc::new(AtomicBool::new(false));
        let mut bound = Vec::new();
        for addr in config.listen_addrs()? {
            let listener = Bound::bind(&addr).map_err(|source| StartError::Listen { addr: addr.clone(), source })?;
            bound.push(listener);
        }
        let addrs = bound
            .iter()
            .map(|b| b.local_addr())
            .collect::<Result<Vec<_>, _>>()
            .map_err(|source| StartError::Listen { addr: ListenAddr::Unix("?".into()), source })?;

        let shm_error = |error| StartError::Shm { name: config.hub.shm.clone().unwrap_or_default(), error };
        let shm = config.hub.shm.as_deref().map(ShmListener::bind).transpose().map_err(shm_error)?;
        // The bus thread's doorbell, rung by stream sessions and shared-memory
        // clients alike; its descriptor goes to every shared-memory client.
        let (bell, bell_fd) = fieldhub_shm::BellSegment::create().map_err(shm_error)?;
        let ivshmem = IvshmemRegions::open(&config.hub.ivshmem)?;
        let socketcan_ports = SocketCanPort::open_all(&config.ports)?;
        let bell = Arc::new(bell);
        let (inbox, inbox_rx) = queues::inbox(Arc::clone(&bell));
        let bus = bus::Bus::new(&config, Arc::clone(&stopping));
        let bus_thread = std::thread::Builder::new()
            .name("fh-bus".into())
            .spawn(move || bus.run(inbox_rx))
            .map_err(|source| StartError::Thread { what: "bus", source })?;

        let ctx = Arc::new(SessionContext {
            inbox: inbox.clone(),
            hub_name: config.hub.name.clone(),
            token: config.hub.token.clone(),
            next_client: AtomicU32::new(1),
            live_clients: AtomicUsize::new(0),
            stopping: Arc::clone(&stopping),
        });
        let mut hub = Self {
            inbox,
            stopping,
            addrs,
            shm_socket: shm.as_ref().map(|l| l.path().to_owned()),
            sessions: Arc::clone(&ctx),
            bus_thread: Some(bus_thread),
            accept_threads: Vec::new(),
            control: None,
        };
        let control = ControlServer::start(hub.inbox.clone(), config.hub.token.clone())
            .map_err(|source| StartError::Thread { what: "control", source })?;
        let control = Arc::new(control);
        hub.control = Some(Arc::clone(&control));
        for listener in bound {
            let (ctx, stopping, control) = (Arc::clone(&ctx), Arc::clone(&hub.stopping), Arc::clone(&control));
            let thread = std::thread::Builder::new()
                .name("fh-accept".into())
                .spawn(move || listener.accept_loop(ctx, stopping, Some(control)))
                .map_err(|source| StartError::Thread { what: "accept", source })?;
            hub.accept_threads.push(thread);
        }
        if let Some(listener) = shm {
            let (ctx, stopping, bell_fd) = (Arc::clone(&ctx), Arc::clone(&hub.stopping), Arc::new(bell_fd));
            let thread = std::thread::Builder::new()
                .name("fh-shm-accept".into())
                .spawn(move || listener.accept_loop(ctx, bell_fd, stopping))
                .map_err(|source| StartError::Thread { what: "accept", source })?;
            hub.accept_threads.push(thread);
        }
        if !ivshmem.is_empty() {
            let (ctx, stopping) = (Arc::clone(&ctx), Arc::clone(&hub.stopping));
            let thread = std::thread::Builder::new()
                .name("fh-ivshmem".into())
                .spawn(move || ivshmem.poll_loop(ctx, bell, stopping))
                .map_err(|source| StartError::Thread { what: "ivshmem", source })?;
            hub.accept_threads.push(thread);
        }
        for port in socketcan_ports {
            let thread =
                port.start(Arc::clone(&ctx)).map_err(|source| StartError::Thread { what: "SocketCAN port", source })?;
            hub.accept_threads.push(thread);
        }
        Ok(hub)
    }

    /// The addresses the hub listens on (port 0 resolved to the real port).
    pub fn listen_addrs(&self) -> &[ListenAddr] {
        &self.addrs
    }

    /// The session socket clients reach as `shm://NAME`, when serving shared memory.
    pub fn shm_socket(&self) -> Option<&std::path::Path> {
        self.shm_socket.as_deref()
    }

    /// Say goodbye to every client, stop accepting and wait for the bus
    /// thread to finish.
    pub fn shutdown(&mut self) {
        if self.stopping.swap(true, Ordering::AcqRel) {
            return;
        }
        let _ = self.inbox.send(Inbound::Shutdown);
        if let Some(bus) = self.bus_thread.take() {
            let _ = bus.join();
        }
        for addr in &self.addrs {
            listener::wake(addr);
        }
        if let Some(path) = &self.shm_socket {
            listener::wake(&ListenAddr::Unix(path.clone()));
        }
        for thread in self.accept_threads.drain(..) {
            let _ = thread.join();
        }
        // The accept threads held the other references; this one stops it.
        if let Some(control) = self.control.take().and_then(|c| Arc::try_unwrap(c).ok()) {
            drop(control);
        }
        // Give every session the chance to write its GOODBYE before the
        // process may exit; a client that does not read cannot hold us long.
        let deadline = std::time::Instant::now() + GOODBYE_GRACE;
        while self.sessions.live_clients.load(Ordering::Acquire) > 0 && std::time::Instant::now() < deadline {
            std::thread::sleep(std::time::Duration::from_millis(5));
        }
    }
}

impl Drop for Hub {
    fn drop(&mut self) {
        self.shutdown();
    }
}
