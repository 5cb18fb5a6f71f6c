//! cannelloni endpoints (`[[cannelloni]]`, `docs/cannelloni.md`): cannelloni
//! tunnels and the `can-cannelloni` python-can backend join a channel
//! unchanged, over UDP (cannelloni's packet format 2) or TCP (its stream mode).
//!
//! Unlike cannelloni itself, which ties two hosts together, an endpoint
//! serves several peers on one channel, each peer a client of the hub with
//! one port (`cannelloni-udp-…`, `cannelloni-tcp-…`): admission, transmit
//! credit, wiring, fault rules and per-port statistics apply per peer.
//!
//! - [`codec`]: the packet, record and banner formats, no I/O.
//! - [`peer`]: a peer as a hub client; what the endpoint counts for it.
//! - [`udp`]: the UDP endpoint (a reader thread, a writer per peer).
//! - [`tcp`]: the TCP endpoint (an accept thread, a reader and a writer per
//!   connection).
//! - [`stats`]: the counters the control API reports (`GET /api/v1/cannelloni`).
//!
//! Invariants:
//! - Sockets are bound when the hub starts: an address in use stops the
//!   start with an error naming the endpoint.
//! - cannelloni has no way to tell a sender that a frame did not make it
//!   onto the bus: frames the bus drops for a peer (`TX_DROPPED`) and UDP
//!   packets lost on the way (sequence gaps) are counted per peer, logged
//!   once a second at most, and reported by the control API.
//! - Bad input rejects only that packet (UDP) or that connection (TCP).
//! - An idle endpoint costs no CPU: every thread sleeps in the kernel until
//!   a packet, a connection or a frame comes, or the hub stops (each
//!   endpoint's [`StopBell`] wakes it; its peers hear the bus's goodbye).

pub mod codec;
mod peer;
pub mod stats;
mod tcp;
mod udp;

use std::net::{TcpListener, UdpSocket};
use std::sync::Arc;
use std::thread::JoinHandle;

use tracing::warn;

use crate::config::{CannelloniConfig, CannelloniListen};
use crate::session::Sessions;
use crate::transport::stop_bell::{SocketPoll, StopBell};
use stats::{CannelloniStats, EndpointStats};

/// Why an endpoint cannot be set up.
#[derive(Debug, thiserror::Error)]
pub enum CannelloniError {
    #[error("cannelloni endpoint {listen}: {message}")]
    Config { listen: String, message: String },
    #[error("cannelloni endpoint {listen}: cannot bind: {error}")]
    Bind { listen: String, error: std::io::Error },
}

enum Socket {
    Udp(UdpSocket),
    Tcp(TcpListener),
}

/// One endpoint, bound.
struct Endpoint {
    socket: Socket,
    config: CannelloniConfig,
    stats: Arc<EndpointStats>,
}

/// Every configured endpoint, bound and not started yet.
pub struct CannelloniEndpoints {
    endpoints: Vec<Endpoint>,
    /// The bound addresses as `udp/ADDR` or `tcp/ADDR` (port 0 resolved).
    pub addrs: Vec<CannelloniListen>,
}

impl CannelloniEndpoints {
    /// Bind every `[[cannelloni]]`.
    pub fn bind_all(configs: &[CannelloniConfig]) -> Result<Self, CannelloniError> {
        let mut endpoints = Vec::new();
        let mut addrs = Vec::new();
        for config in configs {
            let fail = |message| CannelloniError::Config { listen: config.listen.clone(), message };
            let listen = config.listen_addr().map_err(fail)?;
            let bind = |error| CannelloniError::Bind { listen: config.listen.clone(), error };
            let (socket, bound) = match listen {
                CannelloniListen::Udp(addr) => {
                    let socket = UdpSocket::bind(addr).map_err(bind)?;
                    let bound = CannelloniListen::Udp(socket.local_addr().map_err(bind)?);
                    (Socket::Udp(socket), bound)
                }
                CannelloniListen::Tcp(addr) => {
                    let listener = TcpListener::bind(addr).map_err(bind)?;
                    let bound = CannelloniListen::Tcp(listener.local_addr().map_err(bind)?);
                    (Socket::Tcp(listener), bound)
                }
            };
            if config.open_to_anyone() && !bound.addr().ip().is_loopback() {
                warn!(
                    listen = %bound,
                    channel = %config.channel,
                    "cannelloni endpoint open to anyone who reaches it (allow_unauthenticated): cannelloni has no authentication"
                );
            }
            let stats = EndpointStats::new(bound.to_string(), config.channel.clone());
            endpoints.push(Endpoint { socket, config: config.clone(), stats });
            addrs.push(bound);
        }
        Ok(Self { endpoints, addrs })
    }

    /// The counters of every endpoint, for the control API.
    pub fn stats(&self) -> Arc<CannelloniStats> {
        Arc::new(CannelloniStats { endpoints: self.endpoints.iter().map(|e| Arc::clone(&e.stats)).collect() })
    }

    /// Start every endpoint's thread; they end when the hub stops and
    /// rings the bells returned with them.
    pub fn start(self, sessions: &Arc<Sessions>) -> std::io::Result<(Vec<JoinHandle<()>>, Vec<StopBell>)> {
        let (mut threads, mut bells) = (Vec::new(), Vec::new());
        for endpoint in self.endpoints {
            let sessions = Arc::clone(sessions);
            let Endpoint { socket, config, stats } = endpoint;
            let thread = match socket {
                Socket::Udp(socket) => {
                    let (poll, bell) = SocketPoll::new(&socket)?;
                    bells.push(bell);
                    // Validation made sure the peers parse.
                    let listed = config.peer_addrs().unwrap_or_default();
                    let udp =
                        udp::UdpEndpoint { socket, channel: config.channel, listed, learn: config.learn_peers, stats };
                    std::thread::Builder::new().name("fh-cnl-udp".into()).spawn(move || udp.run(poll, &sessions))?
                }
                Socket::Tcp(listener) => {
                    let (poll, bell) = SocketPoll::new(&listener)?;
                    bells.push(bell);
                    let tcp = tcp::TcpEndpoint { listener, channel: config.channel, stats };
                    std::thread::Builder::new().name("fh-cnl-tcp-l".into()).spawn(move || tcp.run(poll, &sessions))?
                }
            };
            threads.push(thread);
        }
        Ok((threads, bells))
    }
}
