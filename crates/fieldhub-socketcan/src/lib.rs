//! A bridge between one Linux SocketCAN interface (a real adapter, a vcan, a
//! VM guest's interface) and one hub channel, in both directions, CAN and
//! CAN FD.
//!
//! Invariants:
//! - No echo loops: the raw socket does not receive the frames it writes
//!   (SocketCAN's `recv_own_msgs` stays off) and the hub port is opened
//!   without `receive_own`, so a frame crosses the bridge at most once.
//! - Order is kept in each direction: one thread per direction, one frame at
//!   a time.
//! - SocketCAN error frames (`CAN_ERR_FLAG`) reach the hub as error frames;
//!   hub error frames are written to the interface (a real controller's
//!   driver may refuse them; that is counted, not fatal).
//! - The hub going away is not fatal: the bridge reconnects with exponential
//!   backoff (100 ms doubling to 5 s) and frames read from SocketCAN while
//!   it is disconnected are dropped.
//! - Linux only. Without AF_CAN in the kernel, [`Bridge::open`] fails with
//!   [`BridgeError::NoSocketCan`], which says what to do.

pub mod convert;

use std::io;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::Duration;

use fieldhub_client::{Client, ClientOptions, PortConfig};
use socketcan::{CanFdSocket, Socket, SocketOptions};

use convert::{to_hub, to_socketcan, RawFrame};

/// How long a blocked read waits before it looks at the stop flags.
const POLL: Duration = Duration::from_millis(100);
/// Receive buffer asked for on the SocketCAN socket, in bytes (about 5000 FD frames).
const RECEIVE_BUFFER: libc::c_int = 4 << 20;
/// First and longest wait between reconnection attempts.
const BACKOFF_START: Duration = Duration::from_millis(100);
const BACKOFF_MAX: Duration = Duration::from_secs(5);

/// What to join.
#[derive(Clone, Debug)]
pub struct BridgeConfig {
    /// SocketCAN interface name, as in `can0` or `vcan0`.
    pub interface: String,
    /// Hub URL (`tcp://`, `unix:`, `shm://`, `serial:`).
    pub hub: String,
    /// Hub channel to join.
    pub channel: String,
    /// Hub-wide port name; `None` lets the hub name it.
    pub port: Option<String>,
}

/// Why the bridge cannot start.
#[derive(Debug, thiserror::Error)]
pub enum BridgeError {
    #[error(
        "this kernel has no SocketCAN (AF_CAN): load the `can` and `can-raw` modules, \
         or run the bridge where SocketCAN exists"
    )]
    NoSocketCan(#[source] io::Error),
    #[error("cannot open SocketCAN interface '{interface}': {source}; check the name with `ip link` (for a test bus: `ip link add {interface} type vcan && ip link set {interface} up`)")]
    Interface {
        interface: String,
        #[source]
        source: io::Error,
    },
    #[error("cannot configure the SocketCAN socket on '{interface}': {source}")]
    Configure {
        interface: String,
        #[source]
        source: io::Error,
    },
}

/// Frame counts since the bridge opened.
#[derive(Debug, Default)]
pub struct BridgeCounters {
    /// Frames read from SocketCAN and sent to the hub.
    pub to_hub: AtomicU64,
    /// Frames received from the hub and written to SocketCAN.
    pub to_socketcan: AtomicU64,
    /// SocketCAN frames dropped: hub disconnected or not representable.
    pub dropped_to_hub: AtomicU64,
    /// Hub frames the interface refused.
    pub refused_by_socketcan: AtomicU64,
}

/// An open SocketCAN socket, ready to be joined to a hub channel.
pub struct Bridge {
    config: BridgeConfig,
    socket: CanFdSocket,
    counters: BridgeCounters,
}

impl Bridge {
    /// Open the interface with CAN FD frames and error frames enabled.
    pub fn open(config: BridgeConfig) -> Result<Self, BridgeError> {
        check_af_can()?;
        let interface = config.interface.clone();
        let socket = CanFdSocket::open(&interface)
            .map_err(|source| BridgeError::Interface { interface: interface.clone(), source })?;
        let configure = |source| BridgeError::Configure { interface: interface.clone(), source };
        socket.set_error_filter_accept_all().map_err(configure)?;
        socket.set_recv_own_msgs(false).map_err(configure)?;
        socket.set_read_timeout(POLL).map_err(configure)?;
        // A burst from the interface waits in the socket while the hub link
        // catches up; the kernel drops silently what does not fit. Forcing
        // the size needs CAP_NET_ADMIN; without it the limit is rmem_max.
        if socket.set_socket_option(libc::SOL_SOCKET, libc::SO_RCVBUFFORCE, &RECEIVE_BUFFER).is_err() {
            socket.as_raw_socket().set_recv_buffer_size(RECEIVE_BUFFER as usize).map_err(configure)?;
        }
        Ok(Self { config, socket, counters: BridgeCounters::default() })
    }

    /// Frame counts so far.
    pub fn counters(&self) -> &BridgeCounters {
        &self.counters
    }

