//! The fieldhub hub: one process that is the bus.
//!
//! # Layout
//!
//! The bus itself — channels, arbitration, timing, faults, fan-out — is the
//! `fieldhub-bus` crate, a state machine without I/O; this crate is its
//! runtime and every way to reach it, one folder per layer. Imports point down
//! this list, never up (`tests/layers.rs` checks every edge):
//!
//! - [`Hub`] (this file) starts and stops the layers below.
//! - `control/`: the HTTP/JSON control API and the web monitor.
//! - [`federation`]: hubs sharing channels over Eclipse Zenoh.
//! - `transport/`: moves bytes or ring messages. The reactor thread serves
//!   every TCP, unix-socket and `shm://` session socket; ivshmem regions have
//!   a poller; SocketCAN ports and SIL Kit networks a thread per direction.
//!   Shared memory, unix sockets, ivshmem and SocketCAN are Linux-only: a
//!   hub elsewhere (Windows) serves TCP and TLS (`config::platform`).
//! - [`session`]: the session layer: admission ([`session::ClientSlot`]),
//!   handshake, the one mapping from a client's message to a bus request,
//!   errors and goodbyes; credentials and peer users.
//! - `bus_thread/`: the loop that runs the bus, its wake-up and clock.
//! - [`recording`]: where recordings may be written, and their writers.
//! - [`config`]: the TOML configuration and the built-in default.
//! - [`fatal`]: the panic hook of a hub process.
//!
//! # Invariants
//!
//! - Every frame of a channel passes through that channel's sequencer on the
//!   bus thread; receivers see one total order with sequence numbers 1, 2, 3…
//! - The bus thread shares no lock with the control plane and never waits on
//!   a client: outboxes never block, a lossless receiver without room holds
//!   its own channel only, and every wait has a deadline.
//! - Every queue is bounded; every sender is held to a bounded number of
//!   frames ahead of the bus (transmit credit plus its transport's buffer).
//! - A misbehaving client is disconnected alone; the bus never stops for it.

mod bus_thread;
mod check;
pub mod config;
mod control;
pub mod fatal;
pub mod federation;
pub mod recording;
pub mod session;
mod transport;

use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;

use bus_thread::wake::BusWake;
pub use check::{check_config, CheckError};
use config::CannelloniListen;
pub use config::{ConfigError, HubConfig, ListenAddr, TimeMode};
use control::dbc_store::{DbcFileError, DbcStore};
use control::http::ControlServer;
use fieldhub_bus::inbox::{Inbound, InboxSender};
use session::Sessions;
/// cannelloni's packet and stream formats (the fuzz targets read them).
pub use transport::cannelloni::codec as cannelloni_codec;
use transport::cannelloni::{CannelloniEndpoints, CannelloniError};
#[cfg(target_os = "linux")]
use transport::ivshmem::{IvshmemRegions, RegionError};
use transport::listener::Bound;
use transport::rbs::{Prepared as RbsPrepared, RbsError, RestBus};
use transport::reactor::{Listening, Reactor, ReactorHandle};
#[cfg(target_os = "linux")]
use transport::shm::{ShmListener, ShmService};
use transport::silkit::SilKitBridge;
#[cfg(target_os = "linux")]
use transport::socketcan::{SocketCanPort, SocketCanPortError};
/// socketcand's commands and lines (the fuzz targets read them).
pub use transport::socketcand::protocol as socketcand_protocol;
use transport::socketcand::{BeaconConfig, SocketcandError, SocketcandServer};
use transport::stop_bell::StopBell;
pub use transport::tls::config::TlsConfigError;

/// How long shutdown waits for sessions to deliver their `GOODBYE`.
const GOODBYE_GRACE: std::time::Duration = std::time::Duration::from_secs(2);

