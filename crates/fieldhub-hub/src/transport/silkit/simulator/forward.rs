//! The simulator's way in: a SIL Kit controller's transmit request to the
//! bus. SIL Kit's thread hands it straight to the bus's inbox — one item,
//! one wake of the bus, no thread of the bridge's in between — when none of
//! its controller's requests waits before it, its port is open and a
//! transmit credit is free ([`Forwarder::take`]). Otherwise the request
//! waits in its node for the bridge thread, which waits for credit as any
//! sender does ([`Forwarder::forward_next`]): SIL Kit's thread never waits
//! for the bus.
//!
//! Invariants:
//! - Per controller, requests reach the bus in the order SIL Kit delivered
//!   them: SIL Kit's thread forwards one only when none of its controller
//!   waits for the bridge thread, and the bridge thread forwards the
//!   oldest waiting one.
//! - A frame's ticket is taken and the frame handed to the inbox under the
//!   table's lock, so tickets reach the bus in order and every frame whose
//!   ticket a `PING` carries is before the `PING` ([`ping_if_waiting`]).
//! - A frame is handed over only with a transmit credit taken for it.

use std::sync::atomic::Ordering;
use std::sync::Arc;

use fieldhub_silkit::netsim_ffi::ControllerDescriptor;
use fieldhub_silkit::{EventProducer, TransmitStatus};
use tracing::warn;

use super::node::Request;
use super::shared::{Shared, Table};
use crate::session::Sessions;
use fieldhub_bus::credit::TxCredit;
use fieldhub_bus::inbox::{ClientId, Inbound};

/// Requests one SIL Kit controller may have in flight (sent, not yet
/// answered): its transmit queue.
pub const CONTROLLER_QUEUE: usize = 256;

/// What became of a request SIL Kit's thread took.
pub(super) enum Taken {
    /// In the bus's inbox: the bus answers it soon.
    Forwarded,
    /// Waits in its node: the bridge thread forwards it.
    Queued,
    /// Refused as it came, with this answer.
    Refused(Request, TransmitStatus),
}

/// What handing the controller's next request over did.
enum Handed {
    Sent,
    /// Nothing waits (a mode change cancelled it), or no port yet.
    Nothing,
    /// A CAN FD frame on a classic channel: taken out, to be answered.
    Refused(Request),
    /// The bus is gone.
    Gone,
}

/// The bridge's client on the bus, as its frames' senders see it.
pub(super) struct Forwarder {
    pub client: ClientId,
    pub credit: Arc<TxCredit>,
    pub sessions: Arc<Sessions>,
}

impl Forwarder {
    /// SIL Kit's thread: take `controller`'s request, and hand it to the
    /// bus at once if it can go now.
    pub fn take(&self, shared: &Shared, controller: ControllerDescriptor, request: Request) -> Taken {
        let mut table = shared.table();
        let carries_fd = table.carries_fd;
        let node = match table.nodes.get_mut(&controller) {
            Some(node) if node.started && node.requests.len() < CONTROLLER_QUEUE => node,
            Some(node) if node.started => return Taken::Refused(request, TransmitStatus::QueueFull),
            // Stopped, or no port: the controller is no node of the bus now.
            _ => return Taken::Refused(request, TransmitStatus::Canceled),
        };
        let waiting = node.forwarded < node.requests.len();
        // A frame the channel refuses goes the bridge thread's way, which
        // answers and logs it.
        let goes = !waiting && node.port.is_some() && (!request.frame.is_fd() || carries_fd);
        node.requests.push_back(request);
        if !goes || !self.credit.try_acquire() {
            return Taken::Queued;
        }
        match self.hand_over(&mut table, controller) {
            Handed::Sent => Taken::Forwarded,
            // The bus is gone: the bridge thread finds it so and ends.
            Handed::Gone | Handed::Nothing | Handed::Refused(_) => Taken::Queued,
        }
    }

    /// The bridge thread: forward `controller`'s oldest waiting request,
    /// waiting for a transmit credit first (`held`: one taken before and
    /// not used yet); `false` when the bridge stops or the bus is gone.
    pub fn forward_next(
        &self,
        shared: &Shared,
        producer: &EventProducer,
        controller: ControllerDescriptor,
        held: &mut bool,
        stop: &dyn Fn() -> bool,
    ) -> bool {
        if !*held {
            if !self.credit.acquire(stop) {
                return false;
            }
            *held = true;
        }
        let handed = self.hand_over(&mut shared.table(), controller);
        match handed {
            Handed::Sent => *held = false,
            Handed::Nothing => {}
            Handed::Refused(refused) => {
                if shared.unshowable.fetch_add(1, Ordering::Relaxed) == 0 {
                    warn!(participant = %shared.participant, channel = %shared.channel,
                        "refusing CAN FD frames from SIL Kit: the channel is classic CAN; configure it with protocol = \"canfd\"");
                }
                shared.answer(producer, controller, &refused, TransmitStatus::Canceled);
            }
            Handed::Gone => return false,
        }
        true
    }

    /// Hand the controller's oldest waiting request to the bus, with the
    /// next ticket (the caller holds a credit for it); a CAN FD frame on a
    /// classic channel is taken out instead.
    fn hand_over(&self, table: &mut Table, controller: ControllerDescriptor) -> Handed {
        let Table { nodes, carries_fd, tickets, .. } = table;
        let Some(node) = nodes.get_mut(&controller) else { return Handed::Nothing };
        let Some(port) = node.port else { return Handed::Nothing };
        let at = node.forwarded;
        let Some(request) = node.requests.get_mut(at) else { return Handed::Nothing };
        if request.frame.is_fd() && !*carries_fd {
            return node.requests.remove(at).map_or(Handed::Nothing, Handed::Refused);
        }
        *tickets += 1;
        request.ticket = *tickets;
        node.forwarded += 1;
        let frame = request.frame.clone();
        match self.sessions.inbox.send(Inbound::Frame { client: self.client, port, frame }) {
            Ok(()) => Handed::Sent,
            Err(_) => Handed::Gone,
        }
    }

    /// While requests are in the bus's hands and SIL Kit is quiet, send a
    /// `PING` (one at a time) whose `PONG` settles them (see the
    /// simulator's module doc); `false` when the bus is gone.
    pub fn ping_if_waiting(&self, shared: &Shared) -> bool {
        let mut table = shared.table();
        if table.ping.is_some() || table.nodes.values().all(|node| node.forwarded == 0) {
            return true;
        }
        // Frames are handed over under this lock, so every ticket up to
        // this one is in the inbox before the PING.
        table.ping = Some(table.tickets);
        let nonce = table.tickets;
        self.sessions.inbox.send(Inbound::Ping { client: self.client, nonce }).is_ok()
    }
}
