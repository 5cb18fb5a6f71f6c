//! One open SocketCAN interface: a raw socket with CAN FD frames and error
//! frames on, its own writes not looped back, reads that time out so a
//! thread blocked in one can notice that it should stop.
//!
//! Both the client-side bridge and the hub's SocketCAN ports use it, one
//! thread reading and one writing at a time (`&self` on both: the kernel
//! socket is safe to share).
//!
//! An interface that vanishes (a USB adapter unplugged, `ip link del`) is
//! reopened by name when it comes back: the kernel unbinds the socket and
//! reports `ENODEV` once, to whichever call comes first; that call marks the
//! interface gone, and the reader then tries the name again every
//! [`READ_TIMEOUT`]. Writes meanwhile fail (the callers count them). A link
//! that only goes down (`ip link set can0 down`) keeps its binding and needs
//! nothing: reads report `ENETDOWN` once and frames flow again once it is up.

use std::io;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use arc_swap::ArcSwap;
use fieldhub_proto::Frame;
use socketcan::{CanFdSocket, Socket, SocketOptions};

use crate::convert::{to_socketcan, RawFrame};

/// How long a blocked read waits before [`Interface::read`] returns `None`.
pub const READ_TIMEOUT: Duration = Duration::from_millis(100);
/// Receive buffer asked for on the socket, in bytes (about 5000 FD frames).
const RECEIVE_BUFFER: libc::c_int = 4 << 20;

/// Why an interface cannot be opened.
#[derive(Debug, thiserror::Error)]
pub enum InterfaceError {
    #[error(
        "this kernel has no SocketCAN (AF_CAN): load the `can` and `can-raw` modules, \
         or run this where SocketCAN exists"
    )]
    NoSocketCan(#[source] io::Error),
    #[error("cannot open SocketCAN interface '{interface}': {source}; check the name with `ip link` (for a test bus: `ip link add {interface} type vcan && ip link set {interface} up`)")]
    Open {
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

/// A raw CAN socket bound to one interface.
pub struct Interface {
    name: String,
    /// Replaced when the interface comes back after vanishing; the writer
    /// may still hold the old socket for the write under way.
    socket: ArcSwap<CanFdSocket>,
    /// The socket lost its interface. Release: set by whichever side saw
    /// `ENODEV`; Acquire: read by the reader before it reopens.
    gone: AtomicBool,
}

impl Interface {
    /// Open `name` with CAN FD frames and every error class enabled, own
    /// writes not received back.
    pub fn open(name: &str) -> Result<Self, InterfaceError> {
        check_af_can()?;
        let socket = open_socket(name)?;
        Ok(Self { name: name.to_owned(), socket: ArcSwap::from_pointee(socket), gone: AtomicBool::new(false) })
    }

    /// The interface name, as in `can0`.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// The next frame from the interface, or `None` when none came within
    /// about [`READ_TIMEOUT`] (or a signal interrupted the wait, or the
    /// interface is gone and not back yet).
    pub fn read(&self) -> io::Result<Option<RawFrame>> {
        if self.gone.load(Ordering::Acquire) {
            std::thread::sleep(READ_TIMEOUT);
            self.reopen();
            return Ok(None);
        }
        match self.socket.load().read_raw_frame() {
            Ok(raw) => Ok(Some(raw)),
            Err(e) if matches!(e.kind(), io::ErrorKind::WouldBlock | io::ErrorKind::TimedOut) => Ok(None),
            Err(e) if e.kind() == io::ErrorKind::Interrupted => Ok(None),
            Err(e) if lost_interface(&e) => {
                self.mark_gone();
                Ok(None)
            }
            Err(e) => Err(e),
        }
    }

    /// Write one hub frame to the interface. A real controller's driver may
    /// refuse some (error frames, a full transmit queue: `ENOBUFS`); while
    /// the interface is gone every write fails.
    pub fn write(&self, frame: &Frame) -> io::Result<()> {
        let socket = self.socket.load();
        let written = match to_socketcan(frame) {
            Some(RawFrame::Classic(raw)) => socket.write_frame(&socketcan::CanFrame::from(raw)),
            Some(RawFrame::Fd(raw)) => socket.write_frame(&socketcan::CanFdFrame::from(raw)),
            None => {
                let why = format!("the SocketCAN bridge carries CAN and CAN FD frames only, not {frame:?}");
                return Err(io::Error::new(io::ErrorKind::InvalidInput, why));
            }
        };
        if let Err(e) = &written {
            if lost_interface(e) {
                self.mark_gone();
            }
        }
        written
    }

    fn mark_gone(&self) {
        if !self.gone.swap(true, Ordering::AcqRel) {
            tracing::warn!(
                interface = %self.name,
                "SocketCAN interface is gone (unplugged or deleted); it is reopened when it comes back"
            );
        }
    }

    /// Bind a new socket if an interface of this name exists again.
    fn reopen(&self) {
        if let Ok(socket) = open_socket(&self.name) {
            self.socket.store(std::sync::Arc::new(socket));
            self.gone.store(false, Ordering::Release);
            tracing::info!(interface = %self.name, "SocketCAN interface is back; reopened");
        }
    }
}

/// `ENODEV`: the kernel unbound the socket because its interface was
/// unregistered. `ENXIO`: a write on a socket already unbound.
fn lost_interface(e: &io::Error) -> bool {
    matches!(e.raw_os_error(), Some(libc::ENODEV | libc::ENXIO))
}

/// A raw socket bound to `name`, configured as [`Interface::open`] says.
fn open_socket(name: &str) -> Result<CanFdSocket, InterfaceError> {
    let socket =
        CanFdSocket::open(name).map_err(|source| InterfaceError::Open { interface: name.to_owned(), source })?;
    let configure = |source| InterfaceError::Configure { interface: name.to_owned(), source };
    socket.set_error_filter_accept_all().map_err(configure)?;
    socket.set_recv_own_msgs(false).map_err(configure)?;
    socket.set_read_timeout(READ_TIMEOUT).map_err(configure)?;
    // A burst from the interface waits in the socket while the reader
    // catches up; the kernel drops silently what does not fit. Forcing
    // the size needs CAP_NET_ADMIN; without it the limit is rmem_max.
    if socket.set_socket_option(libc::SOL_SOCKET, libc::SO_RCVBUFFORCE, &RECEIVE_BUFFER).is_err() {
        socket.as_raw_socket().set_recv_buffer_size(RECEIVE_BUFFER as usize).map_err(configure)?;
    }
    Ok(socket)
}

/// Whether this kernel can make an AF_CAN raw socket at all, checked before
/// the interface name so a missing AF_CAN is not reported as a missing
/// interface.
fn check_af_can() -> Result<(), InterfaceError> {
    let domain = socket2::Domain::from(libc::AF_CAN);
    let protocol = socket2::Protocol::from(libc::CAN_RAW);
    match socket2::Socket::new(domain, socket2::Type::RAW, Some(protocol)) {
        Ok(_) => Ok(()),
        Err(e) if matches!(e.raw_os_error(), Some(libc::EAFNOSUPPORT | libc::EPROTONOSUPPORT)) => {
            Err(InterfaceError::NoSocketCan(e))
        }
        // Any other failure (permissions, limits) shows up again, with the
        // interface named, when the real socket is opened.
        Err(_) => Ok(()),
    }
}