/// Why a hub could not start.
#[derive(Debug, thiserror::Error)]
pub enum StartError {
    #[error(transparent)]
    Config(#[from] ConfigError),
    // `error`, not `source`: the text already carries it, and an error
    // chain printed by the caller would repeat it.
    #[error("cannot listen on {addr}: {error}")]
    Listen { addr: ListenAddr, error: std::io::Error },
    #[error("cannot start the {what} thread: {error}")]
    Thread { what: &'static str, error: std::io::Error },
    #[error(transparent)]
    Realtime(#[from] bus_thread::realtime::RealtimeError),
    #[error("cannot serve shared memory as shm://{name}: {error}")]
    Shm { name: String, error: std::io::Error },
    #[cfg(target_os = "linux")]
    #[error(transparent)]
    Ivshmem(#[from] RegionError),
    #[cfg(target_os = "linux")]
    #[error(transparent)]
    SocketCan(#[from] SocketCanPortError),
    #[error(transparent)]
    Rbs(#[from] RbsError),
    #[error(transparent)]
    Socketcand(#[from] SocketcandError),
    #[error(transparent)]
    Cannelloni(#[from] CannelloniError),
    #[error(transparent)]
    Dbc(#[from] DbcFileError),
    #[error(transparent)]
    Federation(#[from] federation::FederationError),
    #[error(transparent)]
    Tls(#[from] TlsConfigError),
}

/// A running hub. Dropping it shuts it down.
pub struct Hub {
    inbox: InboxSender,
    stopping: Arc<AtomicBool>,
    addrs: Vec<ListenAddr>,
    /// The session socket when serving shared memory.
    shm_socket: Option<PathBuf>,
    /// The URL clients reach it by: `shm://NAME`, with `?dir=PATH` when
    /// the hub serves it from a private directory of its own.
    shm_url: Option<String>,
    /// That private directory, removed at shutdown.
    private_dir: Option<PathBuf>,
    /// Where the control API's URL is published for `shm://` tools.
    control_file: Option<PathBuf>,
    sessions: Arc<Sessions>,
    bus_thread: Option<JoinHandle<()>>,
    reactor: Option<(ReactorHandle, JoinHandle<()>)>,
    threads: Vec<JoinHandle<()>>,
    /// Wake the listener threads of `threads` that sleep without a timeout.
    stop_bells: Vec<StopBell>,
    control: Option<Arc<ControlServer>>,
    /// Where the cannelloni endpoints listen (port 0 resolved).
    cannelloni_addrs: Vec<CannelloniListen>,
    /// Where the socketcand server listens, when configured.
    socketcand_addr: Option<std::net::SocketAddr>,
}

impl Hub {
    /// Bind every listen address and start serving.
    pub fn start(config: HubConfig) -> Result<Self, StartError> {
        raise_open_file_limit();
        config.check_access()?;
        config.check_admission_here()?;
        let tls = transport::tls::config::of_hub(&config)?;
        let stopping = Arc::new(AtomicBool::new(false));
        let mut bound = Vec::new();
        for addr in config.listen_addrs()? {
            let listener = Bound::bind(&addr).map_err(|error| StartError::Listen { addr: addr.clone(), error })?;
            bound.push(listener);
        }
        let addrs = bound
            .iter()
            .map(|b| b.local_addr())
            .collect::<Result<Vec<_>, _>>()
            .map_err(|error| StartError::Listen { addr: ListenAddr::Unix("?".into()), error })?;

        #[cfg(target_os = "linux")]
        let (shm, runtime, control_file, bell, bell_fd, ivshmem, socketcan_ports) = {
            let shm_error = |error| StartError::Shm { name: config.hub.shm.clone().unwrap_or_default(), error };
            let runtime = config.hub.shm.as_deref().map(shm_runtime_dir).transpose().map_err(shm_error)?;
            let shm = match (&config.hub.shm, &runtime) {
                (Some(name), Some(runtime)) => Some(ShmListener::bind(&runtime.path, name).map_err(shm_error)?),
                _ => None,
            };
            let control_file = match (&config.hub.shm, &runtime, control_url(&addrs, tls.is_some())) {
                (Some(name), Some(runtime), Some(url)) => {
                    Some(publish_control_url(&runtime.path, name, &url).map_err(shm_error)?)
                }
                _ => None,
            };
            // The bus thread's doorbell: its descriptor goes to every
            // shared-memory client; in-process senders wake the bus privately.
            let (bell, bell_fd) = fieldhub_shm::BellSegment::create().map_err(shm_error)?;
            let ivshmem = IvshmemRegions::open(&config.hub.ivshmem)?;
            let socketcan_ports = SocketCanPort::open_all(&config.ports)?;
            (shm, runtime, control_file, bell, bell_fd, ivshmem, socketcan_ports)
        };
        // Elsewhere the bell is the hub's own: no client maps it.
        #[cfg(not(target_os = "linux"))]
        let bell = bus_thread::wake::HubBell::default();
        let rest_bus = RbsPrepared::all(&config.rbs)?;
        let channel_names: Vec<String> = config.channels.iter().map(|c| c.name.clone()).collect();
        let beacon = |target| BeaconConfig { target, hub_name: &config.hub.name, channels: &channel_names };
        let socketcand = config.hub.socketcand.as_deref().map(|addr| {
            let allow = config.hub.socketcand_allow_unauthenticated;
            SocketcandServer::bind(addr, allow, config.hub.socketcand_beacon.as_deref().map(beacon))
        });
        let socketcand = socketcand.transpose()?;
        let socketcand_addr = socketcand.as_ref().and_then(|s| s.local_addr().ok());
        let cannelloni = CannelloniEndpoints::bind_all(&config.cannelloni)?;
        let dbc = DbcStore::load(&config)?;
        let bell = Arc::new(bell);
        let wake = Arc::new(BusWake::new(Arc::clone(&bell)));
        let (inbox, inbox_rx) = fieldhub_bus::inbox::inbox(wake.clone());
        // Counted by the sessions and the control API, reported by the bus.
        let refusals = Arc::new(fieldhub_bus::auth_refusals::AuthRefusals::default());
        let mut bus = bus_thread::bus_for(&config).with_auth_refusals(Arc::clone(&refusals));
        let federation = match federation::Federation::open(&config)? {
            Some((federation, links)) => {
                for link in links {
                    bus.federate(link);
                }
                Some(federation)
            }
            None => None,
        };
        let busy_poll = config.hub.busy_poll;
        let bus_thread =
            spawn(fieldhub_shm::BUS_THREAD_NAME, "bus", move || bus_thread::run(bus, inbox_rx, wake, busy_poll))?;
        if config.hub.realtime {
            if let Err(refused) = bus_thread::realtime::make_realtime(&bus_thread, busy_poll) {
                // Nothing else has reached the bus yet: it stops at once.
                let _ = inbox.send(fieldhub_bus::inbox::Inbound::Shutdown);
                let _ = bus_thread.join();
                return Err(refused.into());
            }
        }

        let sessions = Arc::new(Sessions::new(
            inbox.clone(),
            config.hub.name.clone(),
            credentials(&config, &refusals),
            config.hub.time == TimeMode::Virtual,
            Arc::clone(&stopping),
        ));
        let mut hub = Self {
            inbox,
            stopping,
            addrs,
            shm_socket: None,
            shm_url: None,
            private_dir: None,
            control_file: None,
            sessions: Arc::clone(&sessions),
            bus_thread: Some(bus_thread),
            reactor: None,
            threads: Vec::new(),
            stop_bells: Vec::new(),
            control: None,
            cannelloni_addrs: cannelloni.addrs.clone(),
            socketcand_addr,
        };
        #[cfg(target_os = "linux")]
        {
            hub.shm_socket = shm.as_ref().map(|l| l.path().to_owned());
            hub.shm_url =
                config.hub.shm.as_ref().zip(runtime.as_ref()).map(|(name, runtime)| match &runtime.squatted {
                    None => format!("shm://{name}"),
                    Some(_) => format!("shm://{name}?dir={}", runtime.path.display()),
                });
            hub.private_dir = runtime.and_then(|runtime| runtime.squatted.map(|_| runtime.path));
            hub.control_file = control_file;
        }
        let (rest_bus, rbs_threads) = RestBus::start(rest_bus, &sessions)?;
        hub.threads.extend(rbs_threads);
        let control = ControlServer::start(
            hub.inbox.clone(),
            credentials(&config, &refusals),
            config.hub.recordings_dir.clone(),
            dbc,
            cannelloni.stats(),
            rest_bus,
        )
        .map_err(|error| StartError::Thread { what: "control", error })?;
        let control = Arc::new(control);
        hub.control = Some(Arc::clone(&control));
        #[cfg_attr(not(target_os = "linux"), allow(unused_mut))]
        let mut listening: Vec<Listening> = bound.into_iter().map(Bound::into_listening).collect();
        #[cfg(target_os = "linux")]
        let shm_service = shm.map(|listener| {
            let (listener, path) = listener.into_parts();
            listening.push(Listening::Shm(listener, path));
            Arc::new(ShmService { bell, bell_fd, ring_slots: config.hub.shm_ring_slots })
        });
        #[cfg(not(target_os = "linux"))]
        let shm_service = None;
        let (reactor, handle) = Reactor::new(listening, Arc::clone(&sessions), Some(control), shm_service, tls)
            .map_err(|error| StartError::Thread { what: "reactor", error })?;
        hub.reactor = Some((handle, spawn("fh-reactor", "reactor", move || reactor.run())?));
        #[cfg(target_os = "linux")]
        if !ivshmem.is_empty() {
            let sessions = Arc::clone(&sessions);
            hub.threads.push(spawn("fh-ivshmem", "ivshmem", move || ivshmem.poll_loop(sessions))?);
        }
        #[cfg(target_os = "linux")]
        for port in socketcan_ports {
            let thread = port
                .start(Arc::clone(&sessions))
                .map_err(|error| StartError::Thread { what: "SocketCAN port", error })?;
            hub.threads.push(thread);
        }
        if let Some(server) = socketcand {
            let (thread, bell) = server
                .start(Arc::clone(&sessions))
                .map_err(|error| StartError::Thread { what: "socketcand server", error })?;
            hub.threads.push(thread);
            hub.stop_bells.push(bell);
        }
        let endpoints = cannelloni.start(&sessions);
        let (threads, bells) = endpoints.map_err(|error| StartError::Thread { what: "cannelloni endpoint", error })?;
        hub.threads.extend(threads);
        hub.stop_bells.extend(bells);
        let bridges = SilKitBridge::start_all(&config.silkit, &config.channels, &sessions)
            .map_err(|error| StartError::Thread { what: "SIL Kit bridge", error })?;
        hub.threads.extend(bridges);
        if let Some(federation) = federation {
            hub.threads.extend(federation.start(&sessions)?);
        }
        Ok(hub)
    }

    /// The addresses the hub listens on (port 0 resolved to the real port).
    pub fn listen_addrs(&self) -> &[ListenAddr] {
        &self.addrs
    }

    /// Where the socketcand server listens (port 0 resolved), when configured.
    pub fn socketcand_addr(&self) -> Option<std::net::SocketAddr> {
        self.socketcand_addr
    }

    /// Where the cannelloni endpoints listen (port 0 resolved), in configuration order.
    pub fn cannelloni_addrs(&self) -> &[CannelloniListen] {
        &self.cannelloni_addrs
    }

    /// The session socket clients reach as `shm://NAME`, when serving shared memory.
    pub fn shm_socket(&self) -> Option<&std::path::Path> {
        self.shm_socket.as_deref()
    }

    /// The URL shared-memory clients reach the hub by (its ready line says
    /// it): `shm://NAME`, or `shm://NAME?dir=PATH` when the usual runtime
    /// directory was another user's and the hub made a private one.
    pub fn shm_url(&self) -> Option<&str> {
        self.shm_url.as_deref()
    }

    /// Clients connected now (handshakes under way included).
    pub fn clients(&self) -> usize {
        self.sessions.live()
    }

    /// Say goodbye to every client, stop accepting and wait for the bus
    /// thread to finish.
    pub fn shutdown(&mut self) {
        if self.stopping.swap(true, Ordering::AcqRel) {
            return;
        }
        for bell in &self.stop_bells {
            bell.ring();
        }
        let _ = self.inbox.send(Inbound::Shutdown);
        if let Some(bus) = self.bus_thread.take() {
            let _ = bus.join();
        }
        // Give every session the chance to write its GOODBYE before the
        // process may exit; a client that does not read cannot hold us long.
        let deadline = std::time::Instant::now() + GOODBYE_GRACE;
        while self.sessions.live() > 0 && std::time::Instant::now() < deadline {
            std::thread::sleep(std::time::Duration::from_millis(5));
        }
        if let Some((handle, thread)) = self.reactor.take() {
            handle.stop();
            let _ = thread.join();
        }
        for thread in self.threads.drain(..) {
            let _ = thread.join();
        }
        if let Some(control) = self.control.take().and_then(|c| Arc::try_unwrap(c).ok()) {
            drop(control);
        }
        if let Some(file) = self.control_file.take() {
            let _ = std::fs::remove_file(file);
        }
        // Empty once the reactor removed the session socket.
        if let Some(dir) = self.private_dir.take() {
            let _ = std::fs::remove_dir(dir);
        }
    }
}

/// The hub URL of the first TCP listener (which also serves the HTTP
/// control API), as a local tool reaches it: an unspecified address
/// (`0.0.0.0`, `::`) becomes loopback; `tls://` when the hub speaks TLS.
#[cfg(target_os = "linux")]
fn control_url(addrs: &[ListenAddr], tls: bool) -> Option<String> {
    let scheme = if tls { "tls" } else { "tcp" };
    addrs.iter().find_map(|addr| match addr {
        ListenAddr::Tcp(socket) => {
            let ip = match socket.ip() {
                ip if ip.is_unspecified() && ip.is_ipv4() => std::net::Ipv4Addr::LOCALHOST.into(),
                ip if ip.is_unspecified() => std::net::Ipv6Addr::LOCALHOST.into(),
                ip => ip,
            };
            Some(format!("{scheme}://{}", std::net::SocketAddr::new(ip, socket.port())))
        }
        ListenAddr::Unix(_) => None,
    })
}

/// The private directory of the hub's session socket: the usual one, or,
/// when another user made that first (squatted), one of the hub's own,
/// logged with the URL that names it.
#[cfg(target_os = "linux")]
fn shm_runtime_dir(name: &str) -> std::io::Result<fieldhub_shm::socket::RuntimeDir> {
    let runtime = fieldhub_shm::socket::runtime_dir()?;
    if let Some(why) = &runtime.squatted {
        tracing::warn!(
            "cannot use the runtime directory {why} (another user may have made it first); serving shared memory \
             from the private directory {} instead: clients reach this hub as shm://{name}?dir={} (the ready \
             line gives the URL; or set FIELDHUB_HUB to it)",
            runtime.path.display(),
            runtime.path.display()
        );
    }
    Ok(runtime)
}

/// Write `url` to the control file of `shm://name` (owner-only, in `dir`,
/// the private directory the session socket lives in).
#[cfg(target_os = "linux")]
fn publish_control_url(dir: &std::path::Path, name: &str, url: &str) -> std::io::Result<PathBuf> {
    use std::io::Write;
    use std::os::unix::fs::OpenOptionsExt;
    let path = fieldhub_shm::socket::control_path_in(dir, name)
        .map_err(|why| std::io::Error::new(std::io::ErrorKind::InvalidInput, why))?;
    let mut file = std::fs::OpenOptions::new().write(true).create(true).truncate(true).mode(0o600).open(&path)?;
    writeln!(file, "{url}")?;
    Ok(path)
}

impl Drop for Hub {
    fn drop(&mut self) {
        self.shutdown();
    }
}

fn spawn(name: &str, what: &'static str, body: impl FnOnce() + Send + 'static) -> Result<JoinHandle<()>, StartError> {
    std::thread::Builder::new().name(name.into()).spawn(body).map_err(|error| StartError::Thread { what, error })
}

/// Serve as many clients as the hard limit on open files allows: each
/// session holds a descriptor or two, and the default soft limit (often
/// 1,024) is below [`session::MAX_CLIENTS`]. (Windows has no such limit.)
fn raise_open_file_limit() {
    #[cfg(target_os = "linux")]
    {
        use rustix::process::{getrlimit, setrlimit, Resource};
        let limit = getrlimit(Resource::Nofile);
        if limit.current < limit.maximum {
            let raised = rustix::process::Rlimit { current: limit.maximum, maximum: limit.maximum };
            if let Err(e) = setrlimit(Resource::Nofile, raised) {
                tracing::debug!("cannot raise the open-file limit: {e}");
            }
        }
    }
}

/// The tokens and the rule for local users that sessions and the control
/// API check, counting whom they refuse in `refusals`.
fn credentials(
    config: &HubConfig,
    refusals: &Arc<fieldhub_bus::auth_refusals::AuthRefusals>,
) -> session::credentials::Credentials {
    session::credentials::Credentials::new(
        config.hub.token.clone(),
        config.hub.monitor_token.clone(),
        config.hub.insecure_local,
    )
    .with_grants(&config.access)
    .counting_refusals_in(Arc::clone(refusals))
}
