//! The client-side bridge: one SocketCAN interface (a real adapter, a vcan, a
//! VM guest's interface) joined to one hub channel, in both directions.
//!
//! Invariants:
//! - Order is kept in each direction: one thread per direction, one frame at
//!   a time.
//! - SocketCAN error frames (`CAN_ERR_FLAG`) reach the hub as error frames —
//!   the hub's error model uses SocketCAN's layout, so a controller's state
//!   reports (`CAN_ERR_CRTL`, `CAN_ERR_BUSOFF`, counters) arrive unchanged;
//!   hub error frames are written to the interface (a real controller's
//!   driver may refuse them; that is counted, not fatal).
//! - The hub going away is not fatal: the bridge reconnects with exponential
//!   backoff (100 ms doubling to 5 s) and frames read from SocketCAN while
//!   it is disconnected are dropped and counted.

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::Duration;

use fieldhub_client::{Client, ClientOptions, Port, PortConfig};

use crate::convert::to_hub;
use crate::interface::{Interface, InterfaceError, READ_TIMEOUT};

/// First and longest wait between reconnection attempts.
const BACKOFF_START: Duration = Duration::from_millis(100);
const BACKOFF_MAX: Duration = Duration::from_secs(5);

/// What to join.
#[derive(Clone, Debug)]
pub struct BridgeConfig {
    /// SocketCAN interface name, as in `can0` or `vcan0`.
    pub interface: String,
    /// Hub URL (`tcp://`, `unix:`, `shm://`, `serial:`, `ivshmem://`).
    pub hub: String,
    /// Hub channel to join.
    pub channel: String,
    /// Hub-wide port name; `None` lets the hub name it.
    pub port: Option<String>,
    /// Token to present to a hub that requires one.
    pub token: Option<String>,
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

/// An open SocketCAN interface, ready to be joined to a hub channel.
pub struct Bridge {
    config: BridgeConfig,
    interface: Interface,
    counters: BridgeCounters,
}

impl Bridge {
    /// Open the interface (see [`Interface::open`]).
    pub fn open(config: BridgeConfig) -> Result<Self, InterfaceError> {
        let interface = Interface::open(&config.interface)?;
        Ok(Self { config, interface, counters: BridgeCounters::default() })
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

    fn connect(&self) -> Result<(Client, Port), fieldhub_client::ClientError> {
        let name = format!("bridge-{}", self.config.interface);
        let options = ClientOptions { name, token: self.config.token.clone(), ..ClientOptions::default() };
        let client = Client::connect_with(&self.config.hub, &options)?;
        // The interface decides what it carries: take CAN FD frames whenever the
        // channel has them, as candump does.
        let port_config = PortConfig { name: self.config.port.clone(), fd: true, ..PortConfig::default() };
        let port = client.open_port_with(&self.config.channel, &port_config)?;
        Ok((client, port))
    }

    /// Move frames both ways until the hub connection ends (the reason is
    /// returned) or `stop` is set (`None`).
    fn serve(&self, client: &Client, port: &Port, stop: &AtomicBool) -> Option<String> {
        let ended = AtomicBool::new(false);
        std::thread::scope(|scope| {
            scope.spawn(|| self.socketcan_to_hub(client, port, stop, &ended));
            let reason = self.hub_to_socketcan(client, stop);
            ended.store(true, Ordering::Relaxed);
            reason
        })
    }

    fn socketcan_to_hub(&self, client: &Client, port: &Port, stop: &AtomicBool, ended: &AtomicBool) {
        while !stop.load(Ordering::Relaxed) && !ended.load(Ordering::Relaxed) {
            let raw = match self.interface.read() {
                Ok(Some(raw)) => raw,
                Ok(None) => continue,
                Err(e) => {
                    tracing::error!(interface = %self.config.interface, error = %e, "SocketCAN read failed");
                    std::thread::sleep(READ_TIMEOUT);
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
            let received = match client.recv(Some(READ_TIMEOUT)) {
                Ok(Some(received)) => received,
                Ok(None) => continue,
                Err(e) => return Some(e.to_string()),
            };
            if received.frame.is_echo() {
                continue;
            }
            match self.interface.write(&received.frame) {
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

fn sleep_unless_stopped(total: Duration, stop: &AtomicBool) {
    let mut left = total;
    while !left.is_zero() && !stop.load(Ordering::Relaxed) {
        let step = left.min(READ_TIMEOUT);
        std::thread::sleep(step);
        left -= step;
    }
}
