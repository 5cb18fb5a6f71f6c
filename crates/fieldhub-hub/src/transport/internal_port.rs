//! Ports of the hub's own clients: a SocketCAN interface, a cannelloni peer,
//! a socketcand connection — anything the hub attaches in-process with one
//! port, no wire session in between. [`open`] is the one way they join the
//! bus: attach the admitted slot with a fresh [`QueueOutbox`], a transmit
//! credit for the calling thread and the caller's hang-up, send `OPEN_PORT`
//! and wait for the bus's answer on that outbox. [`closed_flag`] is the
//! hang-up most of them want: a flag the bus sets when it drops the client.
//! [`ask_cyclic`] is how such a client starts or changes a cyclic job the
//! bus runs from its port (socketcand's BCM, a rest-bus simulation's nodes).
//!
//! Invariants:
//! - The calling thread is the one that forwards the port's frames: the
//!   credit wakes it when credit returns.
//! - Every way out without a port closes the outbox; a port the bus refused
//!   also detaches the slot, with the bus's reason.
//! - A wait ends when the hub stops, at the caller's deadline, or with the
//!   bus's answer, whichever comes first; it looks every [`LOOK`].

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use crossbeam_channel::RecvTimeoutError;
use fieldhub_bus::credit::TxCredit;
use fieldhub_bus::cyclic::{JobError, JobId};
use fieldhub_bus::inbox::{ClientId, CyclicRequest, HangUp, Inbound, JobReply};
use fieldhub_bus::outbox::{Outbound, Outbox, QueueOutbox};
use fieldhub_proto::wire::PortOptions;

use crate::session::{ClientSlot, Sessions};

/// How often a waiting thread looks whether the hub stopped or its
/// deadline passed.
pub const LOOK: Duration = Duration::from_millis(100);

/// The port to open for an admitted slot.
pub struct PortRequest<'a> {
    pub channel: &'a str,
    pub port_name: String,
    pub options: PortOptions,
    /// When to give up waiting for the bus's answer; `None` waits until the
    /// hub stops.
    pub deadline: Option<Instant>,
}

/// A hub-internal client's port, open on its channel.
pub struct InternalPort {
    pub port: u16,
    /// Where the bus puts the port's frames and its reports.
    pub outbox: Arc<QueueOutbox>,
    /// The client's transmit credit; the thread that called [`open`] waits on it.
    pub credit: Arc<TxCredit>,
}

/// Why a hub-internal client got no port.
#[derive(Debug, PartialEq, Eq, thiserror::Error)]
pub enum NotOpened {
    /// The bus refused the port, with its error's text.
    #[error("the bus refused the port on '{channel}': {text}")]
    Refused { channel: String, text: String },
    /// The bus said goodbye to the client before it answered.
    #[error("{0}")]
    Goodbye(String),
    /// The hub is stopping, or the deadline passed without an answer.
    #[error("the hub is stopping")]
    Stopped,
}

/// Why a cyclic-job request got no job.
#[derive(Debug, PartialEq, Eq, thiserror::Error)]
pub enum JobNotRun {
    #[error("the bus refused the cyclic job: {0}")]
    Refused(JobError),
    /// The hub is stopping, or the bus dropped the request unanswered
    /// (which it does only when it stops).
    #[error("the hub is stopping")]
    Stopped,
}

/// Send `client`'s cyclic-job request that `make` builds around the reply
/// and wait for the bus's answer, looking every [`LOOK`] whether the hub
/// stopped.
pub fn ask_cyclic(
    sessions: &Sessions,
    client: ClientId,
    make: impl FnOnce(JobReply) -> CyclicRequest,
) -> Result<JobId, JobNotRun> {
    let (answer, answered) = crossbeam_channel::bounded(1);
    let reply: JobReply = Box::new(move |result| {
        let _ = answer.try_send(result);
    });
    let request = Inbound::Cyclic { client, request: make(reply) };
    sessions.inbox.send(request).map_err(|_| JobNotRun::Stopped)?;
    loop {
        match answered.recv_timeout(LOOK) {
            Ok(result) => return result.map_err(JobNotRun::Refused),
            Err(RecvTimeoutError::Timeout) if !sessions.stopping() => {}
            Err(_) => return Err(JobNotRun::Stopped),
        }
    }
}

/// A hang-up that sets a flag, and the flag (read it with `Acquire`).
pub fn closed_flag() -> (Arc<AtomicBool>, HangUp) {
    let closed = Arc::new(AtomicBool::new(false));
    let hang_up = {
        let closed = Arc::clone(&closed);
        // SYNC POINT with the readers' Acquire loads.
        Box::new(move || closed.store(true, Ordering::Release))
    };
    (closed, hang_up)
}

/// Attach `slot` (admitted and named) to the bus and open its one port.
pub fn open(slot: &mut ClientSlot, hang_up: HangUp, request: PortRequest<'_>) -> Result<InternalPort, NotOpened> {
    let sessions = Arc::clone(slot.sessions());
    let outbox = QueueOutbox::new(None, Arc::clone(sessions.inbox.bus_wake()));
    let credit = Arc::new(TxCredit::for_current_thread());
    slot.attach(Outbox::new(outbox.clone()), hang_up, Arc::clone(&credit), None).map_err(|_| NotOpened::Stopped)?;
    let PortRequest { channel, port_name, options, deadline } = request;
    let open = Inbound::OpenPort { client: slot.id(), request: 1, options, channel: channel.to_owned(), port_name };
    let answer = if sessions.inbox.send(open).is_err() {
        Err(NotOpened::Stopped)
    } else {
        wait_for_answer(&outbox, channel, || sessions.stopping() || deadline.is_some_and(|d| Instant::now() >= d))
    };
    match answer {
        Ok(port) => Ok(InternalPort { port, outbox, credit }),
        Err(not_opened) => {
            if let NotOpened::Refused { text, .. } = &not_opened {
                slot.detach(&format!("could not open '{channel}': {text}"));
            }
            outbox.close();
            Err(not_opened)
        }
    }
}

/// The bus's answer to `OPEN_PORT` request 1: the port, or why not.
fn wait_for_answer(outbox: &QueueOutbox, channel: &str, give_up: impl Fn() -> bool) -> Result<u16, NotOpened> {
    while !give_up() {
        match outbox.take_timeout(LOOK) {
            Some(Outbound::PortOpened { port, .. }) => return Ok(port),
            Some(Outbound::Error { text, .. }) => return Err(NotOpened::Refused { channel: channel.to_owned(), text }),
            Some(Outbound::Goodbye { text, .. }) => return Err(NotOpened::Goodbye(text)),
            Some(_) | None => {}
        }
    }
    Err(NotOpened::Stopped)
}
