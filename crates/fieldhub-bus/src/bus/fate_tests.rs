//! A frame's fate (`spec/protocol.md` 6.9), proven on the in-process bus:
//! every frame a port hands over is either on the bus or reported to its
//! sender with `TX_DROPPED` and counted — never silently gone, and never
//! confirmed by a `PONG` before its fate is known.

use fieldhub_proto::fate::DropReason;
use fieldhub_proto::wire::PortOptions;
use fieldhub_proto::Frame;

use super::harness::{Harness, TestClient};
use crate::fault::FaultSpec;
use crate::inbox::Inbound;
use crate::outbox::Outbound;
use crate::request::{ControlRequest, ForcedState};

const CHANNELS: &str = r#"
    [[channel]]
    name = "can0"
    [[channel]]
    name = "timed"
    timing = "timed"
    bitrate = 500000
"#;

fn can(id: u32, n: u8) -> Frame {
    Frame::can(id, false, &[n]).unwrap()
}

/// `TX_DROPPED` reports and `PONG`s among what `client` was sent, in order.
#[derive(Debug, PartialEq, Eq)]
enum Told {
    Dropped(DropReason, u32),
    Pong(u64),
}

fn told(h: &Harness, client: &TestClient) -> Vec<Told> {
    h.items(client)
        .into_iter()
        .filter_map(|item| match item {
            Outbound::TxDropped { reason, dropped, .. } => Some(Told::Dropped(reason, dropped)),
            Outbound::Pong { nonce } => Some(Told::Pong(nonce)),
            _ => None,
        })
        .collect()
}

fn ping(h: &mut Harness, client: &TestClient, nonce: u64) {
    h.bus.handle(Inbound::Ping { client: client.id, nonce });
}

fn port_stats(h: &mut Harness, name: &str) -> fieldhub_proto::stats::PortStats {
    h.bus.stats().ports.into_iter().find(|p| p.name == name).unwrap()
}

fn fault(h: &mut Harness, rule: serde_json::Value) {
    let spec: FaultSpec = serde_json::from_value(rule).unwrap();
    h.control(ControlRequest::AddFault(spec)).unwrap();
}

#[test]
fn frames_waiting_when_a_controller_goes_bus_off_are_reported_to_their_sender_and_counted() {
    let mut h = Harness::new(CHANNELS);
    let (tx, rx) = (h.connect("tx"), h.connect("rx"));
    let port = h.open(&tx, "timed", "tx", PortOptions::empty());
    h.open(&rx, "timed", "rx", PortOptions::empty());
    h.control(ControlRequest::Short { channel: "timed".into() }).unwrap();
    for n in 0..3 {
        h.send(&tx, port, can(0x42, n));
    }
    ping(&mut h, &tx, 7);
    // Every attempt is destroyed; serve each retransmission until bus-off.
    while let Some(next) = h.step() {
        if port_stats(&mut h, "tx").error_state == "bus_off" {
            break;
        }
        h.clock.set(next);
    }
    h.step();
    assert_eq!(told(&h, &tx), [Told::Dropped(DropReason::BusOff, 3), Told::Pong(7)], "told before the PONG");
    let stats = port_stats(&mut h, "tx");
    assert_eq!((stats.tx_frames, stats.tx_dropped, stats.tx_pending), (0, 3, 0));
    assert_eq!(stats.tx_dropped_by_reason.get("bus_off"), Some(&3));
    assert!(h.frames(&rx).iter().all(|(f, _)| f.is_error()), "none of the three reached the bus");
}

#[test]
fn a_frame_sent_while_the_controller_is_bus_off_is_dropped_at_once_and_reported() {
    let mut h = Harness::new(CHANNELS);
    let (tx, rx) = (h.connect("tx"), h.connect("rx"));
    let port = h.open(&tx, "can0", "tx", PortOptions::empty());
    h.open(&rx, "can0", "rx", PortOptions::empty());
    h.control(ControlRequest::ForceState { port: "tx".into(), state: ForcedState::BusOff }).unwrap();
    h.step();
    h.send(&tx, port, can(0x10, 1));
    ping(&mut h, &tx, 1);
    h.step();
    assert_eq!(told(&h, &tx), [Told::Dropped(DropReason::BusOff, 1), Told::Pong(1)]);
    assert!(h.frames(&rx).iter().all(|(f, _)| f.is_error()));
    assert_eq!(port_stats(&mut h, "tx").tx_dropped_by_reason.get("bus_off"), Some(&1));
}

