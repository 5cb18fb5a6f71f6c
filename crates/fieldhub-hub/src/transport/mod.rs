//! Transports: how clients' bytes reach the session layer.
//!
//! A transport only moves bytes or ring messages; admission, handshakes,
//! request mapping, errors and goodbyes are the session layer's
//! ([`crate::session`]), the same for all.
//!
//! - [`reactor`]: one event-loop thread for every TCP and unix-socket
//!   session and every `shm://` session socket, and the listeners they
//!   arrive on ([`listener`] binds them).
//! - [`shm`]: shared-memory clients — the bus thread reads and writes their
//!   rings itself; the reactor only sets them up and watches their end.
//! - [`ivshmem`]: QEMU guests through a region file: a poller thread does
//!   the handshake through the rings and wakes the bus for them.
//! - [`socketcan`]: the SocketCAN interfaces the configuration names, as
//!   ports of the hub's own.
//! - [`silkit`]: the Vector SIL Kit CAN networks the configuration names,
//!   each joined as one participant and attached as one port, or simulated
//!   by the hub, each SIL Kit controller a port.
//! - [`socketcand`]: socketcand's text protocol on its own listener, so
//!   socketcand clients (python-can, SavvyCAN, Kayak) open channels as buses.
//! - [`cannelloni`]: cannelloni endpoints (UDP packets, TCP streams) on a
//!   channel, every peer a client with one port.
//! - [`stop_bell`]: how `Hub::shutdown` wakes listener threads that sleep
//!   without a timeout (socketcand, cannelloni).
//! - [`rbs`]: rest-bus simulations (`[[rbs]]`), a DBC's simulated nodes
//!   as internal ports whose messages are the bus's cyclic jobs.
//! - [`internal_port`]: how the hub's own one-port clients (SocketCAN,
//!   cannelloni peers, socketcand connections) attach and open their port.
//! - [`http`]: a TCP connection that speaks HTTP, handed to the control
//!   server through [`http::HttpHandoff`].
//! - [`tls`]: a TLS connection in the reactor (rustls without blocking);
//!   its `config`: `[hub] tls_*`, read once into the server's settings.
//!
//! Adding a transport means writing one module here that feeds the session
//! layer. Nothing here knows about channels or order; the bus does.
//!
//! `shm`, `ivshmem` and `socketcan` are Linux-only (memfd segments, futexes
//! shared between processes, `SCM_RIGHTS`, SocketCAN), and so are unix
//! sockets in the reactor and the listener; elsewhere (Windows,
//! `docs/windows.md`) the configuration refuses them
//! (`config::platform`) and no shared-memory service exists.

pub mod cannelloni;
pub mod http;
pub mod internal_port;
#[cfg(target_os = "linux")]
pub mod ivshmem;
pub mod listener;
pub mod rbs;
pub mod reactor;
#[cfg(target_os = "linux")]
pub mod shm;
pub mod silkit;
#[cfg(target_os = "linux")]
pub mod socketcan;
pub mod socketcand;
pub mod stop_bell;
pub mod tls;

/// Shared memory is Linux-only: elsewhere no service for it can exist.
#[cfg(not(target_os = "linux"))]
pub mod shm {
    pub enum ShmService {}
}
