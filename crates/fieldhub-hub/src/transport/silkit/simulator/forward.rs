//! The simulator's way in: a SIL Kit controller's transmit request to the
//! bus. SIL Kit's thread hands it straight to the bus's inbox — one item,
//! one wake of the bus, no thread of the bridge's in between — when none of
//! its controller's requests waits before it, its port is open and a
//! transmit credit is free ([`Forwarder::take`]). Otherwise the request
//! waits in its node for the bridge thread, which waits for credit as any
//! sender does ([`Forwarder::forward_next`]): SIL Kit's thread never waits
//! for credit — only, as every sender, while the bus's inbox is full.
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

use std::sync::Arc;

use fieldhub_silkit::netsim_ffi::ControllerDescriptor;
use fieldhub_silkit::TransmitStatus;

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

/// The bridge stops, or the bus is gone.
pub(super) struct Stopped;

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
    /// not used yet). `Ok(Some(request))`: a CAN FD frame the classic
    /// channel refuses, taken out for the caller to answer; `Err(Stopped)`
    /// when the bridge stops or the bus is gone.
    pub fn forward_next(
        &self,
        shared: &Shared,
        controller: ControllerDescriptor,
        held: &mut bool,
        stop: &dyn Fn() -> bool,
    ) -> Result<Option<Request>, Stopped> {
        if !*held {
            if !self.credit.acquire(stop) {
                return Err(Stopped);
            }
            *held = true;
        }
        let handed = self.hand_over(&mut shared.table(), controller);
        match handed {
            Handed::Sent => *held = false,
            Handed::Nothing => {}
            Handed::Refused(refused) => return Ok(Some(refused)),
            Handed::Gone => return Err(Stopped),
        }
        Ok(None)
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

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::AtomicBool;

    use fieldhub_bus::credit::Waiter;
    use fieldhub_bus::inbox::{self, Inbox};
    use fieldhub_bus::testing::SteppedByHand;
    use fieldhub_proto::frame::Frame;

    use crate::session::credentials::Credentials;
    use crate::session::peer_user::PeerOrigin;
    use crate::transport::silkit::simulator::node::Node;

    const CONTROLLER: ControllerDescriptor = 7;
    const PORT: u16 = 3;

    /// A forwarder with `credits` transmit credits, a controller whose port
    /// is open, and the inbox the bus would read.
    fn forwarder(credits: u32) -> (Forwarder, Shared, Inbox) {
        let (sender, inbox) = inbox::inbox(Arc::new(SteppedByHand));
        let credentials = Credentials::new(None, None, false);
        let sessions = Sessions::new(sender, "test-hub".into(), credentials, false, Arc::new(AtomicBool::new(false)));
        let sessions = Arc::new(sessions);
        let client = sessions.admit("a test", "test-peer", PeerOrigin::Operator).expect("room for a client").id();
        let credit = Arc::new(TxCredit::new(Waiter::Bus));
        credit.set_limit(credits);
        let shared = Shared::new("sim".into(), "can0".into(), 500_000, Arc::new(AtomicBool::new(false)));
        let mut node = Node::new();
        node.port = Some(PORT);
        shared.table().nodes.insert(CONTROLLER, node);
        (Forwarder { client, credit, sessions }, shared, inbox)
    }

    fn request(n: u8) -> Request {
        Request { frame: Frame::can(0x100, false, &[n]).unwrap(), user_context: usize::from(n), ticket: 0 }
    }

    /// The frames in the bus's inbox, by their first byte, in order.
    fn inbox_frames(inbox: &Inbox) -> Vec<u8> {
        std::iter::from_fn(|| inbox.try_recv().ok())
            .map(|item| match item {
                Inbound::Frame { port: PORT, frame, .. } => frame.data()[0],
                other => panic!("not a frame of the controller's port: {other:?}"),
            })
            .collect()
    }

    /// SIL Kit's thread hands a request straight to the bus while a credit
    /// is free; without one it leaves it to the bridge thread, and so every
    /// later request of that controller while one waits: the bus gets them
    /// in SIL Kit's order, with tickets in that order.
    #[test]
    fn requests_go_straight_to_the_bus_while_credit_lasts_and_never_overtake_a_waiting_one() {
        let (forwarder, shared, inbox) = forwarder(2);
        let taken: Vec<bool> =
            (0..4).map(|n| matches!(forwarder.take(&shared, CONTROLLER, request(n)), Taken::Forwarded)).collect();
        assert_eq!(taken, [true, true, false, false], "two credits: two go at once, the rest wait");
        assert_eq!(inbox_frames(&inbox), [0, 1]);
        // The bus carried both: their credits come back. A new request
        // still waits behind the two that wait.
        forwarder.credit.release();
        forwarder.credit.release();
        assert!(matches!(forwarder.take(&shared, CONTROLLER, request(4)), Taken::Queued));
        assert!(inbox_frames(&inbox).is_empty(), "nothing overtakes the waiting requests");
        let never = || false;
        let mut held = false;
        for _ in 0..3 {
            assert!(matches!(forwarder.forward_next(&shared, CONTROLLER, &mut held, &never), Ok(None)));
            forwarder.credit.release();
        }
        assert_eq!(inbox_frames(&inbox), [2, 3, 4], "the waiting ones, oldest first");
        let table = shared.table();
        let node = &table.nodes[&CONTROLLER];
        let tickets: Vec<u64> = node.requests.iter().map(|r| r.ticket).collect();
        assert_eq!(tickets, [1, 2, 3, 4, 5], "tickets in the order the bus got the frames");
        assert_eq!(node.forwarded, 5);
    }

    #[test]
    fn a_full_controller_queue_and_a_stopped_controller_are_answered_at_once() {
        let (forwarder, shared, inbox) = forwarder(CONTROLLER_QUEUE as u32 + 1);
        for n in 0..CONTROLLER_QUEUE {
            assert!(matches!(forwarder.take(&shared, CONTROLLER, request(n as u8)), Taken::Forwarded));
        }
        let full = forwarder.take(&shared, CONTROLLER, request(0));
        assert!(matches!(full, Taken::Refused(_, TransmitStatus::QueueFull)), "past the controller's queue");
        shared.table().nodes.get_mut(&CONTROLLER).unwrap().started = false;
        let stopped = forwarder.take(&shared, CONTROLLER, request(0));
        assert!(matches!(stopped, Taken::Refused(_, TransmitStatus::Canceled)), "a stopped controller");
        assert_eq!(inbox_frames(&inbox).len(), CONTROLLER_QUEUE, "neither reached the bus");
    }
}