    /// Bridge until `stop` is set, reconnecting to the hub whenever it goes
    /// away. Returns only once stopped.
    pub fn run(&self, stop: &AtomicBool) {
        let mut backoff = BACKOFF_START;
        while !stop.load(Ordering::Relaxed) {
            match self.connect() {
                Ok((client, port)) => {
                    tracing::info!(
                        interface = %self.config.interface, hub = %self.config.hub, channel = %self.config.channel,
                        "bridge connected"
                    );
                    backoff = BACKOFF_START;
                    let reason = self.serve(&client, &port, stop);
                    if let Some(reason) = reason {
                        tracing::warn!(%reason, "hub connection lost; reconnecting");
                    }
                }
                Err(e) => {
                    tracing::warn!(hub = %self.config.hub, error = %e, retry_in = ?backoff, "cannot reach the hub");
                    sleep_unless_stopped(backoff, stop);
                    backoff = (backoff * 2).min(BACKOFF_MAX);
                }
            }
        }
    }

    fn connect(&self) -> Result<(Client, fieldhub_client::Port), fieldhub_client::ClientError> {
        let name = format!("bridge-{}", self.config.interface);
        let client = Client::connect_with(&self.config.hub, &ClientOptions { name, ..ClientOptions::default() })?;
        let port_config = PortConfig { name: self.config.port.clone(), receive_own: false, block_on_overflow: false };
        let port = client.open_port_with(&self.config.channel, &port_config)?;
        Ok((client, port))
    }

    /// Move frames both ways until the hub connection ends (the reason is
    /// returned) or `stop` is set (`None`).
    fn serve(&self, client: &Client, port: &fieldhub_client::Port, stop: &AtomicBool) -> Option<String> {
        let ended = AtomicBool::new(false);
        std::thread::scope(|scope| {
            scope.spawn(|| self.socketcan_to_hub(client, port, stop, &ended));
            let reason = self.hub_to_socketcan(client, stop);
            ended.store(true, Ordering::Relaxed);
            reason
        })
    }

    fn socketcan_to_hub(&self, client: &Client, port: &fieldhub_client::Port, stop: &AtomicBool, ended: &AtomicBool) {
        while !stop.load(Ordering::Relaxed) && !ended.load(Ordering::Relaxed) {
            let raw: RawFrame = match self.socket.read_raw_frame() {
                Ok(raw) => raw,
                Err(e) if matches!(e.kind(), io::ErrorKind::WouldBlock | io::ErrorKind::TimedOut) => continue,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                Err(e) => {
                    tracing::error!(interface = %self.config.interface, error = %e, "SocketCAN read failed");
                    std::thread::sleep(POLL);
                    continue;
                }
            };
            let frame = match to_hub(&raw) {
                Ok(frame) => frame,
                Err(e) => {
                    tracing::warn!(error = %e, "dropping a SocketCAN frame");
                    self.counters.dropped_to_hub.fetch_add(1, Ordering::Relaxed);
                    continue;
                }
            };
            match client.send(port, &frame) {
                Ok(()) => self.counters.to_hub.fetch_add(1, Ordering::Relaxed),
                Err(_) => self.counters.dropped_to_hub.fetch_add(1, Ordering::Relaxed),
            };
        }
    }

    fn hub_to_socketcan(&self, client: &Client, stop: &AtomicBool) -> Option<String> {
        while !stop.load(Ordering::Relaxed) {
            let received = match client.recv(Some(POLL)) {
                Ok(Some(received)) => received,
                Ok(None) => continue,
                Err(e) => return Some(e.to_string()),
            };
            if received.frame.is_echo() {
                continue;
            }
            let written = match to_socketcan(&received.frame) {
                RawFrame::Classic(raw) => self.socket.write_frame(&socketcan::CanFrame::from(raw)),
                RawFrame::Fd(raw) => self.socket.write_frame(&socketcan::CanFdFrame::from(raw)),
            };
            match written {
                Ok(()) => self.counters.to_socketcan.fetch_add(1, Ordering::Relaxed),
                Err(e) => {
                    tracing::debug!(error = %e, "the interface refused a frame");
                    self.counters.refused_by_socketcan.fetch_add(1, Ordering::Relaxed)
                }
            };
        }
        None
    }
}

/// Whether this kernel can make an AF_CAN raw socket at all, checked before
/// the interface name so a missing AF_CAN is not reported as a missing
/// interface.
fn check_af_can() -> Result<(), BridgeError> {
    let domain = socket2::Domain::from(libc::AF_CAN);
    let protocol = socket2::Protocol::from(libc::CAN_RAW);
    match socket2::Socket::new(domain, socket2::Type::RAW, Some(protocol)) {
        Ok(_) => Ok(()),
        Err(e) if matches!(e.raw_os_error(), Some(libc::EAFNOSUPPORT | libc::EPROTONOSUPPORT)) => {
            Err(BridgeError::NoSocketCan(e))
        }
        // Any other failure (permissions, limits) shows up again, with the
        // interface named, when the real socket is opened.
        Err(_) => Ok(()),
    }
}

fn sleep_unless_stopped(total: Duration, stop: &AtomicBool) {
    let mut left = total;
    while !left.is_zero() && !stop.load(Ordering::Relaxed) {
        let step = left.min(POLL);
        std::thread::sleep(step);
        left -= step;
    }
}
