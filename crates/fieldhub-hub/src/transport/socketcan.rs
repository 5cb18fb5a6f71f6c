//! SocketCAN interfaces the hub attaches as ports of its own
//! (`[[port]] socketcan = "can0"`), the way a hardware connector is wired to
//! the bus: no client process, no bridge in between.
//!
//! To the bus each interface is one client with one port: a reader thread
//! takes frames from the interface and forwards them as that client's frames
//! (waiting for transmit credit like any stream session, so a busy timed
//! channel slows the interface's reader rather than growing a queue); a
//! writer thread drains the client's outbox into the interface.
//!
//! Invariants:
//! - Interfaces are opened when the hub starts: a missing interface or a
//!   kernel without AF_CAN stops the start with an error naming the port.
//!   One that vanishes later (an adapter unplugged) keeps its port on the
//!   bus and is reopened when it comes back.
//! - No echo loops: the socket does not receive its own writes and the port
//!   is opened without `RECEIVE_OWN`.
//! - Order is kept each way: one thread per direction, one frame at a time.
//! - A frame the interface refuses (a driver's full queue, an error frame a
//!   real controller will not send) is counted and logged, never retried
//!   out of order; frames the interface delivers that the hub cannot
//!   represent are dropped and logged.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::Duration;

use fieldhub_proto::wire::PortOptions;
use fieldhub_socketcan::convert::to_hub;
use fieldhub_socketcan::{Interface, InterfaceError};
use tracing::{error, info, warn};

use crate::config::PortConfig;
use crate::session::peer_user::PeerOrigin;
use crate::session::{ClientSlot, Sessions};
use crate::transport::internal_port::{self, InternalPort, NotOpened, PortRequest};
use fieldhub_bus::credit::TxCredit;
use fieldhub_bus::inbox::Inbound;
use fieldhub_bus::outbox::{Outbound, QueueOutbox};

/// How often the writer looks whether the bus let go of the port while no
/// frame comes.
const WRITER_LOOK: Duration = Duration::from_millis(100);

/// How long the reader waits after a failed read (a link gone down) before
/// it reads again, so a failing interface logs at most one line a second. An
/// interface that vanishes altogether is reopened by [`Interface`] itself.
const READ_RETRY: Duration = Duration::from_secs(1);

/// Why a SocketCAN port cannot be attached.
#[derive(Debug, thiserror::Error)]
#[error("SocketCAN port '{port}'")]
pub struct SocketCanPortError {
    port: String,
    #[source]
    source: InterfaceError,
}

/// One interface opened for a configured port, not attached yet.
pub struct SocketCanPort {
    port: String,
    channel: String,
    interface: Arc<Interface>,
}

impl SocketCanPort {
    /// Open the interfaces of every `[[port]]` with `socketcan` set.
    pub fn open_all(ports: &[PortConfig]) -> Result<Vec<Self>, SocketCanPortError> {
        ports
            .iter()
            .filter_map(|p| Some((p, p.socketcan.as_deref()?)))
            .map(|(p, interface)| {
                let open =
                    Interface::open(interface).map_err(|source| SocketCanPortError { port: p.name.clone(), source })?;
                // Validation guarantees a channel for every SocketCAN port.
                let channel = p.channel.clone().unwrap_or_default();
                Ok(Self { port: p.name.clone(), channel, interface: Arc::new(open) })
            })
            .collect()
    }

    /// Attach the port to the bus and move frames until the hub stops. The
    /// returned thread is the reader; it joins the writer before it ends.
    pub fn start(self, sessions: Arc<Sessions>) -> std::io::Result<JoinHandle<()>> {
        std::thread::Builder::new().name(format!("fh-can-{}", self.interface.name())).spawn(move || self.run(&sessions))
    }