#[test]
fn a_frame_a_fault_rule_drops_is_reported_to_its_sender_not_confirmed_as_sent() {
    for at in ["sender", "bus"] {
        let mut h = Harness::new(CHANNELS);
        let (tx, rx) = (h.connect("tx"), h.connect("rx"));
        let port = h.open(&tx, "can0", "tx", PortOptions::empty());
        h.open(&rx, "can0", "rx", PortOptions::empty());
        fault(
            &mut h,
            serde_json::json!({"channel": "can0", "at": at, "id": 0x66, "mask": 0x7FF, "action": {"type": "drop"}}),
        );
        h.send(&tx, port, can(0x66, 1));
        h.send(&tx, port, can(0x67, 2));
        ping(&mut h, &tx, 9);
        h.step();
        assert_eq!(told(&h, &tx), [Told::Dropped(DropReason::FaultRule, 1), Told::Pong(9)], "at {at}");
        let got: Vec<u32> = h.frames(&rx).iter().map(|(f, _)| f.id()).collect();
        assert_eq!(got, [0x67], "at {at}");
        let stats = port_stats(&mut h, "tx");
        assert_eq!((stats.tx_frames, stats.tx_dropped), (1, 1), "at {at}: the dropped frame is not counted as sent");
        assert_eq!(stats.tx_dropped_by_reason.get("fault_rule"), Some(&1), "at {at}");
    }
}

#[test]
fn a_flush_is_answered_only_once_a_frame_a_delay_rule_holds_is_on_the_bus() {
    let mut h = Harness::new(CHANNELS);
    let (tx, rx) = (h.connect("tx"), h.connect("rx"));
    let port = h.open(&tx, "can0", "tx", PortOptions::empty());
    h.open(&rx, "can0", "rx", PortOptions::empty());
    fault(&mut h, serde_json::json!({"channel": "can0", "at": "sender", "action": {"type": "delay", "ms": 10}}));
    h.send(&tx, port, can(0x20, 1));
    ping(&mut h, &tx, 3);
    h.step();
    assert_eq!(told(&h, &tx), [], "the frame is held: no PONG yet");
    assert!(h.frames(&rx).is_empty());
    h.advance(10_000_000);
    assert_eq!(told(&h, &tx), [Told::Pong(3)]);
    assert_eq!(h.frames(&rx).len(), 1);
    assert_eq!(port_stats(&mut h, "tx").tx_frames, 1, "counted as sent once it is on the bus");
}

#[test]
fn frames_of_an_unplugged_port_are_reported_unplugged() {
    let mut h = Harness::new(CHANNELS);
    let (tx, rx) = (h.connect("tx"), h.connect("rx"));
    let port = h.open(&tx, "timed", "tx", PortOptions::empty());
    h.open(&rx, "timed", "rx", PortOptions::empty());
    // Two frames queue behind each other on the timed channel; the cable is
    // pulled while the second waits, and a third comes after.
    h.send(&tx, port, can(0x30, 1));
    h.send(&tx, port, can(0x30, 2));
    h.step();
    h.control(ControlRequest::Unplug { port: "tx".into() }).unwrap();
    h.send(&tx, port, can(0x30, 3));
    ping(&mut h, &tx, 5);
    // The first frame was on the wire when the cable was pulled: it ends.
    h.advance(1_000_000);
    let reports = told(&h, &tx);
    let dropped: u32 = reports
        .iter()
        .map(|t| match t {
            Told::Dropped(DropReason::Unplugged, n) => *n,
            _ => 0,
        })
        .sum();
    let on_bus = h.frames(&rx).len() as u32;
    assert_eq!(on_bus + dropped, 3, "every frame on the bus or reported: {reports:?}");
    assert_eq!(reports.last(), Some(&Told::Pong(5)));
    assert_eq!(port_stats(&mut h, "tx").tx_dropped, u64::from(dropped));
}

#[test]
fn a_frame_a_full_delay_rule_cannot_hold_is_reported_not_lost() {
    use crate::channel::MAX_HELD;
    let mut h = Harness::new(CHANNELS);
    let (tx, rx) = (h.connect("tx"), h.connect("rx"));
    let port = h.open(&tx, "can0", "tx", PortOptions::empty());
    h.open(&rx, "can0", "rx", PortOptions::empty());
    fault(&mut h, serde_json::json!({"channel": "can0", "at": "sender", "action": {"type": "delay", "ms": 1000}}));
    let total = MAX_HELD as u32 + 3;
    for n in 0..total {
        h.send(&tx, port, Frame::can(0x40, false, &n.to_le_bytes()).unwrap());
        if n % 1024 == 1023 {
            h.step();
        }
    }
    h.step();
    let dropped: u32 = told(&h, &tx)
        .iter()
        .map(|t| match t {
            Told::Dropped(DropReason::FaultRule, n) => *n,
            _ => 0,
        })
        .sum();
    assert_eq!(dropped, 3, "the frames beyond what the rule can hold are reported to their sender");
    h.advance(1_000_000_000);
    let on_bus = h.bus.stats().channels[0].frames as u32;
    assert_eq!(on_bus + dropped, total);
}
