//! One SIL Kit controller as the simulator keeps it: a port of the channel
//! and the transmit requests it has not had answered yet ([`Node`]), and
//! which request each of the bus's reports about the port settles.
//!
//! Invariants: a node's requests are oldest first, the first
//! [`Node::forwarded`] of them in the bus's hands in the order they reached
//! it; every request leaves the node once, with the answer the bus's report
//! gives it (`confirm`: on the bus; `drop_oldest`: off it; `unechoed`: on
//! it without its echo reaching the port).

use std::collections::VecDeque;

use fieldhub_proto::frame::Frame;

/// A frame a controller asked to send, with the context its answer carries.
pub(super) struct Request {
    pub frame: Frame,
    pub user_context: usize,
    /// Set when it is forwarded to the bus: the number of frames the
    /// simulator forwarded up to and with it, which a `PING`'s mark is held
    /// against.
    pub ticket: u64,
}

/// One SIL Kit controller: a port of the channel.
pub(super) struct Node {
    /// `None` until the bus opened the port.
    pub port: Option<u16>,
    /// Requests not yet answered, oldest first: the first `forwarded` are
    /// in the bus's hands (in the order they were forwarded), the rest wait
    /// for the bridge thread.
    pub requests: VecDeque<Request>,
    pub forwarded: usize,
    /// The port's last echo (sequence number, frame): a `duplicate` rule's
    /// copy of it comes with the next sequence number.
    last_echo: Option<(u64, Frame)>,
    /// A controller the simulator has not heard a mode from counts as
    /// started: it may have started before it learnt of the simulator.
    pub started: bool,
    pub baud_warned: bool,
}

impl Node {
    pub fn new() -> Self {
        Node { port: None, requests: VecDeque::new(), forwarded: 0, last_echo: None, started: true, baud_warned: false }
    }

    /// The request an echo of `sent` with sequence number `seq` confirms:
    /// the oldest forwarded one with this frame (a frame a `delay` rule held
    /// reaches the bus after later ones); else, when a fault rule changed
    /// the frame on its way, the oldest forwarded one. `None` for a copy a
    /// `duplicate` rule made of the frame echoed just before (the controller
    /// sent it once), and when nothing is in the bus's hands.
    pub fn confirm(&mut self, sent: &Frame, seq: u64) -> Option<Request> {
        let previous = self.last_echo.replace((seq, sent.clone()));
        let forwarded = self.forwarded.min(self.requests.len());
        let at = match self.requests.iter().take(forwarded).position(|r| r.frame == *sent) {
            Some(at) => at,
            None if previous.as_ref().is_some_and(|(s, f)| *s == seq.wrapping_sub(1) && f == sent) => return None,
            None if forwarded > 0 => 0,
            None => return None,
        };
        self.forwarded = forwarded - 1;
        self.requests.remove(at)
    }

    /// The `count` oldest requests in the bus's hands, which it reported off
    /// the bus (a port's frames leave its FIFO in the order it sent them),
    /// and how many of `count` found no request.
    pub fn drop_oldest(&mut self, count: usize) -> (Vec<Request>, usize) {
        let forwarded = self.forwarded.min(self.requests.len());
        let taken = count.min(forwarded);
        self.forwarded = forwarded - taken;
        (self.requests.drain(..taken).collect(), count - taken)
    }