    fn run(self, sessions: &Arc<Sessions>) {
        let mut slot =
            match sessions.admit("SocketCAN", format!("socketcan:{}", self.interface.name()), PeerOrigin::Operator) {
                Ok(slot) => slot,
                Err(violation) => {
                    return error!(port = %self.port, "the hub cannot attach the SocketCAN port: {}", violation.text)
                }
            };
        slot.name_as(format!("socketcan-{}", self.interface.name()));
        let (closed, hang_up) = internal_port::closed_flag();
        let request = PortRequest {
            channel: &self.channel,
            port_name: self.port.clone(),
            // The interface decides what it carries; the channel refuses
            // CAN FD frames itself when it is classic.
            options: PortOptions::FD,
            deadline: None,
        };
        // This thread forwards the interface's frames, so it is the one that
        // waits for transmit credit.
        let InternalPort { port, outbox, credit } = match internal_port::open(&mut slot, hang_up, request) {
            Ok(opened) => opened,
            Err(NotOpened::Stopped) => return,
            Err(not_opened) => {
                return error!(port = %self.port, interface = %self.interface.name(), "SocketCAN port not attached: {not_opened}")
            }
        };
        info!(port = %self.port, interface = %self.interface.name(), channel = %self.channel, "SocketCAN port attached");
        let writer = {
            let (interface, port_name, closed) = (Arc::clone(&self.interface), self.port.clone(), Arc::clone(&closed));
            let outbox = Arc::clone(&outbox);
            std::thread::Builder::new()
                .name(format!("fh-can-w-{}", self.interface.name()))
                .spawn(move || write_loop(&interface, &port_name, &outbox, &closed))
        };
        let stop = || sessions.stopping() || closed.load(Ordering::Acquire);
        self.read_loop(&slot, port, &credit, &stop);
        slot.detach("the hub is stopping");
        outbox.close();
        match writer {
            Ok(handle) => {
                let _ = handle.join();
            }
            Err(e) => error!(port = %self.port, error = %e, "cannot start the SocketCAN writer thread"),
        }
    }

    fn read_loop(&self, slot: &ClientSlot, port: u16, credit: &TxCredit, stop: &dyn Fn() -> bool) {
        while !stop() {
            let raw = match self.interface.read() {
                Ok(Some(raw)) => raw,
                Ok(None) => continue,
                Err(e) => {
                    warn!(port = %self.port, interface = %self.interface.name(), error = %e, "SocketCAN read failed; retrying");
                    std::thread::sleep(READ_RETRY);
                    continue;
                }
            };
            let frame = match to_hub(&raw) {
                Ok(frame) => frame,
                Err(e) => {
                    warn!(port = %self.port, error = %e, "dropping a frame from the interface");
                    continue;
                }
            };
            if !credit.acquire(stop) {
                return;
            }
            if slot.sessions().inbox.send(Inbound::Frame { client: slot.id(), port, frame }).is_err() {
                return;
            }
        }
    }
}

/// Write the bus's frames to the interface until the bus says goodbye or
/// drops the port's client.
fn write_loop(interface: &Interface, port: &str, outbox: &QueueOutbox, closed: &AtomicBool) {
    let mut refused: u64 = 0;
    // SYNC POINT with the hang-up's Release store.
    while !closed.load(Ordering::Acquire) {
        let Some(item) = outbox.take_timeout(WRITER_LOOK) else { continue };
        outbox.took();
        match item {
            Outbound::Frame { frame, .. } => {
                if let Err(e) = interface.write(&frame) {
                    refused += 1;
                    // The first refusal says why; later ones are only counted.
                    if refused == 1 {
                        warn!(port, interface = %interface.name(), error = %e, "the interface refused a frame");
                    }
                }
            }
            Outbound::RxOverflow { dropped, .. } => {
                warn!(port, interface = %interface.name(), dropped, "the interface fell behind the bus; frames dropped");
            }
            Outbound::Error { text, fatal, .. } => {
                warn!(port, interface = %interface.name(), "the bus reports: {text}");
                if fatal {
                    break;
                }
            }
            Outbound::Goodbye { .. } => break,
            Outbound::TxDropped { reason, dropped, .. } => {
                warn!(port, interface = %interface.name(), dropped, "frames from the interface {}", reason.describe());
            }
            Outbound::ChannelState { text, .. } => warn!(port, interface = %interface.name(), "{text}"),
            Outbound::PortOpened { .. }
            | Outbound::PortClosed { .. }
            | Outbound::Pong { .. }
            | Outbound::Grant { .. }
            | Outbound::Stats { .. } => {}
        }
    }
    if refused > 0 {
        warn!(port, interface = %interface.name(), refused, "frames the interface refused");
    }
    closed.store(true, Ordering::Release);
}