    /// The requests forwarded up to ticket `mark` that are still in the
    /// bus's hands when the `PONG` of a `PING` sent after them comes: the bus
    /// reported none of them dropped, so they were on the bus, but their
    /// echo never reached the port.
    pub fn unechoed(&mut self, mark: u64) -> Vec<Request> {
        let forwarded = self.forwarded.min(self.requests.len());
        let settled = self.requests.iter().take(forwarded).take_while(|r| r.ticket <= mark).count();
        self.forwarded = forwarded - settled;
        self.requests.drain(..settled).collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Arc;

    use fieldhub_bus::fault::{Dice, FaultSpec};
    use fieldhub_bus::inbox::Inbound;
    use fieldhub_bus::outbox::Outbound;
    use fieldhub_bus::request::{ControlRequest, ForcedState};
    use fieldhub_bus::testing::{Harness, SteppedByHand, TestClient};
    use fieldhub_proto::wire::PortOptions;
    use fieldhub_silkit::TransmitStatus;
    use serde_json::json;

    const CHANNEL: &str = "[[channel]]\nname = \"can0\"\n";
    /// The options the simulator opens a controller's port with.
    const CONTROLLER: PortOptions =
        PortOptions::FD.union(PortOptions::BLOCK_ON_OVERFLOW).union(PortOptions::RECEIVE_OWN);

    /// Frame `n` of a controller: identifier `0x100 + n % 16`, `n` in its payload.
    fn numbered(n: u32) -> Frame {
        Frame::can(0x100 + n % 16, false, &n.to_le_bytes()).unwrap()
    }

    /// A controller with `count` numbered requests (user context `n + 1`),
    /// all in the bus's hands, with tickets `1..=count`.
    fn forwarded(count: u32) -> Node {
        let mut node = Node::new();
        node.port = Some(1);
        for n in 0..count {
            let ticket = u64::from(n) + 1;
            node.requests.push_back(Request { frame: numbered(n), user_context: n as usize + 1, ticket });
        }
        node.forwarded = count as usize;
        node
    }

    /// What the delivery thread answers for the bus's items to the
    /// controller's client, by the same `Node` calls: (user context,
    /// status), in the order given.
    fn answers(node: &mut Node, items: Vec<Outbound>) -> Vec<(usize, TransmitStatus)> {
        let mut answered = Vec::new();
        for item in items {
            let (settled, status) = match item {
                Outbound::Frame { frame, meta, .. } if frame.is_echo() => {
                    (node.confirm(&frame.with_echo(false), meta.seq).into_iter().collect(), TransmitStatus::Transmitted)
                }
                Outbound::TxDropped { dropped, .. } => {
                    let (canceled, missing) = node.drop_oldest(dropped as usize);
                    assert_eq!(missing, 0, "a drop without a request");
                    (canceled, TransmitStatus::Canceled)
                }
                Outbound::Pong { nonce } => (node.unechoed(nonce), TransmitStatus::Transmitted),
                _ => (Vec::new(), TransmitStatus::Transmitted),
            };
            answered.extend(settled.iter().map(|r: &Request| (r.user_context, status)));
        }
        answered
    }

    /// A bus with the controller's port ("ctl", handle returned) and a
    /// receiver ("rx") on can0, and `rules` added in order.
    fn bus(rules: &[serde_json::Value]) -> (Harness, TestClient, u16, TestClient) {
        let mut h = Harness::new(CHANNEL);
        let (ctl, rx) = (h.connect("silkit"), h.connect("rx"));
        let port = h.open(&ctl, "can0", "ctl", CONTROLLER);
        h.open(&rx, "can0", "rx", PortOptions::empty());
        for rule in rules {
            let spec: FaultSpec = serde_json::from_value(rule.clone()).unwrap();
            h.control(ControlRequest::AddFault(spec)).unwrap();
        }
        (h, ctl, port, rx)
    }

    fn numbers(frames: &[(Frame, fieldhub_proto::FrameMeta)]) -> Vec<u32> {
        frames.iter().map(|(f, _)| u32::from_le_bytes(f.data()[..4].try_into().unwrap())).collect()
    }

    #[test]
    fn a_dropped_frame_with_nothing_behind_it_is_canceled_at_its_report() {
        let (mut h, ctl, port, rx) = bus(&[json!({"channel": "can0", "at": "sender", "action": {"type": "drop"}})]);
        let mut node = forwarded(1);
        h.send(&ctl, port, numbered(0));
        h.step();
        assert_eq!(answers(&mut node, h.items(&ctl)), [(1, TransmitStatus::Canceled)]);
        assert!(h.frames(&rx).is_empty());
        assert!(node.requests.is_empty() && node.forwarded == 0);
    }

    /// Seeded drops at the sender and on the bus: every request answered
    /// once, in request order; `Transmitted` for exactly the frames the
    /// receiver got, `Canceled` for exactly the ones the rules' dice drop.
    #[test]
    fn seeded_drops_answer_every_request_once_in_order() {
        const COUNT: u32 = 300;
        for seed in [1u64, 2, 3] {
            let at_sender = json!({"channel": "can0", "at": "sender", "action": {"type": "drop"},
                "probability": 0.2, "seed": seed});
            let on_bus = json!({"channel": "can0", "at": "bus", "action": {"type": "drop"},
                "probability": 0.1, "seed": seed + 100});
            let (mut h, ctl, port, rx) = bus(&[at_sender, on_bus]);
            let mut node = forwarded(COUNT);
            let mut answered = Vec::new();
            // In bursts, as the bridge forwards what SIL Kit queued.
            for burst in (0..COUNT).collect::<Vec<_>>().chunks(7) {
                burst.iter().for_each(|&n| h.send(&ctl, port, numbered(n)));
                h.step();
                answered.extend(answers(&mut node, h.items(&ctl)));
            }
            let contexts: Vec<usize> = answered.iter().map(|(c, _)| *c).collect();
            assert_eq!(contexts, (1..=COUNT as usize).collect::<Vec<_>>(), "seed {seed}: once each, in order");
            let transmitted: Vec<u32> = answered
                .iter()
                .filter(|(_, s)| *s == TransmitStatus::Transmitted)
                .map(|(c, _)| *c as u32 - 1)
                .collect();
            assert_eq!(transmitted, numbers(&h.frames(&rx)), "seed {seed}: Transmitted = on the bus");
            // Each rule rolls its dice once per frame it sees: the sender's
            // for every frame, the bus's for those the sender's let through.
            let (mut sender, mut on_bus) = (Dice::new(seed), Dice::new(seed + 100));
            let expected: Vec<u32> = (0..COUNT).filter(|_| sender.roll() < 0.2 || on_bus.roll() < 0.1).collect();
            let canceled: Vec<u32> =
                answered.iter().filter(|(_, s)| *s == TransmitStatus::Canceled).map(|(c, _)| *c as u32 - 1).collect();
            assert_eq!(canceled, expected, "seed {seed}: Canceled = what the dice dropped");
        }
    }

    #[test]
    fn frames_dropped_while_bus_off_are_canceled_at_once() {
        let config = "[[channel]]\nname = \"can0\"\nauto_bus_off_recovery = false\n";
        let mut h = Harness::new(config);
        let ctl = h.connect("silkit");
        let port = h.open(&ctl, "can0", "ctl", CONTROLLER);
        h.control(ControlRequest::ForceState { port: "ctl".into(), state: ForcedState::BusOff }).unwrap();
        let mut node = forwarded(3);
        (0..3).for_each(|n| h.send(&ctl, port, numbered(n)));
        let canceled = [(1, TransmitStatus::Canceled), (2, TransmitStatus::Canceled), (3, TransmitStatus::Canceled)];
        assert_eq!(answers(&mut node, h.items(&ctl)), canceled, "before the bus serves the channel again");
    }

    /// A frame a delay rule holds reaches the bus after later ones; a rule
    /// that changes a frame changes its echo; a duplicate's copies echo
    /// again: each echo still answers the request whose frame it sent.
    #[test]
    fn held_changed_and_duplicated_frames_answer_their_own_requests() {
        let rule = |at: &str, id: u32, action: serde_json::Value| json!({"channel": "can0", "at": at, "id": id, "mask": 0x7FF, "action": action});
        let cases = [
            (rule("sender", 0x100, json!({"type": "delay", "ms": 10})), [2, 3, 4, 1], 4),
            (rule("bus", 0x101, json!({"type": "flip", "byte": 0, "mask": 255})), [1, 2, 3, 4], 4),
            (rule("bus", 0x102, json!({"type": "duplicate", "copies": 2})), [1, 2, 3, 4], 6),
        ];
        for (rule, order, carried) in cases {
            let (mut h, ctl, port, rx) = bus(std::slice::from_ref(&rule));
            let mut node = forwarded(4);
            (0..4).for_each(|n| h.send(&ctl, port, numbered(n)));
            h.step();
            let mut answered = answers(&mut node, h.items(&ctl));
            h.advance(10_000_000);
            answered.extend(answers(&mut node, h.items(&ctl)));
            let expected: Vec<(usize, TransmitStatus)> = order.map(|c| (c, TransmitStatus::Transmitted)).to_vec();
            assert_eq!(answered, expected, "{rule}");
            assert_eq!(h.frames(&rx).len(), carried, "{rule}");
        }
    }

    /// An echo that never reached the port (its queue overflowed) leaves
    /// its request in the bus's hands until the PONG of a PING sent after
    /// it, which says the frame was on the bus; a later request waits for
    /// its own fate.
    #[test]
    fn a_pong_settles_a_request_whose_echo_never_came() {
        let (mut h, ctl, port, _rx) = bus(&[]);
        let mut node = forwarded(3);
        (0..2).for_each(|n| h.send(&ctl, port, numbered(n)));
        // The PING through an inbox, as the bridge thread sends it.
        let (to_bus, inbox) = fieldhub_bus::inbox::inbox(Arc::new(SteppedByHand));
        to_bus.send(Inbound::Ping { client: ctl.id, nonce: 2 }).unwrap();
        h.bus.take_input(&inbox);
        h.send(&ctl, port, numbered(2));
        h.step();
        let items: Vec<Outbound> = h
            .items(&ctl)
            .into_iter()
            .filter(|item| !matches!(item, Outbound::Frame { frame, .. } if frame.data()[0] == 1))
            .collect();
        let transmitted = |c| (c, TransmitStatus::Transmitted);
        assert_eq!(answers(&mut node, items), [transmitted(1), transmitted(3), transmitted(2)]);
        assert!(node.unechoed(3).is_empty() && node.requests.is_empty());
    }

    #[test]
    fn an_echo_without_a_request_in_the_bus_hands_answers_nothing() {
        let mut idle = forwarded(1);
        idle.forwarded = 0;
        assert!(idle.confirm(&numbered(0), 1).is_none(), "nothing forwarded, nothing to confirm");
        assert_eq!(idle.drop_oldest(2).1, 2, "and nothing to cancel");
        assert_eq!(idle.requests.len(), 1, "the request still waits for the bridge thread");
    }
}
